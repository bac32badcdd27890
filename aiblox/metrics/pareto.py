"""Quality against cost: the objectives of a sweep (``[search] objectives``), their directions,
and the Pareto front of the scored points.

An objective is a metric a point reports on the tune split (``ndcg@10``, ``evidence_tokens``,
``selected_tokens``, ...) or a cost read from the point's settings (:data:`COSTS`:
``candidates``, the documents retrieved per query). Its direction is inferred from its name
(:func:`infer_direction`): quality metrics are maximised, token and chunk counts and the
candidate depth minimised; a status rate other than ``status:ANSWERED`` (``status:REFUSED``:
is refusing good?) has no inferred direction and needs ``[search] directions``.

The front (:func:`pareto_front`) is the set of non-dominated points: a point is dominated when
another is at least as good in every objective and strictly better in one. Points with equal
objective values do not dominate each other, so ties stay on the front together. Everything is
a pure function of the values: the same points give the same front in any process.
Latency is measured by no stage (it is not deterministic), so it is not an objective.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from aiblox.metrics.directions import COST_METRICS, metric_direction

__all__ = [
    "COSTS",
    "MINIMISED",
    "cost_value",
    "infer_direction",
    "objective_values",
    "pareto_front",
    "resolve_objectives",
]

COSTS: dict[str, str] = {
    "candidates": "documents retrieved per query: the full-text depth, the vector depth, or both "
                  "for a hybrid point (each retrieval stage's list for a pipeline)",
}
"""Costs read from a point's settings (deterministic), by name."""

MINIMISED = frozenset({*COST_METRICS, *COSTS})
"""Metrics (and costs) where lower is better: tokens and chunks handed on, candidates fused
(:data:`aiblox.metrics.directions.COST_METRICS`)."""

_MAXIMISED_STATUS = "status:ANSWERED"
_STATUS = re.compile(r"^status:")


def infer_direction(name: str) -> str | None:
    """``minimize`` for a cost, ``maximize`` for a quality metric (ranx metrics, chunk and
    answer metrics, ``status:ANSWERED``): the direction comparisons use
    (:func:`aiblox.metrics.directions.metric_direction`); None for another status rate,
    which an objective must be given a direction for."""
    if _STATUS.match(name) and name != _MAXIMISED_STATUS:
        return None
    return "minimize" if metric_direction(name) == "lower" else "maximize"


def resolve_objectives(objectives: Sequence[str], directions: Sequence[str] | None,
                       known: Sequence[str], primary: str) -> dict[str, str]:
    """``{objective: direction}`` in the order given, or a ``ValueError`` naming the first
    problem: an objective that is neither a metric of the spec (``known``) nor a cost, a
    ``primary`` that is not an objective, a direction that cannot be inferred."""
    valid = [*known, *COSTS]
    bad = [o for o in objectives if o not in valid]
    if bad:
        raise ValueError(f"objectives: unknown metric(s) {bad}; known: {', '.join(valid)}")
    if primary not in objectives:
        raise ValueError(f"objectives: must include the primary metric {primary!r} (the "
                         f"front's point best by it is the one reported)")
    if directions is not None:
        return dict(zip(objectives, directions, strict=True))
    out: dict[str, str] = {}
    for o in objectives:
        d = infer_direction(o)
        if d is None:
            raise ValueError(f"objectives: no direction can be inferred for {o!r}; set "
                             f"[search] directions (one of maximize, minimize per objective)")
        out[o] = d
    return out


def cost_value(name: str, point: Any) -> float:
    """The cost ``name`` (:data:`COSTS`) of ``point``: its ``candidates`` (documents retrieved
    per query) when it has them, else the sum of its full-text and vector ``depth``."""
    if name == "candidates":
        n = getattr(point, "candidates", None)
        return float(n if n is not None else point.depth[0] + point.depth[1])
    raise KeyError(name)


def objective_values(point: Any, split: str, objectives: Sequence[str]) -> list[float]:
    """A point's objective values on ``split`` (a :class:`PointResult`, or anything with
    ``metrics`` and ``depth``); a metric the point did not compute is a ``ValueError``."""
    out = []
    for o in objectives:
        if o in COSTS:
            out.append(cost_value(o, point))
            continue
        v = point.metrics[split].get(o)
        if v is None or math.isnan(float(v)):
            raise ValueError(f"objective {o!r} was not computed for {point.label} on {split}")
        out.append(float(v))
    return out


def pareto_front(values: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """Indexes (ascending) of the non-dominated rows of ``values``, one column per objective,
    each ``maximize`` or ``minimize``. Row ``j`` dominates row ``i`` when it is at least as good
    in every column and better in one; equal rows do not dominate each other (both stay)."""
    if any(d not in ("maximize", "minimize") for d in directions):
        raise ValueError(f"directions must be maximize or minimize, got {list(directions)}")
    if not values:
        return []
    import numpy as np

    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != len(directions):
        raise ValueError(f"values: one column per direction ({len(directions)}), got shape "
                         f"{v.shape}")
    if np.isnan(v).any():
        raise ValueError("values: NaN has no place on a Pareto front")
    v = v * np.array([1.0 if d == "maximize" else -1.0 for d in directions])  # all maximised
    # the front, scanned best first in the first column: a row can only be dominated by one
    # at least as good there, so each row is compared with the front found so far
    order = np.lexsort(tuple(-v[:, c] for c in range(v.shape[1] - 1, -1, -1)))
    front: list[int] = []
    for i in order:
        if front:
            f = v[front]
            if bool(((f >= v[i]).all(axis=1) & (f > v[i]).any(axis=1)).any()):
                continue
        front.append(int(i))
    return sorted(front)
