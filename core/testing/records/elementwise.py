"""Records for elementwise ops: edge shapes (size-1 dims, scalars, broadcasting, empty tensors)."""

from ..op_records import In, OpRecord

UNARY_FLOAT = ["Relu", "Neg", "Abs", "Reciprocal", "Ceil", "Cos", "Tan", "Sigmoid", "Tanh", "IsNaN",
               "Sign"]
SHAPES = [(2, 3), (1,), (), (4, 1, 5), (0, 3)]

RECORDS = [OpRecord(op, [In(s)]) for op in UNARY_FLOAT for s in SHAPES]
RECORDS += [OpRecord(op, [In(s, "int32")], name=f"int32-{len(s)}d") for op in ("Relu", "Neg", "Abs", "Sign")
            for s in [(2, 3), ()]]
RECORDS += [OpRecord("Tanh", [In((64,), low=-60, high=60)], name="saturating"),
            OpRecord("Sigmoid", [In((64,), low=-100, high=100)], name="saturating")]
RECORDS += [OpRecord(op, [In(a, "bool"), In(b, "bool")], name=f"{len(a)}d-{len(b)}d")
            for op in ("Or", "Xor") for a, b in [((2, 3), (2, 3)), ((2, 1), (1, 3)), ((), (4,))]]
RECORDS += [OpRecord(op, [In(a), In(b)], name=f"{len(a)}d-{len(b)}d")
            for op in ("LessOrEqual", "GreaterOrEqual") for a, b in [((2, 3), (2, 3)), ((3, 1), (1, 4))]]
RECORDS += [OpRecord(op, [In((5,), "int64"), In((5,), "int64")], name="int64")
            for op in ("LessOrEqual", "GreaterOrEqual")]
