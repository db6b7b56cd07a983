"""The CPU backend: native code for the host CPU through LLVM (llvmlite)."""
