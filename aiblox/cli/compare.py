"""``aiblox compare``: two logged sweep points (MLflow child runs) side by side, with a paired
significance test per metric and win/tie/loss counts per query; for selection-policy points, the
evidence that entered or left per query (counts, and the queries that changed most)."""

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
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (with every "
                                 "query's evidence changes for selection-policy runs)."),
    changed: int = typer.Option(10, "--changed", help="Selection-policy runs: queries shown "
                                "whose evidence changed most."),
) -> None:
    """Per-metric deltas (B - A) with a paired t-test on per-query values, and win/tie/loss;
    for selection-policy runs, the evidence that entered or left per query."""
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
    if result.evidence is not None and result.evidence_summary is not None:
        e = result.evidence_summary
        console.print(f"evidence: {e['changed']} of {e['queries']} queries changed; "
                      f"{e['entered']} chunks entered, {e['left']} left, {e['kept']} kept")
        if result.evidence and changed > 0:
            ev = Table(title=f"queries whose evidence changed most (top {changed})")
            for col in ("query", "entered (only B)", "left (only A)", "kept"):
                ev.add_column(col, justify="right" if col == "kept" else "left")
            for c in result.evidence[:changed]:
                ev.add_row(c.query_id, ", ".join(c.entered) or "-", ", ".join(c.left) or "-",
                           str(c.kept) + (" (reordered)" if c.reordered else ""))
            console.print(ev)
