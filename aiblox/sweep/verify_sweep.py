"""A logged sweep as the sweep-level checks of ``aiblox eval verify SWEEP`` read it, and how
they compare a logged table with its recomputation.

The parent run holds the sweep's conclusion (``sweep_summary.json``, ``cv_folds.json``, its
``best.*`` and ``cv.*`` metrics and tags), which ``aiblox report`` and ``aiblox runs`` show;
each point run holds the point's metrics and per-query values. The checks
(:func:`~aiblox.sweep.verify_cv.verify_cv`, :func:`~aiblox.sweep.verify_summary.verify_summary`)
recompute the conclusion from the point runs with the functions the sweep concluded with
(:mod:`aiblox.sweep.results`), reading each point run as a :class:`LoggedPoint` in place of
the sweep's :class:`~aiblox.sweep.results.PointResult`, and the spec's settings from the
parent's ``spec.*`` params (:meth:`LoggedSweep.spec`), never from the tables they check
(but for the order of their points, which MLflow does not keep: :func:`in_logged_order`).
:func:`field_checks` then compares a logged table field by field: every field is one located
check, and a difference names the value inside it that differs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from aiblox.sweep.verify import StageCheck

__all__ = [
    "LoggedPoint",
    "LoggedSweep",
    "compared",
    "field_checks",
    "in_logged_order",
    "logged_sweep",
    "with_defaults",
]


@dataclasses.dataclass
class LoggedPoint:
    """A point run read as the sweep's conclusion reads a point (``label``, ``config_hash``,
    ``metrics`` by split and name, the baseline and outside-grid flags, ``candidates``)."""

    label: str
    config_hash: str
    metrics: dict[str, dict[str, float]]
    """``{split: {metric: value}}``: the run's logged values of the metrics asked for."""
    is_baseline: bool
    outside_grid: bool
    run: Any
    """The MLflow run."""
    client: Any

    @functools.cached_property
    def candidates(self) -> int:
        """Documents it retrieves per query (the ``candidates`` cost), from its logged
        manifest's config (:func:`~aiblox.engine.settings.candidate_depth`)."""
        from aiblox.engine.settings import candidate_depth
        from aiblox.engine.tracking import read_manifest

        return candidate_depth(read_manifest(self.client, self.run.info.run_id,
                                             self.run).config)


@dataclasses.dataclass(frozen=True)
class LoggedSweep:
    """A logged sweep as the sweep-level checks read it: the MLflow client, the parent run and
    its finished child runs (listed once, for every check); each run's per-query values are
    read once too."""

    client: Any
    parent: Any
    children: list[Any]
    read: dict[tuple[str, str], dict[str, dict[str, float]]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False)

    def spec(self, name: str, default: Any = None) -> Any:
        """The spec's setting ``name`` (``stat_test``, ``cv.folds``) as the parent's
        ``spec.<name>`` param logged it, read back (``None``, numbers, lists and objects from
        their text; anything else the string); ``default`` when not logged."""
        text = self.parent.data.params.get(f"spec.{name}")
        if text is None:
            return default
        if text == "None":
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def spec_text(self, name: str) -> str | None:
        """The spec's setting ``name`` as the text logged (a split's or a metric's name,
        which may read as a number), None when it is ``None`` or not logged."""
        text = self.parent.data.params.get(f"spec.{name}")
        return None if text in (None, "None") else str(text)

    def grid_axes(self) -> set[str]:
        """The names of the grid's axes the spec sets (its ``spec.grid.*`` params other than
        ``None``)."""
        return {k.removeprefix("spec.grid.").split(".")[0]
                for k, v in self.parent.data.params.items()
                if k.startswith("spec.grid.") and v != "None"}

    def points(self, splits: Sequence[str | None], names: Sequence[str]) -> list[LoggedPoint]:
        """Every point run as a :class:`LoggedPoint` holding its logged values of ``names`` on
        ``splits`` (a None split is left out)."""
        from aiblox.engine.tracking import metric_key
        from aiblox.engine.tracking.layout import TAG_OUTSIDE_GRID

        out = []
        for c in self.children:
            data, tags = c.data.metrics, c.data.tags
            out.append(LoggedPoint(
                label=tags.get("aiblox.label", ""), config_hash=tags.get("aiblox.config_hash", ""),
                metrics={s: {n: float(data[metric_key(s, n)]) for n in names
                             if metric_key(s, n) in data} for s in splits if s is not None},
                is_baseline=tags.get("aiblox.baseline") == "true",
                outside_grid=tags.get(TAG_OUTSIDE_GRID) == "true", run=c, client=self.client))
        return out

    def per_query(self, point: LoggedPoint, split: str) -> dict[str, dict[str, float]]:
        """``{metric: {qid: value}}``, the point run's ``per_query.<split>.parquet`` (empty
        when it logged none for the split)."""
        from aiblox.engine.tracking import read_per_query

        key = (point.run.info.run_id, split)
        if key not in self.read:
            try:
                self.read[key] = read_per_query(self.client, key[0], split, point.run)
            except ValueError:  # none logged for this split
                self.read[key] = {}
        return self.read[key]


