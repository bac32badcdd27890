"""Compiled kernels of the indexes (numba, cached in ``NUMBA_CACHE_DIR``): queries in parallel.

- :func:`bm25_top_k`: a query's BM25 scores as the float32 sum of its terms' score columns, in
  query order (bm25s's arithmetic), then the top ``k`` among the documents that hold a term;
  :func:`bm25_top_k_weighted` the same with a weight per query term (expanded queries).
- :func:`top_k_rows`: each query's running top ``k`` over blocks of similarity scores (exact
  kNN: a float32 matrix product per block of documents, then this), kept as a heap.
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

__all__ = ["bm25_top_k", "bm25_top_k_weighted", "compiled_threads", "rescore",
           "top_k_rows"]


@njit(cache=True)
def _worse(s1: float, p1: int, s2: float, p2: int) -> bool:  # pragma: no cover - compiled
    """``(s1, p1)`` ranks below ``(s2, p2)``: a lower score, or the same and a higher position."""
    return s1 < s2 or (s1 == s2 and p1 > p2)


@njit(cache=True)
def _sift_down(hs: np.ndarray, hp: np.ndarray, n: int) -> None:  # pragma: no cover - compiled
    """Move the root of a heap of ``n`` entries (its root the worst of them) down to its place:
    after the root was replaced (:func:`_offer`) or taken (:func:`_sorted`)."""
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and _worse(hs[c + 1], hp[c + 1], hs[c], hp[c]):
            c += 1
        if not _worse(hs[c], hp[c], hs[j], hp[j]):
            break
        hs[j], hs[c] = hs[c], hs[j]
        hp[j], hp[c] = hp[c], hp[j]
        j = c


@njit(cache=True)
def _offer(hs: np.ndarray, hp: np.ndarray, n: int, s: float, p: int
           ) -> int:  # pragma: no cover - compiled
    """Offer ``(s, p)`` to a heap of the best ``len(hs)`` seen (its root the worst of them;
    ``n`` entries used); returns the new ``n``. Most offers cost one comparison."""
    kk = hs.shape[0]
    if n < kk:  # fill, sifting the new entry up
        j = n
        hs[j] = s
        hp[j] = p
        while j > 0:
            parent = (j - 1) // 2
            if not _worse(hs[j], hp[j], hs[parent], hp[parent]):
                break
            hs[j], hs[parent] = hs[parent], hs[j]
            hp[j], hp[parent] = hp[parent], hp[j]
            j = parent
        return n + 1
    if kk and _worse(hs[0], hp[0], s, p):  # better than the worst kept: replace it
        hs[0] = s
        hp[0] = p
        _sift_down(hs, hp, n)
    return n


@njit(cache=True)
def _sorted(hs: np.ndarray, hp: np.ndarray, n: int
            ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The ``n`` entries of a heap ordered by score desc, then position asc: a heap sort (the
    root, the worst kept, goes to the end, and the last entry sifts down from the root). The
    heap is consumed. The order is :func:`_worse`'s, a total order (positions are distinct), so
    it equals two stable argsorts'; it compiles in half their time (a fresh install's first
    query) and runs faster at top 100."""
    pos = np.empty(n, dtype=np.int64)
    score = np.empty(n, dtype=np.float32)
    m = n
    while m > 0:
        m -= 1
        pos[m] = hp[0]
        score[m] = hs[0]
        hs[0] = hs[m]
        hp[0] = hp[m]
        _sift_down(hs, hp, m)
    return pos, score


