"""Small helpers over llvmlite.ir for writing kernels: typed constants, counted loops, vectors.

Loop-carried state lives in `alloca`s made in the entry block (`KernelBuilder.var`); LLVM's SROA
promotes them to registers, so kernels read like C and still vectorise and register-allocate.
"""

from __future__ import annotations

import contextlib

import llvmlite.ir as ir

F32 = ir.FloatType()
F64 = ir.DoubleType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()
VEC = 16  # float lanes per AVX-512 register


def vec(t=F32, n: int = VEC) -> ir.VectorType:
    return ir.VectorType(t, n)


class _LoopID(ir.values.MDValue):
    """LLVM's loop ID: a distinct node whose first operand is itself, then the properties."""

    def descr(self, buf):
        ops = ", ".join([self.get_reference()] + [o.get_reference() for o in self.operands])
        buf += (f"distinct !{{{ops}}}", "\n")


def _no_unroll(module: ir.Module) -> _LoopID:
    """The module's one "do not unroll" loop ID. Shared by every such loop, so that identical
    kernels still have identical text (codegen dedupes kernels by their text); LLVM reads the
    properties per loop and makes new IDs when it transforms one, so sharing is harmless."""
    md = getattr(module, "_glow_no_unroll", None)
    if md is None:
        prop = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
        md = module._glow_no_unroll = _LoopID(module, [prop], name=str(len(module.metadata)))
    return md


class BFloatType(ir.types._BaseFloatType):
    """LLVM's `bfloat`, which llvmlite's IR builder lacks (the bf16 GEMM's vdpbf16ps takes it)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"


BFloatType._create_instance()
BF16 = BFloatType()


class KernelBuilder:
    """Builds one function: `kb = KernelBuilder(module, "name", [PTR, PTR, I64])`."""

    def __init__(self, module: ir.Module, name: str, arg_types, ret=VOID, internal: bool = False):
        self.module = module
        self.fn = ir.Function(module, ir.FunctionType(ret, list(arg_types)), name)
        if internal:
            self.fn.linkage = "internal"
        self.args = self.fn.args
        self._entry = self.fn.append_basic_block("entry")
        self._body = self.fn.append_basic_block("body")
        self.b = ir.IRBuilder(self._body)

    # -- values -------------------------------------------------------------------------------------
    @staticmethod
    def i64(n: int) -> ir.Constant:
        return ir.Constant(I64, int(n))

    @staticmethod
    def f32(x: float) -> ir.Constant:
        return ir.Constant(F32, float(x))

    def var(self, t, init=None):
        """A mutable local (alloca in the entry block)."""
        eb = ir.IRBuilder(self._entry)
        if self._entry.instructions:
            eb.position_before(self._entry.instructions[0])
        slot = eb.alloca(t)
        if init is not None:
            self.b.store(init, slot)
        return slot

    def array(self, t, n: int):
        """A stack array of `n` elements of `t` (alloca in the entry block); its pointer."""
        eb = ir.IRBuilder(self._entry)
        if self._entry.instructions:
            eb.position_before(self._entry.instructions[0])
        return eb.alloca(t, size=ir.Constant(I64, n))

    def ptr(self, base, index, etype=F32):
        """&base[index] (index in elements of etype; an int or an i64 value)."""
        if isinstance(index, int):
            index = self.i64(index)
        return self.b.gep(base, [index], source_etype=etype, inbounds=True)

    def load(self, base, index, etype=F32, align=4):
        return self.b.load(self.ptr(base, index, etype), typ=etype, align=align)

    def store(self, value, base, index, etype=F32, align=4):
        self.b.store(value, self.ptr(base, index, etype), align=align)

    def splat(self, scalar, n: int = VEC):
        t = ir.VectorType(scalar.type, n)
        v = self.b.insert_element(ir.Constant(t, ir.Undefined), scalar, ir.Constant(I32, 0))
        return self.b.shuffle_vector(v, ir.Constant(t, ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n))

    def intrinsic(self, name: str, ret, arg_types):
        try:
            return self.module.get_global(name)
        except KeyError:
            return ir.Function(self.module, ir.FunctionType(ret, list(arg_types)), name)

    def fma(self, a, b, c):
        """a * b + c, fused where the target has FMA instructions. llvm.fmuladd, not llvm.fma: on
        a target without them (the generic x86-64 level) llvm.fma must round once, which costs a
        libm fmaf call per lane (GEMM ran at 3 % of the core's peak); fmuladd multiplies and adds."""
        t = a.type
        el = t.element if isinstance(t, ir.VectorType) else t
        suffix = ("f64" if el == F64 else "f32")
        suffix = f"v{t.count}{suffix}" if isinstance(t, ir.VectorType) else suffix
        return self.b.call(self.intrinsic(f"llvm.fmuladd.{suffix}", t, [t, t, t]), [a, b, c])

    def add(self, a, b):
        return self.b.add(a, self.i64(b) if isinstance(b, int) else b)

    def mul(self, a, b):
        return self.b.mul(a, self.i64(b) if isinstance(b, int) else b)

    # -- control flow -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def loop(self, start, stop, step: int = 1, name: str = "i", unroll: bool = True):
        """`with kb.loop(0, n) as i:` a counted loop over i64 (start/stop may be ints or values).
        `unroll=False` tells LLVM never to unroll it: outer loops of a nest over constant trip
        counts were unrolled whole (a [2, 32, 2, 64] Transpose grew to 1,000 instructions of
        masked moves and took 0.25 s of instruction selection, against 0.01 s kept as a loop)."""
        b = self.b
        start = self.i64(start) if isinstance(start, int) else start
        stop = self.i64(stop) if isinstance(stop, int) else stop
        pre = b.block
        head = self.fn.append_basic_block(f"{name}.head")
        body = self.fn.append_basic_block(f"{name}.body")
        done = self.fn.append_basic_block(f"{name}.done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=name)
        i.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", i, stop), body, done)
        b.position_at_end(body)
        yield i
        nxt = b.add(i, self.i64(step))
        i.add_incoming(nxt, b.block)
        back = b.branch(head)
        if not unroll:
            back.set_metadata("llvm.loop", _no_unroll(self.module))
        b.position_at_end(done)

    @contextlib.contextmanager
    def if_then(self, cond):
        with self.b.if_then(cond):
            yield

    def finish(self, value=None):
        """Close the function: entry falls through to the body; return."""
        if value is None:
            self.b.ret_void()
        else:
            self.b.ret(value)
        ir.IRBuilder(self._entry).branch(self._body)
        return self.fn
