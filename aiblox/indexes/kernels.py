"""Compiled kernels of the indexes (numba, cached in ``NUMBA_CACHE_DIR``): queries in parallel.

- :func:`bm25_top_k`: a query's BM25 scores as the float32 sum of its terms' score columns, in
  query order (bm25s's arithmetic), then the top ``k`` among the documents that hold a term.
- :func:`top_k_rows`: the running top ``k`` of each row of a block of similarity scores (exact
  kNN: a float32 matrix product per block of documents, then this).
- :func:`rescore`: the final similarity of each candidate, in float64 and in a fixed order, so a
  query's scores do not depend on the batch it came in.

Both order by score descending, then document position ascending (positions follow item ids,
so that is the project's tie-break), and a document at the cut-off ties exactly as a full sort
would: every document scoring above the ``k``-th score is kept, and of those equal to it the
lowest positions.
"""

from __future__ import annotations

import numpy as np

from aiblox.compiled import compiled_threads, setup_numba_cache

setup_numba_cache()

from numba import njit, prange  # noqa: E402 - after the cache folder is set

__all__ = ["bm25_top_k", "compiled_threads", "rescore", "top_k_rows"]


@njit(cache=True, inline="always")
def _select(cand_pos: np.ndarray, cand_score: np.ndarray, k: int
            ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The top ``k`` of candidates (positions distinct, any order): score desc, position asc."""
    m = cand_pos.shape[0]
    if m > k:
        kth = -np.partition(-cand_score, k - 1)[k - 1]
        keep = np.empty(m, dtype=np.int64)
        n = 0
        for i in range(m):
            if cand_score[i] > kth:
                keep[n] = i
                n += 1
        ties = np.empty(m, dtype=np.int64)
        t = 0
        for i in range(m):
            if cand_score[i] == kth:
                ties[t] = i
                t += 1
        tie_order = np.argsort(cand_pos[ties[:t]], kind="mergesort")
        for j in range(k - n):
            keep[n + j] = ties[tie_order[j]]
        sel = keep[:k]
        cand_pos = cand_pos[sel]
        cand_score = cand_score[sel]
    by_pos = np.argsort(cand_pos, kind="mergesort")
    pos = cand_pos[by_pos]
    score = cand_score[by_pos]
    order = np.argsort(-score, kind="mergesort")  # stable: ties stay in position order
    return pos[order], score[order]


@njit(cache=True, parallel=True)
def bm25_top_k(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, flat: np.ndarray,
               offsets: np.ndarray, extra: np.ndarray, allowed: np.ndarray, n_docs: int,
               k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Per query ``flat[offsets[q]:offsets[q+1]]`` (term columns): positions, scores (float32)
    and counts of its top ``k`` documents among those holding a query term and ``allowed``;
    ``extra[q]`` is added to every score (bm25l/bm25+'s non-occurrence sum)."""
    nq = offsets.shape[0] - 1
    out_pos = np.zeros((nq, k), dtype=np.int64)
    out_score = np.zeros((nq, k), dtype=np.float32)
    counts = np.zeros(nq, dtype=np.int64)
    for q in prange(nq):
        a, b = offsets[q], offsets[q + 1]
        if a == b:
            continue
        bound = 0
        for i in range(a, b):
            t = flat[i]
            bound += indptr[t + 1] - indptr[t]
        scores = np.zeros(n_docs, dtype=np.float32)
        seen = np.zeros(n_docs, dtype=np.bool_)
        cand = np.empty(bound, dtype=np.int64)
        m = 0
        for i in range(a, b):
            t = flat[i]
            for j in range(indptr[t], indptr[t + 1]):
                d = indices[j]
                scores[d] += data[j]
                if not seen[d]:
                    seen[d] = True
                    if allowed[d]:
                        cand[m] = d
                        m += 1
        cand_pos = cand[:m]
        cand_score = np.empty(m, dtype=np.float32)
        for i in range(m):
            cand_score[i] = scores[cand_pos[i]] + extra[q]
        pos, score = _select(cand_pos, cand_score, k)
        n = pos.shape[0]
        counts[q] = n
        out_pos[q, :n] = pos
        out_score[q, :n] = score
    return out_pos, out_score, counts


@njit(cache=True, parallel=True)
def top_k_rows(block: np.ndarray, first: int, allowed: np.ndarray, k: int,
               best_pos: np.ndarray, best_score: np.ndarray,
               counts: np.ndarray) -> None:  # pragma: no cover - compiled
    """Merge the rows of ``block`` (queries x documents ``first ..``; float32 scores, NaN
    skipped) into each query's running top ``k`` (``best_pos``/``best_score``/``counts``, in
    place), keeping documents whose ``allowed`` entry is True."""
    nq, nb = block.shape
    for q in prange(nq):
        c = counts[q]
        cand_pos = np.empty(c + nb, dtype=np.int64)
        cand_score = np.empty(c + nb, dtype=np.float32)
        for i in range(c):
            cand_pos[i] = best_pos[q, i]
            cand_score[i] = best_score[q, i]
        m = c
        row = block[q]
        # a document can enter only if it beats the current k-th score (or fills the list)
        floor = best_score[q, c - 1] if c == k else -np.inf
        for j in range(nb):
            s = row[j]
            if s >= floor and allowed[first + j] and not np.isnan(s):
                cand_pos[m] = first + j
                cand_score[m] = s
                m += 1
        pos, score = _select(cand_pos[:m], cand_score[:m], k)
        n = pos.shape[0]
        counts[q] = n
        best_pos[q, :n] = pos
        best_score[q, :n] = score


@njit(cache=True, parallel=True)
def rescore(queries: np.ndarray, vectors: np.ndarray, pos: np.ndarray, counts: np.ndarray,
            l2: bool) -> np.ndarray:  # pragma: no cover - compiled
    """Each candidate's similarity to its query, summed in float64 in dimension order and
    rounded to float32 once: the same bits whatever the batch (BLAS's float32 products are not:
    a matrix-vector and a matrix-matrix product round differently). Inner product, or with
    ``l2`` the negated Euclidean distance."""
    nq, width = pos.shape
    dim = queries.shape[1]
    out = np.zeros((nq, width), dtype=np.float32)
    for q in prange(nq):
        for i in range(counts[q]):
            v = vectors[pos[q, i]]
            acc = 0.0
            if l2:
                for j in range(dim):
                    d = np.float64(queries[q, j]) - np.float64(v[j])
                    acc += d * d
                out[q, i] = np.float32(-np.sqrt(acc))
            else:
                for j in range(dim):
                    acc += np.float64(queries[q, j]) * np.float64(v[j])
                out[q, i] = np.float32(acc)
    return out
