"""A finished sweep as pandas DataFrames for people: the leaderboard, the primary metric per
value of one swept setting, which settings were swept, tune against report per point, the stage
counts, the significance table and the best point's manifest hashes.

Pure functions of a :class:`~aiblox.sweep.results.SweepResult` (no store, no cache, no
MLflow); the sweep board notebook (``notebooks/sweep_board.py``) draws from them.

Settings a point does not use are left empty, and per-value tables leave those points out
(:mod:`aiblox.engine.applies`): an RRF point has no ``w_text``, ``normalize`` or
``missing``, a linear point no ``rrf_k``, a point whose chunker takes no token budget (``whole``)
no ``max_chunk_tokens`` or ``overlap_tokens``. Rank and "best" follow
:func:`~aiblox.engine.settings.ranking_key`: the primary metric on the tune split, highest
first, ties broken by config hash ascending; the report split never decides anything.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from aiblox.contracts.retrieval import FtsConfig, VectorConfig
from aiblox.engine.algebra import from_data
from aiblox.engine.algebra import settings as pipeline_settings
from aiblox.engine.applies import param_applies, setting_applies
from aiblox.engine.settings import ranked, ranking_order, scoring_read
from aiblox.hashing import SHORT_HASH
from aiblox.metrics.directions import lower_is_better
from aiblox.metrics.marks import mark
from aiblox.metrics.pareto import objective_values
from aiblox.sweep.axes import BM25_AXES, DENSE_AXES
from aiblox.sweep.results import PointResult, SweepResult, pareto_points

__all__ = [
    "axis_frame",
    "folds_frame",
    "leaderboard",
    "manifest_frame",
    "pareto_frame",
    "point_settings",
    "significance_frame",
    "stage_counts",
    "swept_axes",
    "tune_vs_report",
]

CHOSEN = "★"
"""The leaderboard's mark of the chosen point (column ``chosen``)."""

HASH_PREFIX = SHORT_HASH
"""Config-hash digits a frame shows: the start every command shows
(:data:`aiblox.hashing.SHORT_HASH`)."""

_CHUNKING_KEYS = ("chunker_id", "max_chunk_tokens", "overlap_tokens", "top_k_chunks",
                  "per_item_chunk_cap")
_FUSION_KEYS = ("blend", "w_text", "normalize", "missing", "rrf_k")
_RETRIEVAL_AXES = frozenset({*BM25_AXES, *DENSE_AXES})


def _cell(value: Any) -> Any:
    """A table cell: lists and dicts as canonical JSON, so values can be grouped and compared."""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


def point_settings(point: PointResult) -> dict[str, Any]:
    """The settings of one point, one entry per column, each where it applies to the point's
    retrieval mode (:func:`~aiblox.engine.applies.param_applies`, what its MLflow run logs and
    the report plots), else None: ``blend``, ``w_text``, ``normalize``, ``missing``,
    ``rrf_k`` (hybrid points, by blend; a pipeline point's where its fusions read them),
    ``depth`` (full-text ``top_k``, the vector ``top_k`` of a dense point; ``vector_depth``
    too when it differs), the BM25 settings a grid sweeps (``k1``, ``b``, ``method``,
    ``title_weight``, ``title_b``; not for a dense point) and the dense ones (``doc_score``,
    ``passage_chunker``, ``passage_tokens``; not for a bm25 point), the chunking settings of a
    pipeline point (None where its chunker does not take them), a retrieval pipeline's
    ``pipeline`` (its shape) and stage parameters (``rm3.fb_terms``; ``bm25.2.k1`` for the
    second of two stages of one name set differently, :func:`~aiblox.engine.algebra.settings`)
    and, with selection, ``policy`` and the effective value of each swept policy parameter. A
    frame of points keeps the BM25 and dense columns only where the grid varies them."""
    s = point.scoring
    config = point.manifest.config
    read = scoring_read(config)

    def applies(group: str, key: str) -> bool:
        return param_applies(f"prefs.{group}.{key}", config, read)

    row: dict[str, Any] = {k: s.get(k) if applies("scoring", k) else None
                           for k in _FUSION_KEYS}
    fts_on, vector_on = applies("fts", "top_k"), applies("vector", "top_k")
    row["depth"] = point.depth[0] if fts_on or not vector_on else point.depth[1]
    if fts_on and vector_on and point.depth[1] != point.depth[0]:
        row["vector_depth"] = point.depth[1]
    prefs = config.get("prefs") or {}
    for group, contract, keys in (("fts", FtsConfig, BM25_AXES),
                                  ("vector", VectorConfig, DENSE_AXES)):
        given = prefs.get(group) or {}  # a default left out of the config is the default
        row.update({k: _cell(given.get(k, contract.model_fields[k].default))
                    if applies(group, k) else None for k in keys})
    if point.chunking is not None:
        chunker = point.chunking.get("chunker_id")
        row.update({k: _cell(point.chunking.get(k))
                    if setting_applies(k, chunker_id=chunker) else None
                    for k in _CHUNKING_KEYS})
    pipeline = config.get("pipeline")
    if pipeline is not None:  # its shape, then each stage parameter it sets (rm3.fb_terms)
        row.update({k: _cell(v) for k, v in pipeline_settings(from_data(pipeline)).items()})
    if point.selection is not None:
        row["policy"] = point.selection.get("policy")
        params = point.selection.get("params") or {}
        row.update({k: _cell(v) for k, v in sorted(params.items()) if k not in row})
    return row


