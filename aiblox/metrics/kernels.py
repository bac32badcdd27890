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

__all__ = ["KINDS", "ranking_metrics", "run_arrays"]


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
