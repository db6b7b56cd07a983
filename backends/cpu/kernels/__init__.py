"""Kernel generators (LLVM IR) used by the CPU code generator."""
