"""The OpenCL backend: OpenCL C kernels from the shared C-style renderer, run with PyOpenCL."""
