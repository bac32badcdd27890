"""Helpers shared by the CLI commands: opening stores and embedders, printing results."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

# the commands' stderr console, re-exported: progress and tables for people go to stderr,
# ``--json`` output alone goes to stdout
from aiblox.cli._console import console, out  # noqa: F401
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.stores import Store, mask_password, open_store

DB_HELP = ("Store: a DuckDB file path or a postgresql+psycopg:// URL (default: the dataset's "
           "own store under .aiblox/datasets).")
STORE_HELP = "Store: a DuckDB file path or a postgresql+psycopg:// URL (or use --dataset)."
DATASET_STORE_HELP = ("Use this dataset's default store (the one `aiblox ingest DATASET` "
                      "builds) instead of --db.")


def fail(message: str) -> None:
    """Print ``error: message`` as one line and exit with status 2."""
    from aiblox.cli._errors import print_error

    print_error(message)
    raise typer.Exit(2)


def open_db(db: str) -> Store:
    """Open the store at ``db`` or exit with a clear message."""
    try:
        return open_store(db)
    except Exception as exc:  # noqa: BLE001 - shown to the user, not swallowed
        fail(f"cannot open store {mask_password(db)}: {exc}")
        raise  # unreachable


def open_existing_store(db: str, dataset: str) -> Store:
    """Open :func:`existing_store` (never creating a store)."""
    return open_db(existing_store(db, dataset))


def existing_store(db: str, dataset: str) -> str:
    """The store a command reads: ``--db``, or the default store of ``--dataset``. A DuckDB file
    that does not exist is an error (it is never created here)."""
    if db and dataset:
        fail("give --db or --dataset, not both")
    if dataset:
        from aiblox.eval.datasets import DatasetError
        from aiblox.eval.workspace import default_store_path

        try:
            db = default_store_path(dataset)
        except DatasetError as exc:
            fail(str(exc))
        if not Path(db).exists():
            fail(f"dataset {dataset!r} has no store yet ({db}): run `aiblox ingest {dataset}`")
    if not db:
        fail("name a store: --db PATH (or URL), or --dataset NAME for the store `aiblox ingest "
             "NAME` builds")
    local = db.removeprefix("duckdb:///")
    if "://" not in local and local != ":memory:" and not Path(local).exists():
        fail(f"no store at {db}: build one with `aiblox ingest DATASET --db {db}`")
    return db


def cached_embedder(name: str, store: Store, progress: bool = True) -> CachedEmbedder:
    """The named embedder behind the store's embedding cache."""
    try:
        return CachedEmbedder(get_embedder(name), store, progress=progress)
    except (ValueError, ImportError) as exc:
        fail(str(exc))
        raise


def print_json(value: Any) -> None:
    """One JSON object on stdout."""
    typer.echo(json.dumps(value, sort_keys=True, ensure_ascii=False))


def metrics_table(title: str, rows: list[dict[str, Any]], metric_names: list[str]) -> Table:
    """A rich table: one row per result, one column per metric."""
    table = Table(title=title)
    for col in ("dataset", "split", "mode"):
        table.add_column(col)
    for m in metric_names:
        table.add_column(m, justify="right")
    table.add_column("q/s", justify="right")
    for r in rows:
        table.add_row(r["dataset"], r["split"], r["mode"],
                      *[f"{r['metrics'][m]:.4f}" for m in metric_names],
                      f"{r['timings'].get('qps', 0):.0f}")
    return table


def quiet_progress() -> bool:
    """Progress bars unless ``AIBLOX_NO_PROGRESS`` is set."""
    return not os.environ.get("AIBLOX_NO_PROGRESS")


def checked_metrics(names: list[str], option: str = "--metric") -> list[str]:
    """``names`` when every one is a ranx metric, else one ``error:`` line naming ``option``
    (before any work: a typo must not cost a whole evaluation)."""
    from aiblox.eval.metrics.names import validate_metrics

    try:
        return validate_metrics(names)
    except ValueError as exc:
        fail(f"{option}: {exc}")
        raise  # unreachable


def writable_folder(path: str | Path, option: str) -> None:
    """Create ``path`` (with parents) and check a file can be written in it, before any work;
    else one ``error:`` line naming ``option`` (a read-only or full disk, a path through a
    regular file)."""
    import tempfile

    from aiblox.cli._errors import fault_message

    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".aiblox-write-check-"):
            pass
    except OSError as exc:
        fail(f"{option} {path}: cannot write there: {fault_message(exc)}")
