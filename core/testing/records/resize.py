"""Records for resampling: Resize in every mode, coordinate transformation and nearest rounding,
by scales and by sizes, on some axes (negative too) or all, keep_aspect_ratio_policy,
antialiasing, exclude_outside, tf_crop_and_resize with extrapolation, integer data (rounded and
saturated), 16/64-bit floats, 1-D to 5-D, empty results; Upsample; GridSample in every mode and
padding mode (grids reaching far outside [-1, 1] to fold reflections more than once), 2-D and
3-D; AffineGrid in 2-D and 3-D, including size-1 axes."""

import numpy as np

from ..op_records import Const, In, OpRecord

TOL = dict(rtol=1e-5, atol=1e-5)


def f32(v):
    return Const(np.asarray(v, np.float32))


def i64(v):
    return Const(np.asarray(v, np.int64))


def resize(x, scales=None, sizes=None, roi=None, name="", dtype="float32", tol=TOL, **attrs):
    ins = [In(x, dtype, -3, 3 if dtype != "uint8" else 255), None if roi is None else f32(roi),
           None if scales is None else f32(scales), None if sizes is None else i64(sizes)]
    while ins[-1] is None:
        ins.pop()
    return OpRecord("Resize", ins, attrs, name=name, **tol)


CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
RECORDS = []
for mode in ("nearest", "linear", "cubic"):
    for ctm in CTMS:
        RECORDS.append(resize((1, 2, 4, 5), scales=[1, 1, 2, 1.5], mode=mode, coordinate_transformation_mode=ctm,
                              name=f"{mode}-{ctm}-up"))
        RECORDS.append(resize((1, 2, 7, 9), scales=[1, 1, 0.6, 0.5], mode=mode, coordinate_transformation_mode=ctm,
                              name=f"{mode}-{ctm}-down"))
    RECORDS.append(resize((2, 3, 5, 4), sizes=[2, 3, 8, 3], mode=mode, name=f"{mode}-sizes"))
    RECORDS.append(resize((1, 1, 6, 6), sizes=[3, 1], axes=[-1, 1], mode=mode, name=f"{mode}-negative-axes"))
    RECORDS.append(resize((1, 1, 5, 6), roi=[0.1, 0.2, 0.8, 1.2], sizes=[4, 5], axes=[2, 3], mode=mode,
                          coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.5,
                          name=f"{mode}-crop-and-resize"))
for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
    for ctm in ("half_pixel", "asymmetric", "align_corners"):
        RECORDS.append(resize((1, 1, 3, 5), scales=[1, 1, 2.5, 0.8], nearest_mode=nm,
                              coordinate_transformation_mode=ctm, name=f"nearest-{nm}-{ctm}"))
for policy in ("not_larger", "not_smaller"):
    RECORDS.append(resize((1, 1, 4, 6), sizes=[7, 7], axes=[2, 3], keep_aspect_ratio_policy=policy, mode="linear",
                          name=f"policy-{policy}"))
for mode in ("linear", "cubic"):
    RECORDS.append(resize((1, 2, 12, 10), scales=[1, 1, 0.4, 0.55], mode=mode, antialias=1,
                          name=f"{mode}-antialias-down"))
    RECORDS.append(resize((1, 1, 5, 5), scales=[1, 1, 1.6, 2], mode=mode, antialias=1, name=f"{mode}-antialias-up"))
