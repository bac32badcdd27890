"""``aiblox ingest``: load a BEIR dataset into a store, with vectors."""

from __future__ import annotations

from pathlib import Path

import typer

from aiblox.cli._common import DB_HELP, cached_embedder, console, fail, open_db, print_json
from aiblox.eval.datasets import DatasetError, load_dataset
from aiblox.eval.workspace import default_store_path, prepare_store


def ingest(
    dataset: str = typer.Argument(..., help="Dataset name (sample, scifact, ...) or BEIR folder."),
    db: str = typer.Option("", "--db", help=DB_HELP),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder name (minilm, hashing)."),
    vectors: list[Path] = typer.Option([], "--vectors",
                                       help="Parquet file of precomputed vectors (_id, "
                                            "text_sha256, vector) put into the embedding cache; "
                                            "repeatable."),
    auto_vectors: bool = typer.Option(True, help="Find precomputed vectors beside the dataset."),
    replace: bool = typer.Option(False, "--replace", help="The store holds another dataset: "
                                 "delete its items (with vectors and cached chunks) first."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Make the store hold exactly DATASET (adding, changing and deleting items), with vectors;
    idempotent (a second run changes nothing). A store holding another dataset is refused."""
    try:
        ds = load_dataset(dataset, splits=[])
    except DatasetError as exc:
        fail(str(exc))
    db = db or default_store_path(ds)
    store = open_db(db)
    try:
        emb = cached_embedder(embedder, store)
        report = prepare_store(store, ds, emb, vectors=vectors, auto_vectors=auto_vectors,
                               replace=replace)
    except Exception as exc:  # noqa: BLE001
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json({"dataset": ds.name, "dataset_hash": ds.hash, "db": db,
                    **report.model_dump()})
    elif report.up_to_date:
        console.print(f"[green]up to date[/green]: {db} holds {ds.name} "
                      f"({report.items.unchanged} items, vectors complete)")
    else:
        i = report.items
        console.print(f"[green]ingested[/green] {ds.name} into {db}: {i.inserted} new, "
                      f"{i.updated} updated, {i.deleted} deleted, {i.unchanged} unchanged; "
                      f"{report.vectors_written} vectors written "
                      f"({report.embedding_cache_misses} embedded, "
                      f"{report.embedding_cache_hits} from cache)")
