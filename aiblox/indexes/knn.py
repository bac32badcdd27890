"""Nearest neighbours over item vectors: exact (blocked float32 matrix products) or HNSW (faiss).

Exact search multiplies the queries by blocks of document vectors (BLAS ``sgemm`` through numpy)
and keeps each query's running top ``k`` in compiled code (:func:`kernels.top_k_rows`), so its
results equal a plain numpy reference (``scores = queries @ vectors.T``, then score descending,
item id ascending). Approximate search walks a faiss HNSW graph (Malkov and Yashunin, "Efficient
and robust approximate nearest neighbor search using Hierarchical Navigable Small World graphs",
TPAMI 2018) with ``M``, ``efConstruction`` and ``efSearch`` from :class:`VectorConfig`; its hits
are ordered by the same rule.

A filtered HNSW search (metadata filters: an ``allowed`` mask) whose filter leaves at most
:func:`filtered_exact_rows` vectors, ``sqrt(2 M efSearch n)`` of the index's ``n``, scores those
vectors exactly (the hits are the exact search's, cut as it cuts them): a walk that gathers
``efSearch`` allowed candidates expands about ``efSearch / share`` nodes and computes the
distances to their ``2 M`` neighbours each, no fewer than the exact scan's ``share * n``
(faiss's filtered walk, an ``IDSelectorBatch``, explores the same ``efSearch`` nearest nodes
whether they pass or not, so a sparse filter left it short of ``k`` hits and far from the true
neighbours: 40 allowed of 20,000 gave 4 to 10 hits and a recall@10 of 0.59). A larger allowed
set is walked (approximate, as unfiltered); a query the walk leaves with fewer than ``k`` hits
(or than the allowed count) is walked again with ``4 * efSearch``, then scored exactly over the
allowed vectors if still short, so it always gets ``min(k, allowed)`` hits.

Similarities (higher is better): ``cosine`` (vectors and queries L2-normalised, then inner
product), ``ip`` (inner product) and ``l2`` (negated Euclidean distance).

On a GPU (a search on ``device="cuda:N"``, as a retriever whose embedder runs there asks) with
faiss's GPU build installed (``faiss.StandardGpuResources``: faiss-gpu), the exact search's
candidates come from faiss's brute-force kNN on that GPU (``faiss.knn_gpu``); they are rescored
in float64 on the CPU as the CPU's are, so the hits are the same. Without the GPU build, or on
the CPU, nothing changes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.compiled import readonly_view
from aiblox.contracts.retrieval import HNSW_FROM_VECTORS, VectorConfig
from aiblox.fusion.types import RankedList
from aiblox.indexes.bm25 import ranked_lists, read_ids
from aiblox.indexes.page_cache import PREFETCH_FROM_QUERIES, map_npy, prefetch, read_around
from aiblox.indexes.single_query import rescore_one

__all__ = ["FILTERED_SEARCH_VERSION", "KNN_VERSION", "VectorIndex", "effective_kind",
           "exact_reference", "filtered_exact_rows", "filtered_search_key",
           "gpu_index"]

KNN_VERSION = "1"
"""Version of the vector index layout; part of the index key."""

FILTERED_SEARCH_VERSION = "2"
"""Version of the filtered HNSW search (see the module doc); part of the cache keys of
filtered dense searches that may walk HNSW (:func:`filtered_search_key`). 2: a sparse filter
is scored exactly, a short walk retried (1 walked once with faiss's selector)."""

BLOCK = 16384
"""Documents per block of the exact search's matrix products."""

_GPU_RESOURCES: dict[int, Any] = {}
"""faiss's GPU resources (scratch memory, streams) by GPU index, made once per process."""


def gpu_index(device: str | None) -> int | None:
    """The GPU faiss searches on for ``device`` (``cuda:N``): N, when faiss has its GPU build
    (``StandardGpuResources``) and sees that GPU; else None (the CPU path)."""
    if not device or not device.startswith("cuda"):
        return None
    import faiss

    if not hasattr(faiss, "StandardGpuResources"):
        return None
    index = int(device.partition(":")[2] or 0)
    return index if index < faiss.get_num_gpus() else None


def _gpu_knn(q: np.ndarray, vectors: np.ndarray, k: int, metric: int,
             gpu: int) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    res = _GPU_RESOURCES.get(gpu)
    if res is None:
        res = _GPU_RESOURCES[gpu] = faiss.StandardGpuResources()
    return faiss.knn_gpu(res, q, vectors, k, metric=metric, device=gpu)


def _graph_bytes(folder: Path, vectors: np.ndarray) -> int:
    """The bytes of ``hnsw.faiss`` before its stored vectors: faiss writes an ``IndexHNSWFlat``
    as its graph (levels, offsets, neighbour lists), then the flat vectors (float32, the
    index's own copy of ``vectors``)."""
    try:
        size = (folder / "hnsw.faiss").stat().st_size
    except OSError:
        return 0
    return max(0, size - int(vectors.shape[0]) * int(vectors.shape[1]) * 4)


def effective_kind(cfg: VectorConfig, n_vectors: int) -> str:
    """``exact`` or ``hnsw``: ``cfg.index``, with ``auto`` resolved by the size rule
    (HNSW from :data:`HNSW_FROM_VECTORS` vectors on)."""
    if cfg.index != "auto":
        return cfg.index
    return "hnsw" if n_vectors >= HNSW_FROM_VECTORS else "exact"


def filtered_exact_rows(n: int, m: int, ef_search: int) -> int:
    """The most allowed vectors a filtered HNSW search scores exactly (more are walked):
    ``sqrt(2 M efSearch n)`` for an index of ``n`` vectors with ``M`` links per node (the
    module doc): 12,800 of 20,000 at the defaults, 90,509 of 1,000,000."""
    return int(np.sqrt(2.0 * m * ef_search * n))


def filtered_search_key(cfg: VectorConfig, filtered: bool) -> str | None:
    """:data:`FILTERED_SEARCH_VERSION` where a search under metadata filters may walk HNSW
    (``index`` ``auto`` or ``hnsw`` of the derived index, documents scored by their own
    vector), for cache keys; None otherwise (keys as before)."""
    if not filtered or cfg.engine != "index" or cfg.index == "exact" or cfg.doc_score != "first":
        return None
    return FILTERED_SEARCH_VERSION


def _normalised(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


def prepared(vectors: np.ndarray, distance: str) -> np.ndarray:
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    return _normalised(v) if distance == "cosine" else v


def exact_reference(vectors: np.ndarray, queries: np.ndarray, ids: Sequence[str], k: int,
                    distance: str) -> list[RankedList]:
    """The plain numpy answer that exact search must equal: every similarity computed in
    float64 and rounded to float32 once, a full sort (score desc, id asc)."""
    v = prepared(vectors, distance).astype(np.float64)
    q = prepared(queries, distance).astype(np.float64)
    if distance == "l2":
        scores = np.stack([-np.sqrt(((v - row[None, :]) ** 2).sum(1)) for row in q])
    else:
        scores = q @ v.T
    scores = scores.astype(np.float32)
    out = []
    for row in scores:
        order = np.lexsort((np.arange(len(ids)), -row))[:k]
        out.append([(ids[i], float(row[i])) for i in order])
    return out


class VectorIndex:
    """Item vectors of one model, searchable exactly or through an HNSW graph."""

    def __init__(self, ids: list[str], vectors: np.ndarray, cfg: VectorConfig, kind: str,
                 hnsw: Any = None) -> None:
        self.ids = ids
        """Item ids, ascending (a position is the rank among ties)."""
        self.vectors = readonly_view(vectors)  # built or memory-mapped: one compiled kernel
        """``(n, dim)`` float32, normalised for cosine (read-only)."""
        self.config = cfg
        self.kind = kind
        """``exact`` or ``hnsw``."""
        self.hnsw = hnsw
        self._sq_norms: np.ndarray | None = None
        self.mapped_files: tuple[Path, ...] = ()
        """The files a loaded index searches in place (memory-mapped), read ahead once by the
        first batch of :data:`~aiblox.indexes.page_cache.PREFETCH_FROM_QUERIES` queries."""
        self.mapping: Any = None
        """The vectors' mapping when loaded in place (:func:`~aiblox.indexes.page_cache.map_npy`:
        no read-around until a batch gives it back)."""

    @property
    def n(self) -> int:
        return len(self.ids)

    @functools.cached_property
    def id_array(self) -> np.ndarray:
        """:attr:`ids` as a numpy object array (positions to ids at C speed)."""
        return np.array(self.ids, dtype=object)

    @classmethod
    def build(cls, ids: list[str], vectors: np.ndarray, cfg: VectorConfig,
              threads: int | None = None) -> VectorIndex:
        """An index over ``vectors`` (rows in ``ids`` order, ids ascending)."""
        if list(ids) != sorted(ids):
            raise ValueError("vector index: item ids must be in ascending order")
        v = prepared(vectors, cfg.distance)
        kind = effective_kind(cfg, len(ids))
        hnsw = None
        if kind == "hnsw" and len(ids):
            import faiss

            if threads:
                faiss.omp_set_num_threads(int(threads))
            metric = faiss.METRIC_L2 if cfg.distance == "l2" else faiss.METRIC_INNER_PRODUCT
            hnsw = faiss.IndexHNSWFlat(v.shape[1], cfg.hnsw_m, metric)
            hnsw.hnsw.efConstruction = cfg.ef_construction
            hnsw.add(v)
        return cls(list(ids), v, cfg, kind, hnsw)

    # -- persistence -----------------------------------------------------------------------------
    def save(self, folder: Path) -> list[str]:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "vectors.npy", self.vectors, allow_pickle=False)
        (folder / "ids.json").write_text(json.dumps(self.ids, ensure_ascii=False),
                                         encoding="utf-8")
        names = ["vectors.npy", "ids.json"]
        if self.hnsw is not None:
            import faiss

            faiss.write_index(self.hnsw, str(folder / "hnsw.faiss"))
            names.append("hnsw.faiss")
        return names

    @classmethod
    def load(cls, folder: Path, cfg: VectorConfig, kind: str, mmap: bool = True
             ) -> VectorIndex:
        mapping = None
        if mmap:  # read in place; a page touched is read alone (few queries touch few rows)
            vectors, mapping = map_npy(folder / "vectors.npy")
        else:
            vectors = np.load(folder / "vectors.npy", allow_pickle=False)
        ids = read_ids(folder / "ids.json")
        hnsw = None
        if kind == "hnsw" and (folder / "hnsw.faiss").exists():
            import faiss

            # IO_FLAG_MMAP_IFC (faiss >= 1.11) maps the stored vectors and the graph in place:
            # 0.06 s and ~0.4 GiB at 1M, where IO_FLAG_MMAP still copied them (1.4 s, 1.7 GiB)
            in_place = getattr(faiss, "IO_FLAG_MMAP_IFC", faiss.IO_FLAG_MMAP)
            flags = in_place | faiss.IO_FLAG_READ_ONLY if mmap else 0
            if mmap:  # faiss reads the graph whole on opening: its part of the file, ahead
                prefetch([folder / "hnsw.faiss"], first=_graph_bytes(folder, vectors))
            hnsw = faiss.read_index(str(folder / "hnsw.faiss"), flags)
        index = cls(ids, vectors, cfg, kind, hnsw)
        if mmap:
            index.mapping = mapping
            index.mapped_files = (folder / "vectors.npy",
                                  *((folder / "hnsw.faiss",) if hnsw is not None else ()))
        return index

    # -- search ------------------------------------------------------------------------------
    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None,
               threads: int | None = None, device: str = "cpu") -> list[RankedList]:
        """Top ``k`` items per query vector, best first (score desc, id asc). ``device``
        ``cuda:N``: an unfiltered exact search finds its candidates on that GPU when faiss has
        its GPU build (the same hits: see the module doc)."""
        q = prepared(np.atleast_2d(queries), self.config.distance)
        if len(q) == 0:
            return []
        if self.n == 0:
            return [[] for _ in range(len(q))]
        if q.shape[1] != self.vectors.shape[1]:
            raise ValueError(f"query vectors have {q.shape[1]} dimensions, the index "
                             f"{self.vectors.shape[1]}")
        if self.mapped_files and len(q) >= PREFETCH_FROM_QUERIES:
            read_around(self.mapping)  # a batch touches most pages: as before
            prefetch(self.mapped_files)  # a cold page cache read in large requests, once
            self.mapped_files = ()
        if self.kind == "hnsw" and self.hnsw is not None:
            pos, scores, counts = self._hnsw(q, k, allowed, threads)
        else:
            pos, scores, counts = self._exact(q, k, allowed, threads, device)
        out = ranked_lists(self.id_array, pos, scores, counts)
        floor = self.config.min_score
        return out if floor is None else [[h for h in hits if h[1] >= floor] for hits in out]

    def _exact(self, q: np.ndarray, k: int, allowed: np.ndarray | None,
               threads: int | None, device: str = "cpu"
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Candidates by float32 matrix products, with room for their rounding, then every
        candidate rescored in float64 (:func:`kernels.rescore`), ordered and cut to ``k``.

        Unfiltered, the candidates come from faiss's exhaustive search (BLAS ``sgemm`` and a heap,
        as ``IndexFlatIP``/``IndexFlatL2``; on a GPU, ``knn_gpu``); a query whose candidate window
        ends in a tie with its ``k``-th score (faiss keeps any of equal scores) is searched again by
        the compiled path, which keeps the lowest positions. Filtered, the compiled path runs:
        blocks of documents multiplied by the queries, each query's top kept in a heap."""
        nq = len(q)
        want = min(int(k), self.n)
        # room for float32 rounding at the cut-off (exact ties are kept by position in the
        # compiled path, so only near ties within ~1e-7 need it)
        wide = min(self.n, want + max(16, want // 4))
        l2 = self.config.distance == "l2"
        if allowed is None:
            import faiss

            metric = faiss.METRIC_L2 if l2 else faiss.METRIC_INNER_PRODUCT
            gpu = gpu_index(device)
            if gpu is not None:
                dist, idx = _gpu_knn(q, np.ascontiguousarray(self.vectors), wide, metric, gpu)
            else:
                dist, idx = faiss.knn(q, np.ascontiguousarray(self.vectors), wide,
                                      metric=metric)
            pos = idx.astype(np.int64)
            counts = np.full(nq, wide, dtype=np.int64)
            # the k-th and the last candidate tied: faiss may have dropped a lower position
            edge = np.abs(dist[:, want - 1] - dist[:, wide - 1]) <= 1e-6 * np.maximum(
                1.0, np.abs(dist[:, want - 1]))
            if wide > want and edge.any():
                redo = np.flatnonzero(edge)
                p2, c2 = self._blocked(q[redo], wide, None, threads)
                pos[redo], counts[redo] = p2, c2
            return self._final(q, pos, counts, want, threads)
        pos, counts = self._blocked(q, wide, allowed, threads)
        return self._final(q, pos, counts, want, threads)

    def _blocked(self, q: np.ndarray, wide: int, allowed: np.ndarray | None,
                 threads: int | None, rows: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Each query's ``wide`` best candidates (positions, counts) over blocks of documents,
        ties kept by lowest position. ``rows`` (ascending positions): only those documents are
        read, a block of them gathered at a time (the same candidates as ``allowed`` set on
        exactly them)."""
        from aiblox.indexes.kernels import compiled_threads, top_k_rows

        nq = len(q)
        best_pos = np.zeros((nq, wide), dtype=np.int64)
        best_score = np.zeros((nq, wide), dtype=np.float32)
        counts = np.zeros(nq, dtype=np.int64)
        total = self.n if rows is None else len(rows)
        mask = (np.ones(total, dtype=np.bool_) if allowed is None or rows is not None
                else np.ascontiguousarray(allowed, dtype=np.bool_))
        l2 = self.config.distance == "l2"
        if l2 and rows is None and self._sq_norms is None:
            self._sq_norms = np.einsum("ij,ij->i", self.vectors, self.vectors)
        with compiled_threads(threads):
            for start in range(0, total, BLOCK):
                part = (self.vectors[start:start + BLOCK] if rows is None
                        else self.vectors[rows[start:start + BLOCK]])
                block = q @ part.T
                if l2:  # the order of -|q - d| is the order of 2 q.d - |d|^2
                    norms = (self._sq_norms[start:start + BLOCK]  # type: ignore[index]
                             if rows is None else np.einsum("ij,ij->i", part, part))
                    block = 2.0 * block - norms[None, :]
                top_k_rows(np.ascontiguousarray(block, dtype=np.float32), start, mask,
                           best_score, best_pos, counts)
        if rows is not None and len(rows):  # positions among rows -> positions in the index
            best_pos = rows[best_pos]
        return best_pos, counts

    def _final(self, q: np.ndarray, pos: np.ndarray, counts: np.ndarray, k: int,
               threads: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rescore candidates in float64, order them (score desc, id asc), cut to ``k``; one
        query in numpy (:func:`~aiblox.indexes.single_query.rescore_one`, no numba to load)."""
        l2 = self.config.distance == "l2"
        if len(q) == 1:
            scores = np.zeros(pos.shape, dtype=np.float32)
            n = int(counts[0])
            scores[0, :n] = rescore_one(q[0], self.vectors, pos[0, :n], l2)
        else:
            from aiblox.indexes.kernels import compiled_threads, rescore

            with compiled_threads(threads):
                scores = rescore(q, self.vectors, pos, counts, l2)
        nq = len(q)
        out_pos = np.zeros((nq, k), dtype=np.int64)
        out_score = np.zeros((nq, k), dtype=np.float32)
        out_counts = np.zeros(nq, dtype=np.int64)
        for i in range(nq):
            n = int(counts[i])
            p, s = pos[i, :n], scores[i, :n]
            order = np.lexsort((p, -s))[:k]
            out_counts[i] = len(order)
            out_pos[i, :len(order)] = p[order]
            out_score[i, :len(order)] = s[order]
        return out_pos, out_score, out_counts

    def _hnsw(self, q: np.ndarray, k: int, allowed: np.ndarray | None,
              threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The graph walk; under a filter, exact over the allowed vectors when they are few,
        and a short walk retried (the module doc)."""
        ef = max(self.config.ef_search or max(128, 2 * k), k)
        if allowed is None:
            return self._walk(q, k, ef, None)
        rows = np.flatnonzero(allowed).astype(np.int64)
        if len(rows) <= filtered_exact_rows(self.n, self.config.hnsw_m, ef):
            return self._allowed_exact(q, k, rows, threads)
        pos, scores, counts = self._walk(q, k, ef, rows)
        need = min(int(k), len(rows))
        short = np.flatnonzero(counts < need)
        if len(short):  # once more, wider
            pos[short], scores[short], counts[short] = self._walk(q[short], k, 4 * ef, rows)
            short = np.flatnonzero(counts < need)
        if len(short):  # then exactly
            pos[short], scores[short], counts[short] = self._allowed_exact(q[short], k, rows,
                                                                           threads)
        return pos, scores, counts

    def _allowed_exact(self, q: np.ndarray, k: int, rows: np.ndarray, threads: int | None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact search over the vectors at ``rows`` only: the hits of :meth:`_exact` under the
        same filter (the same candidate window, rescored and cut as it does)."""
        want = min(int(k), self.n)
        if not len(rows):
            empty = np.zeros((len(q), want), dtype=np.int64)
            return empty, empty.astype(np.float32), np.zeros(len(q), dtype=np.int64)
        wide = min(self.n, want + max(16, want // 4))
        pos, counts = self._blocked(q, wide, None, threads, rows)
        return self._final(q, pos, counts, want, threads)

    def _walk(self, q: np.ndarray, k: int, ef: int, rows: np.ndarray | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """faiss's HNSW search with ``efSearch`` ``ef``, restricted to ``rows`` when given."""
        import faiss

        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
        params.efSearch = int(ef)
        if rows is not None:
            params.sel = faiss.IDSelectorBatch(rows)
        _, idx = self.hnsw.search(q, int(k), params=params)
        counts = (idx >= 0).sum(1).astype(np.int64)
        pos = np.where(idx >= 0, idx, 0).astype(np.int64)
        for i in range(len(q)):  # found hits first (faiss pads with -1 at the end)
            pos[i, :counts[i]] = idx[i][idx[i] >= 0]
        return self._final(q, pos, counts, int(k), None)
