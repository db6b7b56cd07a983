"""Testing kit: the ONNX node suite, the light models, and output comparison helpers."""
