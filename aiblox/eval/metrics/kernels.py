"""numba kernel of the ranking metrics (:class:`aiblox.eval.metrics.QrelsScorer`), compiled once
and cached in ``NUMBA_CACHE_DIR`` (set before numba is imported).

- :func:`run_arrays`: a ranx run (a numba typed list of ``(n, 2)`` arrays: judged-document code,
  ``n - rank``) built inside compiled code, where appending to a typed list costs nothing.
"""

from __future__ import annotations

import numpy as np

from aiblox.compiled import setup_numba_cache

setup_numba_cache()

from numba import njit  # noqa: E402 - after the cache folder is set
from numba.typed import List  # noqa: E402

__all__ = ["run_arrays"]


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
