"""Memory helpers shared by every layer."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for a block that allocates millions of small
    objects (ranked lists, hits) freed by reference counting: the collector would rescan every
    live object (a loaded corpus, cached signals) again and again, for nothing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
