"""numba kernels of batch fusion (:mod:`aiblox.fusion.batch`), compiled once and cached in
``NUMBA_CACHE_DIR`` (set before numba is imported), so the compiled code is reused across
processes like ranx's own kernels.

- :func:`linear_scores` and :func:`rrf_scores`: the fused score of every flat position of a
  batch of queries, with the reference's arithmetic in the reference's order (so the same IEEE
  doubles as :class:`aiblox.fusion.HybridScorer`; no fast-math, so no fused multiply-add),
  queries in parallel.
- :func:`segment_order`: per query segment of a flat score array, its positions by score
  descending, ties by position (that is, document id) ascending, cut to ``top_k``: exactly the
  order of ``numpy.lexsort((positions, -scores, segment))``, at a fraction of its cost (a
  radix sort of a segment mostly kept, a partial quicksort that only orders the ``top_k``
  kept of the others; blocks of queries in parallel).
- :func:`minmax_lists`: :func:`aiblox.fusion.normalize.minmax` of many lists at once, step for
  step (Python's ``min``/``max`` keep the first of equal values, so do these loops).
- :func:`zscore_lists`: :func:`~aiblox.fusion.normalize.zscore` (and ``sigmoid``) of many lists
  at once, step for step: :func:`fsum` is CPython's ``math.fsum`` (Shewchuk's exact partials,
  then its correctly rounded total), ``** 2`` and ``exp`` call the C library as CPython does.

Parallel loops use numba's threads (:func:`aiblox.compiled.compiled_threads` sets how many: the
sweep's ``--jobs``).
"""

from __future__ import annotations

import math

import numpy as np

from aiblox.compiled import setup_numba_cache

setup_numba_cache()

from numba import njit, prange  # noqa: E402 - after the cache folder is set

__all__ = ["blend_linear", "blend_rrf", "fsum", "linear_blend", "linear_scores", "minmax_lists",
           "kept_offsets", "order_segment", "rrf_scores", "segment_order", "segment_scratch",
           "zscore_lists"]

_BLOCKS = 64
"""Query blocks of :func:`segment_order` and :func:`zscore_lists` (each with its own scratch
arrays)."""
_RADIX_MIN = 32
"""Segments shorter than this are sorted by comparisons (:func:`_partial_sort`). Measured on
scifact's fused runs (the fusion sweep's 4 depths x 2 splits, top 10, 25 and 100): from 32
positions on the radix sort is as fast or faster, at top 100 1.6-2.5x on the 25- and 50-deep
lists (their 40-90 positions a query), which at 96 were sorted by comparisons."""


@njit(cache=True, parallel=True)
def linear_scores(nt: np.ndarray, nv: np.ndarray, min_t: np.ndarray, min_v: np.ndarray,
                  has_t: np.ndarray, has_v: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                  w_text: float, w_vec: float, list_min: bool
                  ) -> np.ndarray:  # pragma: no cover - compiled
    """``(0 + w_text * a) + w_vec * b`` per position: ``a``/``b`` the normalised text/vector
    score, or for a document missing from a list that list's minimum (``list_min``) or 0."""
    out = np.empty(nt.shape[0], dtype=np.float64)
    for q in prange(starts.shape[0]):
        for i in range(starts[q], starts[q] + counts[q]):
            a = _or_missing(has_t[i], nt[i], min_t[q], list_min)
            b = _or_missing(has_v[i], nv[i], min_v[q], list_min)
            out[i] = (0.0 + w_text * a) + w_vec * b
    return out


@njit(cache=True)
def linear_blend(a: np.ndarray, b: np.ndarray, w_text: float, w_vec: float
                 ) -> np.ndarray:  # pragma: no cover - compiled
    """``(0 + w_text * a) + w_vec * b`` per position, ``a``/``b`` with missing documents
    already filled in (:meth:`BatchFusion._filled`): :func:`linear_scores`'s doubles in one
    pass, on one thread (a pass over a split's positions is shorter than waking a pool)."""
    out = np.empty(a.shape[0], dtype=np.float64)
    for i in range(a.shape[0]):
        out[i] = blend_linear(a[i], b[i], w_text, w_vec)
    return out


