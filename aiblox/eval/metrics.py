"""Ranking metrics through ranx (imported lazily: it compiles with numba on first use).

ranx orders a run by score and breaks ties its own way, so the run handed to it carries
rank-derived scores (``n - rank``): ranx then scores exactly the ranked list aiblox produced,
with aiblox's tie-break (score desc, id asc). Queries judged in the qrels but with nothing
retrieved score 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiblox.compiled import setup_numba_cache

__all__ = ["DEFAULT_METRICS", "evaluate_run", "ranked_run", "setup_numba_cache"]

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
    best first (a document listed twice counts once, at its best rank). The scoring runs
    through :class:`aiblox.eval.sweep.split_metrics.SplitMetrics`, which hands ranx its typed
    lists directly: the numbers are ranx's (``tests/sweep/test_split_metrics.py`` holds them to
    ranx's ``Qrels``/``Run`` route), without the numba dictionaries that cost every new process
    several seconds of compilation.
    """
    from aiblox.eval.metric_names import validate_metrics
    from aiblox.eval.sweep.split_metrics import SplitMetrics

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
    return SplitMetrics(judged).evaluate(hits, list(metrics))
