"""Imports every group of lowering rules (registration side effects)."""

from . import rules_elementwise  # noqa: F401
from . import rules_recurrent  # noqa: F401
from . import rules_activation  # noqa: F401
from . import rules_attention  # noqa: F401
from . import rules_loss  # noqa: F401
from . import rules_reduce  # noqa: F401
