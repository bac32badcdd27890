"""Fusion in a notebook: cached signals re-fused under one scoring setting and scored with ranx
(milliseconds on the sample, about a second on SciFact), a metric along a weight axis built
from integer steps (``i / steps``, never a float accumulation), and the queries a change moved.
Depths default to the evaluation depth (100, :data:`~aiblox.metrics.DEFAULT_DEPTH`); a
metric whose cutoff is deeper than the run is refused, as everywhere
(:mod:`aiblox.metrics.depth`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.evaluate import config_hash, run_hash
from aiblox.explore.notebook import NotebookWorkspace
from aiblox.fusion import RankedList
from aiblox.metrics import DEFAULT_DEPTH, DEFAULT_METRICS, check_depth, evaluate_run
from aiblox.metrics.depth import metrics_within
from aiblox.retrieval import HybridRetriever, SignalRuns

__all__ = [
    "FusionPoint",
    "baseline_prefs",
    "fitting_metrics",
    "fusion_prefs",
    "moved_queries",
    "score_point",
    "weight_curve",
]


def fusion_prefs(blend: str = "rrf", w_text: float = 0.35, rrf_k: int = 60,
                 normalize: str = "sigmoid", depth: int = DEFAULT_DEPTH, missing: str = "zero",
                 top_k: int = DEFAULT_DEPTH, mode: str = "hybrid") -> RetrievalPrefs:
    """Retrieval preferences of one fusion setting. ``w_text`` is the text share: the linear
    blend uses ``(w_text, 1 - w_text)``, RRF the per-signal weights ``(w_text, 1 - w_text)``
    scaled so that 0.5 is classic unweighted RRF.

    Only the settings of ``blend`` are set (:mod:`aiblox.engine.applies`): the linear blend
    takes ``w_text``, ``w_vec``, ``normalize`` and ``missing``, RRF ``rrf_k`` and its weights;
    the other blend's settings keep their defaults, as ``aiblox eval`` and a sweep point leave
    them, so the config hash is the one the CLI and a sweep give for the same setting."""
    if not 0.0 <= w_text <= 1.0:
        raise ValueError(f"w_text must lie in [0, 1], got {w_text}")
    w_vec = round(1.0 - w_text, 12)
    scoring: dict[str, object] = {"blend": blend}
    if blend == "linear":
        scoring.update(w_text=w_text, w_vec=w_vec, normalize=normalize, missing=missing)
    else:
        scoring.update(rrf_k=rrf_k, rrf_w_text=round(2 * w_text, 12),
                       rrf_w_vec=round(2 * w_vec, 12))
    return RetrievalPrefs(
        query_text="", mode=mode, top_k_items=top_k,  # type: ignore[arg-type]
        fts={"top_k": depth}, vector={"top_k": depth},  # type: ignore[arg-type]
        scoring=scoring)  # type: ignore[arg-type]


def baseline_prefs(depth: int = DEFAULT_DEPTH, top_k: int = DEFAULT_DEPTH) -> RetrievalPrefs:
    """The package's default fusion (classic RRF, k=60) at ``depth``: what moves are measured
    against."""
    return RetrievalPrefs(query_text="", mode="hybrid", top_k_items=top_k,
                          fts={"top_k": depth}, vector={"top_k": depth})  # type: ignore[arg-type]


@dataclass
class FusionPoint:
    """One fusion setting scored on the workspace's split."""

    prefs: RetrievalPrefs
    run: dict[str, RankedList]
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    hashes: dict[str, str] = field(default_factory=dict)


def _fuse(ws: NotebookWorkspace, prefs: RetrievalPrefs) -> dict[str, RankedList]:
    if prefs.fts.top_k > ws.max_depth or prefs.vector.top_k > ws.max_depth:
        raise ValueError(f"depth above the cached depth {ws.max_depth}")
    sig = SignalRuns(text=[t[:prefs.fts.top_k] for t in ws.signals.text],
                     vec=[v[:prefs.vector.top_k] for v in ws.signals.vec])
    hits = HybridRetriever.fuse([prefs] * len(ws.queries), sig)
    return {q: [(h.doc_id, h.score) for h in hs]
            for (q, _), hs in zip(ws.queries, hits, strict=True)}


_FIX = ("give fusion_prefs(depth=..., top_k=...) {cut} or more (the workspace's signals are "
        "cached as deep as open_notebook_workspace(max_depth=...)), or use cutoffs of at most "
        "{depth}")


