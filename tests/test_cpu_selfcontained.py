"""Generated CPU code is self-contained: it calls nothing outside itself but what glow binds by
address (backends/cpu/linking.py), so it never depends on what else the process has loaded.

The crash this guards against (issue 14, finding 2): `Pow(float16, float16)` called compiler-rt's
`__truncdfhf2`, which a process that imports only glow lacks (SIGSEGV); after `import
onnxruntime` it happened to be there. So the end-to-end checks run in a fresh interpreter that
imports only glow, and compare with NumPy (and glow's reference interpreter) in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import llvmlite.ir as ir
import ml_dtypes
import numpy as np
import pytest
from helpers import backend_unavailable

pytestmark = pytest.mark.skipif(backend_unavailable("cpu") is not None, reason="no cpu backend")

HERE = os.path.dirname(os.path.abspath(__file__))
BF16 = ml_dtypes.bfloat16


def _fresh(code: str, tmp_path, env: dict | None = None, timeout: int = 600):
    """Run `code` in a new interpreter that imports only glow (and numpy/onnx); its stdout."""
    full_env = {**os.environ, "GLOW_CACHE_DIR": str(tmp_path / "cache"), **(env or {})}
    prelude = f"import sys\nsys.path.insert(0, {HERE!r})\n"
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                       text=True, env=full_env, timeout=timeout, cwd=str(tmp_path))
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


# -- the reported crash ---------------------------------------------------------------------------

POW_CASE = """
    import numpy as np
    from onnx import TensorProto as T
    from helpers import make_model
    from onnx import helper
    import glow
    assert "onnxruntime" not in sys.modules
    out = {}
    for shape in ([], [1]):
        m = make_model([helper.make_node("Pow", ["x", "y"], ["z"])], [("x", T.FLOAT16, shape),
                       ("y", T.FLOAT16, shape)], [("z", T.FLOAT16, shape)])
        exe = glow.compile(m, "cpu")
        z = exe.run({"x": np.full(shape, 2.213, np.float16), "y": np.full(shape, 1.679, np.float16)})["z"]
        out[str(shape)] = [float(z.reshape(-1)[0]), str(z.dtype)]
    assert "onnxruntime" not in sys.modules
    print("RESULT", __import__("json").dumps(out))
"""


@pytest.mark.parametrize("features", ["", "-f16c"], ids=["host", "no-f16c"])
def test_pow_float16_in_a_fresh_process(tmp_path, features):
    """The issue's case; with F16C masked off, every half conversion is a helper call (halfrt)."""
    out = _fresh(POW_CASE, tmp_path, {"GLOW_CPU_FEATURES": features})
    got = json.loads(out.split("RESULT", 1)[1])
    want = float(np.power(np.float16(2.213), np.float16(1.679)))  # 3.793
    for shape in ("[]", "[1]"):
        assert got[shape] == [want, "float16"]


# -- float16 / bfloat16 through elementwise ops and casts, in a fresh process ---------------------

UNARY = {  # op -> the interval its inputs are drawn from
    **{op: (-3.0, 3.0) for op in ("Abs", "Neg", "Exp", "Floor", "Ceil", "Round", "Sin", "Cos", "Atan",
                                   "Sinh", "Cosh", "Asinh", "Erf", "Tanh", "Sigmoid", "Relu", "Sign",
                                   "Softplus", "Softsign", "HardSigmoid", "HardSwish", "Elu", "Selu",
                                   "Celu", "Gelu", "Mish", "LeakyRelu", "ThresholdedRelu", "Reciprocal")},
    "Tan": (-1.4, 1.4), "Log": (0.05, 5.0), "Sqrt": (0.0, 5.0), "Asin": (-0.95, 0.95),
    "Acos": (-0.95, 0.95), "Atanh": (-0.9, 0.9), "Acosh": (1.05, 5.0),
}
BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "PRelu", "Equal", "Less", "Greater")
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, -65504.0, 2.0 ** -24, 2.0 ** -14]
N = 37  # not a multiple of the vector width: the masked tail runs too


def _onnx_type(d):
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np.dtype(d))


