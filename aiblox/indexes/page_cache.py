"""Reading a memory-mapped index ahead: its files brought into the page cache in large requests,
before faiss opens it and before a batch of queries walks it.

A search over a memory-mapped index reads its pages as it touches them. An HNSW graph and the
vectors its candidates are rescored with are touched at random, so from a cold page cache every
touch is a small read that waits on the disk: a 1M-document dense evaluation (1,000 queries)
spent 23 s retrieving cold (411k major page faults) against 1.9 s warm (benchmarks/README.md).
Opening such an index reads part of it whole: faiss, mapping an HNSW index in place, reads
every node's neighbour list when it opens it, page by page (5.2-5.4 s and 66k major faults at
1M documents cold, before a single query; 0.3 s read ahead), so :meth:`VectorIndex.load` reads
that part, the file's start, ahead whatever follows.

Read ahead, the same files arrive in large requests, in the background:
``POSIX_FADV_WILLNEED`` over each window of :data:`WINDOW` bytes (one call reads no more than
the device's readahead limit, so a file is asked for window by window). With both, the cold
1M dense evaluation takes 8-10 s and a cold ``aiblox search`` 2.8 s (8 s before). Waiting for
the reads (``MADV_POPULATE_READ``) before searching measured the same as not waiting, so the
search does not wait. A file whose sampled pages are already cached is left alone (a warm file
costs :data:`SAMPLES` non-blocking one-byte reads, where asking costs about 20 ms a GB). Where
these calls do not exist (macOS, Windows) the search reads as it goes, as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PREFETCH_FROM_QUERIES", "SAMPLES", "WINDOW", "cached", "prefetch"]

WINDOW = 8 << 20
"""Bytes asked for in one ``posix_fadvise`` call."""

SAMPLES = 64
"""Pages sampled (evenly over a file) to tell a cached file from a cold one."""

PREFETCH_FROM_QUERIES = 64
"""A batch of this many queries reads its index's files ahead; fewer (a single ``aiblox
search``) touch too few pages for the whole files to be worth reading."""

def cached(fd: int, size: int) -> bool:
    """Every sampled page of the open file ``fd`` is in the page cache (non-blocking reads;
    False where they cannot be asked for)."""
    nowait = getattr(os, "RWF_NOWAIT", None)
    if nowait is None or size == 0:
        return size == 0
    buf = bytearray(1)
    for i in range(SAMPLES):
        try:
            if os.preadv(fd, [buf], size * i // SAMPLES, nowait) != 1:
                return False
        except OSError:  # EAGAIN: not cached; anything else: not known to be
            return False
    return True


def prefetch(paths: Iterable[str | Path], first: int | None = None) -> int:
    """Ask the kernel to bring ``paths`` (each file's ``first`` bytes, when given) into the page
    cache in large requests, in the background; returns the bytes asked for (0 for files
    already cached). Missing files and refused calls are skipped: reading ahead is a hint,
    never a reason for a search to fail."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return 0
    asked = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            if first is not None:
                size = max(0, min(size, first))
            if cached(fd, size):
                continue
            for offset in range(0, size, WINDOW):
                advise(fd, offset, WINDOW, os.POSIX_FADV_WILLNEED)
            asked += size
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked
