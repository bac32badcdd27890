"""``aiblox eval``: score retrieval modes on a labelled dataset with ranx."""

from __future__ import annotations

from pathlib import Path

import typer

from aiblox.cli._common import (
    checked_metrics,
    console,
    fail,
    metrics_table,
    print_json,
    quiet_progress,
)
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.eval.chunk_eval import ChunkEvalResult, evaluate_chunks
from aiblox.eval.datasets import DatasetError, load_dataset
from aiblox.eval.metrics import DEFAULT_METRICS
from aiblox.eval.runner import EvalResult, evaluate_retrieval
from aiblox.eval.workspace import open_workspace
from aiblox.retrieval import make_retriever
from aiblox.stores import StoreError


def eval_command(
    dataset: str = typer.Argument(..., help="Dataset name (sample, scifact, ...) or BEIR folder."),
    split: str = typer.Option("test", help="qrels split to score."),
    mode: list[str] = typer.Option(["hybrid"], "--mode",
                                   help="bm25, dense or hybrid; repeat for several."),
    db: str = typer.Option("", "--db", help="Store to use, synced to the dataset first (only what "
                                            "is missing is done); default: the dataset's own "
                                            "store under .aiblox/datasets."),
    embedder: str = typer.Option("minilm", "--embedder", help=(
        "Embedder: minilm, hashing, or a sentence-transformers model folder or package.")),
    vectors: list[Path] = typer.Option([], "--vectors", help="Precomputed vectors parquet."),
    blend: str = typer.Option("rrf", help="Fusion: rrf or linear."),
    rrf_k: int = typer.Option(60, "--rrf-k", help="RRF constant k."),
    w_text: float = typer.Option(0.35, "--w-text", help="Linear blend weight of BM25."),
    w_vec: float = typer.Option(0.65, "--w-vec", help="Linear blend weight of the vector score."),
    normalize: str = typer.Option("sigmoid", help="minmax, zscore, sigmoid or none."),
    missing: str = typer.Option("zero", help="Linear blend score of a document absent from a "
                                             "list: zero or list_min."),
    depth: int = typer.Option(100, help="Candidates taken from each signal before fusion."),
    top_k: int = typer.Option(100, "--top-k", help="Fused candidates scored per query."),
    metric: list[str] = typer.Option(list(DEFAULT_METRICS), "--metric",
                                     help="ranx metric name; repeatable."),
    ignore_identical_ids: bool = typer.Option(
        False, "--ignore-identical-ids",
        help="Drop a retrieved document whose id equals the query id (BEIR/MTEB protocol)."),
    chunks: bool = typer.Option(False, "--chunks", help="Also report chunk-level metrics "
                                                        "(implied by --chunker)."),
    chunker: str = typer.Option("", "--chunker",
                                help="Chunker for chunk-level metrics (token_window, "
                                     "sentences, headings, whole)."),
    max_chunk_tokens: int | None = typer.Option(None, "--max-chunk-tokens",
                                                help="Token budget per chunk."),
    overlap_tokens: int | None = typer.Option(None, "--overlap-tokens",
                                              help="Tokens shared by consecutive chunks."),
    chunk_strategy: str = typer.Option("late", "--chunk-strategy",
                                       help="late, precomputed or mixed."),
    top_k_chunks: int = typer.Option(12, "--top-k-chunks", help="Evidence chunks returned."),
    chunk_items: int = typer.Option(10, "--chunk-items",
                                    help="Top fused candidates chunked per query."),
    per_item_chunk_cap: int = typer.Option(3, "--per-item-chunk-cap",
                                           help="Evidence chunks kept per document."),
    chunk_limit: int | None = typer.Option(None, "--chunk-limit",
                                           help="Chunk metrics on the first N query ids only."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Score retrieval on DATASET's SPLIT with ranx."""
    metric = checked_metrics(metric)
    try:
        ds = load_dataset(dataset, splits=[split])
    except DatasetError as exc:
        fail(str(exc))
    results: list[EvalResult] = []
    chunk_results: list[ChunkEvalResult | None] = []
    with_chunks = chunks or bool(chunker)
    try:
        ws = open_workspace(ds, db or None, embedder, vectors=vectors,
                            with_vectors=any(m != "bm25" for m in mode),
                            progress=quiet_progress())
    except (StoreError, ValueError, ImportError) as exc:
        fail(str(exc))
        raise  # unreachable
    try:
        for m in mode:
            try:
                prefs = RetrievalPrefs(
                    query_text="", mode=m, top_k_items=top_k,  # type: ignore[arg-type]
                    ignore_identical_ids=ignore_identical_ids,
                    fts={"top_k": depth}, vector={"top_k": depth},  # type: ignore[arg-type]
                    scoring={"blend": blend, "rrf_k": rrf_k, "w_text": w_text,  # type: ignore
                             "w_vec": w_vec, "normalize": normalize, "missing": missing})
            except ValueError as exc:
                fail(str(exc))
            results.append(evaluate_retrieval(ws.retriever, ds, split, prefs, metric,
                                              progress=quiet_progress()))
            chunk_results.append(None)
            if with_chunks:
                try:
                    cprefs = RetrievalPrefs.model_validate({
                        **prefs.model_dump(), "top_k_items": chunk_items,
                        "top_k_chunks": top_k_chunks, "per_item_chunk_cap": per_item_chunk_cap,
                        "chunking": {"strategy": chunk_strategy,
                                     "chunker_id": chunker or "sentences",
                                     "max_chunk_tokens": max_chunk_tokens,
                                     "overlap_tokens": overlap_tokens}})
                    late = make_retriever(ws.store, ws.embedder if m != "bm25" else None)
                    chunk_results[-1] = evaluate_chunks(late, ds, split, cprefs, metric,
                                                        limit=chunk_limit,
                                                        progress=quiet_progress())
                except ValueError as exc:
                    fail(str(exc))
    finally:
        ws.close()
    if as_json:
        out = [r.model_dump(mode="json") for r in results]
        for o, c in zip(out, chunk_results, strict=True):
            if c is not None:
                o["chunks"] = c.model_dump(mode="json")
        print_json(out[0] if len(out) == 1 else {"results": out})
        return
    console.print(metrics_table(f"{ds.name} / {split}", [r.model_dump() for r in results],
                                list(metric)))
    for r, c in zip(results, chunk_results, strict=True):
        if c is not None:
            recall = "  ".join(f"{k} {v:.4f}" for k, v in c.answer_recall.items())
            proj = "  ".join(f"{k} {v:.4f}" for k, v in c.projection_metrics.items())
            console.print(f"{r.mode} chunks {c.chunker_id} ({c.n_queries} queries): {recall}  "
                          f"evidence tokens {c.evidence_tokens['all']:.1f}  "
                          f"{c.projection}: {proj}  cache hits "
                          f"{c.counts.get('chunk_cache_hits', 0)} misses "
                          f"{c.counts.get('chunk_cache_misses', 0)}")
    for r in results:
        console.print(f"{r.mode}: run {r.hashes['run'][:16]}  config {r.hashes['config'][:16]}  "
                      f"dataset {r.hashes['dataset'][:16]}")
