"""Which untuned pipeline should a user with new data start from? A fixed list of candidates
against today's hybrid default (``bm25 + dense``, RRF k 60) on every shared collection.

The candidates and the rule that picks one were fixed before any of them was run here (this
module's first commit): every pipeline is untuned (published or neutral settings, no parameter
fitted to any collection), and the recommendation is the candidate whose *worst* difference to
RRF k 60 over the six collections is largest (maximin; ties broken by the mean difference),
and the note says whether that worst difference is at least 0, i.e. whether the pick is at
least as good as RRF k 60 on every collection.

That pick is made on the very queries it is reported on. What a user with *new* data gets is
measured leave-one-collection-out (the second table): for each collection, the same rule picks
on the other five alone, and the pick's difference to RRF k 60 is read on the held-out one, the
only collection it was not chosen on.

Quality: nDCG@10 on each collection's test split (scifact:
its 300 test queries; the others: their one judged split), the difference to RRF k 60 with its
95% paired bootstrap interval (1,000 resamples, seed 0), the paired t-test's p and W/T/L. Cost:
seconds per query of the whole pipeline (median of ``--repeat`` runs over the split, indexes
loaded, query vectors cached), beside RRF's.

all-MiniLM-L6-v2 throughout (vectors imported from ``../shared/embeddings``), BM25 k1 1.2,
b 0.75, every run 100 deep, in the default store the sweeps use. Each candidate is one
``aiblox eval DATASET --pipeline EXPR`` away:

    python benchmarks/recommended_pipeline.py [--datasets scifact,adi] [--repeat 3] [--markdown]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import arg_parser, environment_line, err, paired_delta, positive_int, print_table  # noqa: E402

from aiblox.data import load_dataset  # noqa: E402
from aiblox.engine.evaluate import evaluate_retrieval  # noqa: E402
from aiblox.engine.workspace import open_workspace  # noqa: E402

DATASETS = ["scifact", "cranfield", "cisi", "medline", "adi", "vaswani"]
PRIMARY = "ndcg@10"
METRICS = [PRIMARY, "recall@100"]
BASELINE = "rrf"
CANDIDATES: dict[str, str] = {
    "rrf": "bm25 + dense",
    "minmax": 'fuse(bm25, dense, blend="linear", normalize="minmax", weights=(0.5, 0.5))',
    "zscore": 'fuse(bm25, dense, blend="linear", normalize="zscore", weights=(0.5, 0.5))',
    "bo1_rrf": "(bm25 >> bo1 >> bm25) + dense",
    "bo1_minmax": 'fuse(bm25 >> bo1 >> bm25, dense, blend="linear", normalize="minmax", '
                  'weights=(0.5, 0.5))',
    "rrf3_bo1": "bm25 + (bm25 >> bo1 >> bm25) + dense",
    "rescore_0.5": "bm25 >> dense_rescore(alpha=0.5)",
}
"""Name -> pipeline expression (``aiblox eval --pipeline``). Linear blends weigh both runs
0.5 after per-query normalisation (min-max: the best document 1, the 100th 0; z-score); Bo1 at
Terrier's defaults (3 documents, 10 terms); ``dense_rescore`` reorders BM25's top 100 by
0.5 x its min-max BM25 score + 0.5 x MiniLM's min-max cosine."""


def measure(name: str, repeat: int) -> dict[str, Any]:
    ds = load_dataset(name)
    ws = open_workspace(ds, None, "minilm", progress=False)
    try:
        out: dict[str, Any] = {"name": name, "mean": {}, "per": {}, "cost": {}}
        for key, expr in CANDIDATES.items():
            times = []
            for _ in range(repeat + 1):  # the first run fills caches: not timed
                t0 = time.perf_counter()
                res = evaluate_retrieval(ws, ds, "test", metrics=METRICS, pipeline=expr,
                                         progress=False)
                times.append(time.perf_counter() - t0)
            out["mean"][key] = res.metrics
            out["per"][key] = res.per_query[PRIMARY]
            out["cost"][key] = statistics.median(times[1:]) / res.n_queries
            out["queries"] = res.n_queries
        return out
    finally:
        ws.close()