RECORDS += [
    resize((1, 1, 4, 6), scales=[1, 1, 1.7, 0.6], mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5,
           name="cubic-exclude-outside"),
    resize((8,), scales=[1.5], mode="linear", name="1d"),
    resize((2, 6), sizes=[4, 6], mode="cubic", name="2d-one-axis"),
    resize((1, 1, 3, 4, 5), scales=[1, 1, 2, 0.5, 1.4], mode="linear", name="5d-trilinear"),
    resize((1, 2, 3, 4, 2), sizes=[5, 3, 4], axes=[2, 3, 4], mode="nearest", name="5d-nearest"),
    resize((1, 1, 4, 4), scales=[1, 1, 1, 1], mode="linear", name="identity"),
    resize((1, 1, 1, 1), scales=[1, 1, 3, 2], mode="cubic", name="from-one-pixel"),
    resize((1, 3, 4), sizes=[0], axes=[2], mode="linear", name="empty-output"),
    resize((1, 0, 4), sizes=[6], axes=[2], mode="linear", name="empty-other-axis"),
    resize((1, 2, 0), scales=[1, 1, 2], mode="nearest", name="empty-resized-axis"),
    resize((1, 2, 4, 4), scales=[1, 1, 1.5, 0.75], mode="nearest", dtype="bool", name="bool"),
    *[resize((1, 2, 5, 4), scales=[1, 1, 1.6, 0.75], mode=m, dtype=t, name=f"{m}-{t}")
      for m in ("nearest", "linear", "cubic") for t in ("uint8", "int32", "int64")],
    *[resize((1, 2, 5, 4), scales=[1, 1, 1.6, 0.75], mode=m, dtype=t, name=f"{m}-{t}",
             tol=dict(rtol=1e-2, atol=1e-2) if t == "bfloat16" else dict(rtol=1e-3, atol=1e-3))
      for m in ("linear", "cubic") for t in ("float16", "bfloat16")],
    *[resize((1, 2, 5, 4), scales=[1, 1, 1.6, 0.75], mode=m, dtype="float64", name=f"{m}-float64",
             tol=dict(rtol=1e-12, atol=1e-12)) for m in ("linear", "cubic")],
]
RECORDS += [OpRecord("Upsample", [In((1, 2, 3, 4)), f32([1, 1, 2, 3])], {"mode": m}, name=m, **TOL)
            for m in ("nearest", "linear")]

# GridSample: grids reach past [-1, 1] (reflection folds several times)
for mode in ("nearest", "linear", "cubic"):
    for padding in ("zeros", "border", "reflection"):
        for ac in (0, 1):
            RECORDS.append(OpRecord("GridSample", [In((2, 3, 5, 6)), In((2, 4, 7, 2), low=-3.2, high=3.2)],
                                    dict(mode=mode, padding_mode=padding, align_corners=ac),
                                    name=f"{mode}-{padding}-ac{ac}", **TOL))
for mode in ("nearest", "linear", "cubic"):
    RECORDS.append(OpRecord("GridSample", [In((1, 2, 3, 4, 5)), In((1, 2, 3, 4, 3), low=-1.5, high=1.5)],
                            dict(mode=mode, padding_mode="reflection"), name=f"3d-{mode}", **TOL))
RECORDS += [
    OpRecord("GridSample", [In((1, 1, 1, 1)), In((1, 3, 2, 2), low=-2, high=2)],
             dict(mode="linear", padding_mode="reflection", align_corners=1), name="one-pixel-reflection", **TOL),
    OpRecord("GridSample", [In((1, 2, 4, 4), "int32", -50, 50), In((1, 3, 3, 2), low=-1, high=1)],
             dict(mode="linear"), name="int32", rtol=0, atol=1),
    OpRecord("GridSample", [In((1, 2, 4, 4), "float16"), In((1, 3, 3, 2), "float16", low=-1, high=1)],
             dict(mode="cubic", padding_mode="border"), name="float16", rtol=2e-3, atol=2e-3),
    OpRecord("GridSample", [In((1, 2, 4, 4), "float64"), In((1, 3, 3, 2), "float64", low=-1.2, high=1.2)],
             dict(mode="linear"), name="float64", rtol=1e-12, atol=1e-12),
]

# AffineGrid: size is (N, C, *spatial)
RECORDS += [OpRecord("AffineGrid", [In((n, k, k + 1)), i64(size)], dict(align_corners=ac),
                     name=f"{k}d-{'x'.join(map(str, size))}-ac{ac}", **TOL)
            for n, k, size in [(2, 2, [2, 3, 4, 5]), (1, 3, [1, 1, 3, 2, 4]), (1, 2, [1, 1, 1, 3]),
                               (2, 2, [2, 1, 1, 1])]
            for ac in (0, 1)]
RECORDS += [OpRecord("AffineGrid", [In((1, 2, 3), "float16"), i64([1, 1, 3, 4])], name="float16",
                     rtol=1e-3, atol=1e-3),
            OpRecord("AffineGrid", [In((1, 3, 4), "float64"), i64([1, 2, 2, 3, 2])], name="float64",
                     rtol=1e-12, atol=1e-12)]
