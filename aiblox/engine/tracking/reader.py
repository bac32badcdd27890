"""The one reader of the MLflow point layout (:mod:`aiblox.engine.tracking.layout`): a run's
artifacts (read in place from a local artifact folder, else downloaded without MLflow's
progress bars), its manifest, its per-query values and selected evidence, a sweep's parent run
by name and its points, and a point's TREC run files (logged, or written again from the stage
keys its manifest records; a scored run file's, as logged). ``aiblox compare``, ``aiblox
runs``, ``aiblox report``, ``aiblox eval verify`` and the notebooks read through here."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiblox.engine.bulk_mlflow import local_path
from aiblox.engine.manifest import PointManifest
from aiblox.engine.outputs import StageReader
from aiblox.engine.tracking.layout import (
    MANIFEST,
    TAG_KIND,
    TAG_PARENT,
    evidence_file,
    per_query_file,
    run_file,
    split_file,
)
from aiblox.engine.tracking.mlflow_store import quiet_downloads, tag_filter

__all__ = [
    "artifact_bytes",
    "child_runs",
    "find_sweep_run",
    "logged_runs",
    "logged_splits",
    "point_manifest",
    "read_dataset_name",
    "read_evidence",
    "read_json",
    "read_manifest",
    "read_per_query",
    "scored_run_files",
]


def artifact_bytes(client: Any, run_id: str, name: str, run: Any = None) -> bytes | None:
    """The artifact ``name`` of run ``run_id`` (``run``: the run, when already fetched), or None
    when it has none: read in place from a local artifact folder, else downloaded (no progress
    bars)."""
    run = run if run is not None else client.get_run(run_id)
    folder = local_path(run.info.artifact_uri or "")
    if folder is not None:
        path = folder / name
        return path.read_bytes() if path.is_file() else None
    with tempfile.TemporaryDirectory() as tmp, quiet_downloads():
        try:
            local = client.download_artifacts(run_id, name, tmp)
        except Exception:  # noqa: BLE001 - MLflow's errors for a missing file vary by store
            return None
        return Path(local).read_bytes()


def read_json(client: Any, run_id: str, name: str, run: Any = None) -> Any:
    """A JSON artifact (``sweep_summary.json``, ``cv_folds.json``) parsed, None when missing."""
    data = artifact_bytes(client, run_id, name, run)
    return None if data is None else json.loads(data.decode("utf-8"))


def read_manifest(client: Any, run_id: str, run: Any = None) -> PointManifest:
    """A point's ``manifest.json``; ``ValueError`` naming the run when it has none."""
    manifest = point_manifest(client, run_id, run)
    if manifest is None:
        raise ValueError(f"run {run_id} has no {MANIFEST} artifact")
    return manifest


def point_manifest(client: Any, run_id: str, run: Any = None) -> PointManifest | None:
    """A run's ``manifest.json``, None when it logged none (a run file ``aiblox eval --run
    --mlflow`` scored has no config to record); a damaged one is a ``ValueError``."""
    data = artifact_bytes(client, run_id, MANIFEST, run)
    return None if data is None else PointManifest.model_validate_json(data)


def read_dataset_name(client: Any, run: Any) -> str:
    """The name of the dataset ``run`` was scored on: its manifest's (a point), else its
    ``dataset`` param (a scored run file, a notebook's run), else the ``dataset`` of its
    ``experiment.json`` (a run file ``aiblox eval --mlflow`` scored before it logged the
    param); "" when it records none. Its hash is the tag ``aiblox.dataset_hash``."""
    run_id = run.info.run_id
    try:
        return read_manifest(client, run_id, run).dataset
    except ValueError:
        pass
    if run.data.params.get("dataset"):
        return str(run.data.params["dataset"])
    table = read_json(client, run_id, "experiment.json", run)
    return str(table.get("dataset", "")) if isinstance(table, dict) else ""


def _frame(data: bytes) -> Any:
    import io

    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(data))


def read_per_query(client: Any, run_id: str, split: str,
                   run: Any = None) -> dict[str, dict[str, float]]:
    """``{metric: {query_id: value}}`` from a run's ``per_query.<split>.parquet``;
    ``ValueError`` naming the run and the split when it has none."""
    name = per_query_file(split)
    data = artifact_bytes(client, run_id, name, run)
    if data is None:
        raise ValueError(f"run {run_id} has no {name} artifact (split {split})")
    table = _frame(data)
    out: dict[str, dict[str, float]] = {}
    for qid, metric, value in zip(table.column("query_id").to_pylist(),
                                  table.column("metric").to_pylist(),
                                  table.column("value").to_pylist(), strict=True):
        out.setdefault(str(metric), {})[str(qid)] = float(value)
    return out


def logged_splits(client: Any, run_id: str, run: Any = None) -> list[str]:
    """The splits a run logged both metrics (``<split>.<metric>``) and per-query values of,
    sorted; the artifacts looked up in place where the store is local (nothing downloaded)."""
    run = run if run is not None else client.get_run(run_id)
    folder = local_path(run.info.artifact_uri or "")
    if folder is not None:
        names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    else:
        names = {f.path for f in client.list_artifacts(run_id)}
    splits = {key.split(".", 1)[0] for key in run.data.metrics if "." in key}
    return sorted(s for s in splits if per_query_file(s) in names)


