"""ranx metrics for many runs over one split's qrels, without rebuilding ranx's dictionaries.

:func:`aiblox.eval.metrics.evaluate_run` turns qrels and run into ranx ``Qrels``/``Run``
objects (numba typed dictionaries, then sorted typed lists) on every call, which costs most of
a second on a few hundred queries. ``ranx.evaluate`` also accepts the typed lists themselves:
:class:`SplitMetrics` builds the qrels list once and each run's list directly, then calls
``ranx.evaluate``: judged documents are mapped to exact small integers (instead of ranx's
float-cast string hashes), every unjudged one to -1 (ranx's metrics only ever match run
documents against judged ones), and scores are ``n - rank`` as in
:func:`aiblox.eval.metrics.ranked_run`. The numbers are
ranx's; ``tests/sweep/test_split_metrics.py`` holds them equal to ``evaluate_run``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aiblox.eval.metrics import setup_numba_cache

__all__ = ["SplitMetrics"]


class SplitMetrics:
    """The judged queries of one split, ready to score runs with ``ranx.evaluate``."""

    def __init__(self, qrels: Mapping[str, Mapping[str, int]]) -> None:
        setup_numba_cache()
        from numba.typed import List

        self.qids = sorted(q for q, docs in qrels.items() if docs)
        self._ids: dict[str, int] = {}
        arrays = []
        for q in self.qids:
            # relevance desc, then id: ranx's own qrels order (the ideal ranking for nDCG)
            items = sorted(((d, int(g)) for d, g in qrels[q].items()), key=lambda x: (-x[1], x[0]))
            arr = np.empty((len(items), 2), dtype=np.float64)
            for i, (d, g) in enumerate(items):
                arr[i, 0] = self._id(d)
                arr[i, 1] = g
            arrays.append(arr)
        self._qrels = List(arrays) if arrays else None

    def _id(self, doc: str) -> int:
        i = self._ids.get(doc)
        if i is None:
            i = self._ids[doc] = len(self._ids)
        return i

    def evaluate(self, run: Mapping[str, Sequence[Sequence[Any]]], metrics: Sequence[str]
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """``(means, per_query)`` like :func:`aiblox.eval.metrics.evaluate_run`."""
        if self._qrels is None:
            return {m: 0.0 for m in metrics}, {m: {} for m in metrics}
        from numba.typed import List

        arrays = []
        get = self._ids.get
        for q in self.qids:
            hits = run.get(q, ())
            n = len(hits)
            arr = np.empty((n, 2), dtype=np.float64)
            # a document absent from the qrels matches nothing, so all share the id -1
            arr[:, 0] = [get(d, -1) for d, _ in hits]
            arr[:, 1] = np.arange(n, 0, -1, dtype=np.float64)
            arrays.append(arr)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ranx import evaluate

            # twice when alone: ranx's evaluate(return_mean=False) fails on a single metric name
            names = list(metrics) if len(metrics) > 1 else [metrics[0], metrics[0]]
            scores = evaluate(self._qrels, List(arrays), names, return_mean=False,
                              save_results_in_run=False)
        per_query = {m: {q: float(v) for q, v in zip(self.qids, scores[m], strict=True)}
                     for m in metrics}
        means = {m: float(np.mean(scores[m])) for m in metrics}
        return means, per_query
