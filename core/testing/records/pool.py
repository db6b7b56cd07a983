"""Records for pooling: 1-D/2-D/3-D windows, strides, dilations, asymmetric pads, every auto_pad,
ceil_mode (including a last window that would start in the padding), tiling windows (stride ==
kernel) with and without pads, count_include_pad, p-norms, MaxPool's Indices in both storage
orders (with ties, where the first maximum must win), 8-bit integer MaxPool, 16/64-bit floats,
and the global pools."""

import numpy as np

from ..op_records import Const, In, OpRecord

WINDOWS = [  # (input shape, attributes, name)
    ((1, 1, 5, 5), dict(kernel_shape=[3, 3]), "3x3"),
    ((2, 3, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 2, 1]), "strides-asymmetric-pads"),
    ((1, 2, 9, 9), dict(kernel_shape=[3, 3], dilations=[2, 3], pads=[1, 1, 2, 2]), "dilations"),
    ((1, 2, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2]), "tiling"),
    ((1, 2, 7, 5), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 0, 0, 1]), "tiling-pads-crop"),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), "ceil"),
    ((1, 1, 6, 6), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1),
     "ceil-last-window-in-pads"),
    ((1, 2, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), "tiling-ceil"),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 4], strides=[2, 3], auto_pad="SAME_UPPER"), "same-upper"),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 4], strides=[2, 1], auto_pad="SAME_LOWER"), "same-lower"),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], auto_pad="VALID"), "valid"),
    ((1, 1, 1, 1), dict(kernel_shape=[1, 1]), "all-ones-dims"),
    ((1, 2, 4, 1), dict(kernel_shape=[3, 1], pads=[1, 0, 1, 0]), "width-1"),
    ((2, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1]), "1d"),
    ((1, 2, 5, 4, 6), dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0]), "3d"),
    ((1, 2, 6, 6, 6), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]), "3d-tiling"),
    ((1, 2, 5, 6), dict(kernel_shape=[5, 3], strides=[2, 3]), "one-window-rows-tiling-columns"),
    ((1, 2, 4, 4), dict(kernel_shape=[3, 3], pads=[1, 1, 0, 0], strides=[4, 4]), "one-window-padded"),
]

RECORDS = []
for shape, attrs, name in WINDOWS:
    RECORDS.append(OpRecord("MaxPool", [In(shape)], attrs, name=name))
    RECORDS.append(OpRecord("MaxPool", [In(shape)], attrs, name=f"{name}-indices", num_outputs=2))
    RECORDS.append(OpRecord("LpPool", [In(shape)], attrs, name=name, rtol=1e-5, atol=1e-6))
    for cip in (0, 1):
        RECORDS.append(OpRecord("AveragePool", [In(shape)], dict(attrs, count_include_pad=cip),
                                name=f"{name}-cip{cip}", rtol=1e-5, atol=1e-6))

# ties: the first maximum in row-major window order wins, in both storage orders
TIES = Const(np.array([[[[1, 3, 3, 0], [3, 3, 2, 3], [0, 1, 3, 3], [3, 2, 3, 1]]]], np.float32))
RECORDS += [OpRecord("MaxPool", [TIES], dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], storage_order=so),
                     name=f"ties-storage{so}", num_outputs=2) for so in (0, 1)]
RECORDS += [OpRecord("MaxPool", [In((2, 3, 5, 6))], dict(kernel_shape=[2, 3], strides=[1, 2],
                                                           pads=[0, 1, 1, 1], storage_order=1),
                     name="column-major", num_outputs=2),
            OpRecord("MaxPool", [In((1, 2, 6, 5), "int8", -128, 127)], dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                     name="int8"),
            OpRecord("MaxPool", [In((1, 2, 6, 5), "uint8", 0, 255)], dict(kernel_shape=[2, 2], strides=[2, 2]),
                     name="uint8-tiling"),
            OpRecord("MaxPool", [In((1, 2, 6, 5), "int8", -128, 127)], dict(kernel_shape=[3, 2], pads=[1, 1, 1, 1]),
                     name="int8-indices", num_outputs=2)]
# p-norms other than 2, element types
RECORDS += [OpRecord("LpPool", [In((1, 2, 6, 6))], dict(kernel_shape=[3, 3], p=p, pads=[1, 1, 1, 1]),
                     name=f"p{p}", rtol=1e-5, atol=1e-6) for p in (1, 3)]
TOL = {"float16": dict(rtol=1e-3, atol=1e-3), "float64": dict(rtol=1e-12, atol=1e-12),
       "bfloat16": dict(rtol=1e-2, atol=1e-2)}
for t, tol in TOL.items():
    RECORDS += [OpRecord(op, [In((1, 2, 6, 7), t)], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                         name=t, **tol) for op in ("MaxPool", "AveragePool", "LpPool")]
    RECORDS += [OpRecord(op, [In((2, 3, 4, 5), t)], name=t, **tol)
                for op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")]

# global pools: 1-D/2-D/3-D, size-1 spatial dims, p
for shape in [(2, 3, 7), (1, 2, 4, 5), (1, 2, 3, 4, 2), (2, 3, 1, 1)]:
    RECORDS += [OpRecord(op, [In(shape)], name=f"{len(shape) - 2}d-{'x'.join(map(str, shape))}",
                         rtol=1e-5, atol=1e-6)
                for op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")]
RECORDS += [OpRecord("GlobalLpPool", [In((1, 3, 4, 4))], dict(p=p), name=f"p{p}", rtol=1e-5, atol=1e-6)
            for p in (1, 3)]

# RoiAlign (fixed sampling_ratio): rois reach past the map (zero weights, border clamps) and may
# be malformed (x2 < x1), in both coordinate modes; batch indices pick among two images
ROI = dict(output_height=3, output_width=4)
RECORDS += [OpRecord("RoiAlign", [In((2, 3, 6, 7), dtype), In((5, 4), dtype, -2, 9), In((5,), "int64", 0, 1)],
                     dict(ROI, mode=mode, coordinate_transformation_mode=ctm, sampling_ratio=sr, spatial_scale=scale),
                     name=f"{mode}-{ctm}-sr{sr}-scale{scale}-{dtype}", **TOL.get(dtype, dict(rtol=1e-5, atol=1e-5)))
            for mode in ("avg", "max") for ctm in ("half_pixel", "output_half_pixel")
            for sr, scale, dtype in ((2, 1.0, "float32"), (1, 0.5, "float32"), (3, 1.0, "float64"),
                                     (2, 1.0, "float16"))]
RECORDS += [OpRecord("RoiAlign", [In((1, 2, 5, 5)), In((1, 4), "float32", 0, 4), In((1,), "int64", 0, 0)],
                     dict(output_height=1, output_width=1, sampling_ratio=2, mode=m), name=f"one-bin-{m}",
                     rtol=1e-5, atol=1e-5) for m in ("avg", "max")]
