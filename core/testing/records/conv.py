"""Records for convolutions: 1-D/2-D/3-D, groups (depthwise, with a channel multiplier), strides,
dilations, asymmetric pads, every auto_pad, bias, size-1 dims, 16-bit and 64-bit floats, kernels
big enough that the im2col rewrite must split its patch matrix, and for ConvTranspose the
geometry cases (output_padding, output_shape, SAME pads, strides larger than the kernel, which
leave phases of the output without any contribution)."""

from ..op_records import In, OpRecord

#: float32 sums in another order: relative error grows with the number of terms
F32 = dict(rtol=1e-4, atol=1e-5)
TOL = {"float32": F32, "float64": dict(rtol=1e-10, atol=1e-12), "float16": dict(rtol=2e-3, atol=2e-3),
       "bfloat16": dict(rtol=2e-2, atol=2e-2)}


def conv(x, w, bias=False, name="", dtype="float32", op="Conv", **attrs):
    m = w[1] * attrs.get("group", 1) if op == "ConvTranspose" else w[0]
    ins = [In(x, dtype), In(w, dtype)] + ([In((m,), dtype)] if bias else [])
    return OpRecord(op, ins, attrs, name=name, **TOL[dtype])


RECORDS = [
    # 2-D basics
    conv((1, 1, 5, 5), (1, 1, 3, 3), name="basic"),
    conv((2, 3, 7, 6), (4, 3, 3, 3), bias=True, pads=[1, 1, 1, 1], name="pads-bias"),
    conv((1, 3, 7, 9), (2, 3, 3, 2), strides=[2, 3], pads=[1, 0, 2, 1], name="strides-asymmetric"),
    conv((1, 2, 9, 9), (3, 2, 3, 3), dilations=[2, 3], pads=[2, 1, 0, 3], name="dilations"),
    conv((1, 2, 8, 7), (3, 2, 3, 3), strides=[2, 2], dilations=[2, 1], pads=[3, 3, 3, 3],
         name="pads-wider-than-window"),
    conv((1, 2, 6, 5), (2, 2, 1, 1), name="1x1"),
    conv((2, 4, 5, 5), (6, 4, 1, 1), strides=[2, 2], bias=True, name="1x1-strided"),
    conv((1, 1, 1, 1), (1, 1, 1, 1), name="all-ones-dims"),
    conv((1, 1, 1, 1), (2, 1, 3, 3), pads=[1, 1, 1, 1], name="1x1-input-padded"),
    conv((1, 2, 5, 1), (3, 2, 3, 1), pads=[1, 0, 1, 0], name="width-1"),
    conv((3, 2, 4, 4), (5, 2, 4, 4), name="kernel-covers-input"),
    # auto_pad
    conv((1, 2, 7, 6), (3, 2, 3, 4), auto_pad="SAME_UPPER", strides=[2, 2], name="same-upper"),
    conv((1, 2, 7, 6), (3, 2, 3, 4), auto_pad="SAME_LOWER", strides=[2, 1], name="same-lower"),
    conv((1, 2, 7, 6), (3, 2, 3, 4), auto_pad="VALID", pads=[1, 1, 1, 1], name="valid"),
    conv((1, 2, 6, 6), (3, 2, 3, 3), auto_pad="SAME_UPPER", dilations=[2, 2], name="same-dilated"),
    # groups
    conv((2, 4, 6, 6), (6, 2, 3, 3), group=2, bias=True, pads=[1, 1, 1, 1], name="group-2"),
    conv((1, 6, 5, 5), (6, 2, 3, 3), group=3, strides=[2, 2], name="group-3-strided"),
    conv((2, 5, 7, 6), (5, 1, 3, 3), group=5, pads=[1, 1, 1, 1], bias=True, name="depthwise"),
    conv((1, 3, 8, 8), (6, 1, 3, 3), group=3, strides=[2, 2], dilations=[1, 2], name="depthwise-multiplier"),
    conv((1, 4, 6, 6), (4, 1, 1, 1), group=4, name="depthwise-1x1"),
    conv((1, 8, 5, 5), (8, 1, 5, 5), group=8, auto_pad="SAME_UPPER", name="depthwise-5x5-same"),
    conv((1, 1, 6, 6), (4, 1, 3, 3), name="one-input-channel"),
    # 1-D and 3-D
    conv((2, 3, 11), (4, 3, 3), strides=[2], pads=[1, 2], bias=True, name="1d"),
    conv((1, 2, 9), (2, 1, 4), group=2, dilations=[2], name="1d-grouped-dilated"),
    conv((1, 2, 5, 4, 6), (3, 2, 3, 2, 3), pads=[1, 0, 1, 1, 1, 0], strides=[1, 2, 2], bias=True,
         name="3d"),
    conv((1, 4, 4, 4, 4), (4, 1, 3, 3, 3), group=4, auto_pad="SAME_LOWER", name="3d-depthwise"),
    # kernels whose patch matrix must be split into chunks of kernel positions
    conv((1, 4, 20, 20), (2, 4, 7, 7), bias=True, name="chunked-7x7"),
    conv((2, 8, 16, 16), (4, 8, 9, 9), pads=[4, 4, 4, 4], name="chunked-9x9-same"),
    conv((1, 3, 40), (2, 3, 31), pads=[15, 15], name="chunked-1d"),
    # element types
    *[conv((1, 3, 6, 6), (4, 3, 3, 3), bias=True, dtype=t, pads=[1, 1, 1, 1], name=t)
      for t in ("float16", "float64", "bfloat16")],
    conv((1, 4, 6, 6), (4, 1, 3, 3), group=4, dtype="float16", name="depthwise-float16"),
]

