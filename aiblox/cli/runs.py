"""``aiblox runs [SWEEP]``: the sweeps an MLflow store holds, or one sweep's points, with what
``aiblox compare`` and ``aiblox eval verify`` accept to name them: the full label (as
``SWEEP:LABEL``), the config hash (a unique prefix will do) and the MLflow run id.
``aiblox runs export REF --trec DIR``: a logged point's TREC run files (logged, or written from
the stage cache by the keys its manifest records; a run file ``aiblox eval --run --mlflow``
scored, as it logged it)."""

from __future__ import annotations

import csv
import hashlib
import io
import re
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from aiblox.cli._common import (
    checked_choice,
    fail,
    out,
    print_json,
    remove_empty,
    stored_text,
    writable_folder,
)
from aiblox.cli._console import console
from aiblox.cli._defaults import STAGE_CACHE_DIR, TRACKING_URI
from aiblox.hashing import SHORT_HASH  # digits a table shows (--format json|csv: all)


class Format(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"
    csv = "csv"


def _value(v: float | None) -> str:
    return "" if v is None else f"{v:.4f}"


def _print_csv(rows: list[dict[str, Any]], columns: list[str]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    out.file.write(buf.getvalue())
    out.file.flush()


def runs(
    sweep: str = typer.Argument("", metavar="SWEEP", help="A sweep's name (its newest run) or "
                                "parent run id: list its points. Without it: list the sweeps."),
    tracking_uri: str = typer.Option(TRACKING_URI, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
                                     help="MLflow tracking URI."),
    fmt_text: str = typer.Option("table", "--format", help="table, json (one JSON array) or "
                               "csv."),
) -> None:
    """List logged sweeps, or one sweep's points (best first on the tune split) with their full
    labels, config hashes and MLflow run ids: name a point to `aiblox compare` and `aiblox eval
    verify` as SWEEP:LABEL, a config-hash or run-hash prefix or its run id."""
    fmt = Format(checked_choice(fmt_text, [f.value for f in Format], "--format"))
    try:
        from aiblox.sweep.runs import list_points, list_sweeps
    except ImportError:  # pragma: no cover - mlflow is the `tracking` extra
        fail("MLflow is not installed: pip install 'aiblox[tracking]'")
        return
    try:
        if sweep:
            row, points = list_points(sweep, tracking_uri)
        else:
            sweeps = list_sweeps(tracking_uri)
    except ValueError as exc:  # TrackingStoreError too: a missing store, named, not created
        fail(str(exc))
        return
    if not sweep:
        if not sweeps:
            fail(f"no sweeps logged in {tracking_uri}: run `aiblox sweep SPEC --tracking-uri "
                 f"{tracking_uri}` first")
        _sweeps(sweeps, fmt)
        return
    _points(row, points, fmt)


def _sweeps(sweeps: list[Any], fmt: Format) -> None:
    rows = [s.model_dump(mode="json") for s in sweeps]
    if fmt is Format.json:
        print_json(rows)
        return
    if fmt is Format.csv:
        _print_csv(rows, list(rows[0]))
        return
    from rich.table import Table

    table = Table(title="sweeps (newest first); aiblox runs SWEEP lists its points")
    for col in ("sweep", "parent run id", "status", "points", "primary", "best point",
                "config", "tune", "report"):
        table.add_column(col, justify="right" if col in ("points", "tune", "report")
                         else "left", no_wrap=True)
    for s in sweeps:  # what the tracking store holds: escaped, never read as rich markup
        table.add_row(*(stored_text(cell) for cell in (
            s.name, s.parent_run_id, f"{s.status}, interrupted" if s.interrupted else s.status,
            f"{s.points} (+{s.deleted} deleted)" if s.deleted else str(s.points), s.primary,
            (s.best_label or "") + (" (deleted)" if s.best_deleted_run_id else ""),
            (s.best_config_hash or "")[:SHORT_HASH],
            f"{s.tune_split} {_value(s.best_tune)}".strip() if s.best_tune is not None else "",
            f"{s.report_split} {_value(s.best_report)}" if s.best_report is not None
            else "")))
    out.print(table)
    _interrupted(sweeps)


def _interrupted(sweeps: list[Any]) -> None:
    """A line per sweep MLflow shows as RUNNING whose process is gone: why, and the command
    that finishes it (``aiblox sweep SPEC --resume``)."""
    from aiblox.sweep.runs import interrupted_note

    for s in sweeps:
        if s.interrupted:
            out.print(stored_text(interrupted_note(s)), soft_wrap=True)


def _points(sweep: Any, points: list[Any], fmt: Format) -> None:
    rows = [p.model_dump(mode="json") for p in points]
    if fmt is Format.json:
        print_json(rows)
        return
    if fmt is Format.csv:
        cols = ["sweep", "label", "config_hash", "run_id", "primary", "tune", "report",
                "baseline", "best"]
        _print_csv(rows, cols)
        return
    from rich.table import Table

    report = f"{sweep.report_split} {sweep.primary}" if sweep.report_split else ""
    table = Table(title=stored_text(f"sweep {sweep.name} (parent run {sweep.parent_run_id}): "
                                    f"{len(points)} points, best first on {sweep.tune_split} "
                                    f"{sweep.primary}; name one as {sweep.name}:LABEL"))
    cols = ["sweep", "label", "config", "run id", f"{sweep.tune_split} {sweep.primary}"]
    cols += [report] if report else []
    cols += ["note"]
    for col in cols:
        table.add_column(stored_text(col), no_wrap=True,
                         justify="right" if sweep.primary in col else "left")
    for p in points:
        note = ", ".join(n for n, on in (("best", p.best), ("baseline", p.baseline)) if on)
        table.add_row(*(stored_text(cell) for cell in (
            p.sweep, p.label, p.config_hash[:SHORT_HASH], p.run_id, _value(p.tune),
            *([_value(p.report)] if report else []), note)))
    out.print(table)
    _interrupted([sweep])
    if sweep.deleted:
        from aiblox.sweep.runs import deleted_best_note

        best = deleted_best_note(sweep)
        out.print(stored_text(f"{sweep.deleted} point run(s) of this sweep deleted from the "
                              f"tracking store, not listed" + (f"; {best}" if best else "")))


def export_runs(
    ref: str = typer.Argument(..., metavar="REF", help="A logged point: its MLflow run id, "
                              "SWEEP:LABEL, a config-hash or run-hash prefix, or a sweep (its "
                              "best point)."),
    trec: Path = typer.Option(..., "--trec", help="Folder to write <label>.<split>.trec into."),
    split: list[str] = typer.Option([], "--split", help="A split to write (repeatable; default: "
                                    "every split of the point)."),
    cache_dir: str = typer.Option(STAGE_CACHE_DIR, "--cache-dir", help="The stage cache the "
                                  "sweep ran with (a run file the point did not log is written "
                                  "from it)."),
    tracking_uri: str = typer.Option(TRACKING_URI, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
                                     help="MLflow tracking URI."),
) -> None:
    """Write a logged point's TREC run files: the ones its run logged (a sweep logs them for the
    points its conclusion names), else written from the stage cache by the stage keys its
    manifest records (the run its metrics were computed from, the same bytes). A run file
    ``aiblox eval --run --mlflow`` scored has no manifest: the files it logged, as logged."""
    try:
        from aiblox.engine.cache import StageCache, StageCacheCorrupt, StageCacheError
        from aiblox.engine.outputs import StageReader
        from aiblox.engine.tracking import (
            logged_runs,
            point_manifest,
            scored_run_files,
            split_file,
            tracking_client,
        )
        from aiblox.sweep.runs import resolve_run
    except ImportError:  # pragma: no cover - mlflow is the `tracking` extra
        fail("MLflow is not installed: pip install 'aiblox[tracking]'")
        return
    made = writable_folder(trec, "--trec")
    try:
        point = resolve_run(ref, tracking_uri, sweep_best=True)
        client = tracking_client(tracking_uri)
        run = client.get_run(point.run_id)
        manifest = point_manifest(client, point.run_id, run)
        if manifest is None:  # a scored run file (QA: it was refused, though it logged its run)
            texts = scored_run_files(client, point.run_id, split or None, run)
        else:
            reader = StageReader(StageCache(cache_dir)) if Path(cache_dir).is_dir() else None
            texts = logged_runs(client, point.run_id, manifest, reader, splits=split or None,
                                run=run)
    except (KeyError, StageCacheError, ValueError) as exc:
        remove_empty(made)  # a failure leaves no folder it made (QA 20: an empty --trec)
        if isinstance(exc, KeyError):
            fail(f"{point.name}: run {point.run_id} logged no run file of split {exc.args[0]} "
                 f"and the stage cache {cache_dir} does not exist; pass --cache-dir (the "
                 f"sweep's), or rerun the sweep with it")
        if isinstance(exc, StageCacheError):
            # an entry never computed there is absent, not damaged
            why = (f"no entry {exc.name}/{exc.key[:16]}" if isinstance(exc, StageCacheCorrupt)
                   and exc.reason == "its meta file is missing" else str(exc))
            fail(f"{point.name}: its run is not in the stage cache {cache_dir} ({why}); rerun "
                 f"the sweep with --cache-dir {cache_dir} to compute it again")
        fail(str(exc))  # unknown or ambiguous references, a missing store, a split
        return
    except BaseException:
        remove_empty(made)
        raise
    stem = export_stem(point.label or (manifest.config_hash[:12] if manifest is not None else
                                       Path(run.data.params.get("run_file", "run")).stem))
    for s, text in texts.items():
        path = trec / f"{stem}.{split_file(s)}.trec"
        path.write_bytes(text.encode("utf-8"))  # the bytes logged, on every platform
        console.print(f"wrote {path} ({text.count(chr(10))} lines)", markup=False,
                      soft_wrap=True)


_SPELLED = ((">>", "_then_"), ("+", "_plus_"), ("%", "_cut_"), ("@", "_at_"), ("=", "-"))
"""A label's operators spelled out in a file name (``bm25 >> rm3`` is ``bm25_then_rm3``)."""


def export_stem(label: str) -> str:
    """A point's label as a file name safe to type in a shell, deterministically: operators
    spelled out (:data:`_SPELLED`), every run of other characters than letters, digits, ``.``,
    ``-`` and ``_`` one ``_`` (``bm25 >> rm3(orig_weight=0.5) >> bm25 @ bm25-d100`` is
    ``bm25_then_rm3_orig_weight-0.5_then_bm25_at_bm25-d100``); never starting with ``-`` or
    ``.``; a label past 120 characters cut, with 12 hex of its sha256 after the cut."""
    text = label
    for old, new in _SPELLED:
        text = text.replace(old, new)
    text = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9._-]+", "_", text)).strip("_.-")
    if len(text) > 120:
        text = f"{text[:120].rstrip('_.-')}_{hashlib.sha256(label.encode()).hexdigest()[:12]}"
    return text or "run"
