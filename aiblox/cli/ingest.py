"""``aiblox ingest``: load a BEIR dataset into a store, with vectors."""

from __future__ import annotations

from pathlib import Path

import typer

from aiblox.cli._common import DEFAULT_DB, cached_embedder, console, fail, open_db, print_json
from aiblox.eval.datasets import DatasetError, load_dataset
from aiblox.eval.runner import prepare_store


def ingest(
    dataset: str = typer.Argument(..., help="Dataset name (sample, scifact, ...) or BEIR folder."),
    db: str = typer.Option(DEFAULT_DB, "--db", help="Store: a DuckDB file path."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder name (minilm, hashing)."),
    vectors: list[Path] = typer.Option([], "--vectors",
                                       help="Parquet file of precomputed vectors (_id, "
                                            "text_sha256, vector) put into the embedding cache; "
                                            "repeatable."),
    auto_vectors: bool = typer.Option(True, help="Find precomputed vectors beside the dataset."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Ingest DATASET into the store; idempotent (a second run changes nothing)."""
    try:
        ds = load_dataset(dataset, splits=[])
    except DatasetError as exc:
        fail(str(exc))
    store = open_db(db)
    try:
        emb = cached_embedder(embedder, store)
        report = prepare_store(store, ds, emb, vectors=vectors, auto_vectors=auto_vectors)
    except Exception as exc:  # noqa: BLE001
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json({"dataset": ds.name, "dataset_hash": ds.hash, **report.model_dump()})
    else:
        console.print(f"[green]ingested[/green] {ds.name} into {db}: {report.items.inserted} new, "
                      f"{report.items.updated} updated, {report.items.unchanged} unchanged; "
                      f"{report.vectors_written} vectors written "
                      f"({report.embedding_cache_misses} embedded, "
                      f"{report.embedding_cache_hits} from cache)")
