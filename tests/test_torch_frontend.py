"""The PyTorch frontend, op by op: ATen rules through `torch.compile(backend="glow")` against
eager torch, each asserting that every ATen node really ran on glow (a rule that silently fell
back to eager would otherwise pass). CI installs torch (.ci/run): a missing torch is a failure."""

import subprocess
import sys

import glow
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from glow.torch.dynamo import recording
from torch import nn


class Fn(nn.Module):
    def __init__(self, fn, *mods):
        super().__init__()
        self.fn, self.mods = fn, nn.ModuleList(mods)

    def forward(self, *args):
        return self.fn(*args)


def on_glow(fn_or_module, *args, options=None, rtol=1e-4, atol=1e-5, all_on_glow=True):
    """Compile with the glow backend, compare with eager, and check nothing but size arithmetic
    stayed in torch. Returns the reports."""
    model = fn_or_module if isinstance(fn_or_module, nn.Module) else Fn(fn_or_module)
    torch._dynamo.reset()
    compiled = torch.compile(model.eval(), backend="glow", options=options)
    with torch.no_grad(), recording() as reports:
        got = compiled(*args)
        want = model(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.is_floating_point:
            np.testing.assert_allclose(g.float().numpy(), w.float().numpy(), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    if all_on_glow:
        assert reports, "no graph reached the glow backend"
        for rep in reports:
            left = {n: op for n, op in rep["nodes"] if n not in rep["glow"] and n not in rep["sizes"]}
            assert not left, f"stayed eager: {left} ({ {n: rep['eager'].get(n) for n in left} })"
    return reports


X = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(0))
IDX = torch.tensor([[3, -7, 0, 11], [-1, 5, 2, 8]])


@pytest.mark.parametrize("fn", [
    lambda x: (x + 2) * x - x / 3 + x.pow(2) - torch.rsqrt(x.abs() + 1),
    lambda x: torch.where(x > 0, x, x * 0.1).masked_fill(x < -1, -5.0),
    lambda x: (x == x.amax(-1, keepdim=True)) | (x <= 0) & (x != 1),
    lambda x: (F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.hardswish(x), F.hardsigmoid(x)),
    lambda x: (F.leaky_relu(x, 0.2), F.elu(x), F.softplus(x), torch.clamp(x, -0.5, 0.7), F.relu6(x)),
    lambda x: (torch.sigmoid(x), torch.tanh(x), torch.exp(x / 4), torch.log(x.abs() + 0.5), torch.erf(x)),
    lambda x: (x.softmax(-1), F.log_softmax(x, 1), x.sum(), x.mean((0, 2), keepdim=True), x.var(-1)),
    lambda x: (x.amin(1), x.argmax(-1), x.max(1).values, x.max(1).indices, x.cumsum(2), x.prod(-1)),
], ids=["arith", "where", "compare", "act1", "act2", "act3", "reduce", "argmax"])
def test_elementwise_and_reductions(fn):
    on_glow(fn, X)


def test_integer_arithmetic_follows_torch():
    # floor division and remainder of negative ints round toward -inf in torch (not C's truncation)
    on_glow(lambda i: (i // 3, i % 5, i * 2 + 1, -i, torch.div(i, 4, rounding_mode="trunc")), IDX)


def test_type_promotion_with_scalars_and_mixed_dtypes():
    on_glow(lambda x, i: (x[:, :1, :4] + i.unsqueeze(1), i + 0.5, (i > 2).float() * x[0, 0, :4]),
            X, IDX)


@pytest.mark.parametrize("fn", [
    lambda x: torch.cat([x.transpose(1, 2)[:, 1:3], x.permute(0, 2, 1)[:, -2:]], 1).reshape(2, -1),
    lambda x: (x[:, 0], x[..., 1::2], x[:, -1, 2:5], x.unsqueeze(1).squeeze(1), x.flatten(1)),
    lambda x: tuple(x.split([2, 4], dim=1)) + tuple(x.chunk(2, -1)) + (torch.stack([x, x * 2], 1),),
    lambda x: (x.expand(3, 2, 6, 8), x[:, :1].expand(-1, 6, -1), x.repeat(1, 2, 1), x.flip(-1)),
    lambda x: (F.pad(x, (1, 2)), F.pad(x, (0, 0, 2, 1), value=3.0), x.contiguous().clone().t()
               if x.dim() == 2 else x.mT),
], ids=["cat-permute", "select-slice", "split-stack", "expand-repeat", "pad"])
def test_movement(fn):
    # computed in and out: a partition of data movement alone is left to torch (not worth a call)
    def moved(x):
        outs = fn(torch.tanh(x))
        return tuple(o * 2 for o in outs) if isinstance(outs, tuple) else outs * 2

    on_glow(moved, X)


def test_creation_and_indexing():
    emb = nn.Embedding(16, 8)

    def fn(x, i):
        n = x.shape[-1]
        pos = torch.arange(n) * 2
        mask = torch.ones(n, n).triu(1).bool()
        return (x + pos, x.masked_fill(mask[:6], 0.0), emb(i.abs() % 16), torch.zeros_like(x) + torch.full((8,), 3.0),
                x.index_select(1, torch.tensor([4, 0, 2])), x.gather(2, i.abs()[:, None, :4] % 8 + torch.zeros(
                    2, 6, 4, dtype=torch.int64)), x[:, torch.tensor([1, 3])])

    on_glow(Fn(fn, emb), X, IDX)


def test_advanced_indexing_with_several_index_tensors():
    i = torch.tensor([[0], [-1]])  # broadcasts against j, negative as torch counts
    j = torch.tensor([[1, 5, -2]])
    on_glow(lambda x: (x[i, j], x[:, i, j], x[i, :, j], x[i, j, torch.tensor(3)], x[1:, i[0], j] * 2), X)


def test_matrix_products():
    lin = nn.Linear(8, 5)
    w = torch.randn(8, 3)

    def fn(x):
        return (lin(x), x @ w, torch.bmm(x, x.transpose(1, 2)), torch.addmm(w[0], x[0], w),
                torch.baddbmm(x[:, :, :6], x, x.transpose(1, 2), beta=0.5, alpha=2.0))

    on_glow(Fn(fn, lin), X)


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"mask": "bool"}, {"mask": "float"}, {"gqa": True}],
                         ids=["plain", "causal", "bool-mask", "float-mask", "gqa"])
