"""Code generation: an IR function and its memory plan become ONE LLVM module with one entry,

    void glow_run(ptr ctx, i64 tid, i64 nthreads)

ctx is an array of pointers: [arena, weights blob, sync state, inputs..., outputs...]. Each
thread of the pool that gets to run calls the entry; every kernel call in it is a *phase*
(sync.py): its work is cut into chunks that the threads claim, and a thread waits only
for the earlier phases whose memory this one conflicts with. A kernel splits its work by the
(tid, nthreads) it is passed, which is its chunk and the number of chunks; a small one is one
chunk (`cg.call(fn, args, single=True)`), run by whichever thread claims it. The calls of one
instruction run in order, each after the one before.

Kernels are registered per op in one table, tried highest priority first:

    @cpu_kernel("Transpose", supports=lambda node: ...)   # node: a graph Node (types, attrs)
    def emit_transpose(cg: Codegen, instr: Instr) -> None: ...

An emitter makes its kernel with `cg.function(name, arg_types)` (a KernelBuilder), takes operand
pointers in the entry with `cg.ptr(operand)`, packs compile-time data with `cg.weight(array)`,
and calls the kernel with `cg.call(fn, [..., cg.tid, cg.nth])`. A kernel instruction with an
elementwise epilogue: the emitter applies it itself when registered with `epilogue=True`,
otherwise the codegen runs the epilogue as a second, in-place elementwise pass over the output.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import mmap
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
from glow import dtypes as dt
from glow.aligned import drop_pages
from glow.errors import BackendError
from glow.flow import NeedsInputValues
from glow.ir.instr import ACTIVATION, INPUT, OUTPUT, WEIGHT, Instr, IRFunction, overlaps
from glow.specialize import specializable

from . import shared_weights
from .abi import CTX_ARENA, CTX_FIRST_INPUT, CTX_SYNC, CTX_WEIGHTS, ENTRY, WEIGHT_ALIGN  # noqa: F401 (the ABI)
from .irutil import I8, I64, PTR, KernelBuilder
from .sync import PhaseEmitter, SerialEmitter


class NeedsConstant(NeedsInputValues):
    """A kernel needs an input's value at compile time (pads, axes, slice bounds) and it is not a
    constant: the runtime then specialises the graph on small integer input values."""


def constant(o) -> np.ndarray:
    """The compile-time value of operand `o`; NeedsConstant when it is only known at run time."""
    v = weight_data(o)
    if v is None:
        raise NeedsConstant(f"%{o.name} must be a compile-time constant for the CPU backend")
    return v


def value_input(v) -> bool:
    """Whether a graph value can become a constant by specialising on input values: a constant,
    a small integer tensor (glow.specialize makes those constants), or a scalar computed from
    them (constant folding does the rest)."""
    if v is None or v.is_constant:
        return True
    t = v.type
    if not (isinstance(t, dt.TensorType) and t.is_static):
        return False
    if specializable(t):
        return True
    return t.numel <= 1 and getattr(v, "node", True) is not None  # not a graph input


# -- the kernel table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelDef:
    domain: str
    op: str
    emit: Callable  # (cg, instr) -> None
    supports: Callable  # (node) -> bool; node: a graph Node, or an InstrNode at emit time
    priority: int = 0
    epilogue: bool = False  # the emitter applies the instruction's elementwise epilogue itself
    fallback: KernelDef | None = None  # the next variant for the same op (lower priority)

    def variants(self):
        k = self
        while k is not None:
            yield k
            k = k.fallback

    def accepts(self, node) -> bool:
        return any(_safe(k.supports, node) for k in self.variants())

    def choose(self, node) -> KernelDef | None:
        return next((k for k in self.variants() if _safe(k.supports, node)), None)


def _safe(pred, node) -> bool:
    try:
        return bool(pred(node))
    except Exception:  # noqa: BLE001 - a predicate that cannot judge a node declines it
        return False


KERNELS: dict[tuple[str, str], KernelDef] = {}


def cpu_kernel(op: str, *, supports: Callable = lambda node: True, domain: str = "",
               priority: int = 0, epilogue: bool = False):
    """Register an emitter for `op`. Several emitters may serve one op; the first (by priority)
    whose `supports` accepts a node wins, so a fast special case sits on a general one."""
    from glow.ops import get_op

    get_op(op, domain)  # registering for an unknown op raises

    def register(emit):
        new = KernelDef(domain, op, emit, supports, priority, epilogue)
        chain = sorted([new, *KERNELS[(domain, op)].variants()] if (domain, op) in KERNELS else [new],
                       key=lambda k: -k.priority)
        head = None
        for k in reversed(chain):
            head = KernelDef(k.domain, k.op, k.emit, k.supports, k.priority, k.epilogue, head)
        KERNELS[(domain, op)] = head
        return emit

    return register


_loaded = False


def load_kernels():
    """Import every kernel module once (each registers its emitters). Asked for by every support
    query, so the folder is listed once per process (listing it each time cost ResNet-50's
    compile 0.3 s)."""
    global _loaded
    if not _loaded:
        import importlib
        import pkgutil

        from . import kernels

        for m in pkgutil.iter_modules(kernels.__path__):
            if not m.name.startswith("_"):
                importlib.import_module(f"{kernels.__name__}.{m.name}")
        _loaded = True
    return KERNELS


class Operand:
    """What a support predicate sees of an instruction operand (the parts of a graph Value)."""

    __slots__ = ("name", "type", "data")

    def __init__(self, o):
        self.name, self.type = o.name, o.type
        self.data = weight_data(o) if o.kind == WEIGHT else None

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    known = property(lambda self: self.data)


class InstrNode:
    """A kernel instruction seen as a graph Node, so one predicate serves graph and IR."""

    def __init__(self, instr: Instr):
        n = len(instr.inputs) if instr.n_args is None else instr.n_args
        self.op, self.name, self.attrs = instr.op, instr.name, instr.attrs
        self.inputs = tuple(None if o is None else Operand(o) for o in instr.inputs[:n])
        self.outputs = tuple(None if o is None else Operand(o) for o in instr.outputs)
        self.captures = ()

    @property
    def all_inputs(self):
        return tuple(v for v in self.inputs if v is not None)


def weight_data(o) -> np.ndarray | None:
    """The compile-time value of a weight operand (a buffer or a view onto one)."""
    root = o.root
    if root.data is None:
        return None
    if o is root:
        return np.asarray(root.data)
    raw = np.ascontiguousarray(root.data).reshape(-1).view(np.uint8)
    return raw[o.offset:o.offset + o.nbytes].view(o.type.dtype.np).reshape(o.type.shape)


# -- element types ------------------------------------------------------------------------------

_LTYPES = {
    dt.float32: ir.FloatType(), dt.float64: ir.DoubleType(), dt.float16: ir.HalfType(),
    dt.bfloat16: ir.IntType(16), dt.int8: I8, dt.uint8: I8, dt.bool_: I8, dt.int16: ir.IntType(16),
    dt.uint16: ir.IntType(16),
    dt.int32: ir.IntType(32), dt.uint32: ir.IntType(32), dt.int64: I64, dt.uint64: I64,
    # one byte per element, converted by Cast (kernels/narrow.py) and moved by movement ops
    **{d: I8 for d in (dt.float8e4m3fn, dt.float8e4m3fnuz, dt.float8e5m2, dt.float8e5m2fnuz, dt.float8e8m0,
                       dt.float4e2m1, dt.int4, dt.uint4, dt.int2, dt.uint2)},
}


def ltype(dtype) -> ir.Type:
    """The LLVM storage type of an element type (bool is stored as i8)."""
    try:
        return _LTYPES[dtype]
    except KeyError:
        raise BackendError(f"the CPU backend has no code for element type {dtype}") from None


def has_ltype(dtype) -> bool:
    return dtype in _LTYPES


# -- the code generator -------------------------------------------------------------------------


class Codegen:
    """Builds the module for one IR function: `Codegen(fn, plan).build() -> (ir_text, weights)`.
    `profile=True`: the instrumented variant that times each instruction (profiling.py)."""

    def __init__(self, fn: IRFunction, plan, profile: bool = False, serial: bool = False,
                 triple: str | None = None, share: bool = True):
        """`serial`: an entry for one thread (a bundle: no sync state, atomics or syscalls);
        `triple`: the target's, when not the host's; `share`: large weights held once per
        process rather than in this program's blob (shared_weights.py; off for a bundle, whose
        weights file must hold them all)."""
        self.fn, self.plan = fn, plan
        self._share = share
        #: (value-table index, Shared, byte offset into it): the table entries that are absolute
        #: addresses of shared weights (the program holds them; a saved one relocates them)
        self.held_weights: list[tuple] = []
        self._shared_at: dict[int, object] = {}
        self.module = ir.Module(name=fn.name)
        self.module.triple = triple or llvm.get_process_triple()
        self.entry = KernelBuilder(self.module, ENTRY, [PTR, I64, I64])
        # The entry only sequences kernel calls and the waits between them, once per inference:
        # optimising it buys nothing at run time and cost 0.6 s of DenseNet-121's compile (one
        # call per kernel and phase, a megabyte of IR). The sync helpers beside it are optimised.
        self.entry.fn.attributes.add("noinline")
        self.entry.fn.attributes.add("optnone")
        self.b = self.entry.b
        ctx, self.tid, self.nth = self.entry.args
        self._names = set()
        self._weights = _Blob(sum(n for b in fn.buffers if b.kind == WEIGHT and not b.boxed
                                  for n in [getattr(b.type, "nbytes", 0) or 0]
                                  if not (self._shares(n) and shared_weights.immutable(b.data))))
        self._weights.reserve(8, 8)  # bytes 0-7: where the value table starts (see `value`)
        self._values: list[int] = []
        self._weight_at: dict[int, int] = {}
        self._operand_of: dict[int, object] = {}  # id(pointer value) -> operand (for noalias)
        self._shared: dict = {}
        self._staging = None  # staging(): one buffer for every instruction's temporary data
        self._shared_fns: set[int] = set()  # called more than once: never marked noalias
        self._by_body: dict[bytes, ir.Function] = {}  # kernel text -> the kernel (deduplication)
        self._memo: dict = {}  # (emitter's key, noalias pattern) -> the kernel (call_memo)
        self.instr: Instr | None = None
        self.index = 0
        slots = [self.b.load(self.entry.ptr(ctx, i, PTR), typ=PTR) for i in range(
            CTX_FIRST_INPUT + len(fn.inputs) + len(fn.outputs))]
        self.arena, self.weights_base, sync_state = slots[:CTX_FIRST_INPUT]
        self._table = self.b.gep(self.weights_base, [self.b.load(self.weights_base, typ=I64)], source_etype=I8,
                                 inbounds=True)
        self._io = {}
        for k, buf in enumerate(fn.inputs + fn.outputs):
            self._io.setdefault(id(buf), slots[CTX_FIRST_INPUT + k])
        self._sync = (SerialEmitter(self.entry) if serial else
                      PhaseEmitter(self.entry, sync_state, self.tid, self.nth, self.value, self.weight))
        self._first_phase = 0  # the current instruction's first phase
        # profile: time every instruction into the counters at ctx[after the outputs] (profiling.py)
        self.timer = None
        if profile:
            from .profiling import InstrTimer

            self.timer = InstrTimer(self.entry, ctx, CTX_FIRST_INPUT + len(fn.inputs) + len(fn.outputs))

    # -- helpers for emitters --------------------------------------------------------------------
    def ptr(self, o, offset: int = 0):
        """Pointer (in the entry) to an operand's first byte (plus `offset` bytes); a null pointer
        for an empty tensor."""
        root = o.root
        if root.boxed:
            if isinstance(root.type, dt.TensorType) and root.type.numel == 0:
                return ir.Constant(PTR, None)
            raise BackendError(f"%{o.name}: the CPU backend cannot hold {root.type} (not static)")
        if root.kind == WEIGHT and self._shares(root.type.nbytes) and shared_weights.immutable(root.data):
            p = self._shared_ptr(self._shared_weight(root), o.offset + offset)
            self._operand_of[id(p)] = o
            return p
        if root.kind == WEIGHT:
            base, off = self.weights_base, self._place_weight(root) + o.offset
        elif root.kind == ACTIVATION:
            base, off = self.arena, self.plan.offsets[id(root)] + o.offset
        elif root.kind in (INPUT, OUTPUT):
            base, off = self._io[id(root)], o.offset
        else:  # pragma: no cover
            raise BackendError(f"unknown buffer kind {root.kind}")
        off += offset
        p = self.b.gep(base, [self.value(off)], source_etype=I8, inbounds=True)
        self._operand_of[id(p)] = o
        return p

    def weight(self, array: np.ndarray, align: int = WEIGHT_ALIGN):
        """Pack a compile-time array into the weights blob; its pointer in the entry."""
        off = self._append(np.ascontiguousarray(array), align)
        return self.b.gep(self.weights_base, [self.value(off)], source_etype=I8, inbounds=True)

    def weight_out(self, shape, dtype, fill: Callable[[np.ndarray], object], align: int = WEIGHT_ALIGN,
                   source: np.ndarray | None = None, how: tuple = (), partners: tuple = ()):
        """Place a compile-time array of this shape that `fill(array)` writes in place (the array
        zeroed, a window onto the weights blob: a packer writes straight into it, no copy
        between); its pointer in the entry. The window is filled before anything else is placed:
        a blob that grows later copies only the bytes already written.

        With `source` (the constant it is made from) and `how` (hashable: how it is made from
        it, every parameter of the packing), a large one is made once per process and shared by
        every program that makes it alike (shared_weights.py); `partners`: other constants it is
        made from (a gated product's second matrix)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if (source is not None and align <= WEIGHT_ALIGN and self._shares(nbytes)
                and all(shared_weights.immutable(a) for a in (source, *partners))):
            return self._shared_ptr(shared_weights.get(source, how, shape, dtype, fill, partners), 0)
        off = self._weights.reserve(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize, align)
        fill(self._weights.window(off, shape, dtype))
        return self.b.gep(self.weights_base, [self.value(off)], source_etype=I8, inbounds=True)

    def value(self, v: int, typ: ir.IntType = I64) -> ir.Value:
        """The integer `v` in the entry, read from the value table in the weights blob rather
        than written into the code: byte offsets of the memory plan and the weights, sizes and
        the threading plan's numbers. So the entry's text depends on the sequence of kernel
        calls, not on the sizes: a new input shape with the same sequence reuses the compiled
        entry (the object cache is keyed by text) and brings only a new weights blob."""
        k = len(self._values)
        self._values.append(int(v))
        x = self.b.load(self.b.gep(self._table, [self.entry.i64(8 * k)], source_etype=I8, inbounds=True),
                        typ=I64, align=8)
        return x if typ.width == 64 else self.b.trunc(x, typ)

    def function(self, name: str, arg_types, ret=None) -> KernelBuilder:
        """A new internal kernel function (its name made unique)."""
        base = f"k{self.index}.{name}"
        unique = base
        for n in itertools.count(1):
            if unique not in self._names:
                break
            unique = f"{base}.{n}"
        self._names.add(unique)
        kb = KernelBuilder(self.module, unique, arg_types, **({} if ret is None else {"ret": ret}),
                           internal=True)
        kb.fn.attributes.add("nounwind")
        return kb

    def staging(self, nbytes: int):
        """A 64-byte aligned buffer of at least `nbytes` that a kernel uses during its own
        instruction only (a bf16 convolution's rounded input): one module global for every
        instruction that asks, as large as the largest request, so it does not add up over a
        model's layers. Kernels take it as an argument."""
        gv = self._staging
        if gv is None:
            gv = self._staging = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), 64), "glow.staging")
            gv.linkage = "internal"
            gv.align = 64
            gv.initializer = ir.Constant(gv.value_type, None)
        if nbytes > gv.value_type.count:  # uses see an untyped pointer: only the definition grows
            gv.value_type = ir.ArrayType(ir.IntType(8), int(nbytes))
            gv.initializer = ir.Constant(gv.value_type, None)
        return gv

    def shared(self, key, make: Callable):
        """A function built once per `key` and reused by every instruction asking for it."""
        fn = self._shared.get(key)
        if fn is None:
            fn = self._shared[key] = make()
            self._shared_fns.add(id(fn))
        return fn

    def call(self, fn, args, single: bool = False):
        """Call a kernel from the entry, as one phase of the current instruction. A split kernel
        takes `[..., cg.tid, cg.nth]` last (replaced by its chunk and the number of chunks);
        `single`: one chunk, args as given. Pointer arguments whose operands overlap no other
        argument are marked noalias (unless the kernel is shared)."""
        if id(fn) not in self._shared_fns:
            self._mark_noalias(fn, args)
            fn = self._dedup(fn)
        self._phase(fn, args, single)

    def call_memo(self, key, make: Callable, args, single: bool = False):
        """`call(make(), args, single)`, except that `make` runs only the first time `key` meets
        this noalias pattern of `args`; later instructions call that kernel. `key` must decide
        the kernel's whole text (the emitter's shape class, element types and body): building a
        kernel and printing it to find its twin (`_dedup`) was most of code generation when
        hundreds of instructions share a few kernels (ResNet-50 on the primitive floor: 194
        Slices, 8 kernels)."""
        memo = (key, self._noalias(args))
        fn = self._memo.get(memo)
        if fn is None:
            fn = make()
            self._mark_noalias(fn, args)
            fn = self._memo[memo] = self._dedup(fn)
        self._phase(fn, args, single)

    def _phase(self, fn, args, single: bool):
        one_chunk = single and _one_chunk(args)
        if one_chunk:  # a split kernel run as one chunk: whether it is, is a value (see PhaseEmitter)
            args, single = [*args[:-2], self.tid, self.nth], False
        if not single and (len(args) < 2 or args[-2] is not self.tid or args[-1] is not self.nth):
            raise BackendError(f"{fn.name}: a split kernel takes (cg.tid, cg.nth) as its last arguments")
        index = len(self._sync.phases)
        self._sync.phase(self._accesses(self.instr), single, index - 1 if index > self._first_phase else None,
                         fn, args, one_chunk)

    # -- building --------------------------------------------------------------------------------
    def build(self) -> tuple[str, np.ndarray]:
        """Emit every instruction; returns the module's IR text and the weights blob."""
        load_kernels()
        instrs = [i for i in self.fn.instrs if i.kind not in ("alloc", "dealloc")]
        for k, instr in enumerate(instrs):
            self.instr, self.index = instr, k
            if all(_empty(o) for o in instr.writes()):
                continue
            self._first_phase = len(self._sync.phases)
            start = self.timer.start() if self.timer is not None else None
            self.emit(instr)
            self._drop_copied_weights(instr)
            if self.timer is not None:
                self.timer.stop(k, start)
        self._sync.finish()
        self.entry.finish()
        at = self._append(np.array(self._values or [0], np.int64), 8)
        self._weights.window(0, (1,), np.int64)[0] = at
        return str(self.module), self._blob()

    @property
    def sync_bytes(self) -> int:
        """Bytes of sync state the entry needs (ctx[CTX_SYNC], zeroed before each inference)."""
        return self._sync.state_bytes

    def emit(self, instr: Instr):
        from .kernels import elementwise, movement

        if instr.kind == "copy":
            return movement.emit_copy(self, instr)
        if instr.kind == "fused":
            return elementwise.emit_fused(self, instr)
        kd = self.kernel_for(instr)
        try:
            kd.emit(self, instr)
        except NeedsConstant as e:  # whose kernel it was: those nodes go to the host if nothing settles it
            e.ops = {**e.ops, instr.op.name: e.ops.get(instr.op.name, 0) + 1}
            raise
        if instr.expr is not None and not kd.epilogue:
            elementwise.emit_epilogue(self, instr)  # a second phase: after every chunk of the kernel

    def kernel_for(self, instr: Instr) -> KernelDef:
        head = KERNELS.get((instr.op.domain, instr.op.name))
        kd = head.choose(InstrNode(instr)) if head is not None else None
        if kd is None:
            raise BackendError(f"no CPU kernel for instruction '{instr.name}' ({instr.opname}) with "
                               f"inputs {[None if o is None else str(o.type) for o in instr.inputs]}")
        return kd

    # -- internals -------------------------------------------------------------------------------
    def _append(self, data: np.ndarray, align: int) -> int:
        return self._weights.append(data, align)

    def _drop_copied_weights(self, instr: Instr) -> None:
        """The pages of a spilled weight (glow.aligned.spilled) that this instruction has copied or
        packed into the program leave the process: they are not read again, and a convolutional
        network's weights were otherwise resident twice. One the program reads where it lies (a
        shared weight used as it is) stays."""
        for o in instr.reads():
            root = o.root
            if root.kind == WEIGHT and isinstance(root.data, np.ndarray):
                held = self._shared_at.get(id(root))
                if held is None or held.array is not held.source:
                    drop_pages(root.data)

    def _place_weight(self, root) -> int:
        off = self._weight_at.get(id(root))
        if off is None:
            data = np.ascontiguousarray(root.data, dtype=root.type.dtype.np)
            off = self._weight_at[id(root)] = self._append(data, WEIGHT_ALIGN)
        return off

    def _blob(self) -> np.ndarray:
        return self._weights.array()

    def _shares(self, nbytes: int) -> bool:
        """Whether a weight of `nbytes` is held once per process (if its memory is immutable)."""
        return self._share and nbytes >= shared_weights.SHARE_BYTES

    def _shared_weight(self, root):
        held = self._shared_at.get(id(root))
        if held is None:
            held = self._shared_at[id(root)] = shared_weights.as_it_lies(root.data, root.type.dtype.np)
        return held

    def _shared_ptr(self, held, delta: int):
        """A pointer to byte `delta` of a shared weight: its address from the value table."""
        self.held_weights.append((len(self._values), held, delta))
        return self.b.inttoptr(self.value(held.address + delta), PTR)

    def _accesses(self, instr: Instr) -> list[tuple]:
        """(space, start, end, writes) byte ranges of an instruction's operands: arena offsets
        for activations (so reuse of the arena counts), ranges of the array for inputs/outputs;
        weights are never written and do not count."""
        out = []
        for writes, ops in ((True, instr.writes()), (False, instr.reads())):
            for o in ops:
                root = o.root
                if root.kind == WEIGHT:
                    continue
                if root.kind == ACTIVATION and not root.boxed:
                    start = self.plan.offsets[id(root)] + o.offset
                    out.append(("arena", start, start + o.nbytes, writes))
                else:
                    out.append((id(root), o.offset, o.offset + max(o.nbytes, 1), writes))
        return out

    def _dedup(self, fn):
        """An identical kernel made before (same body, same attributes) instead of `fn`, which is
        then dropped: kernels take operands as pointers, so same-shaped ops share their code."""
        text = str(fn)
        key = hashlib.sha1(text.replace(f'@"{fn.name}"', "@F").replace(f"@{fn.name}(", "@F(").encode()).digest()
        old = self._by_body.get(key)
        if old is None:
            self._by_body[key] = fn
            return fn
        del self.module.globals[fn.name]
        return old

    def _noalias(self, args) -> tuple[int, ...]:
        """Positions of the pointer arguments whose operands overlap no other argument's (and
        that are not passed twice): the kernel may mark them noalias."""
        ops = [self._operand_of.get(id(a)) for a in args]
        out = []
        for k, (a, o) in enumerate(zip(args, ops)):
            if o is None or not isinstance(a.type, ir.PointerType):
                continue
            if all(q is None or q is o and args[j] is a or not overlaps(o, q)
                   for j, q in enumerate(ops) if j != k):
                if any(j != k and args[j] is a for j in range(len(args))):
                    continue
                out.append(k)
        return tuple(out)

    def _mark_noalias(self, fn, args):
        for k in self._noalias(args):
            if k < len(fn.args):
                fn.args[k].add_attribute("noalias")