@njit(cache=True, inline="always")
def blend_linear(a: float, b: float, w_text: float, w_vec: float) -> float:  # pragma: no cover
    """One position's linear blend, ``(0 + w_text * a) + w_vec * b`` (:func:`linear_blend`)."""
    return (0.0 + w_text * a) + w_vec * b


@njit(cache=True, inline="always")
def _or_missing(has: bool, value: float, floor: float, list_min: bool
                ) -> float:  # pragma: no cover - compiled
    """A list's normalised score of a document, or for a document missing from the list its
    lowest score (``list_min``) or 0."""
    if has:
        return value
    return floor if list_min else 0.0


@njit(cache=True)
def minmax_lists(raw: np.ndarray, offsets: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per list ``raw[offsets[q]:offsets[q + 1]]``: its min-max scaled scores (all 1.0 when
    every score is equal) and the lowest of them (0.0 for an empty list)."""
    out = np.empty(raw.shape[0], dtype=np.float64)
    mins = np.zeros(offsets.shape[0] - 1, dtype=np.float64)
    for q in range(offsets.shape[0] - 1):
        a, b = offsets[q], offsets[q + 1]
        if a == b:
            continue
        lo = raw[a]
        hi = raw[a]
        for i in range(a + 1, b):
            if raw[i] < lo:
                lo = raw[i]
            if raw[i] > hi:
                hi = raw[i]
        if hi == lo:
            for i in range(a, b):
                out[i] = 1.0
        else:
            span = hi - lo
            for i in range(a, b):
                out[i] = (raw[i] - lo) / span
        m = out[a]
        for i in range(a + 1, b):
            if out[i] < m:
                m = out[i]
        mins[q] = m
    return out, mins


@njit(cache=True)
def fsum(x: np.ndarray, partials: np.ndarray) -> float:  # pragma: no cover - compiled
    """CPython's ``math.fsum`` of finite ``x`` (``Modules/mathmodule.c``: Shewchuk's partials,
    then the sum of the partials rounded once, half-way cases corrected); ``partials`` is
    scratch of at least ``len(x)`` doubles."""
    m = 0
    for xi in x:
        v = xi
        i = 0
        for j in range(m):
            y = partials[j]
            if abs(v) < abs(y):
                t = v
                v = y
                y = t
            hi = v + y
            lo = y - (hi - v)
            if lo != 0.0:
                partials[i] = lo
                i += 1
            v = hi
        m = i
        partials[m] = v
        m += 1
    hi = 0.0
    if m > 0:
        n = m - 1
        hi = partials[n]
        lo = 0.0
        while n > 0:
            v = hi
            n -= 1
            y = partials[n]
            hi = v + y
            yr = hi - v
            lo = y - yr
            if lo != 0.0:
                break
        if n > 0 and ((lo < 0.0 and partials[n - 1] < 0.0) or
                      (lo > 0.0 and partials[n - 1] > 0.0)):
            y = lo * 2.0
            v = hi + y
            yr = v - hi
            if y == yr:
                hi = v
    return hi


@njit(cache=True, parallel=True)
def zscore_lists(raw: np.ndarray, offsets: np.ndarray, logistic: bool, two: float
                 ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per list ``raw[offsets[q]:offsets[q + 1]]``: its z-scores (all 0.0 when the variance is
    0.0), or with ``logistic`` their logistic function, and the lowest of them (0.0 for an
    empty list). ``two`` is 2.0, passed in so that ``d ** two`` stays a call of the C
    library's ``pow``, as CPython's ``d ** 2`` is (not folded into ``d * d``). Lists are
    independent: blocks of them run in parallel, each with its own scratch arrays."""
    nq = offsets.shape[0] - 1
    out = np.empty(raw.shape[0], dtype=np.float64)
    mins = np.zeros(nq, dtype=np.float64)
    longest = 0
    for q in range(nq):
        longest = max(longest, offsets[q + 1] - offsets[q])
    blocks = min(nq, _BLOCKS)
    for blk in prange(blocks):
        partials = np.empty(longest + 1, dtype=np.float64)
        sq = np.empty(longest, dtype=np.float64)
        for q in range(blk * nq // blocks, (blk + 1) * nq // blocks):
            _zscore_list(raw, offsets[q], offsets[q + 1], logistic, two, out, mins, q,
                         partials, sq)
    return out, mins


@njit(cache=True)
def _zscore_list(raw: np.ndarray, a: int, b: int, logistic: bool, two: float, out: np.ndarray,
                 mins: np.ndarray, q: int, partials: np.ndarray, sq: np.ndarray
                 ) -> None:  # pragma: no cover - compiled
    """One list of :func:`zscore_lists`, written into ``out[a:b]`` and ``mins[q]``."""
    n = b - a
    if n == 0:
        return
    lo = raw[a]
    hi = raw[a]
    for i in range(a + 1, b):
        lo = min(lo, raw[i])
        hi = max(hi, raw[i])
    mean = fsum(raw[a:b], partials) / n
    for i in range(n):
        sq[i] = (raw[a + i] - mean) ** two
    var = fsum(sq[:n], partials) / n
    if hi == lo or var == 0.0:  # all equal: the mean of 0.1 * 3 is not 0.1
        for i in range(a, b):
            out[i] = 0.0
    else:
        std = math.sqrt(var)
        for i in range(a, b):
            out[i] = (raw[i] - mean) / std
    if logistic:
        for i in range(a, b):
            out[i] = 1.0 / (1.0 + math.exp(-out[i]))
    m = out[a]
    for i in range(a + 1, b):
        if out[i] < m:
            m = out[i]
    mins[q] = m


@njit(cache=True, parallel=True)
def rrf_scores(rank_t: np.ndarray, rank_v: np.ndarray, has_t: np.ndarray, has_v: np.ndarray,
               k: float, w_text: float, w_vec: float) -> np.ndarray:  # pragma: no cover
    """``w_text / (k + rank_t) + w_vec / (k + rank_v)`` per position, each term only where the
    document is in that list, text first."""
    out = np.empty(rank_t.shape[0], dtype=np.float64)
    for i in prange(rank_t.shape[0]):
        out[i] = blend_rrf(rank_t[i], rank_v[i], has_t[i], has_v[i], k, w_text, w_vec)
    return out


@njit(cache=True, inline="always")
def blend_rrf(rank_t: float, rank_v: float, has_t: bool, has_v: bool, k: float, w_text: float,
              w_vec: float) -> float:  # pragma: no cover - compiled
    """One position's reciprocal rank fusion (:func:`rrf_scores`), text term first."""
    f = 0.0
    if has_t:
        f = f + w_text / (k + rank_t)
    if has_v:
        f = f + w_vec / (k + rank_v)
    return f


@njit(cache=True, inline="always")
def _before(v: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover - compiled
    """Position ``a`` ranks before ``b``: a higher score, or an equal one and a smaller position.
    Every pair is strictly ordered, so any correct sort gives the one stable order."""
    return v[a] > v[b] or (v[a] == v[b] and a < b)


@njit(cache=True)
def _partial_sort(v: np.ndarray, idx: np.ndarray, lo: int, hi: int, k_end: int,
                  stack: np.ndarray) -> None:  # pragma: no cover - compiled
    """Order ``idx[lo:hi]`` (flat positions) by :func:`_before` far enough that ``idx[lo:k_end]``
    holds the first ones, sorted: quicksort (median-of-three, Hoare partition) that never
    descends into a part lying wholly at or after ``k_end``, insertion sort below 16."""
    stack[0] = lo
    stack[1] = hi
    top = 2
    while top > 0:
        top -= 2
        a = stack[top]
        b = stack[top + 1]
        while b - a > 16:
            m = (a + b - 1) // 2
            x, y, z = idx[a], idx[m], idx[b - 1]
            if _before(v, y, x):
                x, y = y, x
            if _before(v, z, y):
                y = z
                if _before(v, y, x):
                    y = x
            pivot = y  # the median of three distinct keys: never the range's largest
            i = a - 1
            j = b
            while True:
                i += 1
                while _before(v, idx[i], pivot):
                    i += 1
                j -= 1
                while _before(v, pivot, idx[j]):
                    j -= 1
                if i >= j:
                    break
                t = idx[i]
                idx[i] = idx[j]
                idx[j] = t
            # [a, j] holds positions ranked up to the pivot, [j + 1, b) from it
            if j + 1 < k_end:
                stack[top] = j + 1
                stack[top + 1] = b
                top += 2
            b = j + 1
        for i in range(a + 1, b):
            t = idx[i]
            j = i - 1
            while j >= a and _before(v, t, idx[j]):
                idx[j + 1] = idx[j]
                j -= 1
            idx[j + 1] = t


@njit(cache=True)
def _radix_sort(v: np.ndarray, idx: np.ndarray, s: int, n: int, fbuf: np.ndarray,
                keys: np.ndarray, keys2: np.ndarray, idx2: np.ndarray,
                hist: np.ndarray) -> None:  # pragma: no cover - compiled
    """``idx[:n]`` = positions ``s .. s + n - 1`` in :func:`_before` order, all of them.

    Each score becomes a 64-bit key whose unsigned order is descending score order (-0.0 is
    keyed as 0.0: they are equal scores). A stable LSD radix sort orders the keys' high 32
    bits (a byte every key shares is skipped), starting from position order; then each run of
    keys with equal high halves (rare: scores equal to about 7 significant digits) is put in
    full-key order by a stable insertion sort, so equal scores stay in position order."""
    for i in range(n):
        x = v[s + i]
        fbuf[i] = 0.0 if x == 0.0 else x
    bits = fbuf[:n].view(np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    for i in range(n):
        b = bits[i]
        # ascending float order as unsigned order, then reversed (descending scores)
        asc = ~b if (b & sign) != np.uint64(0) else b | sign
        keys[i] = ~asc
        idx[i] = s + i
    hist[:, :] = 0
    for i in range(n):
        k = keys[i]
        for d in range(4, 8):
            hist[d, (k >> np.uint64(8 * d)) & np.uint64(255)] += 1
    src_k, src_i, dst_k, dst_i = keys, idx, keys2, idx2
    for d in range(4, 8):
        h = hist[d]
        if h[(src_k[0] >> np.uint64(8 * d)) & np.uint64(255)] == n:
            continue  # every key has this byte: the pass would change nothing
        total = 0
        for c in range(256):
            t = h[c]
            h[c] = total
            total += t
        for i in range(n):
            k = src_k[i]
            c = (k >> np.uint64(8 * d)) & np.uint64(255)
            at = h[c]
            h[c] = at + 1
            dst_k[at] = k
            dst_i[at] = src_i[i]
        src_k, src_i, dst_k, dst_i = dst_k, dst_i, src_k, src_i
    high = np.uint64(32)
    a = 0
    while a < n:  # runs of equal high halves: insertion sort by the full key, stable
        top = src_k[a] >> high
        b = a + 1
        while b < n and (src_k[b] >> high) == top:
            b += 1
        for i in range(a + 1, b):
            k = src_k[i]
            p = src_i[i]
            j = i - 1
            while j >= a and src_k[j] > k:
                src_k[j + 1] = src_k[j]
                src_i[j + 1] = src_i[j]
                j -= 1
            src_k[j + 1] = k
            src_i[j + 1] = p
        a = b
    if src_i is not idx:
        for i in range(n):
            idx[i] = src_i[i]


@njit(cache=True, parallel=True)
def segment_order(scores: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                  top_k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray
                                       ]:  # pragma: no cover - compiled
    """``(positions, kept, ordered)``: int32 flat positions, query by query, best first;
    ``kept[q]`` (int32) per query; ``ordered``, the scores at those positions (the fused run's
    three arrays, written by the sorting threads, no copies after).

    Segment ``q`` is ``scores[starts[q]:starts[q] + counts[q]]``; best first is score
    descending, ties in position order (positions follow document ids), as a stable sort of
    the negated scores gives. ``top_k < 0`` keeps every position. A segment of ``_RADIX_MIN``
    positions or more is radix sorted whole (:func:`_radix_sort`, no branches to mispredict:
    faster than a partial quicksort even when 10 of 1,600 are kept, measured on scifact's fused
    runs); a shorter one has only its first ``top_k`` put in order (a partial quicksort). Both
    give the one order :func:`_before` defines.
    """
    nq = starts.shape[0]
    kept, at, longest = kept_offsets(counts, top_k)
    out = np.empty(at[nq], dtype=np.int32)
    ordered = np.empty(at[nq], dtype=np.float64)
    blocks = min(nq, _BLOCKS)
    for blk in prange(blocks):
        idx, stack, fbuf, keys, keys2, idx2, hist = segment_scratch(longest)
        for q in range(blk * nq // blocks, (blk + 1) * nq // blocks):
            s = starts[q]
            order_segment(scores, s, counts[q], kept[q], idx, stack, fbuf, keys, keys2, idx2,
                          hist)
            for i in range(kept[q]):
                out[at[q] + i] = idx[i]
                ordered[at[q] + i] = scores[idx[i]]
    return out, kept.astype(np.int32), ordered


@njit(cache=True, inline="always")
def segment_scratch(longest: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray, np.ndarray, np.ndarray
                                           ]:  # pragma: no cover - compiled
    """The scratch arrays :func:`order_segment` needs for segments of up to ``longest``
    positions: ``(idx, stack, fbuf, keys, keys2, idx2, hist)`` (one set per thread)."""
    return (np.empty(longest, dtype=np.int64), np.empty(2 * longest + 2, dtype=np.int64),
            np.empty(longest, dtype=np.float64), np.empty(longest, dtype=np.uint64),
            np.empty(longest, dtype=np.uint64), np.empty(longest, dtype=np.int64),
            np.empty((8, 256), dtype=np.int64))


@njit(cache=True, inline="always")
def order_segment(v: np.ndarray, s: int, n: int, keep: int, idx: np.ndarray, stack: np.ndarray,
                  fbuf: np.ndarray, keys: np.ndarray, keys2: np.ndarray, idx2: np.ndarray,
                  hist: np.ndarray) -> None:  # pragma: no cover - compiled
    """``idx[:keep]``: the first ``keep`` of positions ``s .. s + n - 1`` of ``v`` in
    :func:`_before` order (score descending, ties by position): a segment of ``_RADIX_MIN``
    positions or more radix sorted whole, a shorter one partially sorted."""
    if n >= _RADIX_MIN:
        _radix_sort(v, idx, s, n, fbuf, keys, keys2, idx2, hist)
    else:
        for i in range(n):
            idx[i] = s + i
        _partial_sort(v, idx, 0, n, keep, stack)


@njit(cache=True, inline="always")
def kept_offsets(counts: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray, int
                                                          ]:  # pragma: no cover - compiled
    """``(kept, at, longest)`` of query segments of ``counts`` positions cut to ``top_k`` (< 0:
    none cut): each query's kept count, where its kept positions start in a flat output
    (``at[nq]``: their total), and the longest segment."""
    nq = counts.shape[0]
    kept = counts.copy()
    if top_k >= 0:
        for q in range(nq):
            if kept[q] > top_k:
                kept[q] = top_k
    at = np.zeros(nq + 1, dtype=np.int64)
    longest = 0
    for q in range(nq):
        at[q + 1] = at[q] + kept[q]
        longest = max(longest, counts[q])
    return kept, at, longest