def test_scaled_dot_product_attention(kw):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 5, 8, generator=g)
    kv_heads = 2 if kw.get("gqa") else 4
    k, v = torch.randn(2, kv_heads, 7, 8, generator=g), torch.randn(2, kv_heads, 7, 8, generator=g)
    mask = None
    if kw.get("mask") == "bool":
        mask = torch.rand(2, 1, 5, 7, generator=g) > 0.3
        mask[..., 0] = True
    elif kw.get("mask") == "float":
        mask = torch.randn(2, 1, 5, 7, generator=g)
    on_glow(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=kw.get("is_causal", False), scale=0.3,
        enable_gqa=bool(kw.get("gqa"))), q, k, v)


def test_convolutions_norms_and_pools():
    torch.manual_seed(0)
    mods = nn.ModuleDict({
        "c1": nn.Conv1d(4, 8, 3, padding=1, groups=2), "c2": nn.Conv2d(4, 6, 3, stride=2, dilation=2, padding=2),
        "ct": nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), "bn": nn.BatchNorm2d(4),
        "ln": nn.LayerNorm(5), "gn": nn.GroupNorm(2, 4)}).eval()
    with torch.no_grad():
        mods["bn"].running_mean.uniform_(-1, 1)
        mods["bn"].running_var.uniform_(0.5, 2)

    def fn(x):
        m = mods
        return (m["c1"](x[:, :, 0]), m["c2"](x), m["ct"](x), m["bn"](x), m["ln"](x), m["gn"](x),
                F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2, ceil_mode=True), F.adaptive_avg_pool2d(x, 1))

    on_glow(Fn(fn, *mods.values()), torch.randn(2, 4, 5, 5))


def test_half_precision_and_bool_outputs():
    xh = X.half()
    on_glow(lambda x: (x + 1, torch.relu(x), x > 0), xh, rtol=1e-3, atol=1e-3)


