"""``aiblox eval verify``: re-execute a logged sweep point from its manifest alone and say whether
every stage gives the same bytes, or which stage first differs."""

from __future__ import annotations

from pathlib import Path

import typer

from aiblox.cli._common import fail, out, print_json, show_progress
from aiblox.cli._defaults import TRACKING_URI
from aiblox.cli._errors import print_error
from aiblox.hashing import SHORT_HASH, short_hash

_HEX = frozenset("0123456789abcdef")


def verify_command(
    run: str = typer.Argument(..., metavar="RUN",
                              help="A point (its MLflow run id, SWEEP:LABEL with a label or "
                                   "its unique prefix, SWEEP:best or SWEEP:baseline, or a "
                                   "config-hash or run-hash prefix), a sweep (parent run id "
                                   "or name: its best point), or a manifest.json path."),
    tracking_uri: str = typer.Option(TRACKING_URI, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
                                     help="MLflow tracking URI the point was logged to."),
    db: str = typer.Option("", "--db", help="Store to re-run retrieval on (synced to the dataset "
                                            "first), of the point's backend; default: the "
                                            "dataset's own store. A point scored on "
                                            "PostgreSQL needs its URL here (the manifest holds "
                                            "none): --db \"$AIBLOX_DB\"."),
    dataset: str = typer.Option("", "--dataset", metavar="PATH",
                                help="Re-read the point's dataset here (a copy, when the "
                                     "folder the point was computed from is gone; checked by "
                                     "its hash); default: the folder the manifest records."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Re-execute RUN's logged point from its config alone; exit 1 names the first stage that
    differs."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from aiblox.data import DatasetError
    from aiblox.engine.tracking import check_tracking_store
    from aiblox.sweep.verify import (
        logged_artifacts,
        logged_manifest,
        logged_metrics,
        verify_point,
    )
    from aiblox.sweep.verify_cv import verify_cv
    from aiblox.sweep.verify_summary import verify_summary
    from aiblox.sweep.verify_sweep import logged_sweep

    try:
        if not (run.endswith(".json") or Path(run).is_file()):
            check_tracking_store(tracking_uri)  # a read: never create an empty database
        manifest, source = logged_manifest(run, tracking_uri)
        run_id = source.split()[1] if source.startswith("run ") else None
        logged = logged_metrics(manifest, run_id, tracking_uri) if run_id else None
        files = logged_artifacts(manifest, run_id, tracking_uri) if run_id else None
    except ValueError as exc:
        fail(str(exc))
        return
    try:
        rep = verify_point(manifest, db=db or None, dataset_path=dataset or None,
                           progress=show_progress(), logged=logged, artifacts=files)
        # a sweep (its parent run and children, listed once for both checks)
        sweep = logged_sweep(run, tracking_uri) if source.startswith("run ") else None
        # a [cv] sweep: its k-fold result recomputed from the children's logged per-query
        # values, against every copy of it (cv_folds.json, the summary, the parent's metrics)
        cv_checks = verify_cv(sweep) if sweep else None
        # a sweep: what its parent run concluded (best point, leaderboard, intervals,
        # significance table, Pareto front), recomputed from its point runs
        sweep_checks = verify_summary(sweep) if sweep else None
    except (DatasetError, ValueError) as exc:
        fail(str(exc))
        return
    if cv_checks or sweep_checks:
        checks = rep.checks + (cv_checks or []) + (sweep_checks or [])
        bad = next((c.where for c in checks if not c.identical), None)
        rep = rep.model_copy(update={"checks": checks, "identical": bad is None,
                                     "first_difference": bad})
    for note in rep.notes:
        print_error(note, prefix="note")
    if as_json:
        print_json({"source": source, **rep.model_dump(mode="json")})
    else:
        # results to stdout, whole (aiblox eval verify > v.txt holds them): values at full
        # precision, hashes as every command shows them (their start)
        table = Table(title=f"verify {manifest.sweep} point {short_hash(rep.config_hash)} "
                            f"({source})")
        for col in ("check", "logged", "recomputed", "same"):
            table.add_column(col, overflow="fold")
        for c in rep.checks:
            table.add_row(Text(c.where), Text(shown(c.expected)), Text(shown(c.actual)),
                          "yes" if c.identical else "[red]NO[/red]")
        out.print(table)
        if rep.identical:
            out.print(f"identical: {len(rep.checks)} checks, every stage gives the logged "
                      f"bytes and every logged metric value is recomputed exactly"
                      + ((" (per query, and the logged run files line by line)"
                          if any(a.trec is not None for a in files.values())
                          else " (per query)") if files else "")
                      + (" (and the k-fold result, in the summary, cv_folds.json and the "
                         "parent's metrics, from the logged per-query values)"
                         if cv_checks else "")
                      + (" (and the sweep's best point, leaderboard, intervals, significance "
                         "table and Pareto front from its points' logged values)"
                         if sweep_checks else ""), soft_wrap=True)
        else:
            first = next(c for c in rep.checks if not c.identical)
            said = (f": {escape(first.detail)}" if first.detail else
                    f" (logged {escape(first.expected)}, recomputed {escape(first.actual)})")
            out.print(f"[red]differs[/red]: first at {escape(rep.first_difference or '')}"
                      f"{said}", soft_wrap=True)
    if not rep.identical:
        raise typer.Exit(1)


def shown(value: str) -> str:
    """A check's value as the table shows it: a hex digest (or ``key:hash``, a stage's key and
    output hash) as the start every command shows (:func:`~aiblox.hashing.short_hash`, the
    prefix ``aiblox compare`` and ``eval verify`` accept); anything else (a metric value at
    full precision, a count, a model id) whole."""
    parts = value.split(":")
    if all(len(p) > SHORT_HASH and set(p) <= _HEX for p in parts):
        return ":".join(short_hash(p) for p in parts)
    return value
