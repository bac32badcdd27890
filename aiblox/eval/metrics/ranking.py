"""Ranking metrics: ranx's numbers, for one run or for many runs over the same qrels.

:func:`evaluate_run` (the one-shot eval, chunk eval and the notebooks) and the sweep's metrics
stage both score through :class:`QrelsScorer`, so every ranking number aiblox prints comes from
one route.

ranx orders a run by score and breaks ties its own way, so the run handed to it carries
rank-derived scores (``n - rank``, as :func:`ranked_run` gives): ranx then scores exactly the
ranked list aiblox produced, with aiblox's tie-break (score desc, id asc). Queries judged in the
qrels but with nothing retrieved score 0.

ranx's documented route turns qrels and run into ``Qrels``/``Run`` objects (numba typed
dictionaries, then sorted typed lists) on every call, which costs most of a second on a few
hundred queries, and several seconds of compilation in every new process. ``ranx.evaluate``
also accepts the typed lists themselves: :class:`QrelsScorer` builds the qrels list once and each
run's list directly, then calls ``ranx.evaluate``: judged documents are mapped to exact small
integers (instead of ranx's float-cast string hashes), every unjudged one to -1 (ranx's metrics
only ever match run documents against judged ones). The numbers are ranx's;
``tests/eval/test_ranking_metrics.py`` holds them equal to the ``Qrels``/``Run`` route.

:meth:`QrelsScorer.evaluate_packed` scores a run already in compact form (per kept hit its
document's code from :meth:`QrelsScorer.codes`, per query the number of hits; the run list is
built by a compiled kernel, :mod:`aiblox.eval.metrics.kernels`): the sweep's hot path, which
never turns a fused run back into strings.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aiblox.compiled import setup_numba_cache
from aiblox.eval.metrics.names import validate_metrics
from aiblox.eval.metrics.packed import pack_metrics, unpack_metrics

__all__ = ["DEFAULT_METRICS", "QrelsScorer", "evaluate_run", "ranked_run"]

DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@100", "mrr@10", "map@100")


def ranked_run(run: Mapping[str, Sequence[tuple[str, float]]]) -> dict[str, dict[str, float]]:
    """``{qid: [(doc, score), ...]}`` (best first) to ranx scores that encode the order."""
    out: dict[str, dict[str, float]] = {}
    for qid, hits in run.items():
        n = len(hits)
        out[qid] = {doc: float(n - i) for i, (doc, _s) in enumerate(hits)}
    return out


def evaluate_run(qrels: Mapping[str, Mapping[str, int]],
                 run: Mapping[str, Sequence[tuple[str, float]]],
                 metrics: Sequence[str] = DEFAULT_METRICS,
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query values of ``metrics`` (any ranx metric name) over the judged queries.

    Returns ``(means, per_query)`` with ``per_query[metric][qid]``. Each query's hits are taken
    best first (a document listed twice counts once, at its best rank).
    """
    metrics = validate_metrics(metrics)
    judged = {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items() if docs}
    hits: dict[str, list[tuple[str, float]]] = {}
    for q in judged:
        seen: set[str] = set()
        kept: list[tuple[str, float]] = []
        for d, s in run.get(q, ()):
            if d not in seen:
                seen.add(d)
                kept.append((d, s))
        hits[q] = kept
    return QrelsScorer(judged).evaluate(hits, list(metrics))


class QrelsScorer:
    """The judged queries of one split (or any qrels), ready to score many runs with
    ``ranx.evaluate`` (see the module doc)."""

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
        from aiblox.eval.metrics.kernels import run_arrays

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
        run = run_arrays(np.ascontiguousarray(codes, dtype=np.float64), offsets)
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
        """``(means, per_query)`` of a run ``{qid: [(doc, score), ...]}`` (best first)."""
        out = unpack_metrics(self.evaluate_packed_run(run, metrics))
        return out["means"], out["per_query"]

    def evaluate_packed_run(self, run: Mapping[str, Sequence[Sequence[Any]]],
                            metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """:meth:`evaluate` as :func:`pack_metrics` arrays."""
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