def fitting_metrics(prefs: RetrievalPrefs, metrics: Sequence[str] = DEFAULT_METRICS
                    ) -> list[str]:
    """The ``metrics`` a run under ``prefs`` is deep enough for (a cutoff at most its depths:
    ``recall@100`` needs ``depth`` and ``top_k`` of 100 or more), in their order."""
    return metrics_within(prefs, metrics)


def score_point(ws: NotebookWorkspace, prefs: RetrievalPrefs,
                metrics: Sequence[str] | None = None) -> FusionPoint:
    """Fuse the cached signals under ``prefs`` and score the run with ranx. ``metrics`` None:
    those of :data:`~aiblox.metrics.DEFAULT_METRICS` the run is deep enough for
    (:func:`fitting_metrics`); a metric named whose cutoff is above the run's depths raises
    :class:`~aiblox.metrics.DepthError` (:mod:`aiblox.metrics.depth`)."""
    if metrics is None:
        metrics = fitting_metrics(prefs) or list(DEFAULT_METRICS)  # none fits: refused below
    check_depth(prefs, metrics, fix=_FIX)
    run = _fuse(ws, prefs)
    means, per_query = evaluate_run(ws.qrels, run, metrics)
    chash, _ = config_hash(prefs, ws.embedder.model_id, ws.store.kind)
    return FusionPoint(prefs=prefs, run=run, metrics=means, per_query=per_query,
                       hashes={"dataset": ws.dataset.hash, "config": chash,
                               "run": run_hash(run)})


def weight_curve(ws: NotebookWorkspace, prefs: RetrievalPrefs, metric: str = "ndcg@10",
                 steps: int = 10) -> pd.DataFrame:
    """``metric`` along the text weight ``w_text = i / steps`` (i = 0..steps) with every other
    setting of ``prefs`` kept: columns ``w_text`` and ``value``."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    check_depth(prefs, [metric], fix=_FIX)
    s = prefs.scoring
    rows = []
    for i in range(steps + 1):
        w = i / steps
        p = fusion_prefs(blend=s.blend, w_text=w, rrf_k=s.rrf_k, normalize=s.normalize,
                         depth=prefs.fts.top_k, missing=s.missing, top_k=prefs.top_k_items)
        means, _ = evaluate_run(ws.qrels, _fuse(ws, p), [metric])
        rows.append({"w_text": w, "value": means[metric]})
    return pd.DataFrame(rows, columns=["w_text", "value"])


def _first_relevant(hits: RankedList, rel: Mapping[str, int]) -> int | None:
    for i, (d, _) in enumerate(hits, start=1):
        if rel.get(d, 0) > 0:
            return i
    return None


def moved_queries(ws: NotebookWorkspace, before: FusionPoint, after: FusionPoint,
                  metric: str = "ndcg@10", cutoff: int = 10) -> pd.DataFrame:
    """Per judged query: ``metric`` before and after, its delta, the first relevant rank and
    the top document before and after, and whether the top ``cutoff`` changed. Sorted by
    ``|delta|`` desc, then query id. ``metric`` must be one both points scored (a
    ``ValueError`` names the ones they did)."""
    for name, point in (("before", before), ("after", after)):
        if metric not in point.per_query:
            raise ValueError(f"metric {metric!r} was not scored by the {name} point; it scored: "
                             f"{', '.join(point.per_query) or 'nothing'} (score_point's "
                             "metrics=...)")
    text = ws.query_text
    rows = []
    for q in sorted(before.per_query[metric]):
        b, a = before.per_query[metric][q], after.per_query[metric].get(q, 0.0)
        rb, ra = before.run.get(q, []), after.run.get(q, [])
        rel = ws.qrels.get(q, {})
        rows.append({
            "qid": q, "query": text.get(q, ""), "before": round(b, 4), "after": round(a, 4),
            "delta": round(a - b, 4),
            "first_rel_before": _first_relevant(rb, rel),
            "first_rel_after": _first_relevant(ra, rel),
            "top1_before": rb[0][0] if rb else None, "top1_after": ra[0][0] if ra else None,
            "top_changed": [d for d, _ in rb[:cutoff]] != [d for d, _ in ra[:cutoff]],
        })
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_abs"] = df["delta"].abs()
    return df.sort_values(["_abs", "qid"], ascending=[False, True]).drop(columns="_abs") \
        .reset_index(drop=True)
