"""MLflow runs in a notebook: the runs of the store ``aiblox sweep`` logs to, a fusion setting
logged from a notebook in the sweep's layout, and two runs compared the way ``aiblox compare``
compares them (:func:`aiblox.sweep.compare_runs`: the same p-values and deltas).
"""

from __future__ import annotations

import importlib.util
import math
import os

import pandas as pd

from aiblox.engine.evaluate import config_hash
from aiblox.engine.tracking import DEFAULT_TRACKING_URI, logged_splits, tracking_client
from aiblox.explore.fusion import FusionPoint
from aiblox.explore.notebook import NotebookWorkspace
from aiblox.sweep.compare import DatasetMismatch, compare_runs

__all__ = ["compare_mlflow_runs", "log_fusion_point", "mlflow_runs", "notebook_tracking_uri",
           "point_run_choices"]


def notebook_tracking_uri() -> str:
    """The MLflow store a notebook reads and logs to: ``MLFLOW_TRACKING_URI`` when set (as
    the CLI's ``--tracking-uri`` takes it), else the CLI's default store
    (:data:`~aiblox.engine.tracking.DEFAULT_TRACKING_URI`)."""
    return os.environ.get("MLFLOW_TRACKING_URI", "").strip() or DEFAULT_TRACKING_URI


def mlflow_runs(tracking_uri: str = DEFAULT_TRACKING_URI, max_results: int = 500) -> pd.DataFrame:
    """The runs of the MLflow store (``mlflow.search_runs`` over every experiment), newest
    first, at most ``max_results`` of them: ``attrs["truncated"]`` is True when the store holds
    more (an older run is then reached by its reference, :func:`compare_mlflow_runs`); an
    empty frame when mlflow is not installed or the store does not exist yet (a missing SQLite
    file is not created)."""
    if importlib.util.find_spec("mlflow") is None:
        return pd.DataFrame()
    import mlflow

    from aiblox.engine.tracking import TrackingStoreError, check_tracking_store, opened_uri

    try:
        check_tracking_store(tracking_uri)  # a missing store is not created
    except TrackingStoreError:
        return pd.DataFrame()

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(opened_uri(tracking_uri))
    try:
        df = mlflow.search_runs(search_all_experiments=True, max_results=max_results + 1,
                                output_format="pandas")
    except Exception:  # noqa: BLE001 - an unreadable store shows as "no runs"
        return pd.DataFrame()
    finally:
        mlflow.set_tracking_uri(previous)
    if not isinstance(df, pd.DataFrame):
        return pd.DataFrame()
    truncated = len(df) > max_results  # one more asked for: the store holds more than shown
    df = df.head(max_results).reset_index(drop=True)
    df.attrs["truncated"] = truncated
    return df


def point_run_choices(runs: pd.DataFrame) -> dict[str, str]:
    """``{label: run_id}`` of the runs of ``runs`` (:func:`mlflow_runs`) that can be compared:
    the points (a sweep's child runs, ``aiblox eval`` runs, notebook settings), not a sweep's
    parent run (tag ``aiblox.kind = sweep``), which ``aiblox compare`` refuses: a sweep is
    compared point by point. In the frame's order (newest first); a label is the run's name
    and its id's first 8 characters."""
    if runs.empty:
        return {}
    kind = runs["tags.aiblox.kind"] if "tags.aiblox.kind" in runs.columns else None
    points = runs if kind is None else runs[kind != "sweep"]
    names = (points["tags.mlflow.runName"] if "tags.mlflow.runName" in points.columns
             else pd.Series("", index=points.index))
    return {f"{name if isinstance(name, str) else ''} {rid[:8]}".strip(): rid
            for name, rid in zip(names, points["run_id"], strict=True)}