def in_logged_order(points: Sequence[LoggedPoint], hashes: Any) -> list[LoggedPoint]:
    """``points`` in the order ``hashes`` (a logged list of config hashes) gives them when it
    lists exactly them, else by config hash: MLflow keeps no grid order, and a logged list that
    holds other points differs from the recomputed one whatever the order."""
    mine = sorted(points, key=lambda p: p.config_hash)
    if not isinstance(hashes, list) or sorted(map(str, hashes)) != [p.config_hash for p in mine]:
        return mine
    at = {h: i for i, h in enumerate(hashes)}
    return sorted(points, key=lambda p: at[p.config_hash])


def logged_sweep(run: str | LoggedSweep, tracking_uri: str = "") -> LoggedSweep | None:
    """The sweep ``run`` names (its parent run id or name), its children listed once; None
    when it names none (a point run id, a manifest path): what the sweep-level checks of
    ``aiblox eval verify`` read (:func:`~aiblox.sweep.verify_cv.verify_cv`,
    :func:`~aiblox.sweep.verify_summary.verify_summary`), which take it in place of ``run`` to
    share one lookup."""
    from aiblox.engine.tracking import child_runs, find_sweep_run, tracking_client

    if isinstance(run, LoggedSweep):
        return run
    if Path(run).suffix == ".json" or Path(run).is_file():
        return None
    client = tracking_client(tracking_uri)
    try:
        parent = find_sweep_run(client, run)
    except ValueError:
        return None
    return LoggedSweep(client, parent, child_runs(client, parent))


def compared(where: str, expected: Any, actual: Any) -> StageCheck:
    """A check of a logged value (``expected``) against its recomputation, as text."""
    return StageCheck(where=where, expected=str(expected), actual=str(actual),
                      identical=str(expected) == str(actual))


class _Missing:
    def __repr__(self) -> str:
        return "missing"


MISSING: Any = _Missing()
"""A field or value one side lacks (shown as ``missing``)."""


def _text(value: Any) -> str:
    """A value as JSON text (floats at full precision, NaN as ``NaN``): equal texts, equal
    values."""
    return "missing" if value is MISSING else json.dumps(value, sort_keys=True)


def _shown(value: Any) -> str:
    """A value as a check shows it: a string as it is, a number at full precision, a list
    or object as JSON when short, else by its size."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        text = _text(value)
        return text if len(text) <= 80 else f"{len(value)} values"
    return repr(value)


def _first(logged: Any, again: Any, path: str = "") -> tuple[str, str, str]:
    """The first value that differs inside two JSON values: its path (``rows[1].gap``,
    ``per_query[12]``; empty for the values themselves) and each side's value."""
    if isinstance(logged, dict) and isinstance(again, dict):
        for k in sorted(set(logged) | set(again), key=str):
            a, b = logged.get(k, MISSING), again.get(k, MISSING)
            if _text(a) != _text(b):
                step = f".{k}" if str(k).isidentifier() else f"[{k}]"
                return _first(a, b, (path + step).removeprefix("."))
    if isinstance(logged, list) and isinstance(again, list):
        for i in range(max(len(logged), len(again))):
            a = logged[i] if i < len(logged) else MISSING
            b = again[i] if i < len(again) else MISSING
            if _text(a) != _text(b):
                return _first(a, b, f"{path}[{i}]")
    return path, _shown(logged), _shown(again)


def with_defaults(model: type[BaseModel], data: Any) -> Any:
    """``data`` (a logged record of ``model``, parsed JSON) with each optional field of
    ``model`` it lacks at its default, as JSON: a table logged before the field was added reads
    as its readers read it, not as a difference (a wrong value still is one)."""
    if not isinstance(data, dict):
        return data
    return {**{name: to_jsonable_python(f.get_default(call_default_factory=True))
               for name, f in model.model_fields.items() if not f.is_required()}, **data}


def _rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def field_checks(prefix: str, source: str, logged: Mapping[str, Any],
                 again: Mapping[str, Any]) -> list[StageCheck]:
    """``logged`` (a table as logged, parsed JSON) against ``again`` (its recomputation, as
    JSON: ``model_dump(mode="json")``), one check per field of either,
    ``<prefix><field> (<source>)``, a list of records (a table's rows) one check per row,
    ``<prefix><field>[i] (<source>)``. Values are equal when their JSON texts are (exactly:
    ``5.0`` is not ``5``, a changed last digit differs). Equal, both sides show the value (a
    long one by its size); different, both name the first value inside the field that
    differs (``gap: 0.1`` against ``gap: 0.2``, ``[12]: missing``)."""
    checks = []

    def check(where: str, a: Any, b: Any) -> None:
        if _text(a) == _text(b):
            checks.append(StageCheck(where=where, expected=_shown(a), actual=_shown(b),
                                     identical=True))
            return
        path, x, y = _first(a, b)
        checks.append(StageCheck(where=where, expected=f"{path}: {x}" if path else x,
                                 actual=f"{path}: {y}" if path else y, identical=False))

    for name in [*again, *(k for k in logged if k not in again)]:
        a, b = logged.get(name, MISSING), again.get(name, MISSING)
        if _rows(a) or _rows(b):
            a, b = (v if isinstance(v, list) else [] for v in (a, b))
            for i in range(max(len(a), len(b))):
                check(f"{prefix}{name}[{i}] ({source})", a[i] if i < len(a) else MISSING,
                      b[i] if i < len(b) else MISSING)
        else:
            check(f"{prefix}{name} ({source})", a, b)
    return checks
