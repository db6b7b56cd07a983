"""The pass pipelines, each one readable function.

    optimize_graph      before lowering (compile-flow step 3); target-independent but for the QDQ
                        islands, which ask the backend's `supports`
    cleanup_graph       after lowering (step 6)
    fuse_for_backend    last: the fusions the backend asked for (step 6)

`glow.compile` runs them as optimize -> lower -> cleanup -> lower (a no-op unless clean-up formed an
op the backend lacks) -> fuse.
"""

from __future__ import annotations

from ..graph import Graph
from .base import FixedPoint, PassLog, run_passes
from .batchnorm import FOLD_BATCHNORM
from .cse import CSE
from .dce import DCE
from .fold import CONSTANT_FOLD
from .fold_patterns import FOLD_PATTERNS
from .fusion import fusion_pass
from .qdq import QDQ, islands_pass
from .simplify import SIMPLIFY
from .sinking import SINK

# Folding, simplifying and merging feed each other (a folded shape makes a Reshape static, which
# makes two Reshapes mergeable, which makes two nodes equal), so they run together to a fixed point.
CLEANUP = FixedPoint("cleanup", (DCE, CONSTANT_FOLD, SIMPLIFY, CSE))


def default_pipeline(supports=None) -> list:
    """The passes in order; `supports` (a backend's node predicate) enables the rewrites that
    depend on what the backend runs natively."""
    return [
        DCE,              # drop what no output needs before spending time on it
        islands_pass(supports),  # DQ -> Conv -> Q to QLinearConv (before folding makes DQ(w) a float)
        CLEANUP,          # constants folded (weights computed by ConstantOfShape become weights)
        FOLD_PATTERNS,    # exporter-decomposed Softmax/Gelu/LayerNorm raised back (fold before lower)
        QDQ,              # Q(DQ(q)) round trips cancel; Reshape/MaxPool/... between them move integers
        FOLD_BATCHNORM,   # BatchNormalization and per-channel Mul/Add into Conv/Gemm weights
        SINK,             # Transpose/Reshape below elementwise ops ...
        CLEANUP,          # ... where adjacent pairs merge or cancel; then re-fold and re-merge
    ]


def optimize_graph(graph: Graph, log: PassLog | None = None, supports=None) -> Graph:
    """The optimisation pipeline; target-independent but for the rewrites `supports` (the
    backend's node predicate, when given) enables."""
    return run_passes(graph, default_pipeline(supports), log)


def cleanup_graph(graph: Graph, log: PassLog | None = None) -> Graph:
    """After lowering: fold the constant shapes and drop the no-op reshapes lowering leaves."""
    return run_passes(graph, [CLEANUP], log)


def fuse_for_backend(graph: Graph, backend, log: PassLog | None = None) -> Graph:
    """The fusions `backend.fusions()` asks for (none if it has no such method)."""
    fusions = getattr(backend, "fusions", None)
    requests = tuple(fusions()) if callable(fusions) else ()
    if not requests:
        return graph
    return run_passes(graph, [fusion_pass(requests), DCE], log)
