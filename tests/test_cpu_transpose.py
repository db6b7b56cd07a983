"""cpu Transposes of the innermost axis in 8 x 8 register tiles (backends/cpu/kernels/transpose.py):
equal to NumPy over ranks 2-5, sizes that 8 does not divide (edge tiles), 4-byte types, views
after a Slice, 1 and 2 threads (split by the outermost loop), and the axes the tiles choose."""

import glow
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

pytest.importorskip("llvmlite")

from glow.backends.cpu.kernels import transpose  # noqa: E402
from glow.backends.cpu.kernels.elementwise import collapse, strides_of  # noqa: E402

CASES = [((32, 200), (1, 0)), ((9, 17), (1, 0)), ((3, 20, 37), (0, 2, 1)), ((2, 16, 5, 24), (0, 2, 3, 1)),
         ((1, 32, 6, 20, 20), (0, 2, 3, 4, 1)), ((2, 12, 11, 40), (3, 1, 0, 2)), ((64, 3, 130), (2, 1, 0)),
         ((4, 40, 40, 9), (0, 3, 1, 2)), ((300, 300), (1, 0))]
TYPES = {"float32": (T.FLOAT, np.float32), "int32": (T.INT32, np.int32), "float16": (T.FLOAT16, np.float16)}


def transpose_model(shape, perm, elem):
    node = h.make_node("Transpose", ["x"], ["y"], perm=list(perm))
    graph = h.make_graph([node], "t", [h.make_tensor_value_info("x", elem, shape)],
                         [h.make_tensor_value_info("y", elem, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", sorted(TYPES))
@pytest.mark.parametrize("shape,perm", CASES)
def test_transpose_equals_numpy(shape, perm, dtype, threads):
    elem, npt = TYPES[dtype]
    x = (np.random.default_rng(0).standard_normal(shape) * 100).astype(npt)
    got = glow.compile(transpose_model(shape, perm, elem), backend="cpu", threads=threads).run({"x": x})["y"]
    np.testing.assert_array_equal(got, x.transpose(perm))


def test_a_transposed_slice_reads_the_view():
    """Slice then Transpose: the tiles read the slice's strided view of its input."""
    nodes = [h.make_node("Slice", ["x", "s", "e", "a"], ["v"]), h.make_node("Transpose", ["v"], ["y"], perm=[1, 0])]
    inits = [h.make_tensor(n, T.INT64, [2], v) for n, v in (("s", [3, 5]), ("e", [40, 70]), ("a", [0, 1]))]
    graph = h.make_graph(nodes, "st", [h.make_tensor_value_info("x", T.FLOAT, [48, 80])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    x = np.random.default_rng(1).standard_normal((48, 80)).astype(np.float32)
    got = glow.compile(model, backend="cpu").run({"x": x})["y"]
    np.testing.assert_array_equal(got, x[3:40, 5:70].T)


@pytest.mark.parametrize("shape,perm,axis", [((32, 200), (1, 0), 0), ((1, 32, 6, 20, 20), (0, 2, 3, 4, 1), 0),
                                             ((3, 20, 37), (0, 2, 1), 1), ((5, 7), (1, 0), None),
                                             ((8, 16, 4), (0, 2, 1), None)])
def test_tile_axis(shape, perm, axis):
    """The input's contiguous axis the tiles run along; none for a tile bigger than the array
    or an innermost axis that does not move."""
    out_shape = [shape[p] for p in perm]
    in_strides = [strides_of(shape)[p] for p in perm]
    sizes, (so, si) = collapse(out_shape, [strides_of(out_shape), in_strides])
    assert transpose.tile_axis(sizes, so, si) == axis