# ConvTranspose: weights are (C, M / group, *kernel)
T = dict(op="ConvTranspose")
RECORDS += [
    conv((1, 1, 3, 3), (1, 2, 3, 3), name="basic", **T),
    conv((2, 3, 4, 5), (3, 2, 3, 3), strides=[2, 2], bias=True, name="strides-bias", **T),
    conv((1, 2, 4, 4), (2, 3, 3, 2), strides=[3, 2], pads=[1, 2, 0, 1], name="pads", **T),
    conv((1, 2, 4, 4), (2, 3, 3, 3), strides=[2, 2], output_padding=[1, 1], name="output-padding", **T),
    conv((1, 2, 3, 4), (2, 2, 3, 3), strides=[3, 2], output_shape=[10, 8], name="output-shape", **T),
    conv((1, 2, 3, 3), (2, 2, 3, 3), strides=[2, 2], output_shape=[12, 9], name="output-shape-beyond-full",
         **T),
    conv((1, 2, 3, 4), (2, 2, 3, 3), strides=[2, 2], auto_pad="SAME_UPPER", name="same-upper", **T),
    conv((1, 2, 3, 4), (2, 2, 4, 3), strides=[2, 3], auto_pad="SAME_LOWER", name="same-lower", **T),
    conv((1, 2, 4, 4), (2, 2, 3, 3), dilations=[2, 2], name="dilations", **T),
    conv((1, 2, 4, 4), (2, 2, 2, 3), dilations=[2, 3], strides=[2, 3], name="dilations-multiple-of-stride",
         **T),
    conv((1, 2, 3, 3), (2, 3, 1, 1), strides=[3, 2], name="stride-over-kernel", **T),
    conv((2, 4, 3, 3), (4, 2, 3, 3), group=2, strides=[2, 2], bias=True, name="group-2", **T),
    conv((1, 3, 4, 4), (3, 1, 3, 3), group=3, strides=[2, 1], name="depthwise", **T),
    conv((1, 1, 1, 1), (1, 1, 1, 1), name="all-ones-dims", **T),
    conv((2, 3, 5), (3, 2, 3), strides=[2], pads=[1, 0], bias=True, name="1d", **T),
    conv((1, 2, 3, 2, 3), (2, 2, 3, 2, 2), strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1], name="3d", **T),
    conv((1, 8, 6, 6), (8, 4, 8, 8), strides=[4, 4], pads=[2, 2, 2, 2], name="chunked-8x8", **T),
    *[conv((1, 2, 3, 3), (2, 3, 3, 3), strides=[2, 2], bias=True, dtype=t, name=t, **T)
      for t in ("float16", "float64", "bfloat16")],
]


def deform(x, w, group=1, offset_group=1, bias=False, mask=False, name="", dtype="float32", **attrs):
    """DeformConv with offsets up to +-2.5 pixels (many taps land outside the input)."""
    from ...ops.conv import out_extents, window_attrs

    kernel, s, d, p = window_attrs(ValueError, len(x) - 2, w[2:], attrs.get("strides"), attrs.get("dilations"),
                                   attrs.get("pads"))
    out, _, _ = out_extents(ValueError, list(x[2:]), kernel, s, d, p, "NOTSET")
    kk = 1
    for k in kernel:
        kk *= k
    ins = [In(x, dtype), In(w, dtype), In((x[0], offset_group * kk * len(kernel), *out), dtype, -2.5, 2.5)]
    ins += [In((w[0],), dtype) if bias else None]
    ins += [In((x[0], offset_group * kk, *out), dtype, 0, 1)] if mask else []
    while ins[-1] is None:
        ins.pop()
    return OpRecord("DeformConv", ins, dict(attrs, group=group, offset_group=offset_group), name=name,
                    **TOL[dtype])


RECORDS += [
    deform((1, 1, 4, 4), (1, 1, 2, 2), name="basic"),
    deform((2, 4, 5, 6), (6, 4, 3, 3), pads=[1, 1, 1, 1], bias=True, mask=True, name="pads-bias-mask"),
    deform((1, 4, 7, 7), (4, 2, 3, 3), group=2, offset_group=2, strides=[2, 2], dilations=[1, 2],
           pads=[1, 2, 1, 0], name="groups-offset-groups"),
    deform((1, 4, 5, 5), (2, 4, 2, 3), offset_group=4, mask=True, name="offset-group-per-channel"),
    deform((1, 2, 9), (3, 2, 3), strides=[2], pads=[1, 1], bias=True, name="1d"),
    deform((1, 2, 3, 4, 4), (2, 2, 2, 2, 2), mask=True, name="3d"),
    deform((1, 4, 10, 10), (2, 4, 5, 5), pads=[2, 2, 2, 2], name="chunked"),
    *[deform((1, 2, 5, 5), (3, 2, 3, 3), pads=[1, 1, 1, 1], mask=True, bias=True, dtype=t, name=t)
      for t in ("float16", "float64")],
]
