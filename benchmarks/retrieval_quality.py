"""Retrieval quality on the shared test collections, next to the published figures.

For each dataset (scifact, cranfield, medline; with ``--all`` also cisi, adi, vaswani) the
test split is scored with ranx in three modes on a fresh DuckDB file: BM25 (the index engine:
Snowball stemmer, English stop words, title + text, k1 1.2, b 0.75, bm25s's scoring), dense
(all-MiniLM-L6-v2, vectors imported from ``../shared/embeddings``) and hybrid (default RRF,
k = 60). Each row shows the published nDCG@10 from ``../shared/datasets/README.md`` and,
where issue 2 sets one, the quality bar with PASS or FAIL. The exit status is 1 when any bar fails.

    python benchmarks/retrieval_quality.py [--all] [--markdown] [--db-dir DIR]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import arg_parser, environment_line, err, open_quiet_store, print_table

from aiblox.contracts import RetrievalPrefs
from aiblox.data import load_dataset
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.engine.evaluate import EvalResult, evaluate_retrieval
from aiblox.engine.workspace import find_precomputed_vectors, prepare_store
from aiblox.retrieval import HybridRetriever

DEFAULT_DATASETS = ("scifact", "cranfield", "medline")
EXTRA_DATASETS = ("cisi", "adi", "vaswani")
MODES = ("bm25", "dense", "hybrid")

# nDCG@10 on the test split, from ../shared/datasets/README.md. bm25s: the reference runs
# there (bm25s 0.3.16, Snowball stemmer, English stop words, title + text, k1=1.2, b=0.75).
BM25S_REFERENCE = {"scifact": 0.6791, "cranfield": 0.3695, "cisi": 0.3814, "medline": 0.6986,
                   "adi": 0.4832, "vaswani": 0.4362}
PUBLISHED: dict[tuple[str, str], str] = {
    ("scifact", "bm25"): "0.665 BEIR; 0.679 Anserini; 0.6791 bm25s",
    ("scifact", "dense"): "0.645 MTEB (all-MiniLM-L6-v2)",
    ("scifact", "hybrid"): "0.686-0.713 BM25 + dense fusion",
    **{(name, "bm25"): f"{ref:.4f} bm25s" for name, ref in BM25S_REFERENCE.items()
       if name != "scifact"},
}
MINILM = "all-MiniLM-L6-v2"
"""The model the dense and hybrid figures and bars are about: beside another model's rows they
are left out."""


@dataclass(frozen=True)
class Bar:
    """One quality bar of issue 2: its wording and its test on the measured nDCG@10 values."""

    text: str
    check: Callable[[dict[tuple[str, str], float]], bool]


BARS: dict[tuple[str, str], Bar] = {
    ("scifact", "bm25"): Bar(">= 0.66", lambda s: s["scifact", "bm25"] >= 0.66),
    ("scifact", "dense"): Bar("0.645 ± 0.01", lambda s: abs(s["scifact", "dense"] - 0.645) <= 0.01),
    ("scifact", "hybrid"): Bar("> bm25 and > dense", lambda s: s["scifact", "hybrid"] > max(
        s["scifact", "bm25"], s["scifact", "dense"])),
    ("cranfield", "bm25"): Bar(">= 0.36", lambda s: s["cranfield", "bm25"] >= 0.36),
    ("medline", "bm25"): Bar(">= 0.68", lambda s: s["medline", "bm25"] >= 0.68),
}


def score_dataset(name: str, db_path: Path, embedder_name: str
                  ) -> tuple[list[EvalResult], str]:
    """Ingest ``name`` into ``db_path`` (vectors from the shared cache) and score every mode;
    the results and the embedder's model id."""
    t0 = time.perf_counter()
    ds = load_dataset(name, splits=["test"])
    store = open_quiet_store(db_path)
    try:
        emb = CachedEmbedder(get_embedder(embedder_name), store, progress=False)
        if not find_precomputed_vectors(ds, emb.model_id):
            err.print(f"[yellow]{name}: no precomputed vectors; embedding with the model[/yellow]")
        report = prepare_store(store, ds, emb, progress=False)
        if report.embedding_cache_misses:
            err.print(f"[yellow]{name}: {report.embedding_cache_misses} documents embedded live"
                      "[/yellow]")
        err.print(f"{name}: {len(ds.corpus)} docs, {len(ds.qrels['test'])} test queries, "
                  f"ingested in {time.perf_counter() - t0:.1f} s")
        retriever = HybridRetriever(store, emb)
        results = []
        for mode in MODES:
            prefs = RetrievalPrefs(query_text="", mode=mode, top_k_items=100)  # type: ignore[arg-type]
            r = evaluate_retrieval(retriever, ds, "test", prefs, progress=False)
            err.print(f"  {mode:6s} nDCG@10 {r.metrics['ndcg@10']:.4f}  "
                      f"({r.timings['retrieve_s']:.1f} s retrieval, "
                      f"{r.timings['score_s']:.1f} s ranx)")
            results.append(r)
        return results, emb.model_id
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--all", action="store_true",
                    help=f"also score {', '.join(EXTRA_DATASETS)}")
    ap.add_argument("--datasets", help="comma-separated dataset names (overrides --all)")
    ap.add_argument("--db-dir", help="keep the DuckDB files here (<name>.duckdb; reused, only "
                                     "what is missing is ingested) instead of a temp folder")
    ap.add_argument("--embedder", default="minilm", help="embedder name (default minilm)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    names = (args.datasets.split(",") if args.datasets
             else [*DEFAULT_DATASETS, *(EXTRA_DATASETS if args.all else ())])

    t0 = time.perf_counter()
    scores: dict[tuple[str, str], float] = {}
    results: list[EvalResult] = []
    model_ids: list[str] = []
    with tempfile.TemporaryDirectory(prefix="aiblox-bench-") as tmp:
        db_dir = Path(args.db_dir) if args.db_dir else Path(tmp)
        db_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            scored, model = score_dataset(name, db_dir / f"{name}.duckdb", args.embedder)
            model_ids += [model] if model not in model_ids else []
            for r in scored:
                results.append(r)
                scores[name, r.mode] = r.metrics["ndcg@10"]

    # the published dense and hybrid figures and their bars are MiniLM's
    minilm = bool(model_ids) and all(m.split("/")[-1] == MINILM for m in model_ids)
    bars = {k: b for k, b in BARS.items() if minilm or k[1] == "bm25"}
    rows, failed = [], 0
    for r in results:
        key = (r.dataset, r.mode)
        bar = bars.get(key)
        verdict = "—"
        if bar is not None:
            ok = bar.check(scores)
            failed += not ok
            verdict = "PASS" if ok else "FAIL"
        ref = BM25S_REFERENCE.get(r.dataset) if r.mode == "bm25" else None
        rows.append([r.dataset, r.mode, str(r.n_queries), f"{r.metrics['ndcg@10']:.4f}",
                     f"{r.metrics['recall@100']:.4f}",
                     f"{r.metrics['ndcg@10'] - ref:+.4f}" if ref is not None else "",
                     PUBLISHED.get(key, "") if minilm or r.mode == "bm25" else "",
                     bar.text if bar else "", verdict])
    columns = ["dataset", "mode", "queries", "nDCG@10", "R@100", "Δ bm25s", "published nDCG@10",
               "bar (issue 2)", "result"]
    notes = [f"Measured {environment_line()}; {time.perf_counter() - t0:.0f} s in all.",
             "bm25: the index engine (bm25s's scoring; Snowball, English stop words, title + "
             "text, k1=1.2, b=0.75); "
             f"dense: {', '.join(model_ids)} cosine, exact; hybrid: RRF k=60, equal weights, "
             "top 100 from each list."
             + ("" if minilm else f" Published dense and hybrid figures and their bars are "
                f"{MINILM}'s: not shown."),
             f"Quality bars: {len(bars) - failed}/{len(bars)} PASS."
             if all(k in scores for k in bars) else
             f"Quality bars measured: {sum(1 for k in bars if k in scores)}; failed: {failed}."]
    print_table("Retrieval quality, test splits (ranx)", columns, rows, args.markdown,
                right=("queries", "nDCG@10", "R@100", "Δ bm25s"), notes=notes)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