def half_cases():
    """[(name, ModelProto, {input: array})]: every unary/binary op above and the casts between a
    float16/bfloat16 and every other numeric type, on values where rounding is delicate."""
    from helpers import make_model
    from onnx import helper

    rng = np.random.default_rng(14)
    cases = []
    for d in (np.float16, BF16):
        t = _onnx_type(d)
        for op, (lo, hi) in UNARY.items():
            x = rng.uniform(lo, hi, N).astype(d)
            m = make_model([helper.make_node(op, ["x"], ["y"])], [("x", t, [N])], [("y", t, [N])])
            cases.append((f"{op}:{np.dtype(d).name}", m, {"x": x}))
        for op in ("IsNaN", "IsInf"):
            x = np.array(SPECIAL * 3 + [2.5] * (N - 3 * len(SPECIAL)), d)
            m = make_model([helper.make_node(op, ["x"], ["y"])], [("x", t, [N])], [("y", 9, [N])])
            cases.append((f"{op}:{np.dtype(d).name}", m, {"x": x}))
        for op in BINARY:
            a = rng.uniform(0.1 if op == "Pow" else -4, 4, N).astype(d)
            b = rng.uniform(-2, 2, N).astype(d)
            if op in ("Div", "Mod"):
                b = np.where(np.abs(b.astype(np.float32)) < 0.25, 0.75, b).astype(d)
            if op in ("Add", "Sub", "Mul", "Max", "Min"):
                a[:len(SPECIAL)] = SPECIAL
            out_t = 9 if op in ("Equal", "Less", "Greater") else t
            attrs = {"fmod": 1} if op == "Mod" else {}
            m = make_model([helper.make_node(op, ["a", "b"], ["y"], **attrs)], [("a", t, [N]), ("b", t, [N])],
                           [("y", out_t, [N])])
            cases.append((f"{op}:{np.dtype(d).name}", m, {"a": a, "b": b}))
        # scalar (0-d) operands, as in the issue
        m = make_model([helper.make_node("Pow", ["a", "b"], ["y"])], [("a", t, []), ("b", t, [])], [("y", t, [])])
        cases.append((f"Pow0d:{np.dtype(d).name}", m, {"a": np.array(2.213, d), "b": np.array(1.679, d)}))
    for src, dst in _cast_pairs():
        x = cast_inputs(src, dst, rng)
        m = make_model([helper.make_node("Cast", ["x"], ["y"], to=_onnx_type(dst))], [("x", _onnx_type(src), [len(x)])],
                       [("y", _onnx_type(dst), [len(x)])])
        cases.append((f"Cast:{np.dtype(src).name}->{np.dtype(dst).name}", m, {"x": x}))
    return cases


OTHERS = (np.float64, np.float32, np.int64, np.uint64, np.int32, np.uint32, np.int16, np.uint16, np.int8,
          np.uint8, np.bool_)


def _cast_pairs():
    pairs = [(np.float16, BF16), (BF16, np.float16)]
    for h in (np.float16, BF16):
        pairs += [(o, h) for o in OTHERS] + [(h, o) for o in OTHERS]
    return pairs


def _grid_hazards(h):
    """Values of float64 at, just above and just below the midpoints of h's grid (where a double
    rounding through float32 goes wrong), and around h's overflow threshold."""
    bits = np.arange(0, 0x7C00 if h == np.float16 else 0x7F80, 97, dtype=np.uint16)
    v = bits.view(h).astype(np.float64)
    nxt = (bits + 1).view(h).astype(np.float64)
    mid = (v + nxt) / 2
    top = float(np.finfo(h).max)
    ulp = 32.0 if h == np.float16 else 2.0 ** 120  # the spacing of the largest finite value
    over = np.array([top, top + ulp / 2, np.nextafter(top + ulp / 2, 0), np.nextafter(top + ulp / 2, np.inf)])
    out = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf),
                          mid + mid * 2.0 ** -30, mid - mid * 2.0 ** -30, over])
    return np.concatenate([out, -out, SPECIAL, [2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -26, 1e-300, 1e300]])


