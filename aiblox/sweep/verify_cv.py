"""A ``[cv]`` sweep's k-fold result checked against its point runs (``aiblox eval verify
SWEEP``).

The sweep logs its :class:`~aiblox.sweep.crossval.CrossValidation` three times over: whole in
``cv_folds.json`` (the fold ids and every query's held-out value too), as
``sweep_summary.json``'s ``cv`` (the table ``aiblox report`` shows: the cross-validated score,
the margin, its interval and the verdict) and as the parent run's ``cv.*`` metrics and
``aiblox.cv.*`` tags (what ``aiblox runs`` and MLflow show). :func:`verify_cv` computes it
again (:func:`~aiblox.sweep.results.cross_validated`, the sweep's own route) from the grid's
point runs (every child not tagged outside the grid, whatever the logged ``candidates`` list
says) and their logged per-query values, with the folds, seed, test and primary metric of the
parent's ``spec.*`` params, and compares every field of each copy with it: an edited number in
any of them, a candidate left out of the choice or a fold dealt otherwise is a located
difference.
"""

from __future__ import annotations

import json
from typing import Any

from aiblox.sweep.verify import StageCheck
from aiblox.sweep.verify_sweep import (
    LoggedSweep,
    compared,
    field_checks,
    in_logged_order,
    logged_sweep,
    with_defaults,
)

__all__ = ["verify_cv"]


def _read(table: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """A logged k-fold table (or the summary's) as its readers read it, against ``again`` (its
    recomputation, as that copy holds it): a field of ``again`` it lacks (one added since it
    was logged) at its default, each fold row's too."""
    from aiblox.sweep.crossval import CrossValidation, FoldResult

    if not isinstance(table, dict) or not table:  # none logged: every field missing
        return {}
    filled = with_defaults(CrossValidation, table)
    out = {**{k: v for k, v in filled.items() if k in again}, **table}
    if isinstance(out.get("rows"), list):
        out["rows"] = [with_defaults(FoldResult, r) for r in out["rows"]]
    return out


def verify_cv(run: str | LoggedSweep, tracking_uri: str = "") -> list[StageCheck] | None:
    """The checks of a logged ``[cv]`` sweep's k-fold result (``run``: its parent run id or
    name): ``cv/<field> (cv_folds.json)`` and ``cv/<field> (summary)`` for every field (a fold
    table's row each, ``cv/rows[i] (...)``), ``sweep/cv.<name>`` for each parent metric and
    ``sweep/aiblox.cv.<name>`` for each tag. None when ``run`` is not a sweep, or a sweep
    without ``[cv]`` that logged no k-fold result."""
    from aiblox.engine.tracking import (
        artifact_bytes,
        cv_metrics,
        cv_summary,
        cv_tags,
        read_json,
    )
    from aiblox.sweep.results import cross_validated

    found = logged_sweep(run, tracking_uri)
    if found is None:
        return None
    client, parent = found.client, found.parent
    data = artifact_bytes(client, parent.info.run_id, "cv_folds.json", parent)
    summary = read_json(client, parent.info.run_id, "sweep_summary.json", parent) or {}
    logged: dict[str, Any] = json.loads(data) if data is not None else {}
    # the spec's [cv] (spec.cv is "None" without one; a sweep logged before its params:
    # the logged table's own settings)
    folds = None if found.spec("cv", "set") is None else found.spec("cv.folds",
                                                                    logged.get("folds"))
    if folds is None:  # no [cv]: nothing may claim a k-fold result either
        if data is None and "cv" not in summary:
            return None
        return [compared("cv (cv_folds.json, summary)", "a k-fold result logged",
                         "none: the spec sets no [cv]")]
    seed = found.spec("cv.seed", logged.get("seed", 0))
    split, metric = found.spec_text("tune_split") or "", found.spec_text("primary") or ""
    test = found.spec_text("stat_test") or logged.get("test") or "student"
    points = found.points([split], [metric])
    base = next((p for p in points if p.is_baseline), None)
    # the grid's points (the order changes no choice: ties go by config hash)
    grid = in_logged_order([p for p in points if not p.outside_grid], logged.get("candidates"))
    qids = sorted({q for p in grid for q in found.per_query(p, split).get(metric, {})})
    try:
        again = cross_validated(grid, base, found.per_query, qids, folds=folds, seed=seed,
                                split=split, metric=metric,
                                test=test)  # type: ignore[arg-type]
    except ValueError as exc:  # a point run without a value the choice needs
        return [compared("cv (recomputed)", "the k-fold result", str(exc))]
    whole, table = again.model_dump(mode="json"), cv_summary(again)
    if logged and "candidates" not in logged:  # a table from before they were listed: the
        whole.pop("candidates")  # choice was made among the whole grid all the same
    checks = field_checks("cv/", "cv_folds.json", _read(logged, whole), whole)
    checks += field_checks("cv/", "summary", _read(summary.get("cv") or {}, table), table)
    got = {k: v for k, v in parent.data.metrics.items() if k.startswith("cv.")}
    wanted = cv_metrics(again)
    for name in [*sorted(wanted), *sorted(set(got) - set(wanted))]:
        checks.append(compared(f"sweep/{name}", repr(got.get(name, "missing")),
                               repr(float(wanted[name])) if name in wanted
                               else "not a metric of the k-fold result"))
    tags = {k: v for k, v in parent.data.tags.items() if k.startswith("aiblox.cv.")}
    expected = cv_tags(again)
    for name in [*sorted(expected), *sorted(set(tags) - set(expected))]:
        checks.append(compared(f"sweep/{name}", tags.get(name, "missing"),
                               expected.get(name, "not a tag of the k-fold result")))
    return checks
