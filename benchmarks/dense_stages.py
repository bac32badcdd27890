"""Dense feedback (``rocchio``) and the dense model as a rescorer (``dense_rescore``), untuned, on
the shared collections: their effect on quality and their cost in seconds per query.

For each collection's test split (scifact: its 300 test queries; the others: their one judged
split), with all-MiniLM-L6-v2 (document and query vectors imported from ``../shared/embeddings``
into the store's embedding cache, so the model is not run, except for the live-embedding column)
in the same default store the sweeps use:

- ``dense`` (exact cosine, top 100) and ``dense >> rocchio >> dense`` with the paper's setting
  (Li et al. 2021: k 5, alpha 0.4, beta 0.6);
- ``bm25`` (k1 1.2, b 0.75, top 100), the hybrid default ``bm25 + dense`` (RRF k 60, top 100),
  and ``bm25 >> dense_rescore(top_n=100)`` (alpha 1: MiniLM's cosine alone reorders BM25's top
  100);
- each difference (the stage's pipeline minus the one it is compared with) with its 95% paired
  bootstrap interval over queries (1,000 resamples, seed 0; ``aiblox.metrics.bootstrap_ci``
  of the per-query differences), the paired t-test's p and win/tie/loss;
- cost in seconds per query: the median of ``--repeat`` timed runs over all the split's queries
  (indexes loaded, compiled code warm, query vectors read from the embedding cache) divided by
  the number of queries; ``stage``: the stage alone (``rocchio``: the query vectors, the
  documents' vectors and their combination, not the second search; ``dense_rescore``: the query
  vectors and the similarities); ``pipeline``: the whole pipeline with the stage
  (``dense >> rocchio >> dense``, ``bm25 >> dense_rescore``), beside the pipeline it is compared
  with. The note under the table gives what embedding a query with the model itself costs on
  this machine (the collection's first 50 queries, one batch, the median of at most 3 runs),
  paid by every dense step whose query is not cached.

    python benchmarks/dense_stages.py [--datasets scifact,adi] [--repeat 3] [--markdown]

The sweeps ``evals/sweeps/<collection>_dense_prf.toml`` and ``<collection>_dense_rescore.toml``
score the same pipelines (and choose their parameters on train or by cross-validation); their
untuned points' values equal the ones printed here.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import arg_parser, environment_line, err, paired_delta, positive_int, print_table  # noqa: E402

from aiblox.contracts.retrieval import FtsConfig, VectorConfig  # noqa: E402
from aiblox.data import load_dataset  # noqa: E402
from aiblox.engine import Queries, Run, StageContext, StageInputs  # noqa: E402
from aiblox.engine.builtin import FuseConfig  # noqa: E402
from aiblox.engine.plan import fuse_runs  # noqa: E402
from aiblox.engine.registry import get_stage_kind  # noqa: E402
from aiblox.engine.retrieval import retrieve  # noqa: E402
from aiblox.engine.workspace import open_workspace  # noqa: E402
from aiblox.metrics import evaluate_run  # noqa: E402

DATASETS = ["scifact", "cranfield", "cisi", "medline", "adi", "vaswani"]
METRICS = ["ndcg@10", "map@100", "recall@100"]
PRIMARY = "ndcg@10"
ROWS = [("rocchio", "dense", "prf", "dense"),
        ("dense_rescore", "bm25", "rescore", "bm25"),
        ("dense_rescore", "rrf", "rescore", "bm25 + dense (RRF k 60)")]
"""(stage, the run it is compared with, the run with the stage, how the table names the
former)."""


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    """``fn()``'s result and the median of ``repeat`` timings in seconds."""
    out, times = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def stage(name: str, params: dict[str, Any], queries: Queries, run: Run,
          ctx: StageContext) -> Any:
    kind = get_stage_kind(name)
    return kind.compute(kind.make_config(params), StageInputs(queries, queries, run), ctx)


def compare(a: dict[str, float], b: dict[str, float]) -> list[str]:
    """``b - a`` as table cells: the mean difference, its interval, p and W/T/L."""
    mean, lo, hi, p, wtl = paired_delta(a, b)
    return [f"{mean:+.4f}", f"[{lo:+.4f}, {hi:+.4f}]", p, wtl]


