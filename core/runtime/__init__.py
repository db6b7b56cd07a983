"""The multi-device runtime: a partitioned model as one executable (see executor.py), and copies
of one behind one `submit` (replicated.py)."""

from .executor import DagExecutor, PartitionRunError
from .partitioned import PartitionedExecutable
from .replicated import ReplicatedExecutable

__all__ = ["DagExecutor", "PartitionRunError", "PartitionedExecutable", "ReplicatedExecutable"]
