"""Memory between test modules.

The suite runs in one process, and modules load GBs each (SmolLM2's weights, a 1 GiB KV pool, transformers'
reference model). What a module drops, Python frees, but glibc keeps much of it in its arenas (the engine
thread's above all) and the process's resident memory only grows: measured, the gateway's two zero-config
modules left 1.1-1.5 GB resident after they ended, 0.56-0.59 GB once trimmed (docs/testing.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to give back this way
        return None


_trim = _malloc_trim()


def give_memory_back() -> None:
    """Return the allocator's free pages to the system (glibc's malloc_trim; a no-op elsewhere)."""
    if _trim is not None:
        _trim(0)