def test_bfloat16_model():
    lin = nn.Linear(8, 8).to(torch.bfloat16)
    on_glow(Fn(lambda x: (torch.relu(lin(x)) * 2, x.sum(-1)), lin), X.bfloat16(), rtol=2e-2, atol=2e-2)


def test_tensors_cross_without_copies():
    from glow.torch.runtime import feeds_for, from_numpy

    t = torch.randn(3, 4)
    assert np.shares_memory(feeds_for([("input", "x")], [t])["x"], t.numpy())
    b = torch.randn(3, 4).bfloat16()
    assert feeds_for([("input", "b")], [b])["b"].ctypes.data == b.data_ptr()
    a = np.ones((2, 2), np.float32)
    assert from_numpy(a).data_ptr() == a.ctypes.data


def test_compile_bakes_weights_in_without_copying(monkeypatch):
    import glow.torch.dynamo as dynamo

    graphs = []
    real = dynamo.import_graph_module

    def spy(*a, **k):
        got = real(*a, **k)
        graphs.append(got[0])
        return got

    monkeypatch.setattr(dynamo, "import_graph_module", spy)
    lin = nn.Linear(8, 4)
    on_glow(Fn(lambda x: torch.relu(lin(x)) * 2, lin), X)
    weight = lin.weight.detach().numpy()
    (graph,) = graphs
    assert any(np.shares_memory(c.data, weight) for c in graph.constants), "the weight was copied"
    assert [v.type.shape for v in graph.inputs] == [(2, 6, 8)]  # x alone: weight and bias are constants


def test_weights_are_constants_over_the_parameters_memory():
    lin = nn.Linear(8, 4).eval()
    ep = torch.export.export(lin, (torch.randn(2, 8),))
    graph = glow.torch.import_exported(ep)
    assert graph.input_names == ["input"]
    weight = lin.weight.detach().numpy()
    assert any(np.shares_memory(c.data, weight) for c in graph.constants), "the weight was copied"


def test_glow_torch_is_reachable_from_import_glow():
    code = ("import sys, glow; assert callable(glow.torch.explain) and callable(glow.torch.compile_exported); "
            "assert callable(glow.torch.backend)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_glow_does_not_import_torch():
    code = ("import sys, glow, glow.torch, numpy as np; from glow.graph import GraphBuilder; "
            "from glow import dtypes as dt; b = GraphBuilder('g'); x = b.input('x', dt.tensor((2,), 'float32')); "
            "glow.compile(b.build([b.add1('Relu', [x])]), 'reference').run({'x': np.ones(2, np.float32)}); "
            "assert 'torch' not in sys.modules, 'glow imported torch'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_backend_found_through_the_entry_point_without_importing_glow():
    code = ("import sys, torch; f = torch.compile(lambda x: torch.relu(x) * 2, backend='glow'); "
            "x = torch.randn(4, 4); assert torch.equal(f(x), torch.relu(x) * 2); "
            "from torch._dynamo.backends.registry import lookup_backend; "
            "assert lookup_backend('glow').__module__ == 'glow.torch.dynamo', lookup_backend('glow')")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_option_is_one_line_error():
    torch._dynamo.reset()
    f = torch.compile(lambda x: x + 1, backend="glow", options={"thread": 2})
    with pytest.raises(Exception, match="unknown option 'thread'"):
        f(torch.ones(2))


def test_options_reach_glow_compile(monkeypatch):
    seen = {}
    real = glow.compile

    def spy(graph, backend=None, **kw):
        seen.update(backend=backend, **kw)
        return real(graph, backend, **kw)

    monkeypatch.setattr(glow, "compile", spy)
    on_glow(lambda x: torch.tanh(x) * 2, X, options={"backend": "reference", "threads": 1})
    assert seen["backend"] == "reference" and seen["threads"] == 1


def test_called_with_gradients_on_the_backward_stays_in_torch():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2))
    x = torch.randn(4, 8)
    torch._dynamo.reset()
    y = torch.compile(m, backend="glow")(x)
    y.sum().backward()
    got = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    want = m(x)
    want.sum().backward()
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-6)
    for g, p in zip(got, m.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)
