"""glow's differential fuzzer: random well-typed ONNX graphs run on a backend, compared with the
reference backend and onnxruntime, failures shrunk to minimal models (docs/fuzzing.md).

`python -m glow.testing.fuzz --backend cpu --count 100 --seed 0`
"""

from .driver import fuzz, main, report  # noqa: F401
from .generate import Case, generate, op_names  # noqa: F401
