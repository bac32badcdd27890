"""A point's MLflow layout: its tags, params (the flattened config), metric names
(``<split>.<metric>``), artifact file names, TREC run text, and the parent's conclusion
(cross-validation metrics, the Pareto summary)."""

from __future__ import annotations

import json
from typing import Any

from aiblox.data.trec import trec_run_text

__all__ = [
    "EVIDENCE_COLUMNS",
    "TAG_CONFIG",
    "TAG_KIND",
    "TAG_PARENT",
    "TAG_SPEC_PATH",
    "TAG_SWEEP",
    "cv_metrics",
    "flatten",
    "metric_key",
    "pareto_summary",
    "split_file",
    "trec_run",
]


TAG_KIND = "aiblox.kind"


TAG_SWEEP = "aiblox.sweep_hash"


TAG_CONFIG = "aiblox.config_hash"


TAG_PARENT = "mlflow.parentRunId"


EVIDENCE_COLUMNS = ["query_id", "rank", "chunk_id", "item_id"]
"""Columns of ``evidence.<split>.parquet``: the evidence a selection point kept, in order."""


TAG_SPEC_PATH = "aiblox.spec_path"
"""Parent-run tag: the spec file the sweep was run from (for the report's reproduce command)."""


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` to ``{"a.b": "1"}``; empty dicts and lists as JSON text."""
    out: dict[str, str] = {}
    if isinstance(value, dict) and value:
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}{k}."))
        return out
    text = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)
    out[prefix.rstrip(".")] = text
    return out


def split_file(split: str) -> str:
    """A split's name in artifact file names: a derived split's ``:`` and ``/`` are written
    ``-`` and ``of`` (``test:0/2`` is ``test-0of2``); plain names stay as they are."""
    return split.replace(":", "-").replace("/", "of")


def metric_key(split: str, metric: str) -> str:
    """MLflow metric name of a ranx metric on a split: ``test.ndcg_at_10``."""
    return f"{split}.{metric.replace('@', '_at_')}"


def trec_run(run: dict[str, list[list[Any]]], tag: str) -> str:
    """TREC run format: ``qid Q0 doc rank score tag`` per line, queries sorted by id, scores
    strictly decreasing (:func:`aiblox.data.trec.trec_run_text`: trec_eval scores the ranking
    the sweep scored)."""
    return trec_run_text(run, tag)


def cv_metrics(cv: Any) -> dict[str, float]:
    """The parent run's metrics of a k-fold result (:class:`~aiblox.sweep.crossval.
    CrossValidation`): per fold ``cv.fold<i>.tune`` / ``.held_out`` / ``.gap``, the means, the
    pooled held-out score and, with a baseline, the margin, its interval and the p-value."""
    out = {}
    for r in cv.rows:
        out.update({f"cv.fold{r.fold}.tune": r.tune, f"cv.fold{r.fold}.held_out": r.held_out,
                    f"cv.fold{r.fold}.gap": r.gap})
    out.update({"cv.mean_tune": cv.mean_tune, "cv.mean_held_out": cv.mean_held_out,
                "cv.mean_gap": cv.mean_gap, "cv.pooled_held_out": cv.pooled_held_out})
    if cv.margin is not None:
        out.update({"cv.baseline_mean": cv.baseline_mean, "cv.margin": cv.margin,
                    "cv.margin_low": cv.margin_low, "cv.margin_high": cv.margin_high,
                    "cv.p_value": cv.p_value, "cv.beats_baseline": float(cv.beats_baseline)})
    return out


def _with_field_defaults(params: dict[str, str]) -> dict[str, str]:
    """``params`` with BM25 field weighting written out at its defaults (a config leaves
    ``fts.title_weight`` 1.0 and ``fts.title_b`` None out, so its hashes stay those from before
    the settings existed): every point then has the param, and a report's per-axis tables
    hold the unweighted point too."""
    out = dict(params)
    for key in params:
        if key.endswith("fts.k1"):
            head = key[:-len("k1")]
            out.setdefault(f"{head}title_weight", "1.0")
            out.setdefault(f"{head}title_b", "None")
    return out


def _params(flat: dict[str, str]) -> list[Any]:
    from mlflow.entities import Param

    return [Param(k, v[:6000]) for k, v in sorted(flat.items())]


def pareto_summary(result: Any) -> dict[str, Any]:
    """``sweep_summary.json``'s ``pareto``: the objectives and their directions (``[name,
    direction]`` pairs, in order), the front (by config hash, best first by primary) and every
    point's objective values on the tune and report splits, in the objectives' order
    (``front``, ``baseline`` flags), for the report's table and plots."""
    from aiblox.metrics.pareto import objective_values

    names = list(result.objectives)
    front = set(result.pareto)
    return {"objectives": [[n, d] for n, d in result.objectives.items()],  # ordered pairs:
            "front": list(result.pareto),  # the summary's keys are sorted when written
            "points": [{"label": p.label, "config_hash": p.config_hash,
                        "front": p.config_hash in front, "baseline": p.is_baseline,
                        "tune": objective_values(p, result.tune_split, names),
                        "report": (objective_values(p, result.report_split, names)
                                   if result.report_split else [])}
                       for p in result.points]}
