"""Ahead of time: `torch.export` programs through `glow.compile`, `.pt2` files through `glow run`,
against eager torch; dynamic dims as glow's symbolic dims; strict errors naming the ATen op."""

import subprocess
import sys

import glow
import numpy as np
import pytest
import torch
from glow.errors import UnsupportedOpError
from torch import nn
from torch.export import Dim
from torch_models import MODELS

QUICK = {"bert", "gpt2", "resnet"}


def assert_close(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(want.abs().max())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5 * max(scale, 1.0))


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in QUICK else [pytest.mark.slow])
                                  for n in MODELS])
def test_exported_model_equals_eager(name):
    model, args = MODELS[name]()
    with torch.no_grad():
        want = model(*args)
    ep = torch.export.export(model, args)
    exe = glow.compile(ep)  # glow.compile takes the ExportedProgram itself
    (out,) = exe.output_names
    got = exe.run({n: a.numpy() for n, a in zip(exe.input_names, args)})[out]
    assert_close(torch.from_numpy(got), want)


def test_dynamic_dims_become_symbolic_and_compile_once():
    model, args = MODELS["bert"]()
    ep = torch.export.export(model, args, dynamic_shapes=({0: Dim("batch", max=8), 1: Dim("seq", max=64)},))
    graph = glow.torch.import_exported(ep)
    (x,) = graph.inputs
    assert all(isinstance(d, str) for d in x.type.shape), x.type  # both dims symbolic
    fn = glow.torch.compile_exported(ep)
    g = torch.Generator().manual_seed(0)
    for batch, seq in [(2, 8), (3, 5), (1, 17)]:
        ids = torch.randint(0, 128, (batch, seq), generator=g)
        with torch.no_grad():
            assert_close(fn(ids), model(ids))


class Bessel(nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x) + torch.special.bessel_j1(x).relu() + torch.special.bessel_j0(x * 2)


def test_unsupported_op_is_one_line_error_naming_op_and_node():
    ep = torch.export.export(Bessel(), (torch.randn(3),))
    with pytest.raises(UnsupportedOpError) as info:
        glow.compile(ep)
    msg = str(info.value)
    assert "\n" not in msg
    assert "aten.special_bessel_j0.default (x2, e.g. node 'special_bessel_j0')" in msg
    assert "aten.special_bessel_j1.default (x1" in msg  # every unsupported op at once
    assert info.value.ops == {"aten.special_bessel_j0.default": 2, "aten.special_bessel_j1.default": 1}


def test_stateful_program_is_refused():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(1))

        def forward(self, x):
            self.n.add_(1)
            return x + self.n

    ep = torch.export.export(Counter(), (torch.randn(2),))
    with pytest.raises(glow.GlowError, match="stateful program"):
        glow.compile(ep)


def _glow_cli(*args, env_code=""):
    code = f"{env_code}import sys; from glow.cli import main; sys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_glow_run_on_a_saved_pt2(tmp_path):
    model, args = MODELS["resnet"]()
    with torch.no_grad():
        want = model(*args)
    path = tmp_path / "resnet.pt2"
    torch.export.save(torch.export.export(model, args), str(path))
    np.savez(tmp_path / "in.npz", x=args[0].numpy())
    r = _glow_cli("run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out.npz")
    (name,) = got.files
    assert_close(torch.from_numpy(got[name]), want)


def test_glow_run_bad_pt2_and_missing_torch_exit_2(tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_text("not a zip")
    r = _glow_cli("run", str(bad))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "not a torch.export program" in r.stderr
    r = _glow_cli("run", str(bad), env_code="import sys; sys.modules['torch'] = None; ")
    assert r.returncode == 2 and "needs torch" in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
