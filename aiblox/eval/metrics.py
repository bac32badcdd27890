"""Ranking metrics through ranx (imported lazily: it compiles with numba on first use).

ranx orders a run by score and breaks ties its own way, so the run handed to it carries
rank-derived scores (``n - rank``): ranx then scores exactly the ranked list aiblox produced,
with aiblox's tie-break (score desc, id asc). Queries judged in the qrels but with nothing
retrieved score 0.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["DEFAULT_METRICS", "evaluate_run", "ranked_run", "setup_numba_cache"]

DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@100", "mrr@10", "map@100")


def setup_numba_cache() -> str:
    """Point numba's cache at a stable folder (``$NUMBA_CACHE_DIR`` or ``~/.cache/aiblox/numba``)
    so ranx's compiled kernels are reused across processes."""
    path = os.environ.get("NUMBA_CACHE_DIR") or str(Path.home() / ".cache" / "aiblox" / "numba")
    os.environ["NUMBA_CACHE_DIR"] = path
    Path(path).mkdir(parents=True, exist_ok=True)
    return path


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

    Returns ``(means, per_query)`` with ``per_query[metric][qid]``.
    """
    setup_numba_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba type-safety chatter from inside ranx
        from ranx import Qrels, Run, evaluate

        judged = {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items() if docs}
        scores = ranked_run(run)
        run_dict = {q: scores.get(q, {}) for q in judged}
        r = Run.from_dict(run_dict)
        means = evaluate(Qrels.from_dict(judged), r, list(metrics), make_comparable=True)
    if isinstance(means, float | int) or not isinstance(means, dict):
        means = {metrics[0]: means}
    per_query = {m: {q: float(v) for q, v in sorted(r.scores[m].items())} for m in metrics}
    return {m: float(v) for m, v in means.items()}, per_query
