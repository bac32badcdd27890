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
hundred queries, and several seconds of compilation in every new process. :class:`QrelsScorer`
builds the judgements once, judged documents mapped to exact small integers (instead of ranx's
float-cast string hashes), every unjudged one to -1 (ranx's metrics only ever match run
documents against judged ones). ranx's own kernels then walk a typed list per metric; instead,
:func:`~aiblox.metrics.kernels.ranking_metrics` computes every metric of a run in one
compiled pass (hits, hit rate, precision, recall, mrr, map, dcg, nDCG and the Burges forms, at
any ``k`` and relevance level) with ranx's arithmetic in ranx's order, so the doubles are ranx's
bit for bit; f1, r-precision and rbp still go to ``ranx.evaluate`` on the typed lists, and bpref
is trec_eval's, computed here (ranx's is NaN for a query without a judged non-relevant document,
and counts negative grades as judged).
``tests/metrics/test_ranking_metrics.py`` holds every other value equal to the ``Qrels``/``Run``
route, ``tests/data/test_trec_conformance.py`` bpref equal to trec_eval's.

:meth:`QrelsScorer.evaluate_packed` scores a run already in compact form (per kept hit its
document's code from :meth:`QrelsScorer.codes`, per query the number of hits): the sweep's hot
path, which never turns a fused run back into strings.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from aiblox.compiled import setup_numba_cache
from aiblox.data.trec import check_finite_scores, trec_order
from aiblox.fusion import FusedArrays
from aiblox.metrics.names import validate_metrics
from aiblox.metrics.packed import pack_metrics, unpack_metrics

if TYPE_CHECKING:
    from aiblox.contracts.retrieval import ScoringConfig
    from aiblox.fusion import BatchFusion

__all__ = ["DEFAULT_METRICS", "QrelsScorer", "evaluate_run", "ranked_run", "ranks_read",
           "segment_heads"]

DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@100", "mrr@10", "map@100")


def ranked_run(run: Mapping[str, Sequence[tuple[str, float]]]) -> dict[str, dict[str, float]]:
    """``{qid: [(doc, score), ...]}`` (best first) to ranx scores that encode the order."""
    out: dict[str, dict[str, float]] = {}
    for qid, hits in run.items():
        n = len(hits)
        out[qid] = {doc: float(n - i) for i, (doc, _s) in enumerate(hits)}
    return out


def evaluate_run(qrels: Mapping[str, Mapping[str, int]],
                 run: Mapping[str, Sequence[tuple[str, float]] | Mapping[str, float]],
                 metrics: Sequence[str] = DEFAULT_METRICS,
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query values of ``metrics`` (any ranx metric name) over the judged queries.

    Returns ``(means, per_query)`` with ``per_query[metric][qid]``. Each query's hits are taken
    best first (a document listed twice counts once, at its best rank); a query's hits given as
    ``{doc: score}`` (ranx's and pytrec_eval's form) are ranked as trec_eval ranks them
    (:func:`~aiblox.data.trec.trec_order`: score descending, ties by id descending), as
    ``run_experiment`` reads that form; a score there that is not a finite number, or is past
    single precision's range (where scores tie), is a ``ValueError`` naming the query and
    document (a NaN has no place in that order: the result hung on the dict's insertion
    order). ranx's ``Qrels`` and ``Run`` objects are taken as
    their dicts, and query ids as strings (a pandas column gives ``1`` where the qrels say
    ``"1"``); a run that shares no query with the qrels scores 0 everywhere, with a warning.
    """
    metrics = validate_metrics(metrics)
    qrels = qrels.to_dict() if hasattr(qrels, "to_dict") else qrels
    run = run.to_dict() if hasattr(run, "to_dict") else run
    judged = {str(q): {str(d): int(g) for d, g in docs.items()}
              for q, docs in qrels.items() if docs}
    by_id = {str(q): given for q, given in run.items()}
    if judged and by_id and by_id.keys().isdisjoint(judged):
        warnings.warn(f"the run shares no query with the qrels (run: {sorted(by_id)[0]!r}, ...; "
                      f"qrels: {sorted(judged)[0]!r}, ...): every query scores 0", stacklevel=2)
    hits: dict[str, list[tuple[str, float]]] = {}
    for q in judged:
        seen: set[str] = set()
        kept: list[tuple[str, float]] = []
        given = by_id.get(q, ())
        if isinstance(given, Mapping):
            scored = [(str(d), float(s)) for d, s in given.items()]
            check_finite_scores(scored, q, "run")
            given = trec_order(scored)
        for d, s in given:
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
        self._arrays = arrays
        self._typed: Any = None
        self._qid_array: np.ndarray | None = None
        # the same judgements flat, for the compiled metrics (:func:`ranking_metrics`)
        self._q_offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([len(a) for a in arrays], out=self._q_offsets[1:])
        flat = np.concatenate(arrays) if arrays else np.zeros((0, 2), dtype=np.float64)
        self._q_codes = np.ascontiguousarray(flat[:, 0])
        self._q_grades = np.ascontiguousarray(flat[:, 1])

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

    def evaluate_positions(self, qids: Sequence[str], doc_codes: np.ndarray,
                           positions: np.ndarray, counts: np.ndarray,
                           metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """:meth:`evaluate_packed` of the run whose hits are ``doc_codes[positions]`` (a fused
        run's flat positions, ``counts`` per query): only the ranks the metrics read are
        gathered (:func:`ranks_read`: 100 of a 1,000-deep run for ``recall@100``), so the
        numbers are those of the whole run."""
        depth = ranks_read(metrics)
        if depth is not None and counts.size and int(counts.max()) > depth:
            positions, counts = segment_heads(positions, counts, depth)
        return self.evaluate_packed(qids, doc_codes[positions], counts, metrics)

    def evaluate_packed(self, qids: Sequence[str], codes: np.ndarray, counts: np.ndarray,
                        metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """:meth:`evaluate_arrays` as :func:`pack_metrics` arrays (over the judged queries),
        without building per-query dictionaries: the sweep's hot path."""
        if not self._arrays:
            return _no_queries(metrics)
        offsets = np.zeros(len(qids) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        if list(qids) == self.qids:
            starts, lens = offsets[:-1], np.diff(offsets)
        else:  # judged queries only, in the qrels' order; a judged query not run has no hits
            at = {q: i for i, q in enumerate(qids)}
            where = np.asarray([at.get(q, -1) for q in self.qids], dtype=np.int64)
            starts = np.where(where >= 0, offsets[where], 0)
            lens = np.where(where >= 0, offsets[where + 1] - offsets[where], 0)
        codes = np.ascontiguousarray(codes, dtype=np.float64)
        return self._packed_codes(codes, np.ascontiguousarray(starts, dtype=np.int64),
                                  np.ascontiguousarray(lens, dtype=np.int64), metrics)

    def score_fusions(self, index: BatchFusion, cfgs: Sequence[ScoringConfig],
                      top_k: int | None, codes: np.ndarray, metrics: Sequence[str]
                      ) -> list[tuple[FusedArrays, dict[str, np.ndarray] | None]]:
        """Each of ``cfgs`` (one blend of one normalisation and missing rule:
        :meth:`BatchFusion.blend_inputs`) fused over ``index`` and cut to ``top_k``, with its
        :meth:`evaluate_positions` metrics (``codes``: each position's document code): the
        same bytes as :meth:`BatchFusion.fuse_arrays` and :meth:`evaluate_positions` give for
        one setting at a time, in one compiled pass over them all (a sweep's fusion points).
        The metrics are None where one of ``metrics`` is not computed in that pass (f1,
        r-precision, bpref, rbp) or nothing is judged."""
        from aiblox.metrics.kernels import KINDS, fused_metrics

        validate_metrics(metrics)
        parsed = [_parse(m) for m in metrics]
        scored = bool(self._arrays) and all(kind in KINDS for kind, _, _ in parsed)
        own = parsed if scored else []
        rrf, p1, p2 = index.blend_inputs(cfgs[0])
        for c in cfgs[1:]:
            other = index.blend_inputs(c)
            if other[0] != rrf or other[1] is not p1 or other[2] is not p2:
                raise ValueError("score_fusions takes settings of one blend, normalisation "
                                 "and missing-document rule")
        at = {q: i for i, q in enumerate(self.qids)}
        depth = ranks_read(metrics) if scored else 0
        positions, kept, ordered, values = fused_metrics(
            rrf, p1, p2, index.has_t, index.has_v,
            np.asarray([float(c.rrf_k) for c in cfgs], dtype=np.float64),
            np.asarray([float(c.rrf_w_text if rrf else c.w_text) for c in cfgs],
                       dtype=np.float64),
            np.asarray([float(c.rrf_w_vec if rrf else c.w_vec) for c in cfgs],
                       dtype=np.float64),
            index.starts, index.counts, -1 if top_k is None else int(top_k), codes,
            -1 if depth is None else depth,
            np.asarray([at.get(q, -1) if scored else -1 for q in index.qids], dtype=np.int64),
            self._q_codes, self._q_offsets, self._q_grades,
            np.asarray([KINDS[kind] for kind, _, _ in own], dtype=np.int64),
            np.asarray([k for _, k, _ in own], dtype=np.int64),
            np.asarray([level for _, _, level in own], dtype=np.int64))
        return [(FusedArrays(positions[w], kept, ordered[w]),
                 self._packed(metrics, values[w]) if scored else None)
                for w in range(len(cfgs))]

    def _packed(self, metrics: Sequence[str], matrix: np.ndarray) -> dict[str, np.ndarray]:
        """:func:`pack_metrics` of per-query values ``matrix[metric, judged query]``, with
        each metric's mean."""
        if self._qid_array is None:  # the same strings every call: made once
            self._qid_array = np.asarray(self.qids, dtype=np.str_)
        return pack_metrics(metrics, self._qid_array, [float(np.mean(row)) for row in matrix],
                            matrix)

    def _packed_codes(self, codes: np.ndarray, starts: np.ndarray, lens: np.ndarray,
                      metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """The metrics of judged query ``q``'s run ``codes[starts[q]:starts[q] + lens[q]]``
        (best first): ranx's own kernels' numbers, computed by :func:`ranking_metrics` in one
        pass over the run (the metrics it covers), bpref by :meth:`_bpref` (trec_eval's), the
        others (f1, r-precision, rbp) by ranx."""
        from aiblox.metrics.kernels import KINDS, ranking_metrics, run_arrays

        validate_metrics(metrics)  # cached: a bad name fails here, never inside a kernel
        parsed = [_parse(m) for m in metrics]
        own = [i for i, (kind, _, _) in enumerate(parsed) if kind in KINDS]
        matrix = np.zeros((len(metrics), len(self.qids)), dtype=np.float64)
        if own:
            matrix[own] = ranking_metrics(
                codes, starts, lens, self._q_codes, self._q_offsets, self._q_grades,
                np.asarray([KINDS[parsed[i][0]] for i in own], dtype=np.int64),
                np.asarray([parsed[i][1] for i in own], dtype=np.int64),
                np.asarray([parsed[i][2] for i in own], dtype=np.int64))
        for i, (kind, _, level) in enumerate(parsed):
            if kind == "bpref":
                matrix[i] = self._bpref(codes, starts, lens, level)
        rest = [i for i in range(len(metrics)) if i not in own and parsed[i][0] != "bpref"]
        if rest:
            offsets = np.zeros(len(self.qids) + 1, dtype=np.int64)
            np.cumsum(lens, out=offsets[1:])
            flat = (np.concatenate([codes[s:s + n] for s, n in zip(starts, lens, strict=True)])
                    if len(lens) else np.zeros(0, dtype=np.float64))
            run = run_arrays(np.ascontiguousarray(flat, dtype=np.float64), offsets)
            matrix[rest] = self._ranx(run, [metrics[i] for i in rest])
        return self._packed(metrics, matrix)

    def _bpref(self, codes: np.ndarray, starts: np.ndarray, lens: np.ndarray, level: int
               ) -> np.ndarray:
        """trec_eval's bpref (``m_bpref.c``) of each judged query, step for step in its order
        (so the doubles are trec_eval's): walking the run, a relevant document (grade >=
        ``level``) adds 1 - min(n, R) / min(N, R), n the judged non-relevant documents above
        it, or 1 when there are none; the sum is divided by R. Judged non-relevant means a
        grade from 0 to ``level`` - 1: a negative grade counts as unjudged, as in trec_eval.
        With no judged non-relevant document each relevant one retrieved adds 1 (ranx's bpref
        divides 0 by 0 there: NaN on most BEIR collections, which judge only relevant
        documents); with no relevant document the value is 0, as every measure's."""
        out = np.zeros(len(self.qids), dtype=np.float64)
        for q in range(len(self.qids)):
            a, b = self._q_offsets[q], self._q_offsets[q + 1]
            grades = dict(zip(self._q_codes[a:b].tolist(), self._q_grades[a:b].tolist(),
                              strict=True))
            n_rel = sum(g >= level for g in grades.values())
            n_nonrel = sum(0 <= g < level for g in grades.values())
            if not n_rel:
                continue
            total, nonrel_so_far = 0.0, 0
            for code in codes[starts[q]:starts[q] + lens[q]].tolist():
                g = grades.get(code, -1.0)
                if g >= level:
                    total += (1.0 - min(nonrel_so_far, n_rel) / min(n_nonrel, n_rel)
                              if nonrel_so_far > 0 else 1.0)
                elif g >= 0:
                    nonrel_so_far += 1
            out[q] = total / n_rel
        return out

    def _ranx_qrels(self) -> Any:
        """The judgements as ranx's typed list, built on first need (only the metrics ranx
        computes itself need it; building one compiles numba's list methods, ~0.5 s a
        process)."""
        if self._typed is None:
            from numba.typed import List

            self._typed = List(self._arrays)
        return self._typed

    def _ranx(self, run: Any, metrics: Sequence[str]) -> np.ndarray:
        """ranx's per-query scores of a typed-list run (one row per metric, columns in
        :attr:`qids` order). The metrics that come here (f1, r-precision, rbp) give 0 for a
        query with no relevant document; only ranx's bpref divided by zero there, and bpref is
        computed by :meth:`_bpref`."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ranx import evaluate

            # twice when alone: ranx's evaluate(return_mean=False) fails on a single metric name
            names = list(metrics) if len(metrics) > 1 else [metrics[0], metrics[0]]
            scores = evaluate(self._ranx_qrels(), run, names, return_mean=False,
                              save_results_in_run=False)
        return np.asarray([np.asarray(scores[m], dtype=np.float64) for m in metrics],
                          dtype=np.float64).reshape(len(metrics), len(self.qids))

    def evaluate(self, run: Mapping[str, Sequence[Sequence[Any]]], metrics: Sequence[str]
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """``(means, per_query)`` of a run ``{qid: [(doc, score), ...]}`` (best first)."""
        out = unpack_metrics(self.evaluate_packed_run(run, metrics))
        return out["means"], out["per_query"]

    def evaluate_packed_run(self, run: Mapping[str, Sequence[Sequence[Any]]],
                            metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """:meth:`evaluate` as :func:`pack_metrics` arrays."""
        if not self._arrays:
            return _no_queries(metrics)
        get = self._ids.get
        parts = [[get(d, -1) for d, _ in run.get(q, ())] for q in self.qids]
        lens = np.asarray([len(p) for p in parts], dtype=np.int64)
        starts = np.zeros(len(parts), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        # a document absent from the qrels matches nothing, so all share the id -1
        codes = np.asarray([c for p in parts for c in p], dtype=np.float64)
        return self._packed_codes(codes, starts, lens, metrics)


def ranks_read(metrics: Sequence[str]) -> int | None:
    """How deep into a run ``metrics`` look: the largest cutoff when every one is computed by
    :func:`~aiblox.metrics.kernels.ranking_metrics` with a cutoff (``ndcg@10``,
    ``recall@100``: a metric @k reads the first k ranks), else None (the whole run:
    ``map``, ``r-precision``, ``bpref``, ``rbp`` ...)."""
    from aiblox.metrics.kernels import KINDS

    parsed = [_parse(m) for m in metrics]
    if not parsed or any(kind not in KINDS or k <= 0 for kind, k, _ in parsed):
        return None
    return max(k for _, k, _ in parsed)


def segment_heads(positions: np.ndarray, counts: np.ndarray, depth: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The first ``depth`` entries of each query's segment of ``positions`` (segments of
    ``counts`` entries, one after another) and their new counts."""
    heads = np.minimum(counts, depth)
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    new_starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(heads[:-1], out=new_starts[1:])
    take = np.arange(int(heads.sum()), dtype=np.int64) + np.repeat(starts - new_starts, heads)
    return positions[take], heads


def _parse(name: str) -> tuple[str, int, int]:
    """ranx's reading of a metric name (``ndcg@10-l2``): base name, ``k`` (0: all) and
    relevance level (rbp's persistence is not a ``k``: rbp goes to ranx whole)."""
    level = 1
    if "-l" in name:
        name, lvl = name.split("-l")
        level = int(lvl)
    base, _, k = name.partition("@")
    if base.startswith("rbp"):
        return "rbp", 0, level
    return base, int(k) if k else 0, level


def _no_queries(metrics: Sequence[str]) -> dict[str, np.ndarray]:
    """The metrics of a split with no judged query: every mean 0, no per-query values."""
    return pack_metrics(metrics, [], [0.0] * len(metrics), np.zeros((len(metrics), 0)))
