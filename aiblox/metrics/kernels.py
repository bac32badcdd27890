"""numba kernel of the ranking metrics (:class:`aiblox.metrics.QrelsScorer`), compiled once
and cached in ``NUMBA_CACHE_DIR`` (set before numba is imported).

- :func:`run_arrays`: a ranx run (a numba typed list of ``(n, 2)`` arrays: judged-document code,
  ``n - rank``) built inside compiled code, where appending to a typed list costs nothing (for
  the metrics left to ranx).
- :func:`ranking_metrics`: ranx's hits, hit rate, precision, recall, mrr, map, dcg and nDCG
  (and the Burges forms) of every query of a run in one pass, queries in parallel: the same
  loops and the same array expressions as ranx's kernels (``ranx/metrics/*.py``), so the same
  doubles; a judged document matches when its grade reaches the metric's relevance level.
"""

from __future__ import annotations

import numpy as np

from aiblox.compiled import setup_numba_cache

setup_numba_cache()

from numba import njit, prange  # noqa: E402 - after the cache folder is set
from numba.typed import List  # noqa: E402

from aiblox.fusion.kernels import (  # noqa: E402
    blend_linear,
    blend_rrf,
    kept_offsets,
    order_segment,
    segment_scratch,
)

__all__ = ["KINDS", "fused_metrics", "ranking_metrics", "run_arrays"]


@njit(cache=True)
def run_arrays(codes: np.ndarray, offsets: np.ndarray) -> List:  # pragma: no cover - compiled
    """A ranx run: per query ``q`` the rows ``codes[offsets[q]:offsets[q + 1]]`` (best first),
    each ``[code, n - rank]``."""
    out = List()
    for q in range(offsets.shape[0] - 1):
        a, b = offsets[q], offsets[q + 1]
        n = b - a
        arr = np.empty((n, 2), dtype=np.float64)
        for i in range(n):
            arr[i, 0] = codes[a + i]
            arr[i, 1] = n - i
        out.append(arr)
    return out


# -- ranx's metrics, all of one run at once ----------------------------------------------------
HITS, HIT_RATE, PRECISION, RECALL, MRR, MAP, DCG, DCG_BURGES, NDCG, NDCG_BURGES = range(10)
"""Kinds of :func:`ranking_metrics` (ranx's metric names, in :data:`KINDS`)."""
KINDS = {"hits": HITS, "hit_rate": HIT_RATE, "precision": PRECISION, "recall": RECALL,
         "mrr": MRR, "map": MAP, "dcg": DCG, "dcg_burges": DCG_BURGES, "ndcg": NDCG,
         "ndcg_burges": NDCG_BURGES}
"""The ranx metrics :func:`ranking_metrics` computes (the others go to ranx itself)."""


@njit(cache=True, inline="always")
def _gain(grade: float, i: int, jarvelin: bool) -> float:  # pragma: no cover - compiled
    """Rank ``i``'s (from 0) term of ranx's ``_dcg`` sum (``w / log2(arange(1, k + 1) + 1)``,
    or ``2**w - 1`` over it in the Burges form): the same expression, element for element."""
    if jarvelin:
        return grade / np.log2(np.float64(i + 1) + 1)
    return (2**grade - 1) / np.log2(np.float64(i + 1) + 1)


