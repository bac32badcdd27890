"""DuckDB vs PostgreSQL on one dataset and config: metrics side by side, rank overlap, speed.

The same dataset (default SciFact test) and the same retrieval settings run on a fresh DuckDB
file and on a fresh PostgreSQL database (``--pg-url``, else ``AIBLOX_PG_URL``, else a throwaway
PostgreSQL 16 + pgvector from the ``pgserver`` wheel). Vectors come from ``../shared/embeddings``
(all-MiniLM-L6-v2) through each store's embedding cache, so both backends rank the same vectors.

Printed:

1. Per mode (bm25, dense, hybrid; PostgreSQL's full-text with ``fts.mode`` web and any, vectors
   exact and over its HNSW index) nDCG@10 and R@100 of each backend, and the overlap of the two
   backends' runs per query: Jaccard@10 of the top-10 sets and RBO (rank-biased overlap,
   Webber, Moffat and Zobel 2010, extrapolated, p=0.9, depth 10), averaged over queries.
2. Ingest time, and p50/p95 latency of one query at a time for full-text, vector (exact, HNSW)
   and hybrid retrieval on each backend; HNSW recall@10 against exact search.

Full-text differs by design: DuckDB ranks with BM25 (porter stemmer), PostgreSQL with
``ts_rank_cd`` over an ``english`` tsvector; vector search is the same computation on both.

    python benchmarks/backend_parity.py [--dataset scifact] [--pg-url URL] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
from _common import environment_line, err, open_quiet_store, print_table

from aiblox.contracts import FtsConfig, RetrievalPrefs, VectorConfig
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.eval.datasets import load_dataset
from aiblox.eval.runner import EvalResult, evaluate_retrieval
from aiblox.eval.workspace import prepare_store
from aiblox.fusion.types import RankedList
from aiblox.retrieval import HybridRetriever

MODES: list[tuple[str, str, str, str]] = [
    ("bm25 (pg web)", "bm25", "exact", "web"), ("bm25 (pg any)", "bm25", "exact", "any"),
    ("bm25 (pg any, ts_rank)", "bm25", "exact", "any/ts_rank"),
    ("dense", "dense", "exact", "web"),
    ("hybrid (pg web)", "hybrid", "exact", "web"), ("hybrid (pg any)", "hybrid", "exact", "any"),
    ("hybrid (pg any, ts_rank)", "hybrid", "exact", "any/ts_rank"),
    ("dense (pg HNSW)", "dense", "hnsw", "web"),
    ("hybrid (pg web, HNSW)", "hybrid", "hnsw", "web")]
"""(row label, retrieval mode, PostgreSQL vector index, PostgreSQL fts.mode). DuckDB searches
vectors exactly and treats every fts.mode as a bag of words, so it runs each mode once."""
LATENCY: list[tuple[str, str, str, str]] = [
    ("full-text (pg web)", "bm25", "exact", "web"), ("full-text (pg any)", "bm25", "exact", "any"),
    ("full-text (pg any, ts_rank)", "bm25", "exact", "any/ts_rank"),
    ("vector exact", "dense", "exact", "web"), ("vector HNSW", "dense", "hnsw", "web"),
    ("hybrid exact (pg web)", "hybrid", "exact", "web"),
    ("hybrid HNSW (pg web)", "hybrid", "hnsw", "web")]
"""Single-query latency rows; DuckDB runs its BM25 for both full-text rows."""


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


def prefs_for(mode: str, index: str, fts: str) -> RetrievalPrefs:
    """Prefs for a row; ``fts`` is ``mode`` or ``mode/rank_func``."""
    fts_mode, _, rank_func = fts.partition("/")
    return RetrievalPrefs(query_text="", mode=mode, top_k_items=100,  # type: ignore[arg-type]
                          fts=FtsConfig(mode=fts_mode,  # type: ignore[arg-type]
                                        rank_func=rank_func or "ts_rank_cd"),  # type: ignore[arg-type]
                          vector=VectorConfig(index=index))  # type: ignore[arg-type]


def latencies(retriever: HybridRetriever, queries: list[str], prefs: RetrievalPrefs
              ) -> tuple[float, float]:
    """p50 and p95 milliseconds of single-query retrieval (signals + fusion, top 10 items
    from lists of 100)."""
    base = prefs.model_copy(update={"top_k_items": 10})
    times = []
    for q in queries:
        p = base.model_copy(update={"query_text": q})
        t0 = time.perf_counter()
        retriever.fuse([p], retriever.signals([p]))
        times.append((time.perf_counter() - t0) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def hnsw_recall(store, emb: CachedEmbedder, queries: list[str], ef_search: int | None,
                k: int = 10) -> float:
    """Mean recall@k of PostgreSQL's HNSW search against its exact search (cosine)."""
    vecs = emb.embed(queries)
    exact = store.vector_search_many(vecs, emb.model_id, k, VectorConfig(index="exact"))
    approx = store.vector_search_many(vecs, emb.model_id, k,
                                      VectorConfig(index="hnsw", ef_search=ef_search))
    return float(np.mean([len({d for d, _ in a} & {d for d, _ in e}) / max(1, len(e))
                          for a, e in zip(approx, exact, strict=True)]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--pg-url", default=os.environ.get("AIBLOX_PG_URL"),
                    help="admin URL of a PostgreSQL server with pgvector (a scratch database is "
                         "created and dropped); default: AIBLOX_PG_URL, else a throwaway server")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--latency-queries", type=int, default=100)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)

    from aiblox.stores.postgres import PostgresStore, ThrowawayPostgres, scratch_database

    t_all = time.perf_counter()
    ds = load_dataset(args.dataset, splits=[args.split])
    judged = ds.split_queries(args.split)
    lat_queries = [text for _, text in judged[:args.latency_queries]]
    results: dict[str, dict[str, EvalResult]] = {"duckdb": {}, "postgres": {}}
    ingest_s: dict[str, float] = {}
    lat: dict[tuple[str, str], tuple[float, float]] = {}
    recall: dict[str, float] = {}
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="aiblox-parity-"))
        admin = args.pg_url or stack.enter_context(ThrowawayPostgres())
        pg_url = stack.enter_context(scratch_database(admin, prefix="aiblox_parity"))
        stores = {"duckdb": open_quiet_store(Path(tmp) / f"{args.dataset}.duckdb"),
                  "postgres": PostgresStore(pg_url)}
        for name, store in stores.items():
            stack.callback(store.close)
            emb = CachedEmbedder(get_embedder(args.embedder), store, progress=False)
            t0 = time.perf_counter()
            report = prepare_store(store, ds, emb, progress=False)
            if name == "duckdb":
                store.rebuild_fts()  # DuckDB builds its BM25 index on first search: count it
            ingest_s[name] = time.perf_counter() - t0
            err.print(f"{name}: {report.items.inserted} docs ingested in {ingest_s[name]:.1f} s "
                      f"({report.embedding_cache_misses} embedded live)")
            retriever = HybridRetriever(store, emb)
            for label, mode, index, fts_mode in MODES:
                key = label if name == "postgres" else mode
                if key in results[name] or (name == "duckdb" and index == "hnsw"):
                    continue
                r = evaluate_retrieval(retriever, ds, args.split,
                                       prefs_for(mode, index, fts_mode),
                                       metrics=["ndcg@10", "recall@100"], progress=False)
                results[name][key] = r
                err.print(f"  {name} {key:22s} nDCG@10 {r.metrics['ndcg@10']:.4f} "
                          f"({r.timings['retrieve_s']:.1f} s)")
            for label, mode, index, fts_mode in LATENCY:
                if name == "duckdb" and index == "hnsw":
                    continue
                lat[name, label] = latencies(retriever, lat_queries,
                                             prefs_for(mode, index, fts_mode))
            if name == "postgres":
                texts = [text for _, text in judged]
                recall = {"40 (default)": hnsw_recall(store, emb, texts, None),
                          "100": hnsw_recall(store, emb, texts, 100)}

    n = len(judged)
    rows = []
    for label, mode, _index, _fts in MODES:
        pg = results["postgres"][label]
        duck = results["duckdb"][mode]
        j, r = overlap(duck.run, pg.run)
        rows.append([label, str(n),
                     f"{duck.metrics['ndcg@10']:.4f}", f"{pg.metrics['ndcg@10']:.4f}",
                     f"{pg.metrics['ndcg@10'] - duck.metrics['ndcg@10']:+.4f}",
                     f"{duck.metrics['recall@100']:.4f}", f"{pg.metrics['recall@100']:.4f}",
                     f"{j:.3f}", f"{r:.3f}"])
    notes = [f"Measured {environment_line()}; {time.perf_counter() - t_all:.0f} s in all.",
             f"Dataset {args.dataset} {args.split} ({len(ds.corpus):,} docs); vectors "
             f"{args.embedder} from ../shared/embeddings; top 100 per list, RRF k=60.",
             "DuckDB: BM25 (fts extension, porter; one run per mode, every fts.mode is a bag of "
             "words), exact vector search. PostgreSQL: an english tsvector, "
             "tsquery from websearch_to_tsquery (web, every word required) or the query's "
             "lexemes OR-ed (any), ts_rank_cd unless the row says ts_rank; pgvector cosine, "
             "exact or HNSW (m=16, ef_construction=64, ef_search=max(40, k)=100).",
             "Jaccard@10 and RBO (p=0.9, depth 10, extrapolated): the DuckDB run against the "
             "PostgreSQL run of the same row, per query, averaged; HNSW rows compare DuckDB "
             "exact with PostgreSQL HNSW."]
    print_table("Backend parity: DuckDB vs PostgreSQL, same dataset and config",
                ["mode", "queries", "nDCG@10 duckdb", "nDCG@10 postgres", "Δ", "R@100 duckdb",
                 "R@100 postgres", "Jaccard@10", "RBO"], rows, args.markdown,
                right=("queries", "nDCG@10 duckdb", "nDCG@10 postgres", "Δ", "R@100 duckdb",
                       "R@100 postgres", "Jaccard@10", "RBO"), notes=notes)
    if args.markdown:
        print()
    speed_rows = [["ingest (items, vectors from cache, indexes)", "s",
                   f"{ingest_s['duckdb']:.1f}", f"{ingest_s['postgres']:.1f}"]]
    for label, *_ in LATENCY:
        d = lat.get(("duckdb", label))
        p = lat[("postgres", label)]
        speed_rows.append([label, "p50 / p95 ms", f"{d[0]:.1f} / {d[1]:.1f}" if d else "—",
                           f"{p[0]:.1f} / {p[1]:.1f}"])
    for ef, value in recall.items():
        speed_rows.append([f"HNSW recall@10 vs exact, ef_search {ef}", f"{n} queries", "—",
                           f"{value:.4f}"])
    print_table("Backend speed: one query at a time", ["what", "unit", "duckdb", "postgres"],
                speed_rows, args.markdown, right=("duckdb", "postgres"),
                notes=[f"Latency: {len(lat_queries)} queries one at a time, query vectors from "
                       "the embedding cache, signals + fusion (top 10), no chunking; "
                       "wall clock on a shared machine."])
    return 0


if __name__ == "__main__":
    sys.exit(main())
