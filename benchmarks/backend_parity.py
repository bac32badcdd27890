"""Every retrieval engine on DuckDB and on PostgreSQL: nDCG@10, recall@100, speed, parity.

The same dataset (default SciFact test) and the same retrieval settings run on a fresh DuckDB
file and on a fresh PostgreSQL database (``--pg-url``, else ``AIBLOX_PG_URL``, else a throwaway
PostgreSQL 16 + pgvector from the ``pgserver`` wheel). Vectors come from ``../shared/embeddings``
(all-MiniLM-L6-v2) through each store's embedding cache, so both backends rank the same vectors.

Printed: one row per engine a user can pick (:data:`ENGINES`: the default index engines,
faiss HNSW, and the stores' native full-text and vector search), each with its nDCG@10,
recall@100 and queries per second on both stores, and whether the two stores return the same
ranked lists (the index engines must: they are built from the same items and vectors).

    python benchmarks/backend_parity.py [--dataset scifact] [--pg-url URL] [--markdown]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
from _common import arg_parser, environment_line, err, open_quiet_store, print_table

from aiblox.contracts import FtsConfig, RetrievalPrefs, VectorConfig
from aiblox.data import load_dataset
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.engine.evaluate import EvalResult, evaluate_retrieval
from aiblox.engine.workspace import prepare_store
from aiblox.fusion.types import RankedList
from aiblox.retrieval import HybridRetriever


def rbo(s: list[str], t: list[str], p: float = 0.9, depth: int = 10) -> float:
    """Extrapolated rank-biased overlap of two rankings cut at ``depth`` (Webber, Moffat and
    Zobel 2010, eq. 32): 1.0 for identical lists, 0.0 for disjoint ones."""
    k = min(depth, max(len(s), len(t)))
    if k == 0:
        return 1.0
    x = [len(set(s[:d]) & set(t[:d])) for d in range(1, k + 1)]
    total = sum(x[d - 1] / d * p ** d for d in range(1, k + 1))
    return x[k - 1] / k * p ** k + (1 - p) / p * total


def jaccard(s: list[str], t: list[str], depth: int = 10) -> float:
    """|top-k(s) ∩ top-k(t)| / |top-k(s) ∪ top-k(t)| (1.0 when both are empty)."""
    a, b = set(s[:depth]), set(t[:depth])
    return 1.0 if not a | b else len(a & b) / len(a | b)


def overlap(run_a: dict[str, RankedList], run_b: dict[str, RankedList]) -> tuple[float, float]:
    """Mean Jaccard@10 and RBO over the queries of ``run_a``."""
    js, rs = [], []
    for qid, hits in run_a.items():
        a = [d for d, _ in hits]
        b = [d for d, _ in run_b.get(qid, [])]
        js.append(jaccard(a, b))
        rs.append(rbo(a, b))
    return float(np.mean(js)), float(np.mean(rs))


ENGINES: list[tuple[str, str, dict, dict]] = [
    # (row label, mode, fts overrides, vector overrides); the first three are the defaults
    ("bm25, index (default)", "bm25", {}, {}),
    ("dense, index exact (default)", "dense", {}, {}),
    ("hybrid, index (default)", "hybrid", {}, {}),
    ("dense, index HNSW", "dense", {}, {"index": "hnsw"}),
    ("hybrid, index HNSW", "hybrid", {}, {"index": "hnsw"}),
    ("bm25, native: duckdb fts / pg web + ts_rank_cd", "bm25", {"engine": "native"}, {}),
    ("bm25, native: duckdb fts / pg any + ts_rank_cd", "bm25",
     {"engine": "native", "mode": "any"}, {}),
    ("bm25, native: duckdb fts / pg any + ts_rank", "bm25",
     {"engine": "native", "mode": "any", "rank_func": "ts_rank"}, {}),
    ("dense, native exact", "dense", {}, {"engine": "native", "index": "exact"}),
    ("dense, native pgvector HNSW", "dense", {}, {"engine": "native", "index": "hnsw"}),
    ("hybrid, native (pg any + ts_rank)", "hybrid",
     {"engine": "native", "mode": "any", "rank_func": "ts_rank"},
     {"engine": "native", "index": "exact"}),
]
"""Every engine a user can pick, on both stores. DuckDB's native full-text (its fts macro)
ignores the PostgreSQL tsquery mode and rank function; DuckDB has no native HNSW (that row runs
its exact search)."""


def engine_prefs(mode: str, fts: dict, vector: dict) -> RetrievalPrefs:
    return RetrievalPrefs(query_text="", mode=mode, top_k_items=100,  # type: ignore[arg-type]
                          fts=FtsConfig(**fts), vector=VectorConfig(**vector))


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--pg-url", default=os.environ.get("AIBLOX_PG_URL"),
                    help="admin URL of a PostgreSQL server with pgvector (a scratch database is "
                         "created and dropped); default: AIBLOX_PG_URL, else a throwaway server")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)

    from aiblox.stores.postgres import PostgresStore, ThrowawayPostgres, scratch_database

    t_all = time.perf_counter()
    ds = load_dataset(args.dataset, splits=[args.split])
    n = len(ds.split_queries(args.split))
    results: dict[str, dict[str, EvalResult]] = {"duckdb": {}, "postgres": {}}
    ingest_s: dict[str, float] = {}
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="aiblox-parity-"))
        admin = args.pg_url or stack.enter_context(ThrowawayPostgres())
        pg_url = stack.enter_context(scratch_database(admin, prefix="aiblox_parity"))
        os.environ["AIBLOX_INDEX_DIR"] = str(Path(tmp) / "indexes")  # PostgreSQL's indexes
        stores = {"duckdb": open_quiet_store(Path(tmp) / f"{args.dataset}.duckdb"),
                  "postgres": PostgresStore(pg_url)}
        for name, store in stores.items():
            stack.callback(store.close)
            emb = CachedEmbedder(get_embedder(args.embedder), store, progress=False)
            t0 = time.perf_counter()
            report = prepare_store(store, ds, emb, progress=False)
            ingest_s[name] = time.perf_counter() - t0
            err.print(f"{name}: {report.items.inserted} docs ingested in {ingest_s[name]:.1f} s "
                      f"({report.embedding_cache_misses} embedded live)")
            retriever = HybridRetriever(store, emb)
            for label, mode, fts, vector in ENGINES:
                prefs = engine_prefs(mode, fts, vector)
                evaluate_retrieval(retriever, ds, args.split, prefs, metrics=["ndcg@10"],
                                   progress=False)  # warm: index builds, compiles, caches
                r = evaluate_retrieval(retriever, ds, args.split, prefs,
                                       metrics=["ndcg@10", "recall@100"], progress=False)
                results[name][label] = r
                err.print(f"  {name} {label:48s} nDCG@10 {r.metrics['ndcg@10']:.4f} "
                          f"{r.timings['qps']:.0f} q/s")

    rows = []
    for label, *_ in ENGINES:
        duck, pg = results["duckdb"][label], results["postgres"][label]
        j, r = overlap(duck.run, pg.run)
        rows.append([label, f"{duck.metrics['ndcg@10']:.4f}", f"{pg.metrics['ndcg@10']:.4f}",
                     f"{duck.metrics['recall@100']:.4f}", f"{pg.metrics['recall@100']:.4f}",
                     f"{duck.timings['qps']:.0f}", f"{pg.timings['qps']:.0f}",
                     "yes" if duck.run == pg.run else f"{j:.3f} / {r:.3f}"])
    load = os.getloadavg()
    notes = [f"Measured {environment_line()}; {time.perf_counter() - t_all:.0f} s in all; load "
             f"average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min).",
             f"Dataset {args.dataset} {args.split} ({len(ds.corpus):,} docs, {n} queries); "
             f"vectors {args.embedder} from ../shared/embeddings; top 100 per list, RRF k=60; "
             f"q/s: the whole split in batches (second pass: indexes built, kernels compiled).",
             "index: the derived indexes (BM25 equal to bm25s: Snowball, English stop words, "
             "k1 1.2, b 0.75; exact kNN or faiss HNSW M=32, efConstruction=200), the same on "
             "both stores. native: DuckDB's fts macro (Porter; every tsquery mode is a bag of "
             "words) and exact SQL; PostgreSQL's english tsvector (web: every word required; "
             "any: the lexemes OR-ed), pgvector exact or HNSW (m=16, ef_construction=64).",
             "same lists: 'yes' when both stores return identical ranked lists and scores, "
             "else Jaccard@10 / RBO (p=0.9, depth 10) of DuckDB's run against PostgreSQL's."]
    print_table("Engines on both stores: nDCG@10, recall@100 and speed",
                ["engine", "nDCG@10 duckdb", "nDCG@10 postgres", "R@100 duckdb",
                 "R@100 postgres", "q/s duckdb", "q/s postgres", "same lists"], rows,
                args.markdown,
                right=("nDCG@10 duckdb", "nDCG@10 postgres", "R@100 duckdb", "R@100 postgres",
                       "q/s duckdb", "q/s postgres"), notes=notes)
    err.print(f"ingest (items, vectors from cache): duckdb {ingest_s['duckdb']:.1f} s, "
              f"postgres {ingest_s['postgres']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
