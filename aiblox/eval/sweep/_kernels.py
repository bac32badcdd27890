"""numba kernels for the fusion sweep's hot loop (compiled once, cached in ``NUMBA_CACHE_DIR``).

Loaded through ``split_fusion._kernels()``, which points numba's cache at the stable folder
first, so the compiled code is reused across processes like ranx's own kernels.

- :func:`segment_order`: per query segment of a flat score array, the stable order of its
  positions by score descending, cut to ``top_k``. A stable sort that starts from document-id
  order breaks ties on the id ascending, exactly as ``numpy.lexsort((-scores, segment))`` does,
  at a fraction of its cost (hundreds of small sorts instead of two over the whole array).
- :func:`run_arrays`: a ranx run (a numba typed list of ``(n, 2)`` arrays: judged-document code,
  ``n - rank``) built inside compiled code, where appending to a typed list costs nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

__all__ = ["run_arrays", "segment_order"]


@njit(cache=True)
def segment_order(neg_scores: np.ndarray, starts: np.ndarray, counts: np.ndarray,
                  top_k: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``(positions, kept)``: flat positions, query by query, best first; ``kept[q]`` per query.

    ``neg_scores`` holds minus the fused score (so ascending order is best first); segment ``q``
    is ``neg_scores[starts[q]:starts[q] + counts[q]]``. ``top_k < 0`` keeps every position.
    """
    nq = starts.shape[0]
    kept = counts.copy()
    if top_k >= 0:
        for q in range(nq):
            if kept[q] > top_k:
                kept[q] = top_k
    at = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        at[q + 1] = at[q] + kept[q]
    out = np.empty(at[nq], dtype=np.int64)
    for q in range(nq):
        s = starts[q]
        order = np.argsort(neg_scores[s:s + counts[q]], kind="mergesort")
        for i in range(kept[q]):
            out[at[q] + i] = order[i] + s
    return out, kept


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