def measure(name: str, repeat: int) -> dict[str, Any]:
    ds = load_dataset(name)
    ws = open_workspace(ds, None, "minilm", progress=False)
    try:
        ctx = StageContext(ws)
        topics = Queries.of(ds.split_queries("test"))
        qrels = ds.qrels["test"]
        vc, fc = VectorConfig(top_k=100), FtsConfig(top_k=100)
        retrieve("dense", vc, topics, ctx), retrieve("bm25", fc, topics, ctx)  # warm
        dense, t_dense = timed(lambda: retrieve("dense", vc, topics, ctx), repeat)
        bm25, t_bm25 = timed(lambda: retrieve("bm25", fc, topics, ctx), repeat)
        moved, t_rocchio = timed(lambda: stage("rocchio", {}, topics, dense, ctx), repeat)
        prf, t_dense2 = timed(lambda: retrieve("dense", vc, moved, ctx), repeat)
        rrf, t_fuse = timed(lambda: fuse_runs([bm25, dense], FuseConfig(top_k=100)), repeat)
        rescored, t_rescore = timed(
            lambda: stage("dense_rescore", {"top_n": 100}, topics, bm25, ctx), repeat)
        model = ws.embedder.embedder
        sample = list(topics.texts[:50])
        model.embed(sample[:1])  # the model loaded
        _, t_live = timed(lambda: model.embed(sample), min(repeat, 3))
        runs = {"dense": dense, "prf": prf, "bm25": bm25, "rrf": rrf, "rescore": rescored}
        scores = {k: evaluate_run(qrels, r.as_dict(), METRICS) for k, r in runs.items()}
        n = len(topics)
        return {
            "name": name, "queries": len(scores["dense"][1][PRIMARY]),
            "docs": ws.store.count_items(),
            "mean": {k: v[0] for k, v in scores.items()},
            "per": {k: v[1] for k, v in scores.items()},
            "cost": {"dense": t_dense / n, "bm25": t_bm25 / n,
                     "rrf": (t_bm25 + t_dense + t_fuse) / n,
                     "rocchio": t_rocchio / n,
                     "prf_pipeline": (t_dense + t_rocchio + t_dense2) / n,
                     "dense_rescore": t_rescore / n,
                     "rescore_pipeline": (t_bm25 + t_rescore) / n,
                     "live": t_live / len(sample)},
        }
    finally:
        ws.close()


def main() -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    results = []
    for name in args.datasets.split(","):
        err.print(f"[dim]{name} ...[/dim]")
        results.append(measure(name, args.repeat))
    rows = []
    for stage_name, against, with_, label in ROWS:
        for r in results:
            m, p, c = r["mean"], r["per"], r["cost"]
            rows.append([
                stage_name, r["name"], str(r["queries"]), label,
                f"{m[against][PRIMARY]:.4f}", f"{m[with_][PRIMARY]:.4f}",
                *compare(p[against][PRIMARY], p[with_][PRIMARY]),
                f"{m[against]['map@100']:.4f} -> {m[with_]['map@100']:.4f}",
                f"{m[against]['recall@100']:.4f} -> {m[with_]['recall@100']:.4f}",
                f"{c[stage_name]:.5f}", f"{c[with_ + '_pipeline']:.5f} ({c[against]:.5f})"])
    print_table(
        "Dense feedback and dense rescoring, untuned: nDCG@10 on each collection's test split",
        ["stage", "collection", "queries", "against", "its nDCG@10", "with the stage", "delta",
         "95% CI", "p", "W/T/L", "MAP@100 (against -> stage)", "R@100 (against -> stage)",
         "stage s/query", "pipeline s/query (against)"],
        rows, args.markdown,
        right=["queries", "its nDCG@10", "with the stage", "delta", "p", "stage s/query",
               "pipeline s/query (against)"],
        notes=[environment_line() + "; live query embedding (all-MiniLM-L6-v2, not cached) "
               "s/query: " + ", ".join(f"{r['name']} {r['cost']['live']:.4f}"
                                      for r in results)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