@njit(cache=True)
def _bm25_select(scores: np.ndarray, indices: np.ndarray, indptr: np.ndarray, flat: np.ndarray,
                 a: int, b: int, postings: int, add: float, allowed: np.ndarray, n_docs: int,
                 k: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The top ``k`` of one query's summed ``scores`` (its terms ``flat[a:b]``, ``postings``
    entries in all), ``add`` added to each: every document with a score other than 0.0 is
    offered to a heap of the best ``k``, by one sequential pass over the scores when the
    postings are many (common terms), else by a second pass over the postings, each document
    once (rare terms: the cost follows the postings, not the collection's size). Both passes
    select the same documents. ``scores`` is left dirty."""
    hs = np.empty(k, dtype=np.float32)
    hp = np.empty(k, dtype=np.int64)
    n = 0
    floor = np.float32(-np.inf)  # float32 like the scores: a mixed compare costs 3x
    if 4 * postings > n_docs and add == 0.0:  # common terms: one pass over every score
        for d in range(n_docs):  # (without bm25l/bm25+'s constant: 3x faster compiled)
            s = scores[d]
            if s < floor or s == 0.0 or not allowed[d]:  # the floor test rejects most
                continue
            n = _offer(hs, hp, n, s, d)
            if n == k:
                floor = hs[0]
    elif 4 * postings > n_docs:
        for d in range(n_docs):
            s = scores[d]
            v = s + add
            if v < floor or s == 0.0 or not allowed[d]:
                continue
            n = _offer(hs, hp, n, v, d)
            if n == k:
                floor = hs[0]
    else:  # rare terms: visit the documents that hold them (once each)
        for i in range(a, b):
            t = flat[i]
            for j in range(indptr[t], indptr[t + 1]):
                d = indices[j]
                s = scores[d]
                if s == 0.0:  # visited (or held only zero-scored terms)
                    continue
                scores[d] = 0.0
                v = s + add
                if v < floor or not allowed[d]:
                    continue
                n = _offer(hs, hp, n, v, d)
                if n == k:
                    floor = hs[0]
    return _sorted(hs, hp, n)


@njit(cache=True, parallel=True)
def bm25_top_k(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, flat: np.ndarray,
               offsets: np.ndarray, extra: np.ndarray, allowed: np.ndarray, n_docs: int,
               k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Per query ``flat[offsets[q]:offsets[q+1]]`` (term columns): positions, scores (float32)
    and counts of its top ``k`` documents among those holding a query term and ``allowed``;
    ``extra[q]`` is added to every score (bm25l/bm25+'s non-occurrence sum).

    The columns are summed into a score per document, then the top ``k`` of those other than
    0.0 are taken (:func:`_bm25_select`)."""
    nq = offsets.shape[0] - 1
    out_pos = np.zeros((nq, k), dtype=np.int64)
    out_score = np.zeros((nq, k), dtype=np.float32)
    counts = np.zeros(nq, dtype=np.int64)
    for q in prange(nq):
        a, b = offsets[q], offsets[q + 1]
        if a == b:
            continue
        scores = np.zeros(n_docs, dtype=np.float32)
        postings = 0
        for i in range(a, b):
            t = flat[i]
            postings += indptr[t + 1] - indptr[t]
            for j in range(indptr[t], indptr[t + 1]):
                scores[indices[j]] += data[j]
        pos, score = _bm25_select(scores, indices, indptr, flat, a, b, postings, extra[q],
                                  allowed, n_docs, k)
        n = pos.shape[0]
        counts[q] = n
        out_pos[q, :n] = pos
        out_score[q, :n] = score
    return out_pos, out_score, counts


@njit(cache=True, parallel=True)
def bm25_top_k_weighted(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                        flat: np.ndarray, weights: np.ndarray, offsets: np.ndarray,
                        extra: np.ndarray, allowed: np.ndarray, n_docs: int, k: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """:func:`bm25_top_k` with a float32 weight per query term (``weights`` beside ``flat``):
    a document's score is the float32 sum, in query order, of ``weight * score`` over the
    query's terms (RM3's and Bo1's expanded queries); ``extra[q]`` (the weighted
    non-occurrence sum) is added to every score. The same selection and tie rule."""
    nq = offsets.shape[0] - 1
    out_pos = np.zeros((nq, k), dtype=np.int64)
    out_score = np.zeros((nq, k), dtype=np.float32)
    counts = np.zeros(nq, dtype=np.int64)
    for q in prange(nq):
        a, b = offsets[q], offsets[q + 1]
        if a == b:
            continue
        scores = np.zeros(n_docs, dtype=np.float32)
        postings = 0
        for i in range(a, b):
            t = flat[i]
            w = weights[i]
            postings += indptr[t + 1] - indptr[t]
            for j in range(indptr[t], indptr[t + 1]):
                scores[indices[j]] += w * data[j]
        pos, score = _bm25_select(scores, indices, indptr, flat, a, b, postings, extra[q],
                                  allowed, n_docs, k)
        n = pos.shape[0]
        counts[q] = n
        out_pos[q, :n] = pos
        out_score[q, :n] = score
    return out_pos, out_score, counts


@njit(cache=True, parallel=True)
def top_k_rows(block: np.ndarray, first: int, allowed: np.ndarray, heap_score: np.ndarray,
               heap_pos: np.ndarray, counts: np.ndarray) -> None:  # pragma: no cover
    """Offer every entry of ``block`` (queries x documents ``first ..``; float32 scores, NaN
    skipped, documents whose ``allowed`` entry is False skipped) to each query's heap of its
    best ``k`` so far (``heap_score``/``heap_pos`` rows of width ``k``, ``counts`` entries
    used; updated in place, in heap order: sort them at the end)."""
    nq, nb = block.shape
    kk = heap_score.shape[1]
    for q in prange(nq):
        hs = heap_score[q]
        hp = heap_pos[q]
        n = counts[q]
        row = block[q]
        # a score below the worst kept cannot enter (float32 like the scores)
        floor = hs[0] if n == kk else np.float32(-np.inf)
        for j in range(nb):
            s = row[j]
            if s < floor or not allowed[first + j] or np.isnan(s):
                continue
            n = _offer(hs, hp, n, s, first + j)
            if n == kk:
                floor = hs[0]
        counts[q] = n


@njit(cache=True, parallel=True, fastmath={"reassoc", "contract"})
def rescore(queries: np.ndarray, vectors: np.ndarray, pos: np.ndarray, counts: np.ndarray,
            l2: bool) -> np.ndarray:  # pragma: no cover - compiled
    """Each candidate's similarity to its query, summed in float64 and rounded to float32 once:
    the same bits whatever the batch, since this one compiled loop computes every candidate
    (BLAS's float32 products are not: a matrix-vector and a matrix-matrix product round
    differently). The float64 sum may be reassociated for SIMD, always the same way; its
    rounding to float32 equals a numpy float64 reference's. Inner product, or with ``l2`` the
    negated Euclidean distance."""
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
