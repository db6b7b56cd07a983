"""The multi-device runtime: a partitioned model as one executable (see executor.py)."""

from .executor import DagExecutor, PartitionRunError
from .partitioned import PartitionedExecutable

__all__ = ["DagExecutor", "PartitionRunError", "PartitionedExecutable"]
