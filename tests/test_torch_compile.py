"""`torch.compile(model, backend="glow")` on whole models (tests/torch_models.py: transformers
configs with random weights, CNNs written there) against eager torch; graph breaks, an op glow
has no rule for, dynamic sizes without a compile per size, and OpenCL."""

import glow
import numpy as np
import pytest
import torch
from glow.torch.dynamo import recording, stats
from helpers import opencl_unavailable_reason
from torch import nn
from torch_models import MODELS

#: Quick enough for every run; the rest are marked slow (CI runs them too).
QUICK = {"bert", "llama", "resnet", "mobilenet"}


def assert_close(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(want.abs().max())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5 * max(scale, 1.0))


def run_compiled(model, args, options=None):
    torch._dynamo.reset()
    f = torch.compile(model, backend="glow", options=options)
    with torch.no_grad(), recording() as reports:
        got = f(*args)
    return got, reports


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in QUICK else [pytest.mark.slow])
                                  for n in MODELS])
def test_model_equals_eager(name):
    model, args = MODELS[name]()
    with torch.no_grad():
        want = model(*args)
    got, reports = run_compiled(model, args)
    assert_close(got, want)
    assert len(reports) == 1  # one graph: no break in these models
    rep = reports[0]
    eager = [n for n, _ in rep["nodes"] if n not in rep["glow"] and n not in rep["sizes"]]
    assert not eager, f"{name}: nodes left to torch: {eager}"


class Masked(nn.Module):
    """A transformers model called with a padding mask (its mask building: advanced indexing,
    comparisons, where)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask):
        return self.model(input_ids=ids, attention_mask=mask)[0]


@pytest.mark.parametrize("name", ["bert", pytest.param("llama", marks=pytest.mark.slow)])
def test_padding_mask(name):
    model = Masked(MODELS[name]()[0].model).eval()
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 5:] = 0
    with torch.no_grad():
        want = model(ids, mask)
    got, (rep,) = run_compiled(model, (ids, mask))
    assert_close(got, want)
    assert not [n for n, _ in rep["nodes"] if n not in rep["glow"] and n not in rep["sizes"]]


class Branchy(nn.Module):
    """A data-dependent branch: dynamo breaks the graph there and hands glow two graphs."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.a(x))
        y = y * 2 if y.sum() > 0 else y - 1
        return torch.tanh(self.b(y))


class Bessel(nn.Module):
    """An op glow has no rule for (bessel_j0) between two supported pieces."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        return torch.sigmoid(self.b(torch.special.bessel_j0(torch.relu(self.a(x)) + 1)))


OPENCL = opencl_unavailable_reason()
BACKENDS = ["cpu", pytest.param("opencl", marks=[pytest.mark.opencl, pytest.mark.skipif(
    OPENCL is not None, reason=f"no OpenCL: {OPENCL}")])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_break_gives_two_glow_graphs(backend):
    torch.manual_seed(0)
    m, x = Branchy().eval(), torch.randn(3, 8)
    with torch.no_grad():
        for sign in (1, -1):  # both branches
            m.a.bias.fill_(5.0 * sign)
            got, reports = run_compiled(m, (x,), options={"backend": backend})
            assert_close(got, m(x))
            assert len(reports) == 2 and all(r["glow"] for r in reports)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unsupported_op_runs_eager(backend):
    torch.manual_seed(0)
    m, x = Bessel().eval(), torch.randn(3, 8)
    got, reports = run_compiled(m, (x,), options={"backend": backend})
    with torch.no_grad():
        assert_close(got, m(x))
    (rep,) = reports
    assert "special_bessel_j0" in rep["eager"] and "no glow rule for aten.special_bessel_j0" in \
        rep["eager"]["special_bessel_j0"]
    assert {"addmm", "addmm_1"} <= set(rep["glow"])  # both linears on glow, in two partitions
    assert len(set(rep["glow"].values())) == 2


def test_explain_says_what_ran_where_and_why():
    torch.manual_seed(0)
    m, x = Bessel().eval(), torch.randn(3, 8)
    e = glow.torch.explain(m, x)
    rows = {r[1]: r for r in e.nodes}
    assert rows["special_bessel_j0"][3] == "eager" and "no glow rule" in rows["special_bessel_j0"][4]
    assert rows["addmm"][3] == "glow" and "special_bessel_j0" in str(e)


def test_explain_lists_graph_breaks():
    torch.manual_seed(0)
    e = glow.torch.explain(Branchy().eval(), torch.randn(3, 8))
    assert e.graphs == 2 and len(e.graph_breaks) == 1
    assert not e.eager or all(r[4] for r in e.eager)  # every eager row carries a reason


def test_strict_refuses_what_would_stay_eager():
    m = Bessel().eval()
    torch._dynamo.reset()
    f = torch.compile(m, backend="glow", options={"strict": True})
    with pytest.raises(Exception, match="stays eager: no glow rule for aten.special_bessel_j0"):
        with torch.no_grad():
            f(torch.randn(3, 8))


def test_dynamic_sizes_do_not_recompile_per_size():
    model, _ = MODELS["bert"]()
    frames = []

    def counting(gm, example_inputs):
        frames.append(gm)
        return glow.torch.backend(gm, example_inputs)

    torch._dynamo.reset()
    f = torch.compile(model, backend=counting, dynamic=True)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for i, (batch, seq) in enumerate([(2, 8), (3, 5), (5, 13), (4, 9)]):
            x = torch.randint(0, 128, (batch, seq), generator=g)
            assert_close(f(x), model(x))
            if i == 0:  # the first call may hand over a graph twice (dynamo restarts its analysis)
                first_frames, first_compiles = len(frames), stats["glow_compiles"]
                assert any(isinstance(n.meta.get("example_value"), torch.SymInt)  # symbolic sizes came
                           for n in frames[-1].graph.nodes if n.op == "placeholder")
    assert len(frames) == first_frames, "dynamo compiled the model again for a new size"
    assert stats["glow_compiles"] == first_compiles, "glow imported and compiled the graph again for a new size"


@pytest.mark.opencl
@pytest.mark.skipif(OPENCL is not None, reason=f"no OpenCL: {OPENCL}")
@pytest.mark.parametrize("name", ["bert", "mobilenet"])
def test_model_on_opencl(name):
    model, args = MODELS[name]()
    with torch.no_grad():
        want = model(*args)
    got, reports = run_compiled(model, args, options={"backend": "opencl"})
    assert_close(got, want)
    assert reports[0]["glow"] and not reports[0]["failed"]
