"""Every per-op table is keyed by (domain, op name) and refuses ops the op table does not declare;
property sets (commutative, view, epilogue producer) are groups of the op table.

The tables: lowering rules, the C-style renderer's kernel rules and elementwise rules, and the CPU
backend's kernels and elementwise emitters. A rule for a misspelt op would never be found;
registering one raises at import instead.
"""

import pytest
from glow.errors import UnsupportedOpError
from glow.lowering.registry import lowering
from glow.ops import all_ops
from glow.render.expr import CODE_FOR_OP, rule_table
from glow.render.registry import kernel_rule, load_rules


def known() -> set:
    """Every declared op (backend-private ones too, once their backend is imported)."""
    return {(o.domain, o.name) for o in all_ops()}


def test_renderer_tables_hold_declared_ops_only():
    assert set(CODE_FOR_OP) <= known()
    assert set(load_rules()) <= known()


@pytest.mark.parametrize("register", [
    lambda: kernel_rule("NoSuchOp")(print),
    lambda: kernel_rule("Relu", domain="no.such.domain")(print),
    lambda: rule_table({"NoSuchOp": print}),
    lambda: lowering("NoSuchOp")(print),
], ids=["kernel_rule", "kernel_rule-domain", "CODE_FOR_OP", "lowering"])
def test_registering_an_unknown_op_raises(register):
    with pytest.raises(UnsupportedOpError):
        register()


def test_cpu_tables_hold_declared_ops_only():
    pytest.importorskip("llvmlite")
    from glow.backends.cpu import codegen
    from glow.backends.cpu.kernels import ewops

    kernels = codegen.load_kernels()
    assert set(kernels) <= known() and ("glow.cpu", "ConvNHWC") in kernels
    assert set(ewops.table()) <= known()
    for register in (lambda: ewops.op("NoSuchOp")(print), lambda: codegen.cpu_kernel("NoSuchOp")(print)):
        with pytest.raises(UnsupportedOpError):
            register()


def test_property_sets_are_op_groups():
    from glow.ops.registry import COMMUTATIVE, EPILOGUE_PRODUCER, VIEW

    def group(g):
        return {o.name for o in all_ops() if o.in_group(g)}

    assert group(COMMUTATIVE) == {"Add", "Mul", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal",
                                  "BitwiseAnd", "BitwiseOr", "BitwiseXor"}
    assert group(VIEW) == {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
    assert {"Conv", "ConvTranspose", "Gemm", "MatMul"} <= group(EPILOGUE_PRODUCER)
