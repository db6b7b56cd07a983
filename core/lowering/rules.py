"""Imports every group of lowering rules (registration side effects)."""

from . import (
    rules_activation,  # noqa: F401
    rules_attention,  # noqa: F401
    rules_control,  # noqa: F401
    rules_conv,  # noqa: F401
    rules_elementwise,  # noqa: F401
    rules_genai,  # noqa: F401
    rules_generator,  # noqa: F401
    rules_index,  # noqa: F401
    rules_loss,  # noqa: F401
    rules_ml,  # noqa: F401
    rules_movement,  # noqa: F401
    rules_nbits,  # noqa: F401
    rules_nn,  # noqa: F401
    rules_pool,  # noqa: F401
    rules_qlinear,  # noqa: F401
    rules_quant,  # noqa: F401
    rules_recurrent,  # noqa: F401
    rules_reduce,  # noqa: F401
    rules_resize,  # noqa: F401
    rules_signal,  # noqa: F401
    rules_tensor,  # noqa: F401
)