def cast_inputs(src, dst, rng):
    """Inputs of type src for a Cast to dst: in dst's range when dst is an integer type."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src.kind == "f" or src == np.dtype(BF16):
        if dst.kind in "iu":
            lo, hi = np.iinfo(dst).min, np.iinfo(dst).max
            lo, hi = max(lo, -60000), min(hi, 60000)
            x = np.concatenate([rng.uniform(lo, hi, 200), rng.uniform(-3, 3, 50) % (hi - lo) + lo, [lo, hi, 0]])
            x = np.clip(x, lo, hi).astype(src)
            v = x.astype(np.float64)
            return x[(v >= lo) & (v <= hi)]  # rounding to src may have left the range
        if dst == np.dtype(np.bool_):
            return np.array(SPECIAL + list(rng.uniform(-2, 2, 40)), np.float64).astype(src)
        h = dst if dst in (np.dtype(np.float16), np.dtype(BF16)) else src
        x = _grid_hazards(h.type if h != np.dtype(BF16) else BF16)
        with np.errstate(over="ignore"):
            return x.astype(src)
    if src == np.dtype(np.bool_):
        return np.array([0, 1] * 10, np.bool_)
    info = np.iinfo(src)
    picks = [info.min, info.max, 0, 1, -1, 2047, 2049, 2051, 4097, 65504, 65519, 65520, 65535,
             2 ** 24 + 1, 2 ** 31 + 2 ** 23 + 1, 2 ** 31 + 2 ** 23, 2 ** 40 + 2 ** 32 + 1, 2 ** 62 + 2 ** 54 + 1]
    picks = [p for p in picks if info.min <= p <= info.max]
    rand = rng.integers(info.min, info.max, 100, dtype=src, endpoint=True)
    return np.concatenate([np.array(picks, src), rand])


def merged(cases):
    """The cases as one model per family (ops of one type, casts), each case's names prefixed by
    its index: a few compiles instead of hundreds. -> [(model, feeds, {case name: output})]"""
    from helpers import make_model
    from onnx import helper

    families = {}
    for k, (name, model, feeds) in enumerate(cases):
        fam = "Cast" if name.startswith("Cast:") else name.split(":")[1]
        families.setdefault(fam, []).append((k, name, model, feeds))
    out = []
    for members in families.values():
        nodes, ins, outs, all_feeds, names = [], [], [], {}, {}
        for k, name, model, feeds in members:
            (node,) = model.graph.node
            nodes.append(helper.make_node(node.op_type, [f"c{k}_{i}" for i in node.input],
                                          [f"c{k}_{o}" for o in node.output], **{
                                              a.name: helper.get_attribute_value(a) for a in node.attribute}))
            for vi, dst in ((model.graph.input, ins), (model.graph.output, outs)):
                for v in vi:
                    t = v.type.tensor_type
                    dst.append((f"c{k}_{v.name}", t.elem_type, [d.dim_value for d in t.shape.dim]))
            all_feeds.update({f"c{k}_{n}": a for n, a in feeds.items()})
            names[name] = f"c{k}_y"
        out.append((make_model(nodes, ins, outs), all_feeds, names))
    return out


SWEEP = """
    import glow, numpy as np
    import test_cpu_selfcontained as t
    assert "onnxruntime" not in sys.modules
    out = {}
    for model, feeds, names in t.merged(t.half_cases()):
        print("FAMILY", list(names)[0], flush=True)  # the last one printed crashed, if any
        try:
            ys = glow.compile(model, "cpu").run(feeds)
        except glow.GlowError as e:
            out[list(names)[0] + "/error"] = np.array(str(e))
            continue
        for name, y in names.items():
            y = ys[y]
            out[name] = y.view(np.uint16) if y.dtype.itemsize == 2 and y.dtype.kind not in "iu" else y
    assert "onnxruntime" not in sys.modules
    np.savez(sys.argv[1] if len(sys.argv) > 1 else "sweep.npz", **out)
    print("DONE", len(out))
