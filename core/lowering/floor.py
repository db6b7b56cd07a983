"""The floor: the closed set of primitives that every other op lowers to (40 ops).

Chosen to be small *and* practical: batched MatMul stays a primitive (lowering it would multiply
memory), so do Pad/Slice/Concat/Gather (index arithmetic a backend does well), Erf and Atan (no
cheap exact expansion), and the bitwise ops (no arithmetic expansion at all). Everything else
(Relu, Sigmoid, Tanh, Softmax, Conv, pooling, normalisations, ...) has a lowering rule.
"""

FLOOR_GROUPS = {
    "unary math": ("Exp", "Log", "Sqrt", "Sin", "Erf", "Floor", "Atan"),
    "binary arithmetic": ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"),
    "compare, logic, select": ("Equal", "Less", "Greater", "And", "Not", "Where"),
    "bitwise": ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift"),
    "types and constants": ("Cast", "Constant"),
    "movement": ("Identity", "Reshape", "Transpose", "Expand", "Slice", "Pad", "Concat", "Gather"),
    "reductions": ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"),
    "contraction": ("MatMul",),
}

FLOOR = frozenset(op for ops in FLOOR_GROUPS.values() for op in ops)


def floor_ops() -> list[str]:
    return sorted(FLOOR)


#: Host ops: not tensor arithmetic at all (strings, sequences and optionals, random draws, image
#: decoding) or with output shapes that depend on the data (NonZero, Unique, Compress,
#: NonMaxSuppression). They have no lowering; they run where host code runs (the reference
#: interpreter, which the partitioner uses as the host device), next to any backend's floor.
HOST_GROUPS = frozenset({"string", "sequence", "random"})
HOST_OPS = frozenset({"NonZero", "Unique", "Compress", "NonMaxSuppression", "ImageDecoder",
                      "TfIdfVectorizer"})


def is_host_op(op) -> bool:
    """Whether an OpDef is a host op (see HOST_GROUPS / HOST_OPS)."""
    return op.name in HOST_OPS or bool(op.groups & HOST_GROUPS)
