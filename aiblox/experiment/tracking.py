"""MLflow logging of a one-off experiment (``aiblox eval --mlflow``): one run per system, logged
the way a sweep logs a point (:mod:`aiblox.engine.tracking`), so that ``aiblox eval verify
RUN_ID`` re-checks a mode's run from its manifest alone.

A mode's manifest is the sweep's :class:`~aiblox.engine.manifest.PointManifest`, computed
through the sweep's own stage chain (:func:`aiblox.engine.point.split_point`) into a
temporary stage cache (:func:`mode_manifest`): its config hash is the one ``aiblox eval``
reports, its stages are what ``verify`` recomputes. Its run carries tag ``aiblox.kind=point``
(what ``verify`` accepts) and ``aiblox.source=eval``, params (the flattened config), metrics
``<split>.<metric>`` (the manifest's values, which ``verify`` compares), and artifacts
``manifest.json``, ``run.<split>.trec``, ``per_query.<split>.parquet`` (``query_id, metric,
value``) and ``experiment.json`` (the whole table, :meth:`Experiment.as_json`). An external run
file has no config to re-execute: its run (``aiblox.kind=run``) holds the file's sha256 and path
as params, the metrics, the per-query values, the run file and ``experiment.json``.
mlflow is imported here only through the tracking module (the ``tracking`` extra).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import Dataset
from aiblox.embedding.device import describe_device, resolve_device
from aiblox.engine.cache import StageCache
from aiblox.engine.context import RunContext
from aiblox.engine.manifest import PointManifest, SplitManifest, environment
from aiblox.engine.point import split_point
from aiblox.engine.settings import PipelinePoint, SweepSettings, point_config
from aiblox.experiment.table import EVAL_EXPERIMENT, Experiment, System, trec_run_text
from aiblox.hashing import sha256_hex

__all__ = ["EVAL_EXPERIMENT", "log_experiment", "mode_manifest"]

def mode_manifest(dataset: Dataset, split: str, system: System, *, embedder: str,
                  metrics: Sequence[str], db: str | None, backend: str,
                  vectors: Sequence[str] = (), device: str = "auto",
                  progress: bool = False) -> PointManifest:
    """The sweep manifest of a mode system: its prefs (from ``system.config``) run through the
    sweep's stages on ``split`` in a temporary stage cache, on the store ``db`` (None: the
    dataset's own), the embedder on ``device`` (the one the eval ran on). ``embedder`` is the
    registry name the manifest records. Raises ``ValueError`` when the config hash differs
    from the one the system reports."""
    prefs = RetrievalPrefs(query_text="", **system.config["prefs"])
    device = resolve_device(device)
    settings = SweepSettings(name="eval", embedder=embedder, metrics=tuple(metrics),
                             vectors=tuple(str(v) for v in vectors),
                             needs_vectors=prefs.mode != "bm25", device=device)
    pt = PipelinePoint(prefs=prefs)
    with tempfile.TemporaryDirectory() as tmp:
        ctx = RunContext(settings, dataset, StageCache(tmp), db, backend, [split],
                           embedder=system.config.get("embedder"), progress=progress)
        try:
            out = split_point(ctx, pt, split)
            chash, config = point_config(settings, pt, ctx.embedder_id, backend)
        finally:
            ctx.close()
    if chash != system.hashes.get("config"):
        raise ValueError(f"{system.name}: the sweep's config hash {chash[:16]} is not the "
                         f"eval's {system.hashes.get('config', '')[:16]}")
    return PointManifest(
        sweep="eval", sweep_hash=sha256_hex({"eval": dataset.name, "split": split,
                                             "config_hash": chash,
                                             "metrics": list(metrics)}),
        dataset=dataset.name, dataset_hash=dataset.hash, dataset_path=dataset.source,
        config_hash=chash, config=config,
        embedder_name=embedder, device=describe_device(device), metrics=list(metrics),
        splits={split: SplitManifest(split=split, **out)}, environment=environment())


def log_experiment(exp: Experiment, manifests: dict[str, PointManifest], tracking_uri: str,
                   experiment: str = EVAL_EXPERIMENT) -> dict[str, str]:
    """Log every system of ``exp`` as one MLflow run (see the module doc); ``manifests`` holds
    the mode systems' manifests by name. Returns ``{system name: run id}``."""
    import pandas as pd
    from mlflow.entities import Metric, Param

    from aiblox.engine.tracking import (
        artifact_location,
        flatten,
        metric_key,
        split_file,
        tracking_client,
    )
    from aiblox.engine.tracking.mlflow_store import store_lock

    client = tracking_client(tracking_uri, create=True)
    with store_lock(tracking_uri):
        found = client.get_experiment_by_name(experiment)
        exp_id = (str(found.experiment_id) if found is not None else str(client.create_experiment(
            experiment, artifact_location=artifact_location(tracking_uri, experiment))))
    table = exp.as_json()
    eval_id = sha256_hex(table)[:16]
    split = exp.split
    ids: dict[str, str] = {}
    for s in exp.systems:
        m = manifests.get(s.name)
        tags = {"aiblox.kind": "point" if m is not None else "run", "aiblox.source": "eval",
                "aiblox.label": s.name, "aiblox.eval_id": eval_id,
                "aiblox.dataset_hash": s.hashes["dataset"],
                "aiblox.baseline": str(s.name == exp.baseline).lower(),
                "aiblox.test": exp.test, "aiblox.correction": exp.correction}
        if m is not None:
            tags.update({"aiblox.config_hash": m.config_hash,
                         "aiblox.manifest_hash": m.manifest_hash,
                         f"aiblox.run_hash.{split}": m.splits[split].run_hash})
            if m.environment.get("git_commit"):
                tags["aiblox.git_commit"] = str(m.environment["git_commit"])
            params = flatten(m.config)
            values = m.splits[split].metrics  # the values verify recomputes
        else:
            params = {"run_file": str(s.source), "run_file_sha256": s.hashes.get("file", "")}
            values = s.metrics
        run = client.create_run(exp_id, run_name=s.name, tags=tags)
        rid = run.info.run_id
        metrics = [Metric(metric_key(split, k), float(v), 0, 0) for k, v in sorted(values.items())]
        sig = table["systems"][exp.systems.index(s)]["significance"]
        for metric, d in sorted(sig.items()):
            key = metric.replace("@", "_at_")
            metrics += [Metric(f"{split}.{key}.p", float(d["p"]), 0, 0),
                        Metric(f"{split}.{key}.p_adjusted", float(d["p_adjusted"]), 0, 0)]
        plist = [Param(k, v[:6000]) for k, v in sorted(params.items())]
        while metrics or plist:
            client.log_batch(rid, metrics=metrics[:1000], params=plist[:100])
            metrics, plist = metrics[1000:], plist[100:]
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            name = split_file(split)
            if m is not None:
                (folder / "manifest.json").write_text(
                    json.dumps(m.model_dump(mode="json"), sort_keys=True, indent=1),
                    encoding="utf-8")
            (folder / f"run.{name}.trec").write_text(trec_run_text(s.run, s.name),
                                                     encoding="utf-8")
            rows: list[dict[str, Any]] = [
                {"query_id": q, "metric": metric, "value": float(v)}
                for metric, vals in sorted(s.per_query.items()) for q, v in sorted(vals.items())]
            pd.DataFrame(rows, columns=["query_id", "metric", "value"]).to_parquet(
                folder / f"per_query.{name}.parquet", index=False)
            (folder / "experiment.json").write_text(json.dumps(table, sort_keys=True, indent=1),
                                                    encoding="utf-8")
            client.log_artifacts(rid, str(folder))
        client.set_terminated(rid, status="FINISHED")
        ids[s.name] = rid
    return ids
