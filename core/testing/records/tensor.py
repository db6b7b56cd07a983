"""Records for the ops of core/ops/tensor.py (Shape lowers to a constant when the shape is static)."""

from ..op_records import In, OpRecord

RECORDS = [OpRecord("Shape", [In((2, 3, 4))]), OpRecord("Shape", [In((2, 3, 4))], {"start": 1}, name="start"),
           OpRecord("Shape", [In((2, 3, 4))], {"start": -2, "end": -1}, name="neg"),
           OpRecord("Shape", [In(())], name="scalar")]
