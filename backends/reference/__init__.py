"""The reference backend: NumPy execution of every op, the oracle for all other backends."""