def log_fusion_point(ws: NotebookWorkspace, point: FusionPoint,
                     tracking_uri: str = DEFAULT_TRACKING_URI,
                     experiment: str = "aiblox-notebooks") -> str:
    """Log a fusion setting from a notebook to the MLflow store the CLI's sweeps use, by the
    sweep's own writer (:func:`aiblox.engine.tracking.log_runs`) in its layout: params are the
    settings of its config that apply to it, metrics ``<split>.<metric>`` (``@`` written
    ``_at_``), tags the hashes, and a ``per_query.<split>.parquet`` artifact
    (``query_id, metric, value``); artifacts beside a SQLite store (``<db dir>/artifacts``).
    Returns the run id."""
    from aiblox.engine.tracking import PointLog, log_runs

    _, config = config_hash(point.prefs, ws.embedder.model_id, ws.store.kind)
    s = point.prefs.scoring
    settings = (f"w_text={s.w_text} {s.normalize} missing={s.missing}" if s.blend == "linear"
                else f"k={s.rrf_k} w={s.rrf_w_text}/{s.rrf_w_vec}")
    label = f"notebook {s.blend} {settings} depth={point.prefs.fts.top_k}"
    (rid,) = log_runs(tracking_uri, experiment, [PointLog(
        kind="notebook", label=label, metrics={ws.split: point.metrics},
        per_query={ws.split: point.per_query}, config=config,
        config_hash=point.hashes["config"], dataset_hash=point.hashes["dataset"],
        run_hashes={ws.split: point.hashes["run"]}, params={"dataset": ws.dataset.name})])
    return rid


def compare_mlflow_runs(run_a: str, run_b: str, tracking_uri: str = DEFAULT_TRACKING_URI,
                        across_datasets: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two MLflow runs side by side: ``(logged metric deltas, per-query comparison)``. Each run
    is a run id, ``SWEEP:LABEL`` or a config-hash or run-hash prefix, as ``aiblox compare``
    takes them (:func:`aiblox.sweep.runs.resolve_run`). The second frame is ``aiblox compare``'s
    (:func:`aiblox.sweep.compare_runs`: the same test, Holm's correction over the metrics
    of a split, the metric's direction in ``better`` and win/tie/loss under it) for every split
    both runs logged per-query values of (``per_query.<split>.parquet``), one row per
    ``<split>:<metric>``, with the queries it pairs (``n``) and those each run has a value for
    (``n_a``, ``n_b``: a run's logged mean is over its own); it is empty when they logged
    none. Runs scored on different datasets are refused as ``aiblox compare`` refuses them
    (:class:`~aiblox.sweep.compare.DatasetMismatch`, a ``ValueError`` naming both) unless
    ``across_datasets``."""
    if importlib.util.find_spec("mlflow") is None:
        return pd.DataFrame(), pd.DataFrame()
    from aiblox.engine.tracking import TrackingStoreError, check_tracking_store
    from aiblox.sweep.runs import resolve_run

    try:
        check_tracking_store(tracking_uri)  # a missing store is not created
    except TrackingStoreError:
        return pd.DataFrame(), pd.DataFrame()
    run_a, run_b = (resolve_run(r, tracking_uri).run_id for r in (run_a, run_b))
    # the two runs themselves, however many the store holds (a listing of the newest runs
    # left an older one out: a KeyError past 500 runs)
    client = tracking_client(tracking_uri)
    logged_a, logged_b = (client.get_run(r).data.metrics for r in (run_a, run_b))
    rows = []
    for c in sorted({*logged_a, *logged_b}):
        va, vb = logged_a.get(c, math.nan), logged_b.get(c, math.nan)
        if math.isnan(va) and math.isnan(vb):
            continue
        rows.append({"metric": c, "A": va, "B": vb,
                     "delta": (vb - va) if not (math.isnan(va) or math.isnan(vb)) else None})
    splits = sorted(set(logged_splits(client, run_a)) & set(logged_splits(client, run_b)))
    per_query = []
    for split in splits:
        try:
            cmp = compare_runs(run_a, run_b, tracking_uri, split=split,
                               across_datasets=across_datasets)
        except DatasetMismatch:  # not paired, nor its refusal passed over as an empty frame
            raise
        except ValueError:  # no shared per-query metric on this split
            continue
        per_query += [{"metric": f"{split}:{m.metric}", "better": m.direction, "n": m.n,
                       "n_a": m.n_a, "n_b": m.n_b, "A": m.a, "B": m.b, "delta": m.delta,
                       "p_value": m.p_value, "p_adjusted": m.p_adjusted,
                       "significant": m.significant, "wins": m.wins, "ties": m.ties,
                       "losses": m.losses} for m in cmp.metrics]
    return pd.DataFrame(rows), pd.DataFrame(per_query, columns=[
        "metric", "better", "n", "n_a", "n_b", "A", "B", "delta", "p_value", "p_adjusted",
        "significant", "wins", "ties", "losses"])
