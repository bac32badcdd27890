"""A logged sweep's conclusion checked against its point runs (``aiblox eval verify SWEEP``).

``verify`` re-executes the best point, so its logged metrics are recomputed from nothing; what
the parent run says about the sweep (the best point it names, the ``best.tune.*`` and
``best.report.*`` metrics ``aiblox runs`` shows, ``sweep_summary.json``'s best point and
leaderboard, which ``aiblox report`` reads) is a second copy, and an edited copy passed. Here
every one is compared with the point runs: the best point is chosen again from the grid's
logged tune values (:func:`~aiblox.engine.settings.ranking_order`, or the Pareto front of a
multi-objective sweep, its metric objectives checked against the point runs first), the
summary's metric values must be the point runs' own, and the leaderboard their ranking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiblox.engine.settings import ranking_order
from aiblox.sweep.verify import LoggedSweep, StageCheck, compared, logged_sweep

__all__ = ["verify_summary"]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: repr(float(v)) for k, v in a.items()} == {k: repr(float(v)) for k, v in b.items()}


def verify_summary(run: str | LoggedSweep, tracking_uri: str = "") -> list[StageCheck] | None:
    """The checks of a sweep's logged conclusion (``run``: its parent run id or name), None when
    ``run`` is not a finished sweep (a point run id, a manifest path)."""
    from aiblox.engine.tracking import metric_key, read_json
    from aiblox.engine.tracking.layout import TAG_OUTSIDE_GRID
    from aiblox.metrics.pareto import COSTS, pareto_front

    found = logged_sweep(run, tracking_uri)
    if found is None:
        return None
    client, parent = found.client, found.parent
    summary = read_json(client, parent.info.run_id, "sweep_summary.json", parent)
    if summary is None:
        return None
    params = parent.data.params
    tune, primary = params["spec.tune_split"], params["spec.primary"]
    report = params.get("spec.report_split")
    children = {c.data.tags.get("aiblox.config_hash", ""): c for c in found.children}
    checks: list[StageCheck] = []

    def check(where: str, expected: Any, actual: Any) -> None:
        checks.append(compared(where, expected, actual))

    def logged(chash: str, split: str, names: Any) -> dict[str, float]:
        data = children[chash].data.metrics if chash in children else {}
        return {n: data[metric_key(split, n)] for n in names if metric_key(split, n) in data}

    best = summary["best"]
    tagged = parent.data.tags.get("aiblox.best_config_hash", "")
    check("sweep/best (summary)", tagged, best["config_hash"])
    grid = sorted(h for h, c in children.items() if c.data.tags.get(TAG_OUTSIDE_GRID) != "true")
    chosen = _choose(summary, grid, tune, primary, logged, check, set(COSTS), pareto_front)
    check("sweep/best", tagged, chosen)
    for split in (s for s in (tune, report) if s in best["metrics"]):
        mine = best["metrics"][split]
        same = "the point's logged values"
        check(f"sweep/best/{split} (summary)", same,
              same if _same(mine, logged(best["config_hash"], split, mine)) else "differ")
    for role, split in (("tune", tune), ("report", report)):
        prefix = f"best.{role}."
        got = {k.removeprefix(prefix): v for k, v in parent.data.metrics.items()
               if k.startswith(prefix)}
        point = children[tagged].data.metrics if tagged in children else {}
        for name, value in sorted(got.items()):
            check(f"sweep/{prefix}{name}", repr(value),
                  repr(point.get(f"{split}.{name}", "not logged by the point")))
    board = summary.get("leaderboard", [])
    wrong = next((r["label"] for r in board for s, m in r["metrics"].items()
                  if not _same(m, logged(r["config_hash"], s, m))), None)
    check("sweep/leaderboard values", "the points' logged values",
          "the points' logged values" if wrong is None else f"differ at {wrong}")
    order = sorted((r["config_hash"] for r in board), key=lambda h: ranking_order(
        logged(h, tune, [primary]).get(primary), h, primary))
    moved = next((r["label"] for r, h in zip(board, order, strict=True)
                  if r["config_hash"] != h), None)
    ranking = f"ranked by {primary} on {tune}"
    check("sweep/leaderboard order", ranking,
          ranking if moved is None else f"{moved} out of place")
    return checks


def _choose(summary: dict[str, Any], grid: list[str], tune: str, primary: str,
            logged: Callable[[str, str, Any], dict[str, float]],
            check: Callable[[str, Any, Any], None], costs: set[str],
            pareto_front: Callable[..., list[int]]) -> str:
    """The best grid point chosen again from the point runs' logged tune values: the highest
    primary (its direction), or, for a multi-objective sweep, the Pareto front's best by
    primary, its metric objectives checked against the point runs."""
    if not grid:
        return "no point runs"
    pareto = summary.get("pareto")
    if not pareto:
        return min(grid, key=lambda h: ranking_order(logged(h, tune, [primary]).get(primary),
                                                     h, primary))
    names = [n for n, _ in pareto["objectives"]]
    directions = [d for _, d in pareto["objectives"]]
    rows = {p["config_hash"]: p["tune"] for p in pareto["points"]}
    metric_names = [n for n in names if n not in costs]
    wrong = next((h for h in grid if h not in rows or logged(h, tune, metric_names) != {
        n: v for n, v in zip(names, rows[h], strict=True) if n in metric_names}), None)
    check("sweep/pareto values", "the points' logged values",
          "the points' logged values" if wrong is None else f"differ at {wrong[:12]}")
    if wrong is not None:
        return "unknown (the summary's objective values differ)"
    front = [grid[i] for i in pareto_front([rows[h] for h in grid], directions)]
    sign = 1.0 if dict(pareto["objectives"]).get(primary, "maximize") == "maximize" else -1.0
    at = names.index(primary) if primary in names else None
    return min(front, key=lambda h: ranking_order(
        sign * (rows[h][at] if at is not None else logged(h, tune, [primary])[primary]),
        h, None))