"""


def _expected(name, model, feeds):
    """What the output must be: NumPy's / ml_dtypes' casts; glow's reference interpreter (NumPy
    ops on float16 / bfloat16) for the other ops."""
    import glow

    if name.startswith("Cast:"):
        dst = model.graph.output[0].type.tensor_type.elem_type
        from onnx import helper
        with np.errstate(over="ignore", invalid="ignore"):
            return feeds["x"].astype(helper.tensor_dtype_to_np_dtype(dst))
    return glow.compile(model, "reference").run(feeds)["y"]


def _compare(name, got, want):
    if want.dtype.kind in "iub" or want.dtype == np.bool_:
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    g = got.view(want.dtype).astype(np.float64)
    w = want.astype(np.float64)
    if name.startswith("Cast:") or name.split(":")[0] in ("Abs", "Neg", "Relu", "Sign", "Floor", "Ceil",
                                                           "Round", "Max", "Min", "Add", "Sub", "Mul"):
        # exact: one correctly rounded result (NaN: any NaN)
        same = (g == w) & (np.signbit(g) == np.signbit(w)) | np.isnan(g) & np.isnan(w)
        assert same.all(), f"{name}: {np.flatnonzero(~same)[:8]} got {g[~same][:8]} want {w[~same][:8]}"
        return
    # math computed in float32 and rounded once: at most one unit in the last place apart
    ulp = np.spacing(np.abs(want).astype(want.dtype)).astype(np.float64)
    ok = (np.abs(g - w) <= ulp) | (np.isnan(g) & np.isnan(w)) | (g == w)
    assert ok.all(), f"{name}: {np.flatnonzero(~ok)[:8]} got {g[~ok][:8]} want {w[~ok][:8]}"


@pytest.mark.parametrize("features", ["", "-f16c"], ids=["host", "no-f16c"])
def test_half_ops_and_casts_in_a_fresh_process(tmp_path, features):
    path = str(tmp_path / "sweep.npz")
    _fresh(SWEEP.replace('sys.argv[1] if len(sys.argv) > 1 else "sweep.npz"', repr(path)), tmp_path,
           {"GLOW_CPU_FEATURES": features})
    got = np.load(path)
    failures = [f"{k}: {got[k]}" for k in got.files if k.endswith("/error")]
    for name, model, feeds in half_cases():
        if name not in got.files:
            continue
        try:
            _compare(name, got[name], _expected(name, model, feeds))
        except AssertionError as e:
            failures.append(f"{name}: {' '.join(str(e).split())[:400]}")
    assert not failures, "\n".join(failures)


# -- glow's own float16 helpers (halfrt.py), against NumPy, every half and many floats/doubles ------

def _helper_caller(name, src, dst):
    """A module whose `run(in, out, n)` calls helper `name` on each element (by name, so the
    helper itself runs whatever the CPU has), and its compiled function."""
    import ctypes

    import llvmlite.binding as llvm
    from glow.backends.cpu import jit
    from glow.backends.cpu.irutil import I64, PTR, KernelBuilder

    mod = ir.Module(name=f"call_{name}")
    mod.triple = llvm.get_process_triple()
    helper = ir.Function(mod, ir.FunctionType(dst, [src]), name)
    kb = KernelBuilder(mod, "run", [PTR, PTR, I64])
    src_in = ir.IntType(16) if isinstance(src, ir.HalfType) else src
    dst_out = ir.IntType(16) if isinstance(dst, ir.HalfType) else dst
    with kb.loop(0, kb.args[2]) as i:
        v = kb.load(kb.args[0], i, src_in, align=2)
        if src_in is not src:
            v = kb.b.bitcast(v, src)
        r = kb.b.call(helper, [v])
        kb.store(kb.b.bitcast(r, dst_out) if dst_out is not dst else r, kb.args[1], i, dst_out, align=2)
    kb.finish()
    cm = jit.CompiledModule(str(mod), use_cache=False)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(cm.address("run"))

    def call(x, out_dtype):
        y = np.empty(len(x), out_dtype)
        fn(x.ctypes.data, y.ctypes.data, len(x))
        return y

    return cm, call


def _same_bits_or_nan(got, want):
    """Equal values with equal signs (so -0 is not 0); NaN where NaN is, with its sign."""
    with np.errstate(invalid="ignore"):
        g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    assert (np.isnan(g) == nan).all(), np.flatnonzero(np.isnan(g) != nan)[:8]
    same = (g == w) & (np.signbit(g) == np.signbit(w)) | nan
    assert same.all(), f"at {np.flatnonzero(~same)[:8]}: got {g[~same][:8]}, want {w[~same][:8]}"
    assert (np.signbit(g) == np.signbit(w))[nan].all()


def test_half_helpers_round_like_numpy():
    from glow.backends.cpu.halfrt import HALF

    every_half = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    _, ext = _helper_caller("__extendhfsf2", HALF, ir.FloatType())
    _same_bits_or_nan(ext(every_half, np.float32), every_half.astype(np.float32))

    rng = np.random.default_rng(2)
    mids = _grid_hazards(np.float16)
    with np.errstate(over="ignore"):
            f32 = np.concatenate([rng.integers(0, 1 << 32, 400_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                              every_half.astype(np.float32), mids.astype(np.float32),
                              np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                              np.nextafter(mids.astype(np.float32), np.float32(-np.inf))])
    _, trunc_s = _helper_caller("__truncsfhf2", ir.FloatType(), HALF)
    with np.errstate(over="ignore"):
        _same_bits_or_nan(trunc_s(f32, np.float16), f32.astype(np.float16))

    f64 = np.concatenate([rng.integers(0, 1 << 63, 400_000, dtype=np.uint64).view(np.float64),
                          rng.normal(0, 100, 100_000), rng.normal(0, 1e-5, 100_000), mids, -mids,
                          every_half.astype(np.float64)])
    _, trunc_d = _helper_caller("__truncdfhf2", ir.DoubleType(), HALF)
    with np.errstate(over="ignore"):
        _same_bits_or_nan(trunc_d(f64, np.float16), f64.astype(np.float16))


# -- the guard: an object that needs anything glow does not bind is refused at compile time --------

def _calling_module(body: str) -> str:
    import llvmlite.binding as llvm
    return f'; ModuleID = "injected"\ntarget triple = "{llvm.get_process_triple()}"\n{body}'


BugError = getattr(__import__("glow").errors, "InternalError", __import__("glow").BackendError)

FOREIGN = _calling_module("""
declare double @glow_not_a_helper(double)
define double @k3.kernel(double %x) {
  %y = call double @glow_not_a_helper(double %x)
  ret double %y
}
""")

LIBCALL = _calling_module("""
define void @k7.divide(ptr %p) {
  %a = load i128, ptr %p
  %q = sdiv i128 %a, 12345678901234567890123
  store i128 %q, ptr %p
  ret void
}
""")


@pytest.mark.parametrize("text, symbol, user", [(FOREIGN, "glow_not_a_helper", "k3.kernel"),
                                                 (LIBCALL, "__divti3", "k7.divide")],
                         ids=["declared", "libcall"])
def test_undefined_symbol_is_a_compile_time_error(text, symbol, user):
    """A call the IR declares, and a helper call LLVM's code generator inserts itself (128-bit
    division), are both caught before the object is loaded, with the symbol and its caller."""
    from glow.backends.cpu import jit

    with pytest.raises(BugError, match=rf"'{symbol}' \(called by {user}\)") as e:
        jit.CompiledModule(text, use_cache=False)
    assert 'module "injected"' in str(e.value)


def test_a_cached_object_is_checked_too(tmp_path, monkeypatch):
    """An object file in the cache (written by anyone) is checked like a fresh one."""
    import llvmlite.binding as llvm
    from glow.backends.cpu import jit

    monkeypatch.setenv("GLOW_CACHE_DIR", str(tmp_path))
    harmless = _calling_module("define i64 @k0.f(i64 %x) {\n  ret i64 %x\n}\n")
    jit.CompiledModule(harmless)  # stored
    (stored,) = list((tmp_path / "cpu").rglob("*.o"))
    mod = llvm.parse_assembly(FOREIGN)
    stored.write_bytes(jit.target_machine().emit_object(mod))
    with pytest.raises(BugError, match="glow_not_a_helper"):
        jit.CompiledModule(harmless)


def test_every_allowed_symbol_is_bound_from_a_library_glow_opened():
    from glow.backends.cpu import linking

    table = linking.bind()
    for name in ("memcpy", "memset", "memmove", "syscall", "expf", "pow", "sinf", "fmod"):
        assert table[name], name


# -- real models: every module links against nothing but what glow binds ---------------------------

def test_models_link_only_to_bound_symbols(monkeypatch):
    """tiny_cnn and two light models compile with every undefined symbol bound by glow, or
    defined by another of the program's own objects (the entry calls kernels `glow_k_<hash>`,
    kernels write the entry's `glow_index_errors`)."""
    import glow
    import onnx
    from glow.backends.cpu import linking
    from glow.testing.models import light_models
    from helpers import EXAMPLE_MODEL

    seen = {}
    real = linking.undefined_symbols

    def spy(obj):
        u = real(obj)
        seen.update(u)
        return u

    monkeypatch.setattr(linking, "undefined_symbols", spy)
    models = [onnx.load(EXAMPLE_MODEL)] + [c.load() for c in light_models()
                                           if c.name in ("light_squeezenet", "light_shufflenet")]
    for m in models:
        glow.compile(m, "cpu")
    assert "syscall" in seen  # the check really saw the models' objects (the futex waits of sync.py)
    own = {s for s in seen if s.startswith(linking.EXPORT_PREFIX) or s == "glow_index_errors"}
    assert set(seen) - own <= set(linking.bind()), sorted(set(seen) - own - set(linking.bind()))
