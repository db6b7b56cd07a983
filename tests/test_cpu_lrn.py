"""LRN on cpu: a native kernel on NHWC data (LRNNHWC, between convolutions) and on NCHW data
(through scratch buffers), against the reference, on every instruction-set level the host runs."""

import glow
import numpy as np
import pytest
from glow.backends.cpu import jit
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

LEVELS = [lv for lv in jit.ISAS if jit.ISAS.index(lv) >= jit.ISAS.index(jit.host_isa())]


def _model(c, size, beta):
    w = np.random.default_rng(c).standard_normal((c, 3, 3, 3)).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "w"], ["y0"], pads=[1] * 4),
                      h.make_node("LRN", ["y0"], ["y"], size=size, beta=beta, alpha=1e-3, bias=2.0)], "lrn",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 9, 9])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, c, 9, 9])], [nh.from_array(w, "w")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("optimize", [True, False])  # NHWC between convolutions; NCHW through scratch
@pytest.mark.parametrize("c,size,beta", [(96, 5, 0.75), (20, 3, 0.5), (7, 4, 1.3), (40, 1, 0.75), (17, 6, 0.75)])
def test_lrn_matches_the_reference(level, optimize, c, size, beta):
    m = _model(c, size, beta)
    x = np.random.default_rng(size).standard_normal((2, 3, 9, 9)).astype(np.float32) * 3
    want = glow.compile(m, "reference").run({"x": x})["y"]
    exe = glow.compile(m, "cpu", optimize=optimize, options={"isa": level})
    # the Conv before it sums in its own order
    np.testing.assert_allclose(exe.run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    ops = {i.opname for i in exe.program.fn.instrs}
    assert ("LRNNHWC" if optimize else "LRN") in ops, ops  # a kernel, not the lowering's Pad and Slices
