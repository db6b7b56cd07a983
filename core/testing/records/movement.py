"""Records for movement ops: negative axes, size-1 and empty dims, 0-d inputs, int and bool
element types, and every Pad mode with pads wider than the axis and negative (cropping) pads."""

import numpy as np

from ..op_records import Const, In, OpRecord


def i64(*values):
    return Const(np.asarray(values, dtype=np.int64).reshape(-1))


RECORDS = [OpRecord("Flatten", [In((2, 3, 4))], {"axis": a}, name=f"axis{a}") for a in (0, 1, 2, 3, -1)]
RECORDS += [OpRecord("Flatten", [In((0, 3))], name="empty"),
            OpRecord("Flatten", [In(())], {"axis": 0}, name="scalar"),
            OpRecord("Flatten", [In((2, 1, 3), "int64")], {"axis": -2}, name="int64")]

RECORDS += [OpRecord("Squeeze", [In((1, 3, 1, 5)), i64(0, -2)], name="two-axes"),
            OpRecord("Squeeze", [In((1, 1))], name="all-to-scalar"),
            OpRecord("Squeeze", [In((0, 1), "bool"), i64(1)], name="empty-bool"),
            OpRecord("Squeeze", [In((3, 1, 4)), In((1,), "int64", low=1, high=1)], name="runtime-axes"),
            OpRecord("Unsqueeze", [In((3, 4)), i64(0, -1)], name="front-back"),
            OpRecord("Unsqueeze", [In(()), i64(0)], name="scalar"),
            OpRecord("Unsqueeze", [In((0, 2), "int32"), i64(3, 0)], name="empty-unsorted")]

RECORDS += [OpRecord("Split", [In((6,)), i64(2, 4)], num_outputs=2, name="sizes"),
            OpRecord("Split", [In((2, 7))], {"axis": -1, "num_outputs": 3}, num_outputs=3, name="uneven"),
            OpRecord("Split", [In((3, 6), "int64"), i64(0, 6)], {"axis": 1}, num_outputs=2, name="zero-size"),
            OpRecord("Split", [In((4, 1))], {"num_outputs": 2}, num_outputs=2, name="equal")]

RECORDS += [OpRecord("Tile", [In((2, 3)), i64(2, 1)], name="rows"),
            OpRecord("Tile", [In((1,), "int32"), i64(3)], name="1d"),
            OpRecord("Tile", [In((2, 0)), i64(2, 3)], name="empty"),
            OpRecord("Tile", [In((2, 3)), i64(0, 2)], name="zero-repeats"),
            OpRecord("Tile", [In((2, 1, 3), "bool"), i64(2, 3, 2)], name="3d-bool"),
            OpRecord("Tile", [In(()), Const(np.zeros(0, np.int64))], name="scalar")]

RECORDS += [OpRecord(op, [In(s)], {"blocksize": 2, "mode": m}, name=m)
            for op, s in (("DepthToSpace", (2, 8, 2, 3)), ("SpaceToDepth", (2, 2, 4, 6)))
            for m in ("DCR", "CRD")]
RECORDS += [OpRecord("DepthToSpace", [In((1, 9, 1, 1), "int32")], {"blocksize": 3}, name="int32"),
            OpRecord("SpaceToDepth", [In((1, 1, 3, 3), "int64")], {"blocksize": 3}, name="int64")]

RECORDS += [OpRecord("CenterCropPad", [In((5, 7, 3)), i64(3, 10)], {"axes": (0, 1)}, name="crop-pad"),
            OpRecord("CenterCropPad", [In((4, 4), "int32"), i64(5, 1)], name="odd"),
            OpRecord("CenterCropPad", [In((2, 6, 3)), i64(4, 3)], {"axes": (-2, -1)}, name="negative-axes"),
            OpRecord("CenterCropPad", [In((3, 3), "bool"), i64(3, 3)], name="same")]

RECORDS += [OpRecord("Col2Im", [In((1, 4, 9)), i64(4, 4), i64(2, 2)], name="2d"),
            OpRecord("Col2Im", [In((2, 6, 4)), i64(5), i64(2)], name="1d"),
            OpRecord("Col2Im", [In((1, 4, 6)), i64(5, 5), i64(2, 2)],
                     {"strides": (2, 2), "dilations": (1, 2), "pads": (1, 0, 0, 1)},
                     name="strides-dils-pads"),
            OpRecord("Col2Im", [In((1, 8, 8), "int32"), i64(3, 3, 3), i64(2, 2, 2)], name="3d-int32")]

# Pad modes other than constant lower to Slice/Concat; the widths go past the axis length.
PADS = [((3, 4), (1, 2, 0, 1)), ((2, 3), (0, 7, 0, 5)), ((5, 4), (-1, 2, 1, -2)), ((1, 3), (2, 0, 2, 0)),
        ((2, 0, 3), (0, 0, 1, 0, 0, 2))]
RECORDS += [OpRecord("Pad", [In(s), i64(*p)], {"mode": m}, name=f"{m}-{'x'.join(map(str, s))}-{k}")
            for m in ("reflect", "edge", "wrap") for k, (s, p) in enumerate(PADS)
            if not (m != "wrap" and 0 in s)]  # reflect/edge of an empty axis is an error
RECORDS += [OpRecord("Pad", [In((2, 3, 4), "int64"), i64(2, 1), None, i64(-1)], {"mode": "reflect"},
                     name="reflect-axes"),
            OpRecord("Pad", [In((3,), "bool"), i64(4, 4)], {"mode": "edge"}, name="edge-bool")]