def maximin(worst: dict[str, tuple[float, float]]) -> str:
    """The candidate with the largest worst difference (ties: the larger mean, then the first
    name in sorted order)."""
    return max(sorted(worst), key=lambda k: worst[k])


def held_out(results: list[dict[str, Any]]) -> list[list[str]]:
    """Leave-one-collection-out: per collection, the maximin pick over the *other* collections
    and its difference to RRF k 60 on this one (with the 95% interval, p and W/T/L)."""
    deltas = {r["name"]: {key: paired_delta(r["per"][BASELINE], r["per"][key])
                          for key in CANDIDATES if key != BASELINE} for r in results}
    rows = []
    for r in results:
        others = [n for n in deltas if n != r["name"]]
        worst = {key: (min(deltas[n][key][0] for n in others),
                       statistics.fmean(deltas[n][key][0] for n in others))
                 for key in deltas[r["name"]]}
        pick = maximin(worst)
        d, lo, hi, p, wtl = deltas[r["name"]][pick]
        rows.append([r["name"], pick, f"{worst[pick][0]:+.4f}", f"{d:+.4f}",
                     f"[{lo:+.4f}, {hi:+.4f}]", p, wtl])
    return rows


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
    rows, worst = [], {}
    for key, expr in CANDIDATES.items():
        diffs = []
        for r in results:
            m, base = r["mean"][key][PRIMARY], r["mean"][BASELINE][PRIMARY]
            if key == BASELINE:
                cells = ["", "", "", ""]
            else:
                d, lo, hi, p, wtl = paired_delta(r["per"][BASELINE], r["per"][key])
                diffs.append(d)
                cells = [f"{d:+.4f}", f"[{lo:+.4f}, {hi:+.4f}]", p, wtl]
            rows.append([key, f"`{expr}`", r["name"], str(r["queries"]), f"{base:.4f}",
                         f"{m:.4f}", *cells,
                         f"{r['mean'][key]['recall@100']:.4f}",
                         f"{r['cost'][key]:.5f} ({r['cost'][BASELINE]:.5f})"])
        if diffs:
            worst[key] = (min(diffs), statistics.fmean(diffs))
    pick = maximin(worst)
    verdict = ("at least RRF k 60's nDCG@10 on every collection" if worst[pick][0] >= 0 else
               f"below RRF k 60 somewhere (worst {worst[pick][0]:+.4f}): no candidate is at "
               f"least as good everywhere")
    print_table(
        "Untuned pipelines against the hybrid default (RRF k 60): nDCG@10 on each collection",
        ["candidate", "pipeline", "collection", "queries", "RRF k 60", "candidate nDCG@10",
         "delta", "95% CI", "p", "W/T/L", "R@100", "s/query (RRF)"],
        rows, args.markdown,
        right=["queries", "RRF k 60", "candidate nDCG@10", "delta", "p", "R@100",
               "s/query (RRF)"],
        notes=[environment_line(),
               "worst / mean delta over the collections: " + ", ".join(
                   f"{k} {w:+.4f} / {m:+.4f}" for k, (w, m) in worst.items()),
               f"maximin pick: {pick}, {verdict}"])
    if len(results) > 2:
        loco = held_out(results)
        print_table(
            "Leave one collection out: the maximin pick on the other collections, read on this one",
            ["held-out collection", "pick on the others", "its worst delta there",
             "delta here", "95% CI", "p", "W/T/L"],
            loco, args.markdown, right=["its worst delta there", "delta here", "p"],
            notes=["worst / mean held-out delta: "
                   f"{min(float(row[3]) for row in loco):+.4f} / "
                   f"{statistics.fmean(float(row[3]) for row in loco):+.4f}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
