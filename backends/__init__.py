"""Glow's built-in backends. Each registers through the `glow.backends` entry-point group."""
