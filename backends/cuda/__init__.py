"""The CUDA backend: CUDA C++ kernels from the shared C-style renderer, run with CuPy."""