def read_evidence(client: Any, run_id: str, split: str,
                  run: Any = None) -> dict[str, list[str]] | None:
    """``{query_id: [chunk_id, ...]}`` (selected evidence, in rank order) from a run's
    ``evidence.<split>.parquet``; None when the run has none (not a selection point). A query
    that selected nothing is listed with an empty list (a row with no chunk id)."""
    data = artifact_bytes(client, run_id, evidence_file(split), run)
    if data is None:
        return None
    table = _frame(data)
    out: dict[str, list[tuple[int, str]]] = {}
    for qid, rank, chunk in zip(table.column("query_id").to_pylist(),
                                table.column("rank").to_pylist(),
                                table.column("chunk_id").to_pylist(), strict=True):
        rows = out.setdefault(str(qid), [])
        if chunk is not None and int(rank) >= 0:
            rows.append((int(rank), str(chunk)))
    return {q: [c for _, c in sorted(rows)] for q, rows in sorted(out.items())}


def find_sweep_run(client: Any, sweep: str) -> Any:
    """The parent run whose id is ``sweep``, else the newest sweep run named ``sweep``;
    ``ValueError`` naming it when there is none."""
    try:
        run = client.get_run(sweep)
        if run.data.tags.get(TAG_KIND) == "sweep":
            return run
    except Exception:  # noqa: BLE001 - not a run id: look it up by name
        pass
    try:  # a name with a quote (or anything but a plain name) builds no filter
        where = f"{tag_filter(TAG_KIND, 'sweep')} and {tag_filter('aiblox.sweep_name', sweep)}"
    except ValueError:
        raise ValueError(f"no sweep run with id or name {sweep!r}") from None
    exps = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(exps, filter_string=where, order_by=["attributes.start_time DESC"],
                              max_results=1) if exps else []
    if not runs:
        raise ValueError(f"no sweep run with id or name {sweep!r} (aiblox runs lists them)")
    return runs[0]


def child_runs(client: Any, parent: Any, *, finished: bool = True) -> list[Any]:
    """The child runs of a sweep's parent run (FINISHED ones only unless ``finished=False``),
    every page of them."""
    out: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [parent.info.experiment_id],
            filter_string=tag_filter(TAG_PARENT, parent.info.run_id),
            max_results=1000, page_token=token)
        out.extend(r for r in page if not finished or r.info.status == "FINISHED")
        token = page.token
        if not token:
            return out


def logged_runs(client: Any, run_id: str, manifest: PointManifest,
                reader: StageReader | None = None, splits: Sequence[str] | None = None,
                run: Any = None) -> dict[str, str]:
    """A point's TREC run text per split (``splits``, None: every split of its manifest): its
    logged ``run.<split>.trec``, else written from the stage cache ``reader`` reads, by the
    stage keys the manifest records (the run the point's metrics were computed from).
    :class:`~aiblox.engine.cache.StageCacheError` when neither has it (without ``reader``:
    ``KeyError`` naming the split)."""
    tag = f"aiblox-{manifest.config_hash[:12]}"
    out = {}
    for split in splits if splits is not None else list(manifest.splits):
        if split not in manifest.splits:
            raise ValueError(f"run {run_id} has no split {split!r} (its splits: "
                             f"{', '.join(manifest.splits)})")
        data = artifact_bytes(client, run_id, run_file(split), run)
        if data is not None:
            out[split] = data.decode("utf-8")
        elif reader is not None:
            out[split] = reader.point_trec(manifest.splits[split].stages, tag)
        else:
            raise KeyError(split)
    return out


def scored_run_files(client: Any, run_id: str, splits: Sequence[str] | None = None,
                     run: Any = None) -> dict[str, str]:
    """The TREC run files a run with no manifest logged (a run file ``aiblox eval --run
    --mlflow`` scored: its ``run.<split>.trec``, the run as it was scored), their text as
    logged, by split as file names write it (:func:`split_file`; ``splits``: those, None:
    every one logged, found by the artifacts' names). No stage key records such a run, so
    nothing is written again: ``ValueError`` naming the run when it logged none, or no file
    of a split asked for."""
    run = run if run is not None else client.get_run(run_id)
    folder = local_path(run.info.artifact_uri or "")
    if folder is not None:
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    else:
        names = [f.path for f in client.list_artifacts(run_id)]
    logged = {name.removeprefix("run.").removesuffix(".trec"): name for name in sorted(names)
              if name.startswith("run.") and name.endswith(".trec") and len(name) > 9}
    if not logged:
        raise ValueError(f"run {run_id} has no {MANIFEST} artifact and logged no TREC run file "
                         f"(run.<split>.trec): nothing to export")
    wanted = {s: split_file(s) for s in splits} if splits else {s: s for s in logged}
    out = {}
    for split, name in wanted.items():
        data = artifact_bytes(client, run_id, logged[name], run) if name in logged else None
        if data is None:
            raise ValueError(f"run {run_id} is a scored run file (no {MANIFEST}: its run files "
                             f"are exported as logged) and logged none of split {split!r} (its "
                             f"splits: {', '.join(logged)})")
        out[name] = data.decode("utf-8")
    return out
