"""``aiblox compare``: two logged sweep points (MLflow child runs) side by side, with a paired
significance test per metric (the metrics one family, corrected together), win/tie/loss counts
per query under each metric's direction, the queries that moved most, and for selection-policy
points the evidence that entered or left per query."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from aiblox.cli._common import (
    checked_alpha,
    checked_at_least,
    checked_choice,
    fail,
    out,
    print_json,
    stored_text,
)
from aiblox.cli._defaults import TRACKING_URI

if TYPE_CHECKING:
    from aiblox.sweep.compare import MetricDelta

RUN_HELP = ("a 32-hex MLflow run id, SWEEP:LABEL (a label or its unique prefix; SWEEP:best, "
            "SWEEP:baseline), a config-hash prefix (aiblox runs lists them) or a run-hash "
            "prefix (for a sweep point the run hash aiblox report shows; for a run aiblox "
            "eval --mlflow logged, the run hash aiblox eval prints)")


_TEST = {"t": "student", "wilcoxon": "wilcoxon", "fisher": "fisher"}
"""``--test`` as typed -> :mod:`aiblox.metrics.significance`'s name."""
_CORRECTIONS = ("holm", "bonferroni", "none")
"""``--correction`` values: of the p-values over the metrics compared."""


def compare(
    run_a: str = typer.Argument(..., metavar="RUN_A", help=f"A (baseline): {RUN_HELP}."),
    run_b: str = typer.Argument(..., metavar="RUN_B", help=f"B (candidate): {RUN_HELP}."),
    tracking_uri: str = typer.Option(TRACKING_URI, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
                                     help="MLflow tracking URI."),
    split: str = typer.Option("", "--split", help="Split to compare on (default: the one both "
                              "runs logged per-query values of; test where they share "
                              "several)."),
    primary: str = typer.Option("", "--primary", help="Metric of the headline win/tie/loss "
                                "and of the queries that moved (default: A's primary metric, "
                                "its sweep's or the first its eval computed; else B's; else "
                                "ndcg@10 or the first default metric both have)."),
    test_text: str = typer.Option("t", "--test", help="Paired test: t (Student's "
                                    "t-test), wilcoxon (signed-rank) or fisher (randomisation)."),
    correction_text: str = typer.Option(
        "holm", "--correction", help="Correction of the p-values over the "
        "metrics compared."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level, between 0 and 1 "
                                "(adjusted p <= it)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (with every "
                                 "query that moved, and every query's evidence changes for "
                                 "selection-policy runs)."),
    changed: int = typer.Option(10, "--changed", help="Queries shown that moved most (and, "
                                "for selection-policy runs, whose evidence changed most); 0: "
                                "none."),
    across_datasets: bool = typer.Option(False, "--across-datasets", help="Pair the queries of "
                                         "runs scored on different datasets by id (refused "
                                         "otherwise: the same queries with revised "
                                         "judgements, say)."),
) -> None:
    """Per-metric means and deltas (B - A) over the queries both runs have, with a paired test on
    their per-query values, corrected over the metrics, and win/tie/loss under each metric's
    direction (for a cost such as tokens, a decrease is a win); the queries that moved most;
    for selection-policy runs, the evidence that entered or left per query."""
    from rich.table import Table

    from aiblox.metrics.marks import delta_text, legend, p_text, value_text

    checked_alpha(alpha)
    checked_at_least(changed, 0, "--changed")

    try:
        from aiblox.metrics.significance import TEST_NAMES
        from aiblox.sweep.compare import compare_runs, dataset_text
    except ImportError:  # pragma: no cover - mlflow is the `tracking` extra
        fail("MLflow is not installed: pip install 'aiblox[tracking]'")
        return
    # plain text checked here: one error line naming the choices, as every command gives
    stat = _TEST[checked_choice(test_text, _TEST, "--test")]
    correction = checked_choice(correction_text, _CORRECTIONS, "--correction")
    try:
        result = compare_runs(run_a, run_b, tracking_uri, split=split or None,
                              primary=primary or None, alpha=alpha, test=stat,  # type: ignore[arg-type]
                              correction=correction,  # type: ignore[arg-type]
                              across_datasets=across_datasets)
    except ValueError as exc:
        fail(str(exc))
        return
    if as_json:
        print_json({**result.model_dump(mode="json"), "test_name": TEST_NAMES[stat]})
        return
    family = (f"{correction}-corrected over {len(result.metrics)} metrics"
              if correction != "none" else "uncorrected")
    # labels, split names and query and chunk ids as the runs stored them: escaped, never
    # read as rich markup (aiblox.cli._common.stored_text)
    table = Table(title=stored_text(f"{result.name_b or result.label_b} (B) vs "
                                    f"{result.name_a or result.label_a} (A) on {result.split}, "
                                    f"{result.queries_shared} queries, {TEST_NAMES[stat]}, "
                                    f"{family}"))
    for col in ("metric", "better", "A", "B", "delta", "p", "p (adjusted)", "win", "tie",
                "loss"):
        table.add_column(col, justify="left" if col in ("metric", "better") else "right")
    for m in result.metrics:  # one precision for every number (aiblox.metrics.marks)
        table.add_row(m.metric, m.direction, value_text(m.a), value_text(m.b),
                      delta_text(m.delta, m.significant), p_text(m.p_value, result.alpha),
                      p_text(m.p_adjusted, result.alpha), str(m.wins), str(m.ties), str(m.losses))
    if result.datasets:
        a, b = (dataset_text(n, h) for n, h in zip(result.dataset_names or ["", ""],
                                                     result.datasets, strict=True))
        out.print(f"different datasets: A was scored on {a}, B on {b}; their queries are "
                  f"paired by id (--across-datasets)", markup=False, highlight=False)
    partial = result.partial()
    shared = result.queries_shared
    if (result.queries_a, result.queries_b) != (shared, shared):
        out.print(f"query sets differ: A has {result.queries_a} queries on {result.split}, "
                  f"B has {result.queries_b}, {shared} shared; every number below is over the "
                  f"{shared} shared" + (", but for the metrics named next" if partial else ""),
                  markup=False, highlight=False)
    for m in partial:  # a metric without a value for some queries: its row counts fewer
        out.print(_partial_line(m), markup=False, highlight=False)
    out.print(table)
    out.print(legend("A", result.alpha), markup=False, highlight=False)
    p = result.primary_row
    out.print(f"{result.primary} ({p.direction} is better): B wins {p.wins}, ties {p.ties}, "
              f"loses {p.losses} of {result.n_queries} queries"
              + (f" ({p.dropped} left out: a value is NaN)" if p.dropped else ""))
    nan = [f"{m.metric} {m.dropped}" for m in result.metrics if m.dropped]
    if nan:  # a NaN is no score: those queries are out of that metric's test
        out.print(f"queries left out of a test because a value is NaN: {', '.join(nan)}",
                  markup=False, highlight=False)
    if result.moved and changed > 0:
        n = len(result.moved)
        shown = f"top {changed} of {n}" if n > changed else f"all {n}"
        mv = Table(title=f"queries that moved most on {result.primary} ({shown})")
        for col in ("query", "A", "B", "delta", "B is"):
            mv.add_column(col, justify="left" if col in ("query", "B is") else "right")
        for q in result.moved[:changed]:
            mv.add_row(stored_text(q.query_id), value_text(q.a), value_text(q.b),
                       delta_text(q.delta), "better" if q.better else "worse")
        out.print(mv)
    elif not result.moved:
        out.print(f"no query moved on {result.primary}")
    if result.evidence is not None and result.evidence_summary is not None:
        e = result.evidence_summary
        out.print(f"evidence: {e['changed']} of {e['queries']} queries changed; "
                  f"{e['entered']} chunks entered, {e['left']} left, {e['kept']} kept")
        if result.evidence and changed > 0:
            ev = Table(title=f"queries whose evidence changed most (top {changed})")
            for col in ("query", "entered (only B)", "left (only A)", "kept"):
                ev.add_column(col, justify="right" if col == "kept" else "left")
            for c in result.evidence[:changed]:
                ev.add_row(stored_text(c.query_id), stored_text(", ".join(c.entered) or "-"),
                           stored_text(", ".join(c.left) or "-"),
                           str(c.kept) + (" (reordered)" if c.reordered else ""))
            out.print(ev)


def _partial_line(m: MetricDelta) -> str:
    """One line for a metric scored on fewer queries than the comparison counts: how many each
    run has a value for, how many are shared (what its row is over), and whose logged mean is
    over other queries than the row's A or B."""
    k = m.shared
    own = [f"{who}'s logged mean is over its {n}" for who, n in (("A", m.n_a), ("B", m.n_b))
           if n != k]
    return (f"{m.metric} has values for fewer queries: A {m.n_a}, B {m.n_b}, {k} shared; "
            + (f"its A, B, delta, test and win/tie/loss are over the {k} shared" if k
               else "none shared, its row compares nothing")
            + (f" ({', '.join(own)})" if own else ""))
