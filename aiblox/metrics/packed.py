"""Metric values as named arrays: what a sweep's ranking-metrics stage stores and hashes.

:func:`pack_metrics` holds metric names, query ids, the mean of each metric and the per-query
matrix; :func:`packed_means` and :func:`unpack_metrics` give the ``{metric: mean}`` and
``{"means", "per_query"}`` dictionaries back (the same floats). A few milliseconds cheaper a
split than canonical JSON of the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["pack_metrics", "packed_means", "unpack_metrics"]


def pack_metrics(metrics: Sequence[str], qids: Sequence[str] | np.ndarray, means: Sequence[float],
                 per_query: np.ndarray) -> dict[str, np.ndarray]:
    """Metric values as named arrays: metric names, query ids, the mean of each metric, and
    ``per_query[i, j]`` for metric ``i``, query ``j``."""
    return {"metrics": np.asarray(list(metrics), dtype=np.str_),
            "qids": (qids if isinstance(qids, np.ndarray) and qids.dtype.kind == "U"
                     else np.asarray(list(qids), dtype=np.str_)),
            "means": np.asarray(means, dtype=np.float64).reshape(len(metrics)),
            "per_query": np.asarray(per_query, dtype=np.float64).reshape(len(metrics),
                                                                        len(qids))}


def packed_means(arrays: Mapping[str, np.ndarray]) -> dict[str, float]:
    """``{metric: mean}`` of :func:`pack_metrics` arrays (no per-query dictionaries built)."""
    return dict(zip(arrays["metrics"].tolist(), arrays["means"].tolist(), strict=True))


def unpack_metrics(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """``{"means": {metric: value}, "per_query": {metric: {qid: value}}}`` of
    :func:`pack_metrics` arrays (the same floats)."""
    qids = arrays["qids"].tolist()
    return {"means": packed_means(arrays),
            "per_query": {m: dict(zip(qids, row, strict=True))
                          for m, row in zip(arrays["metrics"].tolist(),
                                            arrays["per_query"].tolist(), strict=True)}}
