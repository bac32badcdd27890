"""Pseudo-relevance feedback, untuned, against BM25 on every shared collection, with its cost.

For each collection (scifact, cranfield, cisi, medline, adi, vaswani; squad is left out: one
relevant paragraph per question, nothing for feedback to find) the test split is retrieved by
default BM25 (k1 1.2, b 0.75, lucene; Snowball stemmer, English stop words, title + text, 100
deep), then expanded and retrieved again by the engine's own stages, at their published
defaults: ``bm25 >> rm3 >> bm25`` (Anserini: fb_docs 10, fb_terms 10, orig_weight 0.5) and
``bm25 >> bo1 >> bm25`` (Terrier/PyTerrier: fb_docs 3, fb_terms 10, parameter-free). Each row
gives nDCG@10, MAP@100 and recall@100, the nDCG@10 difference against BM25 with its 95% paired
bootstrap interval (1,000 resamples of the queries, seed 0) and the paired t-test's p, and the
cost in seconds per query: the feedback stage, the second retrieval (weighted terms through
``BM25Index.search_terms``), and the whole pipeline next to BM25 alone (the fastest of
``--repeat`` timed runs after a warm-up: the machine is shared, the fastest is the least
disturbed; indexes and the term statistics built before, their build time shown apart).
Nothing is tuned: no query's judgements are read before the metrics.

    python benchmarks/feedback_effect.py [--datasets scifact,cranfield] [--markdown]
                                         [--db-dir DIR] [--repeat 5] [--threads 2]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _common import arg_parser, environment_line, err, positive_int, print_table

from aiblox.contracts import FtsConfig
from aiblox.data import load_dataset
from aiblox.engine.data import Queries, Run
from aiblox.engine.plan import StageInputs
from aiblox.engine.retrieval import StageContext, retrieve
from aiblox.engine.stages.bo1 import Bo1Config, bo1
from aiblox.engine.stages.rm3 import Rm3Config, rm3
from aiblox.engine.workspace import open_workspace
from aiblox.indexes.kernels import compiled_threads
from aiblox.metrics import bootstrap_ci, evaluate_run, paired_test

DATASETS = ("scifact", "cranfield", "cisi", "medline", "adi", "vaswani")
METRICS = ["ndcg@10", "map@100", "recall@100"]
FTS = FtsConfig(top_k=100)
STAGES = {"rm3": (rm3, Rm3Config(fts=FTS)), "bo1": (bo1, Bo1Config(fts=FTS))}


def timed(fn, repeat: int):
    """``(result, fastest seconds)`` of ``repeat`` calls after one untimed warm-up."""
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, min(times)


def measure(name: str, db_dir: Path, repeat: int) -> list[dict]:
    ds = load_dataset(name, splits=["test"])
    ws = open_workspace(ds, db=str(db_dir / f"{name}.duckdb"), embedder="hashing",
                        with_vectors=False, progress=False)
    try:
        ctx = StageContext(ws)
        t0 = time.perf_counter()
        index = ctx.indexes.lexical(FTS)
        t_index = time.perf_counter() - t0
        t0 = time.perf_counter()
        ctx.indexes.term_stats(FTS)
        t_stats = time.perf_counter() - t0
        pairs = ds.split_queries("test")
        queries = Queries.of(pairs)
        qrels = ds.qrels["test"]
        nq = len(queries)

        def first() -> Run:
            return Run.from_lists(queries.qids, index.search(list(queries.texts), FTS.top_k))

        run, t_bm25 = timed(first, repeat)
        base_means, base_pq = evaluate_run(qrels, run.as_dict(), METRICS)
        rows = [{"dataset": name, "pipeline": "bm25", "queries": nq, "means": base_means,
                 "s_stage": None, "s_second": None, "s_total": t_bm25 / nq,
                 "s_index": t_index, "docs": index.n_docs}]
        inputs = StageInputs(queries, queries, run)
        for kind, (fn, cfg) in STAGES.items():
            expanded, t_stage = timed(lambda fn=fn, cfg=cfg: fn(cfg, inputs, ctx), repeat)
            second, t_second = timed(lambda e=expanded: retrieve("bm25", FTS, e, ctx), repeat)
            means, pq = evaluate_run(qrels, second.as_dict(), METRICS)
            test = paired_test(base_pq["ndcg@10"], pq["ndcg@10"])
            diff = {q: pq["ndcg@10"][q] - base_pq["ndcg@10"][q] for q in base_pq["ndcg@10"]}
            _, low, high = bootstrap_ci(diff, seed=0)
            terms = sum(len(t) for t in expanded.terms) / nq
            rows.append({"dataset": name, "pipeline": f"bm25 >> {kind} >> bm25", "queries": nq,
                         "means": means, "delta": test.delta, "ci": (low, high),
                         "p": test.p_value, "wtl": (test.wins, test.ties, test.losses),
                         "s_stage": t_stage / nq, "s_second": t_second / nq,
                         "s_total": (t_bm25 + t_stage + t_second) / nq, "s_index": t_stats,
                         "terms": terms, "docs": index.n_docs})
        return rows
    finally:
        ws.store.close()


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--db-dir", default=None,
                    help="where the stores and indexes go (default: a fresh temporary folder, "
                         "so the index builds are measured)")
    ap.add_argument("--repeat", type=positive_int, default=5)
    ap.add_argument("--threads", type=positive_int, default=2,
                    help="numba threads (2: the 2-CPU row)")
    args = ap.parse_args()
    db_dir = Path(args.db_dir or tempfile.mkdtemp(prefix="aiblox-feedback-"))
    db_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with compiled_threads(args.threads):
        for name in args.datasets.split(","):
            err.print(f"{name} ...")
            rows += measure(name, db_dir, args.repeat)
    out = []
    for r in rows:
        m = r["means"]
        fb = "delta" in r
        out.append([
            r["dataset"], r["pipeline"], str(r["queries"]),
            f"{m['ndcg@10']:.4f}", f"{m['map@100']:.4f}", f"{m['recall@100']:.4f}",
            f"{r['delta']:+.4f}" if fb else "",
            f"[{r['ci'][0]:+.4f}, {r['ci'][1]:+.4f}]" if fb else "",
            f"{r['p']:.3f}" if fb else "",
            "/".join(map(str, r["wtl"])) if fb else "",
            f"{r['terms']:.1f}" if fb else "",
            f"{r['s_stage'] * 1e3:.2f}" if fb else "",
            f"{r['s_second'] * 1e3:.2f}" if fb else "",
            f"{r['s_total'] * 1e3:.2f}",
        ])
    print_table("Pseudo-relevance feedback at its defaults vs BM25 (test split)",
                ["collection", "pipeline", "queries", "nDCG@10", "MAP@100", "R@100",
                 "delta nDCG@10", "95% CI", "p", "W/T/L", "terms/query", "feedback ms/q",
                 "2nd bm25 ms/q", "pipeline ms/q"], out, args.markdown,
                right=["queries", "nDCG@10", "MAP@100", "R@100", "delta nDCG@10", "p",
                       "terms/query", "feedback ms/q", "2nd bm25 ms/q", "pipeline ms/q"],
                notes=[environment_line() + f", {args.threads} numba threads",
                       "built once per collection (s): " + "; ".join(
                           f"{r['dataset']} BM25 index {r['s_index']:.2f}, term statistics "
                           f"{s['s_index']:.2f}" for r, s in zip(rows[::3], rows[1::3],
                                                                   strict=True))])


if __name__ == "__main__":
    main()
