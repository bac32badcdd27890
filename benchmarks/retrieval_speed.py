"""Retrieval speed on SciFact: ingest, queries per second per mode, against two BM25 baselines.

In one process, on one machine, one after the other:

1. ingest into a fresh DuckDB file with precomputed vectors: import the shared
   all-MiniLM-L6-v2 vectors into the embedding cache, upsert the items and their vectors,
   build the BM25 and vector indexes (and DuckDB's own full-text index, for step 4);
2. retrieve every judged test query in each mode (bm25, dense, hybrid RRF) as the eval runner
   does (``HybridRetriever.signals`` then ``fuse``, 1,000 queries a round), timing retrieval only:
   the query vectors come from the embedding cache, so the model is never loaded, and ranx
   scores the runs afterwards, untimed;
3. the same BM25 queries through ``bm25s`` (English stop words, Snowball stemmer via PyStemmer,
   k1 = 1.2, b = 0.75, title + " " + text, top 100): index and query time on each of its two
   backends, numpy (its default) and numba (its kernels compiled by one untimed retrieval
   first), each on one thread and on every core (aiblox runs on every core);
4. DuckDB's own per-query ``fts_main_items.match_bm25`` macro on the first ``--macro-queries``
   test queries, checking that it ranks exactly as the store's native batched SQL
   (``fts.engine = "native"``).

Absolute times drift on shared machines; the ratios, measured in the same run, are the claim.
Each timing is the best of ``--repeat`` passes, in wall-clock and in process CPU seconds (CPU
time, which counts DuckDB's threads, drifts less when other work shares the machine).

    python benchmarks/retrieval_speed.py [--markdown] [--batch-size 1000] [--macro-queries 30]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from _common import arg_parser, environment_line, err, open_quiet_store, positive_int, print_table

from aiblox.contracts import FtsConfig, RetrievalPrefs, VectorConfig
from aiblox.data import Dataset, load_dataset
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.embedding.vectors import import_vectors
from aiblox.engine.evaluate import run_hash
from aiblox.engine.workspace import find_precomputed_vectors
from aiblox.fusion.types import RankedList
from aiblox.indexes import StoreIndexes
from aiblox.memory import paused_gc
from aiblox.metrics import evaluate_run
from aiblox.retrieval import HybridRetriever
from aiblox.stores import DuckDBStore
from aiblox.stores.ingest import ingest_items

MODES = ("bm25", "dense", "hybrid")
GOAL_S = 30.0
TOP_K = 100


@dataclass
class Clock:
    """Wall-clock and process CPU seconds (all threads, DuckDB's included) of a block."""

    wall: float = 0.0
    cpu: float = 0.0

    @classmethod
    @contextmanager
    def measure(cls) -> Iterator[Clock]:
        c = cls()
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield c
        finally:
            c.wall, c.cpu = time.perf_counter() - w0, time.process_time() - c0

    def best(self, other: Clock) -> Clock:
        """The faster of two measurements (by wall time)."""
        return self if self.wall <= other.wall else other


SLOWEST = Clock(float("inf"), float("inf"))


def run_aiblox(retriever: HybridRetriever, queries: list[tuple[str, str]], mode: str,
               batch_size: int) -> tuple[Clock, dict[str, RankedList]]:
    """Retrieval only, as the eval runner does it: signals (indexes) then fusion, per batch,
    the cyclic collector paused (as ``evaluate_retrieval`` pauses it)."""
    run: dict[str, RankedList] = {}
    with paused_gc(), Clock.measure() as clock:
        for start in range(0, len(queries), batch_size):
            batch = queries[start:start + batch_size]
            group = [RetrievalPrefs(query_text=text, query_id=qid, mode=mode,  # type: ignore[arg-type]
                                    top_k_items=TOP_K) for qid, text in batch]
            hits = retriever.fuse(group, retriever.signals(group))
            for (qid, _), hs in zip(batch, hits, strict=True):
                run[qid] = [(h.doc_id, h.score) for h in hs]
    return clock, run


BM25S_VARIANTS = (("numpy", 1), ("numpy", 0), ("numba", 1), ("numba", 0))
"""bm25s's (backend, threads) runs; 1 thread: ``retrieve(n_threads=0)``, bm25s's default (serial);
0 threads: every core (``n_threads=-1``). numpy on one thread is all of bm25s's defaults
(``BM25()``, ``retrieve()``)."""


def bm25s_label(backend: str, threads: int) -> str:
    cores = "1 thread" if threads == 1 else f"{os.cpu_count()} threads"
    what = ("numpy backend (its default)" if backend == "numpy"
            else "numba backend (compiled first, untimed)")
    return f"bm25s query, {what}, {cores} (tokenize + retrieve)"


def run_bm25s(ds: Dataset, queries: list[tuple[str, str]], backend: str = "numpy",
              threads: int = 1) -> tuple[Clock, Clock, dict[str, RankedList]]:
    """Index the corpus and answer ``queries`` with bm25s on ``backend`` ("numpy", its default,
    or "numba") and ``threads`` (0: every core); returns (index, query, run). On numba one
    untimed retrieval first compiles its kernels (bm25s does not cache them on disk: every
    process compiles them once), so the query clock times the compiled code."""
    import bm25s
    import Stemmer

    ids = list(ds.corpus)
    texts = [f"{d.title} {d.text}" for d in ds.corpus.values()]
    stemmer = Stemmer.Stemmer("english")
    # bm25s's own default, n_threads=0, for one thread: serial, without a thread pool
    n_threads = {0: -1, 1: 0}.get(threads, threads)
    k = min(TOP_K, len(ids))
    with Clock.measure() as index_clock:
        retriever = bm25s.BM25(k1=1.2, b=0.75, backend=backend)
        retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer,
                                       show_progress=False), show_progress=False)
    if backend == "numba":  # compile (untimed): the serial and the parallel kernel differ
        warm = bm25s.tokenize([q for _, q in queries], stopwords="en", stemmer=stemmer,
                              show_progress=False)
        retriever.retrieve(warm, k=k, show_progress=False, n_threads=n_threads)
    with Clock.measure() as query_clock:
        q_tokens = bm25s.tokenize([q for _, q in queries], stopwords="en", stemmer=stemmer,
                                  show_progress=False)
        docs, scores = retriever.retrieve(q_tokens, k=k, show_progress=False,
                                          n_threads=n_threads)
    run = {qid: [(ids[int(d)], float(s)) for d, s in zip(docs[i], scores[i], strict=True) if s > 0]
           for i, (qid, _) in enumerate(queries)}
    return index_clock, query_clock, run