@njit(cache=True)
def _one(codes: np.ndarray, a: int, n: int, q_codes: np.ndarray, q_grades: np.ndarray,
         qa: int, qb: int, kind: int, k: int, lvl: int) -> float:  # pragma: no cover
    """One metric of one query: the run ``codes[a:a + n]`` (best first) against the judged
    documents ``q_codes[qa:qb]`` (relevance descending), with ranx's arithmetic."""
    n_rel = 0
    for j in range(qa, qb):
        if q_grades[j] >= lvl:
            n_rel += 1
    if kind == PRECISION or kind == RECALL:  # noqa: SIM109 - plain compares for numba
        k0 = k if k != 0 else n
        if k0 == 0 or n_rel == 0:
            return 0.0
    elif n_rel == 0:
        return 0.0
    else:
        k0 = k
    keff = n if k0 == 0 or k0 > n else k0
    jarvelin = kind == DCG or kind == NDCG  # noqa: SIM109
    # ranx's _dcg is np.sum over every kept rank, from 0.0 in order; a rank without a hit adds
    # +0.0, which never changes a sum that starts at 0.0, so summing the hits alone, in rank
    # order, gives the same double with no array per query
    hits = 0.0
    first = -1
    ap = 0.0
    dcg = 0.0
    for i in range(keff):
        c = codes[a + i]
        for j in range(qa, qb):
            if q_grades[j] >= lvl and c == q_codes[j]:
                hits += 1.0
                if first < 0:
                    first = i
                ap += hits / (i + 1)
                dcg += _gain(q_grades[j], i, jarvelin)
                break
    if kind == HITS:
        return hits
    if kind == HIT_RATE:
        return 1.0 if first >= 0 else 0.0
    if kind == PRECISION:
        return hits / k0
    if kind == RECALL:
        return hits / n_rel
    if kind == MRR:
        return 1 / (first + 1) if first >= 0 else 0.0
    if kind == MAP:
        return ap / n_rel
    if kind == DCG or kind == DCG_BURGES:  # noqa: SIM109
        return dcg
    # the ideal run is the judged list itself, relevance descending (ranx's _idcg)
    m = qb - qa
    ki = m if k == 0 or k > m else k
    idcg = 0.0
    for i in range(ki):
        if q_grades[qa + i] >= lvl:
            idcg += _gain(q_grades[qa + i], i, jarvelin)
    if idcg == 0.0:
        idcg = 1.0
    return dcg / idcg


@njit(cache=True, parallel=True)
def ranking_metrics(codes: np.ndarray, starts: np.ndarray, lens: np.ndarray,
                    q_codes: np.ndarray, q_offsets: np.ndarray, q_grades: np.ndarray,
                    kinds: np.ndarray, ks: np.ndarray, levels: np.ndarray
                    ) -> np.ndarray:  # pragma: no cover - compiled
    """``out[m, q]``: metric ``m`` (``kinds[m]`` at ``ks[m]``, relevance level ``levels[m]``)
    of judged query ``q``, whose run is ``codes[starts[q]:starts[q] + lens[q]]`` and whose
    judgements are ``q_codes``/``q_grades`` between ``q_offsets[q]`` and ``q_offsets[q + 1]``.
    Queries in parallel; each number is the one ranx's kernel gives for that query."""
    nq = q_offsets.shape[0] - 1
    out = np.zeros((kinds.shape[0], nq), dtype=np.float64)
    for q in prange(nq):
        for m in range(kinds.shape[0]):
            out[m, q] = _one(codes, starts[q], lens[q], q_codes, q_grades, q_offsets[q],
                             q_offsets[q + 1], kinds[m], ks[m], levels[m])
    return out


