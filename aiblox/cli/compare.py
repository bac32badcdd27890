"""``aiblox compare``: two logged sweep points (MLflow child runs) side by side, with a paired
significance test per metric and win/tie/loss counts per query."""

from __future__ import annotations

import typer
from rich.table import Table

from aiblox.cli._common import console, fail, print_json
from aiblox.eval.sweep import DEFAULT_TRACKING_URI


def compare(
    run_a: str = typer.Argument(..., metavar="RUN_A", help="MLflow run id of A (baseline)."),
    run_b: str = typer.Argument(..., metavar="RUN_B", help="MLflow run id of B (candidate)."),
    tracking_uri: str = typer.Option(DEFAULT_TRACKING_URI, "--tracking-uri",
                                     help="MLflow tracking URI."),
    split: str = typer.Option("test", "--split", help="Split to compare on."),
    primary: str = typer.Option("", "--primary", help="Metric of the headline win/tie/loss "
                                "(default: the sweep's primary metric)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Per-metric deltas (B - A) with a paired t-test on per-query values, and win/tie/loss."""
    try:
        from aiblox.eval.sweep.compare import compare_runs
    except ImportError:  # pragma: no cover - mlflow is the `tracking` extra
        fail("MLflow is not installed: pip install 'aiblox[tracking]'")
        return
    try:
        result = compare_runs(run_a, run_b, tracking_uri, split=split,
                              primary=primary or None, alpha=alpha)
    except ValueError as exc:
        fail(str(exc))
        return
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    table = Table(title=f"{result.label_b} (B) vs {result.label_a} (A) on {split}, "
                        f"{result.n_queries} queries, paired {result.test} t-test")
    for col in ("metric", "A", "B", "delta", "p", "sig", "win", "tie", "loss"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for m in result.metrics:
        table.add_row(m.metric, f"{m.a:.4f}", f"{m.b:.4f}", f"{m.delta:+.4f}",
                      f"{m.p_value:.4g}", "*" if m.significant else "", str(m.wins),
                      str(m.ties), str(m.losses))
    console.print(table)
    p = result.primary_row
    console.print(f"{result.primary}: B wins {p.wins}, ties {p.ties}, loses {p.losses} "
                  f"of {result.n_queries} queries")