def run_macro(store: DuckDBStore, queries: list[tuple[str, str]],
              ) -> tuple[Clock, dict[str, RankedList]]:
    """DuckDB's ``match_bm25`` macro, one statement per query; returns (clock, run)."""
    sql = (f"SELECT id, score FROM (SELECT id, fts_main_items.match_bm25(id, ?) AS score "
           f"FROM items) WHERE score IS NOT NULL ORDER BY score DESC, id ASC LIMIT {TOP_K}")
    run: dict[str, RankedList] = {}
    with Clock.measure() as clock:
        for qid, text in queries:
            run[qid] = [(d, float(s)) for d, s in store.con.execute(sql, [text]).fetchall()]
    return clock, run


def same_ranking(a: RankedList, b: RankedList, tol: float = 1e-6) -> bool:
    """Same ids in the same order with scores equal to ``tol``."""
    return len(a) == len(b) and all(
        da == db and abs(sa - sb) <= tol * max(1.0, abs(sa))
        for (da, sa), (db, sb) in zip(a, b, strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--dataset", default="scifact", help="dataset name or path (default scifact)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--batch-size", type=positive_int, default=1000,
                    help="queries per round, as in the eval runner (default 1000)")
    ap.add_argument("--macro-queries", type=positive_int, default=30,
                    help="queries sent through DuckDB's match_bm25 macro (default 30)")
    ap.add_argument("--repeat", type=positive_int, default=3,
                    help="passes over the queries; the table shows the best (default 3)")
    ap.add_argument("--db-dir", help="put the fresh DuckDB file here instead of a temp folder")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    ds = load_dataset(args.dataset, splits=[args.split])
    queries = ds.split_queries(args.split)
    qrels = ds.qrels[args.split]
    n_docs, n_q = len(ds.corpus), len(queries)
    with tempfile.TemporaryDirectory(prefix="aiblox-speed-") as tmp:
        db_dir = Path(args.db_dir) if args.db_dir else Path(tmp)
        db_dir.mkdir(parents=True, exist_ok=True)
        db_path = db_dir / f"{ds.name}-speed.duckdb"
        for p in (db_path, db_path.with_name(db_path.name + ".wal")):
            p.unlink(missing_ok=True)  # always a fresh file
        store = open_quiet_store(db_path)
        try:
            emb = CachedEmbedder(get_embedder("minilm"), store, progress=False)
            files = find_precomputed_vectors(ds, emb.model_id)
            if not files:
                err.print(f"[red]no precomputed vectors for {ds.name}[/red]")
                return 2

            # 1. ingest: vectors into the cache, items + item vectors, full-text index
            with Clock.measure() as import_clock:
                n_vec = sum(import_vectors(f, store, emb.model_id, emb.dim) for f in files)
            with Clock.measure() as upsert_clock:
                report = ingest_items(store, list(ds.corpus.values()), emb, progress=False)
            with Clock.measure() as fts_clock:  # the engines' indexes, and DuckDB's own fts
                indexes = StoreIndexes(store)
                indexes.lexical(FtsConfig())
                indexes.vectors(emb.model_id, VectorConfig())
                if store.fts_stale:
                    store.rebuild_fts()
            ingest_clock = Clock(import_clock.wall + upsert_clock.wall + fts_clock.wall,
                                 import_clock.cpu + upsert_clock.cpu + fts_clock.cpu)
            err.print(f"ingest {ingest_clock.wall:.1f} s ({report.vectors_written} vectors, "
                      f"{report.embedding_cache_misses} embedded live)")

            # 2. retrieval per mode, --repeat passes; the runs must not change between passes
            retriever = HybridRetriever(store, emb)
            runs: dict[str, dict[str, RankedList]] = {}
            first: dict[str, Clock] = {}
            best: dict[str, Clock] = {}
            for rep in range(args.repeat):
                for mode in MODES:
                    clock, run = run_aiblox(retriever, queries, mode, args.batch_size)
                    if mode in runs and run_hash(run) != run_hash(runs[mode]):
                        raise SystemExit(f"{mode}: the ranked run changed between passes")
                    runs.setdefault(mode, run)
                    first.setdefault(mode, clock)
                    best[mode] = best.get(mode, SLOWEST).best(clock)
                    err.print(f"pass {rep + 1} {mode}: {clock.wall:.2f} s wall, "
                              f"{clock.cpu:.2f} s CPU")
            model_loaded = getattr(emb.embedder, "_model", None) is not None

            # 2b. the BM25 index alone (text in, ranked lists of ids out), without the runner's
            # route (prefs, signals, fusion, hits): where the route's fixed cost shows
            lexical = indexes.lexical(FtsConfig())
            texts = [t for _, t in queries]
            lexical.search(texts, TOP_K)  # warm (not timed)
            index_alone = SLOWEST
            for _ in range(args.repeat):
                with Clock.measure() as c:
                    lexical.search(texts, TOP_K)
                index_alone = index_alone.best(c)

            # 3. bm25s, same queries, each backend on one thread and on every core
            bm25s_index: dict[tuple[str, int], Clock] = {}
            bm25s_query: dict[tuple[str, int], Clock] = {}
            bm25s_runs: dict[tuple[str, int], dict[str, RankedList]] = {}
            for _ in range(args.repeat):
                for variant in BM25S_VARIANTS:
                    i_c, q_c, bm25s_runs[variant] = run_bm25s(ds, queries, *variant)
                    bm25s_index[variant] = bm25s_index.get(variant, SLOWEST).best(i_c)
                    bm25s_query[variant] = bm25s_query.get(variant, SLOWEST).best(q_c)
            for variant in BM25S_VARIANTS:
                err.print(f"bm25s {variant[0]}, {variant[1] or 'all'} threads: index "
                          f"{bm25s_index[variant].wall:.2f} s, queries "
                          f"{bm25s_query[variant].wall:.3f} s")

            # 4. DuckDB's match_bm25 macro, same index, first N queries
            macro_q = queries[:args.macro_queries]
            macro = SLOWEST
            for _ in range(args.repeat):
                m_c, macro_run = run_macro(store, macro_q)
                macro = macro.best(m_c)
            native = store.fts_search_many([t for _, t in macro_q], TOP_K,
                                           FtsConfig(engine="native"))
            agree = sum(same_ranking(macro_run[q], hits)
                        for (q, _), hits in zip(macro_q, native, strict=True))
            err.print(f"match_bm25: {macro.wall:.2f} s for {len(macro_q)} queries; "
                      f"{agree}/{len(macro_q)} rankings identical to the native batched SQL")
        finally:
            store.close()

    with Clock.measure() as ranx_clock:  # quality check: same runs, scored with ranx
        ndcg = {m: evaluate_run(qrels, r, ["ndcg@10"])[0]["ndcg@10"] for m, r in runs.items()}
        bm25s_ndcg = {v: evaluate_run(qrels, r, ["ndcg@10"])[0]["ndcg@10"]
                      for v, r in bm25s_runs.items()}

    def rate(n: int, c: Clock) -> str:
        return f"{n / c.wall:,.0f}" if c.wall > 0 else "—"

    def ratio(a: Clock, n_a: int, b: Clock, n_b: int) -> tuple[float, float]:
        """Throughput of ``a`` over throughput of ``b``, by wall and by CPU time."""
        return (n_a / a.wall) / (n_b / b.wall), (n_a / a.cpu) / (n_b / b.cpu)

    vs_bm25s = {v: ratio(best["bm25"], n_q, c, n_q) for v, c in bm25s_query.items()}
    alone_vs = {v: ratio(index_alone, n_q, c, n_q) for v, c in bm25s_query.items()}
    vs_macro = ratio(best["bm25"], n_q, macro, len(macro_q))
    total = Clock(sum(c.wall for c in best.values()), sum(c.cpu for c in best.values()))
    total_first = Clock(sum(c.wall for c in first.values()), sum(c.cpu for c in first.values()))

    def row(step: str, size: str, c: Clock, n: int, quality: str = "", note: str = "",
            ) -> list[str]:
        return [step, size, f"{c.wall:.2f}", f"{c.cpu:.2f}", rate(n, c), quality, note]

    def goal(c: Clock) -> str:
        return f"goal < {GOAL_S:.0f} s: {'PASS' if c.wall < GOAL_S else 'FAIL'}"

    rows = [
        row("ingest: import vectors into the cache", f"{n_vec:,} vectors", import_clock, n_vec),
        row("ingest: items + item vectors", f"{n_docs:,} docs", upsert_clock, n_docs),
        row("ingest: index builds (BM25, exact vectors, DuckDB fts)", f"{n_docs:,} docs",
            fts_clock, n_docs),
        row("**ingest with imported vectors (fresh DB)**", f"{n_docs:,} docs", ingest_clock,
            n_docs),
    ]
    for mode in MODES:
        note = ""
        if mode == "bm25":
            note = f"{vs_macro[0]:.1f}× match_bm25 (CPU {vs_macro[1]:.1f}×); bm25s: below"
        rows.append(row(f"aiblox {mode}" + (" (index)" if mode == "bm25" else ""),
                        f"{n_q} queries", best[mode], n_q, f"{ndcg[mode]:.4f}", note))
        if mode == "bm25":
            rows.append(row("aiblox bm25, the index alone (text in, ranked id lists out)",
                            f"{n_q} queries", index_alone, n_q, "",
                            "; ".join(f"{alone_vs[v][0]:.2f}× bm25s {v[0]} "
                                      f"{v[1] or os.cpu_count()}t" for v in BM25S_VARIANTS)))
    rows += [row(f"bm25s index, {backend} backend (tokenize + index)", f"{n_docs:,} docs",
                 bm25s_index[(backend, 1)].best(bm25s_index[(backend, 0)]), n_docs)
             for backend in ("numpy", "numba")]
    rows += [row(bm25s_label(*v), f"{n_q} queries", bm25s_query[v], n_q, f"{bm25s_ndcg[v]:.4f}",
                 f"baseline; aiblox bm25 {vs_bm25s[v][0]:.2f}× (CPU {vs_bm25s[v][1]:.2f}×)")
             for v in BM25S_VARIANTS]
    rows += [
        row("DuckDB match_bm25 macro, one query per statement", f"{len(macro_q)} queries", macro,
            len(macro_q), "", f"baseline; {agree}/{len(macro_q)} rankings = native batched SQL"),
        row("**all test queries, every mode (retrieval only)**", f"{3 * n_q} queries", total,
            3 * n_q, "", goal(total)),
        row("all test queries, every mode, first pass after ingest", f"{3 * n_q} queries",
            total_first, 3 * n_q, "", goal(total_first)),
    ]
    load = os.getloadavg()
    notes = [
        f"Measured {environment_line()}; {time.perf_counter() - t_start:.0f} s in all; load "
        f"average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min).",
        f"Times are the best of {args.repeat} passes by wall clock (ingest: one pass); CPU s is "
        f"process CPU time over all threads (DuckDB uses {os.cpu_count()}). Retrieval = "
        f"BM25 and vector indexes + fusion, {args.batch_size} queries per round, top {TOP_K}; "
        f"ranx scoring not included ({ranx_clock.wall:.1f} s for the four runs, mostly numba "
        f"start-up). Query vectors come from the embedding cache; model loaded: "
        f"{'yes' if model_loaded else 'no'}.",
        "bm25s: aiblox bm25 (on every core) against each backend and thread count, by wall "
        "clock and by CPU time (a ratio above 1: aiblox faster): "
        + "; ".join(f"{v[0]} {v[1] or os.cpu_count()} thread{'s' if v[1] != 1 else ''} "
                    f"{vs_bm25s[v][0]:.2f}× (CPU {vs_bm25s[v][1]:.2f}×)"
                    for v in BM25S_VARIANTS)
        + f"; DuckDB's per-query match_bm25 macro {vs_macro[0]:.1f}×. 'The index alone': "
        "StoreIndexes.lexical(...).search, without the eval runner's route (a RetrievalPrefs "
        "per query, signals, fusion, hits); its ratios are against bm25s <backend> <threads>. "
        "bm25s's times end at "
        "its arrays (the run's Python lists are built afterwards, untimed); aiblox's include "
        "its ranked lists. Its numba kernels are compiled by an untimed retrieval first (bm25s "
        "does not cache them on disk: each new process compiles them again); its index times "
        f"are the best of {args.repeat} builds, the first numba one compiling.",
    ]
    title = f"Retrieval speed, {ds.name} {args.split} ({n_docs:,} docs, {n_q} queries)"
    columns = ["step", "size", "wall s", "CPU s", "per second", "nDCG@10", "ratio / goal"]
    if not args.markdown:
        rows = [[c.replace("**", "") for c in r] for r in rows]
    print_table(title, columns, rows, args.markdown,
                right=("wall s", "CPU s", "per second", "nDCG@10"), notes=notes)
    return 0 if total.wall < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
