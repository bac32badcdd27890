"""A logged sweep's conclusion checked against its point runs (``aiblox eval verify SWEEP``).

``verify`` re-executes the best point, so its logged metrics are recomputed from nothing; what
the parent run says about the sweep (the best point it names, the ``best.tune.*`` and
``best.report.*`` metrics ``aiblox runs`` shows, ``sweep_summary.json``'s best point,
leaderboard, bootstrap intervals, significance table and Pareto front, which ``aiblox report``
reads) is a second copy, and an edited copy passed. Here every one is computed again from the
point runs' logged values with the sweep's own functions (:mod:`aiblox.sweep.results`) and the
settings of the parent's ``spec.*`` params, and compared: the best point chosen again from the
grid's logged tune values (:func:`~aiblox.engine.settings.ranking_order`, or the first of the
Pareto front of a multi-objective sweep, :func:`~aiblox.sweep.results.pareto_points`, its cost
values read from each point's logged config), the summary's metric values the point runs' own,
the leaderboard their ranking, each interval bootstrapped again from the chosen point's
per-query values (:func:`~aiblox.sweep.results.best_intervals`), the significance table tested
again from the tested points' per-query values with the spec's test, seed and alpha
(:func:`~aiblox.sweep.results.significance_table`) and the whole front, every point's objective
values with it (:func:`~aiblox.engine.tracking.pareto_summary`), field by field
(:func:`~aiblox.sweep.verify_sweep.field_checks`). A metric the parent holds that the sweep
never logs is a difference too. (The k-fold result is :mod:`aiblox.sweep.verify_cv`'s.)
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from aiblox.engine.settings import ranking_order
from aiblox.sweep.verify import StageCheck
from aiblox.sweep.verify_sweep import (
    LoggedPoint,
    LoggedSweep,
    compared,
    field_checks,
    in_logged_order,
    logged_sweep,
    with_defaults,
)

__all__ = ["verify_summary"]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: repr(float(v)) for k, v in a.items()} == {k: repr(float(v)) for k, v in b.items()}


def verify_summary(run: str | LoggedSweep, tracking_uri: str = "") -> list[StageCheck] | None:
    """The checks of a sweep's logged conclusion (``run``: its parent run id or name), None when
    ``run`` is not a finished sweep (a point run id, a manifest path)."""
    from aiblox.engine.tracking import metric_key, read_json
    from aiblox.sweep.results import metrics_tested

    found = logged_sweep(run, tracking_uri)
    if found is None:
        return None
    client, parent = found.client, found.parent
    summary = read_json(client, parent.info.run_id, "sweep_summary.json", parent)
    if summary is None:
        return None
    tune, primary = found.spec_text("tune_split") or "", found.spec_text("primary") or ""
    report = found.spec_text("report_split")
    children = {c.data.tags.get("aiblox.config_hash", ""): c for c in found.children}
    tested = metrics_tested(found.spec("metrics") or [primary], primary,
                            found.spec("chunk_k") or [], found.grid_axes())
    objectives = found.spec("search.objectives") or []
    points = found.points([tune, report], list(dict.fromkeys([primary, *tested, *objectives])))
    by_hash = {p.config_hash: p for p in points}
    checks: list[StageCheck] = []

    def check(where: str, expected: Any, actual: Any) -> None:
        checks.append(compared(where, expected, actual))

    def logged(chash: str, split: str, names: Any) -> dict[str, float]:
        data = children[chash].data.metrics if chash in children else {}
        return {n: data[metric_key(split, n)] for n in names if metric_key(split, n) in data}

    best = summary["best"]
    tagged = parent.data.tags.get("aiblox.best_config_hash", "")
    check("sweep/best (summary)", tagged, best["config_hash"])
    grid = [p for p in points if not p.outside_grid]
    chosen = _choose(found, summary, points, tune, primary, objectives, checks)
    check("sweep/best", tagged, chosen)
    check("sweep/best label (summary)", best.get("label"),
          by_hash[best["config_hash"]].label if best["config_hash"] in by_hash
          else "no point run")
    for split in (s for s in (tune, report or "") if s in best["metrics"]):
        mine = best["metrics"][split]
        same = "the point's logged values"
        check(f"sweep/best/{split} (summary)", same,
              same if _same(mine, logged(best["config_hash"], split, mine)) else "differ")
    _parent_metrics(found, tagged, tune, report, check)
    board = summary.get("leaderboard", [])
    wrong = next((r["label"] for r in board if r["label"] != (
        by_hash[r["config_hash"]].label if r["config_hash"] in by_hash else None)
        or any(not _same(m, logged(r["config_hash"], s, m)) for s, m in r["metrics"].items())),
        None)
    check("sweep/leaderboard values", "the points' logged values",
          "the points' logged values" if wrong is None else f"differ at {wrong}")
    rows = sorted(r["config_hash"] for r in board)
    check("sweep/leaderboard points", f"{len(children)} point runs, each once",
          f"{len(rows)} point runs, each once" if rows == sorted(children)
          else f"{len(rows)} rows: {len(set(children) - set(rows))} point runs left out, "
               f"{len(set(rows) - set(children))} rows of no point run")
    order = sorted((r["config_hash"] for r in board), key=lambda h: ranking_order(
        logged(h, tune, [primary]).get(primary), h, primary))
    moved = next((r["label"] for r, h in zip(board, order, strict=True)
                  if r["config_hash"] != h), None)
    ranking = f"ranked by {primary} on {tune}"
    check("sweep/leaderboard order", ranking,
          ranking if moved is None else f"{moved} out of place")
    point = by_hash.get(chosen) or by_hash.get(tagged)
    checks += _tables(found, summary, points, grid, point, tested, tune, report, primary)
    return checks


def _choose(found: LoggedSweep, summary: dict[str, Any], points: list[LoggedPoint], tune: str,
            primary: str, objectives: list[str], checks: list[StageCheck]) -> str:
    """The best grid point chosen again from the point runs' logged tune values: the highest
    primary (its direction), or, for a multi-objective sweep, the first of the Pareto front
    rebuilt from them (:func:`~aiblox.sweep.results.pareto_points`, the objectives' directions
    as the spec's params give them), whose table (``sweep_summary.json``'s ``pareto``,
    :func:`~aiblox.engine.tracking.pareto_summary`: the front, every point's objective values)
    is compared with the logged one, field by field."""
    from aiblox.engine.tracking import pareto_summary
    from aiblox.metrics.pareto import resolve_objectives
    from aiblox.sweep.results import pareto_points

    grid = [p for p in points if not p.outside_grid]
    if not objectives:
        if summary.get("pareto"):
            checks.append(compared("sweep/pareto (summary)", "a Pareto front",
                                   "none: the spec sets no [search] objectives"))
        if not grid:
            return "no point runs"
        return min(grid, key=lambda p: ranking_order(
            p.metrics.get(tune, {}).get(primary), p.config_hash, primary)).config_hash
    report = found.spec_text("report_split")
    logged = summary.get("pareto") or {}
    try:
        directions = resolve_objectives(objectives, found.spec("search.directions"),
                                        objectives, primary)
        front = pareto_points(grid, tune, directions, primary)
        result = SimpleNamespace(
            objectives=directions, pareto=[p.config_hash for p in front],
            points=in_logged_order(points, [p.get("config_hash")
                                            for p in logged.get("points", [])]),
            tune_split=tune, report_split=report)
        table = pareto_summary(result)
    except (KeyError, ValueError) as exc:  # a point run without an objective's value
        checks.append(compared("sweep/pareto (recomputed)", "the Pareto front", str(exc)))
        return "unknown (a point run lacks an objective's value)"
    checks += field_checks("sweep/pareto.", "summary", logged, table)
    return front[0].config_hash if front else "no point runs"


def _parent_metrics(found: LoggedSweep, tagged: str, tune: str, report: str | None,
                    check: Any) -> None:
    """The parent's ``best.tune.*`` and ``best.report.*`` metrics against the best point's own
    values (every name either side holds: one the other lacks is a difference), and any other
    metric it holds that the sweep never logs (``cv.*``, when the spec sets ``[cv]``, is
    :func:`~aiblox.sweep.verify_cv.verify_cv`'s)."""
    metrics = found.parent.data.metrics
    point: dict[str, float] = next(
        (c.data.metrics for c in found.children
         if c.data.tags.get("aiblox.config_hash") == tagged), {})
    for role, split in (("tune", tune), ("report", report)):
        if split is None:
            continue
        prefix = f"best.{role}."
        got = {k.removeprefix(prefix): v for k, v in metrics.items() if k.startswith(prefix)}
        own = {k.removeprefix(f"{split}."): v for k, v in point.items()
               if k.startswith(f"{split}.")}
        for name in sorted(set(got) | set(own)):
            check(f"sweep/{prefix}{name}", repr(got.get(name, "missing")),
                  repr(own.get(name, "not logged by the point")))
    known = ("best.tune.", *(("best.report.",) if report else ()),
             *(("cv.",) if found.spec("cv", "set") is not None else ()))
    for name in sorted(k for k in metrics if not k.startswith(known)):
        check(f"sweep/{name}", repr(metrics[name]), "not a metric the sweep logs")


def _tables(found: LoggedSweep, summary: dict[str, Any], points: list[LoggedPoint],
            grid: list[LoggedPoint], best: LoggedPoint | None, tested: list[str], tune: str,
            report: str | None, primary: str) -> list[StageCheck]:
    """``sweep_summary.json``'s intervals, significance table and the chosen point's gap
    computed again from the point runs (``best``: the point chosen again)."""
    from aiblox.metrics import Comparison
    from aiblox.sweep.results import best_intervals, significance_table

    splits = [s for s in (tune, report) if s is not None]
    ci = ({} if best is None else
          {s: list(v) for s, v in best_intervals(best, splits, primary, found.per_query).items()})
    checks = field_checks("sweep/ci.", "summary", summary.get("ci") or {}, ci)
    base = next((p for p in points if p.is_baseline), None)
    table: list[dict[str, Any]] = []
    if report is not None and base is not None and best is not None:
        table = [c.model_dump(mode="json") for c in significance_table(
            points, grid, best, base, found.per_query, tested, tune=tune, report=report,
            primary=primary, top=int(found.spec("significance_top", 3)),
            test=found.spec_text("stat_test") or "student",  # type: ignore[arg-type]
            alpha=float(found.spec("alpha", 0.05)), seed=found.spec("seed"))]
    rows = [with_defaults(Comparison, {("p_adjusted" if k == "p_holm" else k): v
                                       for k, v in r.items()} if isinstance(r, dict) else r)
            for r in summary.get("significance", [])]  # p_holm: a summary logged before
    checks += field_checks("sweep/", "summary", {"significance": rows}, {"significance": table})
    m = best.metrics if best is not None else {}
    gap = ("none: no report split" if report is None else
           repr(m[tune][primary] - m[report][primary])
           if primary in m.get(tune, {}) and primary in m.get(report, {}) else "not logged")
    if "gap" in summary or report is not None:
        checks.append(compared("sweep/gap (summary)", repr(summary.get("gap", "missing")), gap))
    return checks