def _tune_order(result: SweepResult) -> list[PointResult]:
    """Points by the primary metric on the tune split, ties by config hash (choose_best)."""
    return ranked(result.points, result.tune_split, result.primary)


def _settings_frame(points: list[PointResult]) -> pd.DataFrame:
    """The settings of ``points`` (:func:`point_settings`), one column per setting; a setting
    no point uses (the blend of a bm25 sweep) is left out, and so is a BM25 or dense setting
    the grid's points do not vary (every hybrid point holds a ``k1``)."""
    rows = [point_settings(p) for p in points]
    columns: list[str] = []
    for r in rows:
        columns += [k for k in r if k not in columns]
    grid = [r for r, p in zip(rows, points, strict=True) if not p.outside_grid] or rows

    def shown(column: str) -> bool:
        if column in _RETRIEVAL_AXES:  # cells are plain values (_cell): JSON compares them
            return len({json.dumps(r.get(column)) for r in grid
                        if r.get(column) is not None}) > 1
        return any(r.get(column) is not None for r in rows)

    columns = [c for c in columns if shown(c)]
    # object cells from the start: a column of whole numbers and empty cells (rrf_k: None on
    # the linear points) keeps its numbers whole (60, not the 60.0 a float column makes)
    return pd.DataFrame(rows, columns=columns, dtype=object).where(lambda f: f.notna(), None)


def swept_axes(result: SweepResult) -> list[str]:
    """The settings that take more than one value over the grid's points (empty cells left
    out; a baseline scored as a point of its own is no grid point), in column order: what the
    sweep varied."""
    frame = _settings_frame([p for p in result.points if not p.outside_grid])
    return [c for c in frame.columns if frame[c].dropna().nunique() > 1]


def leaderboard(result: SweepResult, top: int | None = None) -> pd.DataFrame:
    """One row per point, best on the tune split first (the primary's direction): ``rank`` (on
    tune), ``chosen`` (:data:`CHOSEN` on the chosen point, :attr:`SweepResult.best`: with
    ``[search] objectives`` the Pareto front's best, which may rank below others), ``label``,
    the settings (:func:`point_settings`), ``tune`` and ``report`` (the primary metric on each
    split), ``best`` (True on the chosen point), ``baseline`` and ``config`` (hash prefix).
    ``top`` keeps the first rows only."""
    ordered = _tune_order(result)
    settings = _settings_frame(ordered)
    t, r, m = result.tune_split, result.report_split or "", result.primary
    chosen = result.best.config_hash
    head = pd.DataFrame({"rank": range(1, len(ordered) + 1),
                         "chosen": [CHOSEN if p.config_hash == chosen else "" for p in ordered],
                         "label": [p.label for p in ordered]})
    tail = pd.DataFrame({
        "tune": [p.metrics[t][m] for p in ordered],
        "report": [p.metrics.get(r, {}).get(m, float("nan")) for p in ordered],
        "best": [p.config_hash == result.best.config_hash for p in ordered],
        "baseline": [p.is_baseline for p in ordered],
        "config": [p.config_hash[:HASH_PREFIX] for p in ordered],
    })
    frame = pd.concat([head, settings, tail], axis=1)
    frame.attrs.update(primary=m, tune_split=t, report_split=result.report_split)
    return frame if top is None else frame.head(top).reset_index(drop=True)