@njit(cache=True, parallel=True, nogil=True)
def fused_metrics(rrf: bool, p1: np.ndarray, p2: np.ndarray, has_t: np.ndarray,
                  has_v: np.ndarray, ks: np.ndarray, wts: np.ndarray, wvs: np.ndarray,
                  starts: np.ndarray, counts: np.ndarray, top_k: int, codes: np.ndarray,
                  depth: int, judged: np.ndarray, q_codes: np.ndarray, q_offsets: np.ndarray,
                  q_grades: np.ndarray, kinds: np.ndarray, mks: np.ndarray, levels: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray
                             ]:  # pragma: no cover - compiled
    """Many fusion settings of one split at once, each as its own fusion and metrics stages
    would compute it, byte for byte: ``(positions, kept, ordered, values)``.

    Setting ``w`` is reciprocal rank fusion (``rrf``: ``p1``/``p2`` the ranks, ``ks[w]``) or
    a linear blend (``p1``/``p2`` the filled normalised scores) with weights ``wts[w]``,
    ``wvs[w]``. Per query segment (``starts``/``counts``) its scores are blended, ordered and
    cut to ``top_k`` (< 0: all) as :func:`~aiblox.fusion.kernels.segment_order` does:
    ``positions[w]``/``ordered[w]`` hold the kept positions and scores, ``kept`` the kept
    count per query (the same for every setting). Then every metric (``kinds``, ``mks``,
    ``levels``, as :func:`ranking_metrics`) of judged query ``judged[q]`` (-1: not judged) over
    the document ``codes`` of its first ``depth`` kept positions (< 0: all) goes to
    ``values[w, m, judged[q]]``; a judged query with no segment stays 0 (an empty run's
    value). Blocks of queries run in parallel, each query's settings in turn: a setting orders
    only the positions that can be kept (those scoring at least the lowest new score of the
    previous setting's kept ones: near settings keep near sets). The GIL is released (a sweep
    runs its points' Python on another thread meanwhile)."""
    nq = starts.shape[0]
    nw = wts.shape[0]
    kept, at, longest = kept_offsets(counts, top_k)
    longest = max(longest, 1)
    positions = np.empty((nw, at[nq]), dtype=np.int32)
    ordered = np.empty((nw, at[nq]), dtype=np.float64)
    values = np.zeros((nw, kinds.shape[0], q_offsets.shape[0] - 1), dtype=np.float64)
    blocks = max(1, min(nq, 64))
    for blk in prange(blocks):
        seg = np.empty(longest, dtype=np.float64)
        cand = np.empty(longest, dtype=np.float64)
        where = np.empty(longest, dtype=np.int64)
        top = np.empty(longest, dtype=np.int64)
        head = np.empty(longest, dtype=np.float64)
        idx, stack, fbuf, keys, keys2, idx2, hist = segment_scratch(longest)
        for q in range(blk * nq // blocks, (blk + 1) * nq // blocks):
            s = starts[q]
            n = counts[q]
            keep = kept[q]
            for w in range(nw):
                for i in range(n):
                    if rrf:
                        seg[i] = blend_rrf(p1[s + i], p2[s + i], has_t[s + i], has_v[s + i],
                                           ks[w], wts[w], wvs[w])
                    else:
                        seg[i] = blend_linear(p1[s + i], p2[s + i], wts[w], wvs[w])
                # the previous setting's kept positions score at least t now, so the keep-th
                # best score does too: only positions scoring t or more can be kept (in
                # position order, so ties still order by position)
                m = 0
                if w > 0 and 0 < keep < n:
                    t = seg[top[0]]
                    for i in range(1, keep):
                        t = min(t, seg[top[i]])
                    for i in range(n):
                        if not seg[i] < t:  # NaN too: ordered as the full sort orders it
                            cand[m] = seg[i]
                            where[m] = i
                            m += 1
                if keep <= m < n:  # (the previous kept are all there: m >= keep)
                    order_segment(cand, 0, m, keep, idx, stack, fbuf, keys, keys2, idx2, hist)
                    for i in range(keep):
                        top[i] = where[idx[i]]
                else:
                    order_segment(seg, 0, n, keep, idx, stack, fbuf, keys, keys2, idx2, hist)
                    for i in range(keep):
                        top[i] = idx[i]
                for i in range(keep):
                    positions[w, at[q] + i] = s + top[i]
                    ordered[w, at[q] + i] = seg[top[i]]
                j = judged[q]
                if j < 0:
                    continue
                h = keep if depth < 0 else min(keep, depth)
                for i in range(h):
                    head[i] = codes[s + top[i]]
                for mi in range(kinds.shape[0]):
                    values[w, mi, j] = _one(head, 0, h, q_codes, q_grades, q_offsets[j],
                                            q_offsets[j + 1], kinds[mi], mks[mi], levels[mi])
    return positions, kept.astype(np.int32), ordered, values
