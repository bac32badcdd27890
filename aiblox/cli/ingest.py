"""``aiblox ingest``: load a BEIR dataset into a store, with vectors."""

from __future__ import annotations

from pathlib import Path

import typer

from aiblox.cli._common import (
    DB_HELP,
    DEVICE_HELP,
    cached_embedder,
    checked_db,
    checked_device,
    checked_embedder,
    fail,
    open_db,
    out,
    print_json,
    show_progress,
)


def ingest(
    dataset: str = typer.Argument(..., help=(
        "Dataset name (sample, scifact, ...), a BEIR or CSV/TSV/parquet folder, or a "
        "dataset.toml.")),
    db: str = typer.Option("", "--db", help=DB_HELP),
    embedder: str = typer.Option("minilm", "--embedder", help=(
        "Embedder: minilm, hashing, or a sentence-transformers model folder or package.")),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP + " With --executor ray: "
                               "cuda embeds on the workers' GPUs (one per task)."),
    vectors: list[Path] = typer.Option([], "--vectors",
                                       help="Parquet file of precomputed vectors (_id, "
                                            "text_sha256, vector), always read and checked "
                                            "(every _id a document or query of DATASET, its "
                                            "text's sha256, the embedder's dimension); its "
                                            "vectors replace those in the store; repeatable."),
    auto_vectors: bool = typer.Option(True, help="Find precomputed vectors beside the dataset."),
    replace: bool = typer.Option(False, "--replace", help="The store holds another dataset: "
                                 "delete its items (with vectors and cached chunks) first."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    executor: str = typer.Option("local", "--executor", help="Where texts are embedded: local "
                                 "(this process) or ray (batches as tasks on a Ray cluster; "
                                 "the vectors are written here, each text embedded once)."),
    address: str = typer.Option("", "--address", help="With --executor ray: the cluster's "
                                "address (HOST:PORT); empty: a local Ray instance."),
) -> None:
    """Make the store hold exactly DATASET (adding, changing and deleting items), with vectors;
    idempotent (a second run changes nothing). A store holding another dataset is refused. The
    corpus streams: documents are read, written and embedded a batch at a time."""
    from aiblox.cluster import ExecutorError, check_executor
    from aiblox.data import DatasetError
    from aiblox.embedding.device import DeviceError, parse_device
    from aiblox.engine.workspace import (
        close_made,
        dataset_binding,
        default_store_path,
        ingest_dataset,
        new_store_file,
    )
    from aiblox.stores.identity import read_binding

    checked_db(db)  # a URL naming no store: refused before anything is loaded or made
    try:
        binding = dataset_binding(dataset)
    except DatasetError as exc:
        fail(str(exc))
    try:
        device = parse_device(device)
    except DeviceError as exc:
        fail(str(exc))
    model = checked_embedder(embedder, device)  # before the store is made
    try:
        check_executor(executor, address or None)
    except ExecutorError as exc:
        fail(str(exc))
    if executor != "ray":  # with ray, the workers' GPUs count, not this machine's
        checked_device(device)
    db = db or default_store_path(binding)
    # a DuckDB file this command makes: removed again if the ingest fails before any item is
    # in it (a bad corpus line left an empty store behind, for the next command to find)
    made = new_store_file(db)
    store = open_db(db, model, embedder)  # at the embedder's dimension, or refused
    ingested = False
    try:
        if executor == "ray":
            from aiblox.embedding.ray import ray_cached_embedder

            try:  # the workers build the embedder by its name
                emb = ray_cached_embedder(embedder, store, address or None,
                                          progress=show_progress(), device=device)
            except (ValueError, ImportError) as exc:
                fail(str(exc))
        else:
            emb = cached_embedder(model, store, progress=show_progress())
        try:
            report = ingest_dataset(store, binding.source, emb, vectors=vectors,
                                    auto_vectors=auto_vectors, replace=replace,
                                    progress=show_progress())
        except ExecutorError as exc:  # the cluster lost mid-embedding: one line, not a trace
            fail(f"{exc} (the items written so far are kept: the store is marked half-synced "
                 f"and every reader refuses it until the ingest run again completes it)")
        ingested = True
        held = read_binding(store)  # what the store records: every line below names it
    finally:
        close_made(store, None if ingested else made)
    from aiblox.stores import mask_password

    shown = mask_password(db)  # printed: never with its password
    binding = held or binding
    if as_json:
        print_json({"dataset": binding.name, "source": binding.source, "db": shown,
                    **report.model_dump()})
    else:
        files = (f"; {report.vector_rows} rows of --vectors checked, "
                 f"{report.vectors_imported} new or changed" if vectors else "")
        if report.up_to_date:
            out.print(f"[green]up to date[/green]: {shown} holds {binding.name} "
                      f"({report.items.unchanged} items, vectors complete){files}")
        else:
            done = (f" (completing the ingest interrupted, started {report.completed})"
                    if report.completed else "")
            out.print(f"[green]ingested[/green] {binding.name} into {shown}{done}: "
                      f"{report.changes()}{files}")
