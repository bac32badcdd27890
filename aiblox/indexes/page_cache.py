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

The other way round, a few queries touch few of the vectors, at random: a touched page of a
normal mapping brings its neighbours with it (the kernel's read-around), so one cold ``aiblox
search`` at 1M documents read 1.3 GB, half of it vectors it never looked at.
:func:`map_npy` maps the vectors with ``MADV_RANDOM`` (a touch reads its page only: 0.7 GB);
:func:`read_around` gives a batch its read-around back before the files are read ahead.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["PREFETCH_FROM_QUERIES", "SAMPLES", "WINDOW", "cached", "map_npy", "prefetch",
           "read_around"]

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


def map_npy(path: str | Path) -> tuple[np.ndarray, mmap.mmap | None]:
    """The array of the ``.npy`` file at ``path``, read-only and mapped in place (the array
    ``np.load(path, mmap_mode="r")`` gives), and its mapping, advised ``MADV_RANDOM``: a page
    touched is read alone, without its neighbours. The mapping is None, and the array
    ``np.load``'s own, where the header is not one this reads (Fortran order, a format other
    than 1.0 and 2.0) or the file is empty."""
    from numpy.lib import format as npy

    with open(path, "rb") as f:
        version = npy.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            return np.load(path, mmap_mode="r", allow_pickle=False), None
        header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, fortran, dtype = header(f)
        offset = f.tell()
        count = int(np.prod(shape, dtype=np.int64))
        if fortran or dtype.hasobject or count == 0:
            return np.load(path, mmap_mode="r", allow_pickle=False), None
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    _advise(mapping, "MADV_RANDOM")
    array = np.frombuffer(mapping, dtype=dtype, count=count, offset=offset).reshape(shape)
    return array, mapping


def read_around(mapping: mmap.mmap | None) -> None:
    """Give a :func:`map_npy` mapping the kernel's default read-around back (a batch of queries
    touches most pages; its files are read ahead as well)."""
    if mapping is not None:
        _advise(mapping, "MADV_NORMAL")


def _advise(mapping: mmap.mmap, name: str) -> None:
    """``madvise`` the whole mapping where the platform has the call and the advice (a hint:
    a refusal changes nothing but speed)."""
    advice = getattr(mmap, name, None)
    if advice is not None and hasattr(mapping, "madvise"):
        with contextlib.suppress(OSError):
            mapping.madvise(advice)
