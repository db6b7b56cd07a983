"""Ahead-of-time bundles: a static graph as one object file, a C header and a weights file, for
the host or another LLVM target (`glow bundle`, Glow's `-emit-bundle`).

    DIR/net.o            the code: `int net(uint8_t *constant_weights, uint8_t *mutable_weights,
                         uint8_t *activations)`, and nothing else exported
    DIR/net.h            buffer sizes and alignment, each input's and output's offset in the
                         mutable buffer, names, shapes, element types
    DIR/net.weights.bin  the constant weights, to load into the first buffer
    DIR/net.weights.c    (with weights_c) the same bytes as a C array, for targets without files

The caller owns all three buffers (64-byte aligned); the code allocates nothing, starts no
thread and calls nothing but memcpy, memset and memmove, and libm for the few ops that need it
(the header lists what this bundle's object uses). One call runs one inference on the calling
thread: the program's entry made serial (sync.SerialEmitter) is called with (ctx, 0, 1) by a
wrapper that points ctx at the caller's buffers. It returns 0, or 1 when an index input was out
of range (that access is skipped, as in the JIT; nothing outside a buffer is read).

The kernels are the JIT's, compiled for the target: on another architecture the generic
register tiles; the object is one module (not one per kernel), position-independent, checked
like the JIT's objects to need nothing outside the documented set.
"""

from __future__ import annotations

import os
import re

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
from glow import Graph
from glow.errors import BackendError, InputError
from glow.fileio import write_atomic
from glow.ir import build_ir, plan_memory

from . import codegen, halfrt, jit, linking
from .abi import CTX_ARENA, CTX_FIRST_INPUT, CTX_SYNC, CTX_WEIGHTS, ENTRY, ERRORS
from .irutil import I32, I64, PTR

ALIGN = 64
#: What a bundle's object may call: libc's memory functions and libm.
ALLOWED = frozenset(("memcpy", "memmove", "memset") + linking.LIBM)

#: ELF machine numbers of the targets `glow bundle` is tested on (the object is checked).
MACHINES = {"x86_64": 62, "aarch64": 183, "riscv64": 243, "riscv32": 243, "arm": 40, "armv7": 40, "thumbv7em": 40,
            "thumbv7m": 40, "thumbv6m": 40, "i686": 3, "i386": 3}

#: Default CPU and features per architecture when --cpu is not given (the host's for the host).
DEFAULTS = {"aarch64": ("generic", "+neon"), "riscv64": ("generic-rv64", "+m,+a,+f,+d,+c")}

C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
           "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
           "uint64": "uint64_t", "bool": "uint8_t", "float16": "uint16_t", "bfloat16": "uint16_t"}


def _c_name(name: str) -> str:
    """A C identifier for a bundle name (checked) or a tensor name (made one)."""
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else "_" + s


def _check_cpu(triple: str, cpu: str) -> None:
    """An InputError unless LLVM knows `cpu` for `triple`. LLVM only warns about an unknown CPU
    on stderr, and may then abort the process (x86-64 code for a CPU without 64-bit): so a
    child process compiles an empty module for it first."""
    import subprocess
    import sys

    code = ("import llvmlite.binding as l; l.initialize_all_targets(); l.initialize_all_asmprinters(); "
            f"tm = l.Target.from_triple({triple!r}).create_target_machine(cpu={cpu!r}); "
            f"m = l.parse_assembly('target triple = \"{triple}\"\\ndefine void @f() {{ ret void }}'); "
            "tm.emit_object(m)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or "not a recognized processor" in r.stderr:
        raise InputError(f"--cpu {cpu}: LLVM does not know this CPU for {triple}")


def _target(triple: str | None, cpu: str | None) -> dict:
    """The target's triple, CPU, features and instruction-set level (the host's by default)."""
    jit.target_machine()  # LLVM's targets initialised
    host = llvm.get_process_triple()
    if triple is None or triple == host:
        if cpu is None:
            return {"triple": host, "cpu": jit.cpu_name(), "features": jit.host_features(), "isa": jit.isa()}
        _check_cpu(host, cpu)
        return {"triple": host, "cpu": cpu, "features": "", "isa": "generic"}
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError as e:
        raise InputError(f"--target {triple}: LLVM cannot make code for it ({str(e).strip()})") from None
    arch = triple.split("-")[0]
    dcpu, features = DEFAULTS.get(arch, ("generic", ""))
    if cpu is not None:
        _check_cpu(triple, cpu)
    return {"triple": triple, "cpu": cpu or dcpu, "features": features, "isa": "generic"}


def _wrapper(module: ir.Module, name: str, n_ctx: int, io_offsets: list[int]):
    """`i32 name(ptr constant_weights, ptr mutable_weights, ptr activations)`: ctx on the stack
    pointed at the caller's buffers, the serial entry called once, the index-error record read
    (and cleared) afterwards."""
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR]), name)
    fn.attributes.add("nounwind")
    cw, mw, act = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = b.alloca(ir.ArrayType(PTR, n_ctx))

    def slot(k, value):
        b.store(value, b.gep(ctx, [ir.Constant(I64, 0), ir.Constant(I64, k)], inbounds=True))

    slot(CTX_ARENA, act)
    slot(CTX_WEIGHTS, cw)
    slot(CTX_SYNC, ir.Constant(PTR, None))  # a serial entry has no sync state
    for k, off in enumerate(io_offsets):
        slot(CTX_FIRST_INPUT + k, b.gep(mw, [ir.Constant(I64, off)], source_etype=ir.IntType(8), inbounds=True))
    b.call(module.get_global(ENTRY), [ctx, ir.Constant(I64, 0), ir.Constant(I64, 1)])
    try:
        rec = module.get_global(ERRORS)
    except KeyError:
        b.ret(ir.Constant(I32, 0))
        return
    kind = b.gep(rec, [ir.Constant(I64, 0), ir.Constant(I64, 0)], inbounds=True)
    bad = b.icmp_signed("!=", b.load(kind, typ=I64), ir.Constant(I64, 0))
    b.store(ir.Constant(I64, 0), kind)
    b.ret(b.zext(bad, I32))


def build(graph: Graph, name: str = "net", triple: str | None = None, cpu: str | None = None) -> dict:
    """The bundle of a static graph: {"object", "weights", "header", "info"} (bytes, array, str, dict)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise InputError(f"--name {name!r}: a bundle's name must be a C identifier")
    if not graph.is_static():
        raise InputError(f"graph '{graph.name}' has dynamic shapes: bundle it for fixed shapes (--shape NAME=DxD)")
    target = _target(triple, cpu)
    with jit.for_target(target["triple"], target["cpu"], target["features"], target["isa"]):
        fn = build_ir(graph)
        plan = plan_memory(fn)
        cg = codegen.Codegen(fn, plan, serial=True, triple=target["triple"], share=False)
        _, weights = cg.build()
        io, offsets, size = [], [], 0
        for kind, bufs in (("input", fn.inputs), ("output", fn.outputs)):
            for buf in bufs:
                t = buf.type
                offsets.append(size)
                io.append({"kind": kind, "name": buf.name, "dtype": t.dtype.name, "shape": list(t.shape),
                           "offset": size, "bytes": int(t.nbytes)})
                size += -(-int(t.nbytes) // ALIGN) * ALIGN
        _wrapper(cg.module, name, CTX_FIRST_INPUT + len(offsets), offsets)
        for g in (ENTRY, ERRORS):  # only `name` is exported: bundles link side by side
            try:
                cg.module.get_global(g).linkage = "internal"
            except KeyError:
                pass
        obj = _compile(str(cg.module), target)
    # names graph outputs by the graph's names (IR buffers of an output that is also an input
    # or a weight are renamed), as Executable.run does
    names = [v.name for v in graph.inputs] + [v.name for v in graph.outputs]
    for entry, gname in zip(io, names):
        entry["name"] = gname
    info = {"name": name, "target": target, "constant_weights_bytes": int(weights.nbytes),
            "mutable_weights_bytes": size, "activations_bytes": int(plan.arena_bytes), "alignment": ALIGN,
            "tensors": io, "external": sorted(linking.undefined_symbols(obj))}
    return {"object": obj, "weights": weights, "header": header(info), "info": info}


def _compile(text: str, target: dict) -> bytes:
    """One object for the whole module, float16 helpers linked in (weak: a C runtime's own
    win), checked to need nothing outside ALLOWED."""
    mod = llvm.parse_assembly(text)
    helpers = llvm.parse_assembly(halfrt.module_text(target["triple"]))
    mod.link_in(helpers)
    for f in mod.functions:
        if f.name in halfrt.NAMES and not f.is_declaration:
            f.linkage = "weak_any"
    tm = jit.target_machine(3)
    mod.triple, mod.data_layout = target["triple"], str(tm.target_data)
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    obj = tm.emit_object(mod)
    machine = MACHINES.get(target["triple"].split("-")[0])
    got = int.from_bytes(obj[18:20], "little")
    if obj[:4] != b"\x7fELF" or (machine is not None and got != machine):
        raise BackendError(f"LLVM made an object for machine {got}, not {target['triple']} (ELF machine {machine})")
    extra = sorted(set(linking.undefined_symbols(obj)) - ALLOWED)
    if extra:
        raise BackendError(f"the bundle's object needs {', '.join(extra)}, outside what a bundle may call")
    return obj


def header(info: dict) -> str:
    """net.h: sizes, alignment, the tensors' offsets, shapes and element types, the entry."""
    n, up = info["name"], info["name"].upper()
    t = info["target"]
    lines = [f"/* {n}.h: a glow bundle for {t['triple']} ({t['cpu']}, {t['isa']} level). Generated: do not edit.",
             " *",
             f" * int {n}(constant_weights, mutable_weights, activations) runs one inference on the calling",
             " * thread. Three caller-owned buffers, each aligned to " + f"{n.upper()}_ALIGNMENT bytes:",
             f" *   constant_weights  {up}_CONSTANT_WEIGHTS_SIZE bytes: the contents of {n}.weights.bin",
             f" *   mutable_weights   {up}_MUTABLE_WEIGHTS_SIZE bytes: inputs and outputs at the offsets below",
             f" *   activations       {up}_ACTIVATIONS_SIZE bytes: scratch",
             " * Returns 0, or 1 when an index input was out of range (that access was skipped).",
             f" * The object calls only: {', '.join(info['external']) or 'nothing'}.",
             " */",
             f"#ifndef {up}_H", f"#define {up}_H", "", "#include <stddef.h>", "#include <stdint.h>", "",
             f"#define {up}_ALIGNMENT {info['alignment']}",
             f"#define {up}_CONSTANT_WEIGHTS_SIZE {info['constant_weights_bytes']}",
             f"#define {up}_MUTABLE_WEIGHTS_SIZE {info['mutable_weights_bytes']}",
             f"#define {up}_ACTIVATIONS_SIZE {max(info['activations_bytes'], 1)}", ""]
    ins = [x for x in info["tensors"] if x["kind"] == "input"]
    outs = [x for x in info["tensors"] if x["kind"] == "output"]
    lines += [f"#define {up}_NUM_INPUTS {len(ins)}", f"#define {up}_NUM_OUTPUTS {len(outs)}", ""]
    for x in info["tensors"]:
        c = _c_name(x["name"]).upper()
        ctype = C_TYPES.get(x["dtype"], "raw bytes")
        lines.append(f"/* {x['kind']} '{x['name']}': {x['dtype']}{x['shape']} ({ctype}) */")
        lines.append(f"#define {up}_{c}_OFFSET {x['offset']}")
        lines.append(f"#define {up}_{c}_SIZE {x['bytes']}")
    lines += ["", "/* Every input, then every output, in the graph's order. */",
              f"typedef struct {{ const char *name; const char *dtype; int is_output; size_t offset; size_t size;"
              f" int rank; int64_t dims[8]; }} {n}_tensor_info;",
              f"static const {n}_tensor_info {n}_tensors[] = {{"]
    for x in info["tensors"]:
        if len(x["shape"]) > 8:
            raise InputError(f"tensor '{x['name']}' has rank {len(x['shape'])}; a bundle's header holds up to 8")
        dims = ", ".join(str(d) for d in x["shape"]) or "0"
        lines.append(f"    {{\"{_c_string(x['name'])}\", \"{x['dtype']}\", {int(x['kind'] == 'output')}, "
                     f"{x['offset']}, {x['bytes']}, {len(x['shape'])}, {{{dims}}}}},")
    lines += ["};", "", "#ifdef __cplusplus", 'extern "C"', "#endif",
              f"int {n}(uint8_t *constant_weights, uint8_t *mutable_weights, uint8_t *activations);", "",
              f"#endif /* {up}_H */", ""]
    return "\n".join(lines)


