"""string ops."""

from __future__ import annotations
