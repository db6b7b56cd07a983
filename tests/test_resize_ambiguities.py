"""Resize where ONNX's text admits two readings and onnx.reference and onnxruntime take different ones
(docs/fuzzing.md, "Spec ambiguities"). Each case pins glow's choice on every backend, against
values worked out here from the formula glow follows, and records that onnxruntime takes the
other reading (if it ever changes, the doc is stale and this test says so).

The attribute's text defines `length_resized` as "the length of the resized tensor" but also an
`output_width` that "can be a fractional number when it is calculated out of a scale factor".
With `scales` whose product with the input length is not whole, onnx.reference (and glow) put
the fractional length `length_original * scale` into align_corners, pytorch_half_pixel and
tf_crop_and_resize; onnxruntime puts the integer length of the output.
"""

import glow
import numpy as np
import pytest
from helpers import backend_unavailable, make_model
from onnx import TensorProto as T
from onnx import helper as h

X = np.arange(1, 8, dtype=np.float32).reshape(1, 1, 1, 7)  # 1..7 along W: a value is its coordinate + 1

CASES = {
    # name: (mode, coordinate mode, nearest mode, W scale, roi (W start, end), glow's values, onnxruntime's)
    # 7 * 0.6 = 4.2 -> 4 columns; x = y * 6 / (4.2 - 1), not y * 6 / 3
    "align_corners": ("linear", "align_corners", "round_prefer_floor", 0.6, None,
                      [1 + 1.875 * y for y in range(4)], [1.0, 3.0, 5.0, 7.0]),
    # 7 * 0.15 = 1.05 -> 1 column; 1.05 > 1, so x = 0.5 / 0.15 - 0.5, not 0
    "pytorch_half_pixel": ("linear", "pytorch_half_pixel", "round_prefer_floor", 0.15, None,
                           [1 + 0.5 / 0.15 - 0.5], [1.0]),
    # roi 0.2..0.7: x = 0.2 * 6 + y * 0.5 * 6 / (4.2 - 1), not ... / 3
    "tf_crop_and_resize": ("linear", "tf_crop_and_resize", "round_prefer_floor", 0.6, (0.2, 0.7),
                           [1 + 1.2 + 0.9375 * y for y in range(4)], [2.2, 3.2, 4.2, 5.2]),
    # 3 / float32(0.6) = 4.9999998: floor gives column 4 (onnxruntime multiplies by 1/0.6 rounded to
    # float32 and lands on 5.0 exactly)
    "asymmetric_floor": ("nearest", "asymmetric", "floor", 0.6, None, [1.0, 2.0, 4.0, 5.0], [1.0, 2.0, 4.0, 6.0]),
}


def _model(mode, ctm, nearest, scale, roi):
    start, end = roi or (0.0, 1.0)
    inits = [h.make_tensor("roi", T.FLOAT, [8], [0, 0, 0, start, 1, 1, 1, end]),
             h.make_tensor("scales", T.FLOAT, [4], [1, 1, 1, scale])]
    node = h.make_node("Resize", ["x", "roi", "scales"], ["y"], mode=mode, coordinate_transformation_mode=ctm,
                       nearest_mode=nearest)
    return make_model([node], [("x", T.FLOAT, [1, 1, 1, 7])], [("y", T.FLOAT, None)], inits, opset=19)


@pytest.mark.parametrize("kw", [{"backend": "reference"}, {"backend": "cpu"}, {"backend": "cpu", "native": "floor"},
                                {"backend": "opencl"}], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_glow_takes_the_fractional_length_on_every_backend(name, kw):
    if backend_unavailable(kw["backend"]):
        pytest.skip(f"{kw['backend']} unavailable")
    mode, ctm, nearest, scale, roi, want, _ = CASES[name]
    got = glow.compile(_model(mode, ctm, nearest, scale, roi), strict=True, **kw).run({"x": X})["y"]
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnxruntime_takes_the_other_reading(name):
    ort = pytest.importorskip("onnxruntime")
    mode, ctm, nearest, scale, roi, want, theirs = CASES[name]
    model = _model(mode, ctm, nearest, scale, roi)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    np.testing.assert_allclose(got.reshape(-1), theirs, rtol=1e-5, atol=1e-5)
    assert not np.allclose(got.reshape(-1), want, rtol=1e-5, atol=1e-5)


def test_half_pixel_symmetric_follows_the_formula_where_onnx_reference_does_not():
    """The spec's formula, offset = center * (1 - output_width_int / output_width): 7 * 0.5 = 3.5
    -> 3 columns at x = 2y + 1. glow and onnxruntime give 2, 4, 6; onnx.reference gives 1, 4, 6."""
    model = _model("linear", "half_pixel_symmetric", "round_prefer_floor", 0.5, None)
    for kw in ({"backend": "reference"}, {"backend": "cpu"}, {"backend": "cpu", "native": "floor"}):
        got = glow.compile(model, strict=True, **kw).run({"x": X})["y"]
        np.testing.assert_allclose(got.reshape(-1), [2.0, 4.0, 6.0], rtol=1e-6)
