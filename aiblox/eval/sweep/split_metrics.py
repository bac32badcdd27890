"""ranx metrics for many runs over one split's qrels, without rebuilding ranx's dictionaries.

ranx's documented route turns qrels and run into ``Qrels``/``Run`` objects (numba typed
dictionaries, then sorted typed lists) on every call, which costs most of a second on a few
hundred queries, and several seconds of compilation in every new process. ``ranx.evaluate``
also accepts the typed lists themselves:
:class:`SplitMetrics` builds the qrels list once and each run's list directly, then calls
``ranx.evaluate``: judged documents are mapped to exact small integers (instead of ranx's
float-cast string hashes), every unjudged one to -1 (ranx's metrics only ever match run
documents against judged ones), and scores are ``n - rank`` as in
:func:`aiblox.eval.metrics.ranked_run`. The numbers are
ranx's; ``tests/sweep/test_split_metrics.py`` holds them equal to the ``Qrels``/``Run`` route.
:func:`aiblox.eval.metrics.evaluate_run` (the eval runner's metrics) is built on this class.

:meth:`SplitMetrics.evaluate_arrays` scores a run already in compact form (per kept hit its
document's code from :meth:`SplitMetrics.codes`, per query the number of hits): the sweep's
hot path, which never turns a fused run back into strings.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aiblox.eval.metric_names import validate_metrics
from aiblox.eval.metrics import setup_numba_cache

__all__ = ["SplitMetrics", "pack_metrics", "packed_means", "unpack_metrics"]


def pack_metrics(metrics: Sequence[str], qids: Sequence[str], means: Sequence[float],
                 per_query: np.ndarray) -> dict[str, np.ndarray]:
    """A metrics stage output as named arrays (what the sweep stores and hashes): metric names,
    query ids, the mean of each metric, and ``per_query[i, j]`` for metric ``i``, query ``j``.
    A few milliseconds cheaper a split than canonical JSON of the same numbers."""
    return {"metrics": np.asarray(list(metrics), dtype=np.str_),
            "qids": np.asarray(list(qids), dtype=np.str_),
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

    def codes(self, docs: Sequence[str] | np.ndarray) -> np.ndarray:
        """float64 code of each document: its exact small integer when some query judges it,
        else -1 (matches nothing)."""
        get = self._ids.get
        return np.asarray([get(d, -1) for d in docs], dtype=np.float64)

    def evaluate_arrays(self, qids: Sequence[str], codes: np.ndarray, counts: np.ndarray,
                        metrics: Sequence[str]
                        ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Like :meth:`evaluate` for a run in compact form: ``qids`` in run order, ``counts``
        hits per query, ``codes`` each hit's document code (:meth:`codes`), best first."""
        out = unpack_metrics(self.evaluate_packed(qids, codes, counts, metrics))
        return out["means"], out["per_query"]

    def evaluate_packed(self, qids: Sequence[str], codes: np.ndarray, counts: np.ndarray,
                        metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """:meth:`evaluate_arrays` as :func:`pack_metrics` arrays (over the judged queries),
        without building per-query dictionaries: the sweep's hot path."""
        if self._qrels is None:
            return _no_queries(metrics)
        from aiblox.eval.sweep.split_fusion import _kernels

        offsets = np.zeros(len(qids) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        if list(qids) != self.qids:  # judged queries only, in the qrels' order
            at = {q: i for i, q in enumerate(qids)}
            parts_c, parts_n = [], []
            for q in self.qids:
                i = at.get(q)
                if i is None:
                    parts_n.append(0)
                else:
                    parts_c.append(codes[offsets[i]:offsets[i + 1]])
                    parts_n.append(int(offsets[i + 1] - offsets[i]))
            codes = np.concatenate(parts_c) if parts_c else np.zeros(0, dtype=np.float64)
            offsets = np.zeros(len(self.qids) + 1, dtype=np.int64)
            np.cumsum(parts_n, out=offsets[1:])
        run = _kernels().run_arrays(np.ascontiguousarray(codes, dtype=np.float64), offsets)
        return self._packed(run, metrics)

    def _packed(self, run: Any, metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """ranx's per-query scores of a typed-list run (one row per metric, columns in
        :attr:`qids` order) and their means, as :func:`pack_metrics` arrays."""
        validate_metrics(metrics)  # cached: a bad name fails here, never inside ranx
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ranx import evaluate

            # twice when alone: ranx's evaluate(return_mean=False) fails on a single metric name
            names = list(metrics) if len(metrics) > 1 else [metrics[0], metrics[0]]
            try:
                scores = evaluate(self._qrels, run, names, return_mean=False,
                                  save_results_in_run=False)
            except ZeroDivisionError:
                # ranx's bpref divides by the number of relevant documents; whether that
                # raises or leaves a silent 0 depends on numba's thread state, so name it
                unrelevant = [q for q, arr in zip(self.qids, self._qrels or [], strict=True)
                              if not (arr[:, 1] > 0).any()]
                raise ValueError(
                    f"metrics {', '.join(metrics)}: ranx divided by zero; {len(unrelevant)} "
                    f"judged queries have no relevant document (e.g. "
                    f"{', '.join(unrelevant[:3]) or '-'}), for which bpref is undefined: leave "
                    f"bpref out or drop those queries' judgements") from None
        matrix = np.asarray([np.asarray(scores[m], dtype=np.float64) for m in metrics],
                            dtype=np.float64).reshape(len(metrics), len(self.qids))
        return pack_metrics(metrics, self.qids, [float(np.mean(row)) for row in matrix], matrix)

    def evaluate(self, run: Mapping[str, Sequence[Sequence[Any]]], metrics: Sequence[str]
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """``(means, per_query)`` like :func:`aiblox.eval.metrics.evaluate_run`."""
        out = unpack_metrics(self.evaluate_packed_run(run, metrics))
        return out["means"], out["per_query"]

    def evaluate_packed_run(self, run: Mapping[str, Sequence[Sequence[Any]]],
                            metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """:meth:`evaluate` as :func:`pack_metrics` arrays (a pipeline sweep's metrics stage)."""
        if self._qrels is None:
            return _no_queries(metrics)
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
        return self._packed(List(arrays), metrics)


def _no_queries(metrics: Sequence[str]) -> dict[str, np.ndarray]:
    """The metrics of a split with no judged query: every mean 0, no per-query values."""
    return pack_metrics(metrics, [], [0.0] * len(metrics), np.zeros((len(metrics), 0)))
