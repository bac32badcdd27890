"""``aiblox report``: a self-contained HTML report and a Markdown summary of a logged sweep,
also logged as artifacts of the sweep's MLflow parent run."""

from __future__ import annotations

from pathlib import Path

import typer

from aiblox.cli._common import checked_at_least, fail, print_json
from aiblox.cli._common import out as results
from aiblox.cli._defaults import TRACKING_URI


def report(
    sweep: str = typer.Argument(..., metavar="SWEEP", help="Parent run id or sweep name."),
    tracking_uri: str = typer.Option(TRACKING_URI, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
                                     help="MLflow tracking URI."),
    out: str = typer.Option("", "--out", help="Output folder (default: reports/<sweep>, which "
                            "must stay inside reports/)."),
    top: int = typer.Option(20, "--top", help="Leaderboard rows."),
    no_log: bool = typer.Option(False, "--no-log", help="Do not log the report to MLflow."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Write report.html (no network needed to view it) and report.md for SWEEP."""
    checked_at_least(top, 1, "--top")
    try:
        from aiblox.sweep.report import write_report
    except ImportError:  # pragma: no cover - mlflow is the `tracking` extra
        fail("MLflow is not installed: pip install 'aiblox[tracking]'")
        return
    try:
        info = write_report(sweep, tracking_uri, out or default_out(sweep),
                            log_artifacts=not no_log, top=top)
    except ValueError as exc:
        fail(str(exc))
        return
    if as_json:
        print_json(info)
        return
    results.print(f"wrote {info['html']} and {info['markdown']} "
                  f"(best config {info['best_config_hash'][:16]})")
    results.print(f"reproduce: {info['reproduce']}")


REPORTS = "reports"


def default_out(sweep: str) -> str:
    """``reports/<sweep>``, resolved: a SWEEP that would lead outside ``reports/`` (``..``,
    ``.``, a path, a leading dot) is refused in one line (exit 2)."""
    base = Path(REPORTS).resolve()
    target = (base / sweep).resolve()
    if sweep.startswith(".") or target.parent != base:
        fail(f"SWEEP {sweep!r} would write outside {REPORTS}/ (resolves to {target}); pass a "
             f"sweep name or run id, or choose the folder with --out")
    return str(Path(REPORTS) / sweep)
