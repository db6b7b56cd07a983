"""benchmarks/gemm_peak.py's peak loop computes what it claims, so its GFLOP/s count real work."""

import os
import sys

import llvmlite.binding as llvm
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import gemm_peak  # noqa: E402
from glow.backends.cpu import jit  # noqa: E402


@pytest.mark.parametrize("level", jit.ISAS)
def test_peak_ir_verifies(level):
    llvm.parse_assembly(gemm_peak.peak_ir(level)).verify()


# only the levels this host runs: GLOW_CPU_ISA may lower the level, never raise it
@pytest.mark.parametrize("level", jit.ISAS[jit.ISAS.index(jit.host_isa()):])
def test_peak_loop_sums_every_chain(level, monkeypatch):
    monkeypatch.setenv("GLOW_CPU_ISA", level)
    loop = gemm_peak.PeakLoop()
    assert loop.level == level and (loop.lanes, loop.chains) == gemm_peak.SHAPES[level]
    accumulators = loop.lanes * loop.chains
    # small integers and halves: exact in float32, so == is the right test
    assert loop.fn(10, 1.0, 0.5) == accumulators * 5
    assert loop.fn(3, 2.0, 1.0) == accumulators * 7  # 0 -> 1 -> 3 -> 7: a multiplies, b adds
    assert loop.fn(0, 2.0, 1.0) == 0
