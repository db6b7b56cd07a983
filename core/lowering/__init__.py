"""Lowering: rewrite every op a backend does not support into lower-tier ops, to a fixed point.

* `FLOOR` is the closed set of primitives every op lowers to; a backend that implements only the
  floor runs every model whose ops all have lowering rules.
* Rules are small named functions registered per op with `@lowering("OpName")`, one place per op,
  in the `rules_*.py` modules of this package.
* `lower_to_supported(graph, supports, backend)` drives them: unsupported nodes are rewritten until
  every node is supported; ops that cannot get there are named together in one `LoweringError`.
"""

from .driver import MEMORY_BLOWUP_LIMIT, lower_to_supported, supports_floor  # noqa: F401
from .floor import FLOOR, HOST_GROUPS, HOST_OPS, floor_ops, is_host_op  # noqa: F401
from .registry import LOWERINGS, lowering, rule_for  # noqa: F401