def _c_string(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


#: "  7," for every byte value: weights_c formats by table lookup (100 MB of weights in about a
#: second; a Python loop took 45 s).
_CELLS = np.array([list(f"{i:>3},".encode()) for i in range(256)], np.uint8)
_PER_LINE = 24


def weights_c(name: str, weights: np.ndarray) -> bytes:
    """net.weights.c: the constant weights as an aligned C array (`NAME_constant_weights`)."""
    body = weights.reshape(-1).view(np.uint8)
    cells = _CELLS[body]  # (n, 4) ASCII
    full = body.size // _PER_LINE * _PER_LINE
    lines = cells[:full].reshape(-1, _PER_LINE * 4)
    indent, newline = np.full((len(lines), 4), ord(" "), np.uint8), np.full((len(lines), 1), ord("\n"), np.uint8)
    text = np.concatenate([indent, lines, newline], axis=1).tobytes()
    if full < body.size:
        text += b"    " + cells[full:].tobytes() + b"\n"
    head = (f"/* {name}.weights.c: the constant weights of bundle {name}. Generated: do not edit. */\n"
            "#include <stdint.h>\n"
            f"_Alignas({ALIGN}) const uint8_t {name}_constant_weights[{max(body.size, 1)}] = {{\n").encode()
    return head + (text or b"    0,\n") + b"};\n"


def write(graph: Graph, out_dir: str, name: str = "net", triple: str | None = None, cpu: str | None = None,
          with_weights_c: bool = False) -> dict:
    """Build the bundle and write its files into `out_dir` (made if missing), each atomically."""
    b = build(graph, name, triple, cpu)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out_dir}: cannot make the bundle's folder: {e.strerror}") from None
    files = {f"{name}.o": b["object"], f"{name}.h": b["header"].encode(),
             f"{name}.weights.bin": b["weights"].tobytes()}
    if with_weights_c:
        files[f"{name}.weights.c"] = weights_c(name, b["weights"])
    for fname, data in files.items():
        write_atomic(os.path.join(out_dir, fname), lambda f, d=data: f.write(d), what="bundle file")
    return {**b["info"], "files": sorted(files)}


__all__ = ["build", "header", "weights_c", "write"]
