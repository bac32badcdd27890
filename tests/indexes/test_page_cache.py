"""Reading a memory-mapped index ahead: a cold file is asked for and arrives in the page cache,
a cached one is left alone, and a loaded index reads its files ahead for a batch of queries
(once), not for a single query, with the same hits either way; its vectors are mapped so that a
single query's touch reads its own page, not the neighbours. The page cache is the real one:
a file's pages are dropped with ``POSIX_FADV_DONTNEED`` (no privileges needed)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from aiblox.contracts import VectorConfig
from aiblox.indexes import VectorIndex, page_cache
from aiblox.indexes import knn as knn_module
from aiblox.indexes.page_cache import PREFETCH_FROM_QUERIES, cached, map_npy, prefetch

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"),
                                reason="no posix_fadvise on this platform: nothing to read ahead")


def _drop(path) -> None:
    """The file's clean pages out of the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _cached(path, first: int | None = None) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        return cached(fd, size if first is None else min(size, first))
    finally:
        os.close(fd)


def _page_cached(path, offset: int) -> bool:
    """The page holding byte ``offset`` of the file is in the page cache (a non-blocking read)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT) == 1
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _arrives(path, seconds: float = 5.0, first: int | None = None) -> bool:
    end = time.monotonic() + seconds
    while not _cached(path, first):
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_a_cold_file_is_read_ahead_and_a_cached_one_left_alone(tmp_path):
    path = tmp_path / "index.bin"
    path.write_bytes(os.urandom(3 * page_cache.WINDOW + 12345))  # windows and a remainder
    assert _cached(path)  # just written
    assert prefetch([path]) == 0  # cached: nothing asked for
    _drop(path)
    if _cached(path):
        pytest.skip("this filesystem keeps the pages: nothing to observe")
    assert prefetch([path, tmp_path / "missing.bin"]) == path.stat().st_size  # missing: skipped
    assert _arrives(path)  # every sampled page, the last window's too
    _drop(path)
    assert prefetch([path], first=page_cache.WINDOW + 1) == page_cache.WINDOW + 1
    assert _arrives(path, first=page_cache.WINDOW + 1)


def test_a_loaded_index_reads_ahead_for_a_batch_once_and_not_for_one_query(tmp_path,
                                                                            monkeypatch):
    """On opening, the graph's part of ``hnsw.faiss`` (faiss reads it whole); on the first
    batch, every mapped file; on a single query, nothing more. The real read-ahead runs,
    recorded on its way."""
    asked: list[tuple[list[str], int | None]] = []

    def recorded(paths, first=None):
        paths = list(paths)
        asked.append(([p.name for p in paths], first))
        return prefetch(paths, first)

    monkeypatch.setattr(knn_module, "prefetch", recorded)
    given_back: list[object] = []
    monkeypatch.setattr(knn_module, "read_around",
                        lambda mapping: given_back.append(mapping) or page_cache.read_around(
                            mapping))
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(2000, 32)).astype(np.float32)
    ids = [f"d{i:05d}" for i in range(2000)]
    cfg = VectorConfig(index="hnsw", hnsw_m=8, ef_construction=40)
    built = VectorIndex.build(ids, vecs, cfg, threads=1)
    built.save(tmp_path / "knn")
    files = [tmp_path / "knn" / "vectors.npy", tmp_path / "knn" / "hnsw.faiss"]
    queries = rng.normal(size=(PREFETCH_FROM_QUERIES, 32)).astype(np.float32)
    graph = files[1].stat().st_size - vecs.nbytes  # faiss writes the graph, then the vectors

    in_memory = VectorIndex.load(tmp_path / "knn", cfg, "hnsw", mmap=False)
    assert in_memory.mapped_files == () and asked == []  # nothing mapped: nothing to read
    for f in files:
        _drop(f)
    index = VectorIndex.load(tmp_path / "knn", cfg, "hnsw")
    assert asked == [(["hnsw.faiss"], graph)]
    assert _arrives(files[1], first=graph)
    assert set(index.mapped_files) == set(files) and index.mapping is not None
    assert index.search(queries[:1], k=5) == built.search(queries[:1], k=5)
    assert len(asked) == 1  # one query: nothing read ahead
    for f in files:
        _drop(f)
    assert index.search(queries, k=5) == built.search(queries, k=5)
    assert asked[1:] == [(["vectors.npy", "hnsw.faiss"], None)] and index.mapped_files == ()
    assert given_back == [index.mapping]  # the batch has its read-around back
    assert all(_arrives(f) for f in files)
    index.search(queries, k=5)
    assert len(asked) == 2  # once


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.arange(10, dtype=np.int64),
    np.arange(5, dtype=">i4"),  # a byte order of its own: kept
    np.zeros((0, 4), dtype=np.float32),  # empty: np.load's own
    np.asfortranarray(np.arange(6.0).reshape(2, 3)),  # Fortran order: np.load's own
], ids=["float32", "int64", "big-endian", "empty", "fortran"])
def test_map_npy_is_np_load_s_array_read_only(tmp_path, array):
    path = tmp_path / "a.npy"
    np.save(path, array)
    mapped, mapping = map_npy(path)
    reference = np.load(path, mmap_mode="r")
    assert mapped.dtype == reference.dtype and mapped.shape == reference.shape
    assert np.array_equal(mapped, reference) and not mapped.flags.writeable
    assert (mapping is None) == (array.size == 0 or array.flags.f_contiguous and array.ndim > 1)


@pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="no RWF_NOWAIT: pages cannot be probed")
def test_touched_vectors_read_their_pages_not_their_neighbours(tmp_path):
    """Cold, rows read through a normal mapping bring the pages around them (the kernel's
    read-around, once it sees a few faults); through :func:`map_npy`'s, their own pages only."""
    path = tmp_path / "vectors.npy"
    rows = np.random.default_rng(0).normal(size=(16384, 256)).astype(np.float32)  # 16 MiB
    np.save(path, rows)
    touched = np.random.default_rng(1).integers(0, len(rows), 20)
    probes = range(0, path.stat().st_size, 64 * 1024)  # a page every 64 KiB of the file

    def cached_after_touching(array) -> int:
        assert [float(array[r, 0]) for r in touched] == [float(rows[r, 0]) for r in touched]
        return sum(_page_cached(path, at) for at in probes)

    _drop(path)
    if _page_cached(path, 0):
        pytest.skip("this filesystem keeps the pages: nothing to observe")
    normal = np.load(path, mmap_mode="r")
    around = cached_after_touching(normal)
    if around <= 2 * len(touched):
        pytest.skip("no read-around on this device: nothing to observe")
    del normal  # a mapped page is not dropped
    _drop(path)
    mapped, mapping = map_npy(path)
    assert mapping is not None
    alone = cached_after_touching(mapped)
    # alone, a few probes (2 here); once, beside a busy suite, 47 of the 257 probes, against
    # all 257: the kernel's reads vary with load, read-around's fill the file
    assert alone * 4 <= around, (alone, around)
