"""Evidence speed: source-card packing and evidence bundling on SciFact retrieval output, and
bundling a 10,000-row SQL result; memory bounded by the policy, not by the input.

In one process, one after the other:

1. retrieve every judged SciFact test query (hybrid RRF over BM25 + all-MiniLM-L6-v2 vectors
   from the shared precomputed file, late chunking with the ``sentences`` chunker scored by
   text alone so that no model is loaded), as ``RetrievalBundle`` s: the input, untimed;
2. ``DefaultEvidencePacker.pack`` on every bundle (candidates + evidence chunks, 6 cards) plus
   the ``rag.sources`` event: candidates per second;
3. ``build_evidence_bundle`` on every bundle's evidence chunks as ``doc_chunk`` references
   (default policy; then with redaction on): items per second;
4. ``build_evidence_bundle`` on one SQL result of N rows x 8 columns (default policy: 100 rows,
   20 columns, first_last sampling; the full result is streamed to the lake), from rows in
   memory and from a DuckDB query, for N = 10,000 and 100,000: rows per second and the
   tracemalloc peak of the build (allocations made during the build; the input rows built
   beforehand are not counted).

Times are the best of ``--repeat`` passes (wall clock); tracemalloc runs in a separate pass,
since tracing slows Python down.

    python benchmarks/evidence.py [--markdown] [--repeat 3] [--queries 300]
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import arg_parser, environment_line, err, open_quiet_store, positive_int, print_table

from aiblox.bundles import EvidencePolicy, build_evidence_bundle
from aiblox.contracts import RetrievalPrefs
from aiblox.contracts.retrieval import RetrievalBundle
from aiblox.data import load_dataset
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.engine.workspace import prepare_store
from aiblox.evidence import DefaultEvidencePacker, rag_sources_event
from aiblox.retrieval import HybridRetriever
from aiblox.retrieval.late_chunking import LateChunker, default_chunk_cache

SQL_COLS = 8


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Best wall-clock seconds of ``repeat`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_mib(fn: Callable[[], Any]) -> float:
    """tracemalloc peak (MiB) of allocations made while ``fn`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def retrieve(n_queries: int, batch: int = 100) -> tuple[list[RetrievalBundle], int, float]:
    """SciFact retrieval output: bundles for the first ``n_queries`` judged test queries."""
    ds = load_dataset("scifact", splits=["test"])
    queries = ds.split_queries("test")[:n_queries]
    with tempfile.TemporaryDirectory(prefix="aiblox-evidence-bench-") as tmp:
        store = open_quiet_store(Path(tmp) / "scifact.duckdb")
        try:
            emb = CachedEmbedder(get_embedder("minilm"), store, progress=False)
            prepare_store(store, ds, emb, progress=False)
            if store.fts_stale:
                store.rebuild_fts()
            chunker = LateChunker(None, default_chunk_cache(store))
            retriever = HybridRetriever(store, emb, evidence_builder=chunker)
            t0 = time.perf_counter()
            bundles: list[RetrievalBundle] = []
            for start in range(0, len(queries), batch):
                prefs = [RetrievalPrefs(query_text=text, query_id=qid)
                         for qid, text in queries[start:start + batch]]
                bundles += retriever.search_many(prefs)
            return bundles, len(ds.corpus), time.perf_counter() - t0
        finally:
            store.close()


def doc_chunk_refs(bundle: RetrievalBundle) -> dict[str, list[dict[str, Any]]]:
    titles = {c.item_id: c.title for c in bundle.candidates}
    return {"doc_chunks": [
        {"doc_id": ev.item_id, "text": ev.text, "chunk_index": i,
         **({"title": titles[ev.item_id]} if titles.get(ev.item_id) else {})}
        for i, ev in enumerate(bundle.evidence)]}


def sql_rows(n: int) -> tuple[list[str], list[list[Any]]]:
    cols = ["id", "name", "email", "amount", "ratio", "created", "flag", "note"]
    rows = [[i, f"customer {i:06d}", f"user{i}@example.com", i * 3 % 10007, i / 7.0,
             f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}", i % 2 == 0,
             "lorem ipsum dolor sit amet " * (1 + i % 3)] for i in range(n)]
    return cols, rows


SQL_QUERY = (
    "SELECT i AS id, 'customer ' || lpad(i::VARCHAR, 6, '0') AS name, "
    "'user' || i || '@example.com' AS email, (i * 3) % 10007 AS amount, i / 7.0 AS ratio, "
    "'2024-' || lpad((i % 12 + 1)::VARCHAR, 2, '0') || '-' || lpad((i % 28 + 1)::VARCHAR, 2, "
    "'0') AS created, i % 2 = 0 AS flag, repeat('lorem ipsum dolor sit amet ', 1 + i % 3) AS "
    "note FROM range(?) t(i) ORDER BY i"
)


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--queries", type=positive_int, default=300,
                    help="SciFact test queries (max 300)")
    ap.add_argument("--repeat", type=positive_int, default=3,
                    help="passes; the table shows the best")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    bundles, n_docs, t_retrieve = retrieve(args.queries)
    n_q = len(bundles)
    n_cand = sum(len(b.candidates) for b in bundles)
    n_ev = sum(len(b.evidence) for b in bundles)
    err.print(f"retrieved {n_q} queries in {t_retrieve:.1f} s: {n_cand} candidates, "
              f"{n_ev} evidence chunks")

    packer = DefaultEvidencePacker()

    def pack_all() -> int:
        return sum(len(rag_sources_event(packer.pack(b.candidates, b.evidence))
                       ["payload"]["sources"]) for b in bundles)

    t_pack, n_cards = best_of(args.repeat, pack_all)
    err.print(f"packing: {t_pack:.3f} s")
    rows: list[list[str]] = []

    def row(step: str, size: str, secs: float, n: int, unit: str, peak: str = "",
            note: str = "") -> None:
        rows.append([step, size, f"{secs:.3f}", f"{n / secs:,.0f} {unit}/s", peak, note])

    row("pack source cards + rag.sources (6 cards per query)",
        f"{n_q} queries, {n_cand:,} candidates + {n_ev:,} chunks", t_pack, n_cand, "candidates",
        f"{peak_mib(pack_all):.2f}", f"{n_cards:,} cards; {n_q / t_pack:,.0f} queries/s")

    with tempfile.TemporaryDirectory(prefix="aiblox-evidence-lake-") as lake:
        refs = [doc_chunk_refs(b) for b in bundles]
        for label, policy in (("default policy", EvidencePolicy()),
                              ("redaction on", EvidencePolicy(enable_redaction=True))):
            def bundle_all(policy: EvidencePolicy = policy) -> int:
                return sum(len(build_evidence_bundle(evidence_refs=r, policy=policy,
                                                     lake_root=lake).items) for r in refs)

            t_b, n_items = best_of(args.repeat, bundle_all)
            err.print(f"bundling ({label}): {t_b:.3f} s")
            row(f"bundle retrieval evidence as doc_chunk items ({label})",
                f"{n_q} bundles, {n_ev:,} chunks", t_b, n_items, "items",
                f"{peak_mib(bundle_all):.2f}", f"{n_q / t_b:,.0f} bundles/s")

        import duckdb

        con = duckdb.connect()
        policy = EvidencePolicy()
        for n in (10_000, 100_000):
            cols, data = sql_rows(n)

            def inline(cols: list[str] = cols, data: list[list[Any]] = data) -> Any:
                return build_evidence_bundle(evidence_refs={"sql_results": [
                    {"query_key": "customers", "columns": cols, "rows": data}]},
                    policy=policy, lake_root=lake)

            def query(n: int = n) -> Any:
                return build_evidence_bundle(evidence_refs={"sql_results": [
                    {"query_key": "customers", "sql": SQL_QUERY, "params": [n]}]},
                    policy=policy, lake_root=lake, sql_connection=con)

            for label, fn in (("rows in memory", inline), ("DuckDB query, streamed", query)):
                t_s, b = best_of(args.repeat, fn)
                item = b.items[0]
                assert item.metadata["sql"]["total_rows"] == n, item.metadata["sql"]
                shown = item.metadata["sql"]["shown_rows"]
                err.print(f"sql {label} {n}: {t_s:.3f} s")
                row(f"bundle a SQL result ({label})", f"{n:,} rows x {SQL_COLS} cols", t_s, n,
                    "rows", f"{peak_mib(fn):.2f}",
                    f"{shown} rows shown, {item.byte_count:,} bytes, full result "
                    f"{item.full_ref.byte_count / 2**20:.1f} MiB to the lake")
            del data
        con.close()

    notes = [
        f"Measured {environment_line()}; {time.perf_counter() - t_start:.0f} s in all.",
        f"Input: SciFact test ({n_docs:,} docs), {n_q} queries retrieved in {t_retrieve:.1f} s "
        "(hybrid RRF, top 20 items, top 12 chunks, 'sentences' late chunking scored by text; "
        "not in the times above). Times: best of "
        f"{args.repeat} passes, wall clock. peak MiB: tracemalloc peak of the allocations made "
        "during one pass (the input itself is not counted).",
        "SQL: default EvidencePolicy (max_sql_rows 100, max_sql_cols 20, first_last, item "
        "limit 10,000 bytes); rows are streamed once: sampled rows kept, the rest hashed and "
        "written to the lake as the full result.",
    ]
    title = "Evidence: packing and bundling throughput, memory"
    columns = ["step", "input", "wall s", "throughput", "peak MiB", "notes"]
    print_table(title, columns, rows, args.markdown, right=("wall s", "throughput", "peak MiB"),
                notes=notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
