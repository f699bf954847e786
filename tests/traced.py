"""The peak of Python's traced memory over one call: the memory tests' one way to read it."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def traced_peak(call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result and the most memory Python's allocators held during it (bytes,
    NumPy's arrays included), tracing only for the call."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