class _Blob:
    """The weights blob, written as each weight is placed: a packed copy is written into it at
    once and dropped, where keeping every one until the end doubled the fresh memory a compile
    touched (ResNet-50: 100 MB of packed weights, then a 100 MB blob they were copied into; a
    VM hands out fresh pages slowly). An anonymous mapping reserved with room to spare (only the
    pages written are ever backed) and replaced by a larger one if a compile outgrows it; its
    zero bytes are the padding between weights, the same in every compile.

    The expected bytes are backed in one `madvise` call rather than one fault per page, as small
    pages: asked for huge pages up front, a machine whose memory is fragmented compacts it while
    the compile waits (light ResNet-50 on the floor, Zen 4 VM: code generation 1.6-3.0 s with
    them, 0.3-0.55 s without). Once written the blob is advised for huge pages, which the kernel
    may collapse it into in the background (run time: 87.7 against 88.2 ms, within noise)."""

    def __init__(self, expect: int):
        self._map = None
        self._size = 0
        self._grow(expect + expect // 4 + (16 << 20), expect)  # packing pads; tables are small

    def _grow(self, capacity: int, populate: int = 0):
        new = mmap.mmap(-1, capacity, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if populate >= 1 << 20:  # MADV_POPULATE_WRITE: Linux 5.14+; elsewhere faulted in as written
            with contextlib.suppress(OSError, ValueError, OverflowError):
                new.madvise(getattr(mmap, "MADV_POPULATE_WRITE", 23), 0, populate - populate % mmap.PAGESIZE)
        view = np.frombuffer(new, np.uint8)
        if self._map is not None:
            view[:self._size] = self._view[:self._size]
        self._map, self._view = new, view

    def reserve(self, nbytes: int, align: int) -> int:
        """Offset of `nbytes` new (zero) bytes at `align`."""
        off = -(-self._size // align) * align
        end = off + nbytes
        if end > len(self._view):
            self._grow(max(2 * len(self._view), end + (16 << 20)))
        self._size = end
        return off

    def append(self, data: np.ndarray, align: int) -> int:
        data = np.ascontiguousarray(data)
        off = self.reserve(data.nbytes, align)
        self._view[off:off + data.nbytes] = data.reshape(-1).view(np.uint8)
        return off

    def window(self, off: int, shape, dtype) -> np.ndarray:
        """A writable array over bytes [off, off + its size) of the blob."""
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        return self._view[off:off + n].view(dtype).reshape(shape)

    def array(self) -> np.ndarray:
        """The blob (page-aligned, so WEIGHT_ALIGN-aligned); it keeps the mapping alive."""
        if hasattr(mmap, "MADV_HUGEPAGE"):
            with contextlib.suppress(OSError, ValueError):
                self._map.madvise(mmap.MADV_HUGEPAGE)
        # and collapsed now, in the background, rather than when khugepaged comes by (minutes for
        # an int4 decoder, whose matrices are below SHARE_BYTES and so live here)
        shared_weights.collapse_later(self._view[:self._size], whole_pages_only=True)
        return self._view[:max(self._size, 1)]


def _one_chunk(args) -> bool:
    """Whether a call's last two arguments are the constants (0, 1): a split kernel's
    (tid, nthreads) for one chunk, what emitters pass for work too small to share."""
    return (len(args) >= 2 and all(isinstance(a, ir.Constant) and isinstance(a.type, ir.IntType)
                                   and a.type.width == 64 and a.constant == v for a, v in zip(args[-2:], (0, 1))))


def _empty(o) -> bool:
    t = o.type
    return isinstance(t, dt.TensorType) and t.is_static and t.numel == 0


def slowest_kernels(module, fn: IRFunction, n: int = 10) -> list[dict]:
    """The `n` kernels of a jit.CompiledModule that took LLVM longest (those compiled, not
    found in the cache), each with the instructions it serves: op, node name and shapes."""
    instrs = [i for i in fn.instrs if i.kind not in ("alloc", "dealloc")]
    out = []
    for r in sorted((r for r in module.parts if not r.cached and r.part.defines), key=lambda r: -r.llvm_s)[:n]:
        users = []
        for src in r.part.sources:
            index = int(src[1:src.index(".")])
            if index < len(instrs) and instrs[index].name not in (u["node"] for u in users):
                i = instrs[index]
                users.append({"node": i.name, "op": i.opname, "shapes": _shapes(i)})
        name = r.part.sources[0].split(".", 1)[1] if r.part.sources else r.part.defines
        out.append({"kernel": name, "llvm_s": round(r.llvm_s, 4), "functions": len(r.part.sources),
                    "instrs": users[:3]})
    return out


def _shapes(instr: Instr) -> str:
    def one(o):
        t = o.type
        return f"{t.dtype}{list(t.shape)}" if isinstance(t, dt.TensorType) and t.is_static else str(t)

    ins = ", ".join(one(o) for o in instr.inputs if o is not None)
    return f"({ins}) -> {', '.join(one(o) for o in instr.outputs if o is not None)}"


def generate(fn: IRFunction, plan) -> tuple[str, np.ndarray, int, list]:
    """IR text of the module for `fn`, its weights blob, the bytes of sync state it needs, and
    the shared weights it points at (Codegen.held_weights)."""
    cg = Codegen(fn, plan)
    text, weights = cg.build()
    return text, weights, cg.sync_bytes, cg.held_weights