def _value_key(value: Any) -> tuple[int, float, str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def axis_frame(result: SweepResult, axis: str) -> pd.DataFrame:
    """The primary metric as a function of one swept setting. Per value (sorted; points where
    the setting does not apply left out): ``n`` points, the point best on the tune split among
    them (ties by config hash, as :func:`choose_best`) as ``label``/``config`` with its
    ``tune`` and ``report`` metric, and ``mean_tune``/``mean_report`` over the ``n`` points."""
    ordered = _tune_order(result)
    settings = _settings_frame(ordered)
    if axis not in settings.columns:
        raise KeyError(f"{axis!r} is not a setting of sweep {result.name!r}; settings: "
                       f"{', '.join(settings.columns)}")
    t, r, m = result.tune_split, result.report_split or "", result.primary
    groups: dict[Any, list[PointResult]] = {}
    for point, value in zip(ordered, settings[axis], strict=True):
        if value is not None and not point.outside_grid:  # the grid's values, not a baseline's
            groups.setdefault(value, []).append(point)  # stays in tune order: first is best
    rows = []
    for value in sorted(groups, key=_value_key):
        pts = groups[value]
        top = pts[0]
        rows.append({axis: value, "n": len(pts), "label": top.label,
                     "config": top.config_hash[:HASH_PREFIX],
                     "tune": top.metrics[t][m],
                     "report": top.metrics.get(r, {}).get(m, float("nan")),
                     "mean_tune": sum(p.metrics[t][m] for p in pts) / len(pts),
                     "mean_report": sum(p.metrics.get(r, {}).get(m, float("nan")) for p in pts)
                     / len(pts)})
    frame = pd.DataFrame(rows, columns=[axis, "n", "label", "config", "tune", "report",
                                        "mean_tune", "mean_report"])
    frame.attrs.update(primary=m, tune_split=t, report_split=result.report_split, axis=axis)
    return frame


def tune_vs_report(result: SweepResult) -> pd.DataFrame:
    """Per point (grid order): ``label``, ``config`` (hash prefix), the primary metric on the
    tune and the report split, ``best`` and ``baseline`` flags: what a tune-vs-report scatter
    plots (points far below the diagonal were lucky on tune)."""
    t, r, m = result.tune_split, result.report_split or "", result.primary
    frame = pd.DataFrame({
        "label": [p.label for p in result.points],
        "config": [p.config_hash[:HASH_PREFIX] for p in result.points],
        "tune": [p.metrics[t][m] for p in result.points],
        "report": [p.metrics.get(r, {}).get(m, float("nan")) for p in result.points],
        "best": [p.config_hash == result.best.config_hash for p in result.points],
        "baseline": [p.is_baseline for p in result.points],
    })
    frame.attrs.update(primary=m, tune_split=t, report_split=result.report_split)
    return frame


def folds_frame(result: SweepResult) -> pd.DataFrame:
    """The k-fold table of a ``[cv]`` sweep (empty without one): per ``fold`` the point chosen
    on the other folds (``label``, ``config``), its ``tune`` score there, its ``held_out`` score
    on the fold (``n`` queries), the ``gap`` and the ``baseline`` on the fold."""
    cv = result.cv
    rows = [] if cv is None else [
        {"fold": r.fold, "n": r.n_held_out, "label": r.label,
         "config": r.config_hash[:HASH_PREFIX], "tune": r.tune, "held_out": r.held_out,
         "gap": r.gap, "baseline": r.baseline_held_out} for r in cv.rows]
    frame = pd.DataFrame(rows, columns=["fold", "n", "label", "config", "tune", "held_out",
                                        "gap", "baseline"])
    if cv is not None:
        frame.attrs.update(primary=cv.metric, split=cv.split, margin=cv.margin,
                           margin_low=cv.margin_low, margin_high=cv.margin_high,
                           verdict=cv.verdict)
    return frame


def stage_counts(result: SweepResult) -> pd.DataFrame:
    """Per stage (in the order the stages first appear): outputs ``computed`` in this run and
    ``reused`` from the stage cache."""
    stages = list(dict.fromkeys([*result.computed, *result.reused]))
    return pd.DataFrame({"stage": stages,
                         "computed": [result.computed.get(s, 0) for s in stages],
                         "reused": [result.reused.get(s, 0) for s in stages]})


def significance_frame(result: SweepResult) -> pd.DataFrame:
    """The significance table: per tested point and metric, baseline and candidate means on
    the report split, the delta, raw and Holm-adjusted p-values, the metric's direction
    (``higher`` or ``lower`` is better) and win/tie/loss counts under it, and ``mark``: ``▲`` /
    ``▼`` for a significant difference up or down, as every table marks it
    (:mod:`aiblox.metrics.marks`). Empty (with the columns) when the spec names no
    baseline."""
    columns = ["candidate", "metric", "direction", "baseline_mean", "candidate_mean", "delta",
               "p_value", "p_adjusted", "significant", "mark", "wins", "ties", "losses", "test",
               "correction"]
    return pd.DataFrame([{**c.model_dump(), "mark": mark(c.delta, c.significant)}
                         for c in result.significance], columns=columns)


def manifest_frame(point: PointResult) -> pd.DataFrame:
    """The determinism hashes of one point: per split and stage, the stage key and its output
    hash, plus the run hash (the fused run's hash) per split."""
    rows = []
    for split, sm in point.manifest.splits.items():
        for stage in sm.stages:
            rows.append({"split": split, "stage": stage["name"], "key": stage["key"],
                         "output_hash": stage.get("output_hash")})
        rows.append({"split": split, "stage": "run", "key": "", "output_hash": sm.run_hash})
    return pd.DataFrame(rows, columns=["split", "stage", "key", "output_hash"])


def pareto_frame(result: SweepResult, objectives: dict[str, str] | None = None) -> pd.DataFrame:
    """Quality against cost on the tune split: one row per point, ``label``, ``config_hash``,
    one column per objective, and ``front`` (on the Pareto front), ``best``, ``baseline``;
    front first, best first by the primary metric. The objectives are the spec's (``[search]
    objectives``, :attr:`SweepResult.objectives`, whose front is :attr:`SweepResult.pareto`),
    else ``objectives``, else the primary metric against ``candidates`` (documents retrieved per
    query; the primary in its direction, :func:`~aiblox.metrics.lower_is_better`: fewest tokens
    best for a cost); a front computed here leaves the baseline out (it is never chosen)."""
    direction = "minimize" if lower_is_better(result.primary) else "maximize"
    objs = dict(result.objectives or objectives or {result.primary: direction,
                                                    "candidates": "minimize"})
    if result.objectives:
        front = set(result.pareto)
    else:
        front = {p.config_hash for p in pareto_points(
            [p for p in result.points if not p.is_baseline], result.tune_split, objs,
            result.primary)}
    names = list(objs)
    rows = [{"label": p.label, "config_hash": p.config_hash[:HASH_PREFIX],
             **dict(zip(names, objective_values(p, result.tune_split, names), strict=True)),
             "front": p.config_hash in front, "best": p.config_hash == result.best.config_hash,
             "baseline": p.is_baseline} for p in result.points]
    frame = pd.DataFrame(rows, columns=["label", "config_hash", *names, "front", "best",
                                        "baseline"])
    # front first, then as pareto_points orders the front: the primary in its direction here,
    # ties by config hash, NaN last (the one ranking, ranking_order)
    sign = 1.0 if objs.get(result.primary, direction) == "maximize" else -1.0
    order = sorted(range(len(rows)), key=lambda i: (not rows[i]["front"], ranking_order(
        sign * result.points[i].metrics[result.tune_split][result.primary],
        result.points[i].config_hash, None)))
    return frame.iloc[order].reset_index(drop=True)
