"""Re-execute a logged sweep point from its manifest alone and say whether every stage gives the
same bytes, or which stage first differs.

Nothing is read from the stage cache: the dataset is loaded and hashed, the config hash is
recomputed from the logged config, and signals (retrieval), fusion and metrics are recomputed,
split by split, their keys and output hashes compared with the manifest's. The store named by
``db`` (default: the dataset's own store) is synced to the dataset first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.eval.datasets import Dataset, load_dataset
from aiblox.eval.metrics import QrelsScorer, packed_means
from aiblox.eval.runner import config_hash
from aiblox.eval.sweep.manifest import PointManifest
from aiblox.eval.sweep.runner import (
    FUSION_VERSION,
    METRICS_VERSION,
    SIGNALS_VERSION,
    _fused_arrays,
    _signals_output,
    fusion_config,
    metrics_config,
    signals_config,
)
from aiblox.eval.sweep.stages import encode_arrays, stage_key
from aiblox.fusion.batch import BatchFusion
from aiblox.hashing import canonical_plain_json, sha256_bytes, sha256_text

__all__ = ["StageCheck", "VerifyReport", "logged_manifest", "logged_metrics", "verify_point"]


class StageCheck(BaseModel):
    """One recomputed stage against the manifest."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    where: str
    """``dataset``, ``config`` or ``<split>/<stage>``."""
    expected: str
    """Key and output hash from the manifest (``key:hash``), or the logged hash."""
    actual: str
    """The same, recomputed."""
    identical: bool
    """``expected == actual``."""


class VerifyReport(BaseModel):
    """The outcome of re-executing one point."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    config_hash: str
    """The point verified."""
    identical: bool
    """True when every check matched."""
    first_difference: str | None = None
    """The first check that differs (pipeline order), or None."""
    checks: list[StageCheck] = Field(default_factory=list)
    """Every check, in pipeline order (stops after the first difference)."""


def _load(manifest: PointManifest | dict[str, Any] | str | Path) -> PointManifest:
    if isinstance(manifest, PointManifest):
        return manifest
    if isinstance(manifest, str | Path):
        manifest = json.loads(Path(manifest).read_text(encoding="utf-8"))
    return PointManifest.model_validate(manifest)


def logged_manifest(run: str, tracking_uri: str) -> tuple[PointManifest, str]:
    """The manifest of a logged point and where it came from.

    ``run`` is a ``manifest.json`` path, an MLflow point run id (a sweep's child run), or a
    sweep (its parent run id or its name): then the sweep's best point, as chosen on the tune
    split. Raises :class:`ValueError` naming ``run`` when it is none of these.
    """
    import tempfile

    path = Path(run)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise ValueError(f"{run}: no such manifest file")
        return _load(path), str(path)
    from aiblox.eval.sweep.report import find_sweep_run
    from aiblox.eval.sweep.tracking import tracking_client

    client = tracking_client(tracking_uri)
    try:
        point = client.get_run(run)
    except Exception:  # noqa: BLE001 - not a run id: a sweep name, or nothing
        point = None
    if point is None or point.data.tags.get("aiblox.kind") == "sweep":
        parent = point if point is not None else find_sweep_run(client, run)
        best = parent.data.tags.get("aiblox.best_config_hash")
        if not best:
            raise ValueError(f"sweep {run!r} has no best point logged (unfinished?)")
        from aiblox.eval.sweep.tracking import tag_filter

        found = client.search_runs(
            [parent.info.experiment_id],
            filter_string=f"{tag_filter('mlflow.parentRunId', parent.info.run_id)} and "
                          f"{tag_filter('aiblox.config_hash', best)}", max_results=1)
        if not found:
            raise ValueError(f"sweep {run!r}: the best point {best[:12]} has no child run")
        point = found[0]
    elif point.data.tags.get("aiblox.kind") != "point":
        raise ValueError(f"run {run} is not an aiblox sweep point or sweep")
    with tempfile.TemporaryDirectory() as tmp:
        local = client.download_artifacts(point.info.run_id, "manifest.json", tmp)
        return _load(local), f"run {point.info.run_id} ({point.data.tags.get('aiblox.label')})"


def logged_metrics(manifest: PointManifest, run_id: str, tracking_uri: str
                   ) -> dict[str, dict[str, float]]:
    """The metric values MLflow holds for a point's run, ``{split: {metric: value}}``, for the
    manifest's splits and metrics (what a verification compares with a clean recomputation)."""
    from aiblox.eval.sweep.tracking import metric_key, tracking_client

    data = tracking_client(tracking_uri).get_run(run_id).data.metrics
    return {split: {name: float(data[metric_key(split, name)]) for name in sm.metrics
                    if metric_key(split, name) in data}
            for split, sm in manifest.splits.items()}


def verify_point(manifest: PointManifest | dict[str, Any] | str | Path, *, db: str | None = None,
                 dataset: Dataset | None = None, progress: bool = False,
                 logged: dict[str, dict[str, float]] | None = None) -> VerifyReport:
    """Re-execute the point of ``manifest`` (a model, a dict or a ``manifest.json`` path).

    Besides every stage's key and output hash, the recomputed metric values are compared with
    the values the manifest records and, given ``logged`` (``{split: {metric: value}}``, e.g.
    :func:`logged_metrics` of its MLflow run), with those: a logged number that differs from a
    clean recomputation is a difference even when every hash matches."""
    from aiblox.embedding import CachedEmbedder, get_embedder
    from aiblox.eval.workspace import open_dataset_store, prepare_store
    from aiblox.retrieval.retriever import HybridRetriever
    from aiblox.stores.identity import store_fingerprint

    m = _load(manifest)
    checks: list[StageCheck] = []

    def check(where: str, expected: str, actual: str) -> bool:
        checks.append(StageCheck(where=where, expected=expected, actual=actual,
                                 identical=expected == actual))
        return expected == actual

    def report() -> VerifyReport:
        bad = next((c.where for c in checks if not c.identical), None)
        return VerifyReport(config_hash=m.config_hash, identical=bad is None,
                            first_difference=bad, checks=checks)

    def check_values(split: str, recorded: dict[str, float], recomputed: dict[str, float],
                     mlflow: dict[str, float]) -> bool:
        """The metric values the manifest (and MLflow) logged against the recomputed ones."""
        for source, values in (("manifest", recorded), ("mlflow", mlflow)):
            for name in sorted(values):
                if name in recomputed and not check(f"{split}/{name} ({source})",
                                                    repr(float(values[name])),
                                                    repr(float(recomputed[name]))):
                    return False
        return True

    ds = dataset or load_dataset(m.dataset, splits=list(m.splits))
    if not check("dataset", m.dataset_hash, ds.hash):
        return report()
    prefs = RetrievalPrefs(query_text="", **m.config["prefs"])
    emb_id, backend = m.config["embedder"], m.config["backend"]
    if "query_limit" in m.config:  # a pipeline point: chunking, selection and what follows
        _verify_pipeline(m, ds, prefs, db, progress, check, check_values, logged or {})
        return report()
    if not check("config", m.config_hash, config_hash(prefs, emb_id, backend)[0]):
        return report()
    store = open_dataset_store(ds, db)
    try:
        emb = CachedEmbedder(get_embedder(m.embedder_name or "minilm"), store, progress=progress)
        needs_vec = prefs.mode != "bm25"
        prepare_store(store, ds, emb if needs_vec else None, progress=progress)
        fingerprint = store_fingerprint(store, emb.model_id if needs_vec else None)
        retriever = HybridRetriever(store, emb)
        for split, sm in m.splits.items():
            logged_stages = {s["name"]: s for s in sm.stages}
            scfg = signals_config(prefs, ds.hash, split, backend, emb_id, store=fingerprint)
            sig = _signals_output(retriever, ds, split, prefs)
            skey = stage_key("signals", SIGNALS_VERSION, scfg, [])
            if not check(f"{split}/signals", _pair(logged_stages["signals"]),
                         f"{skey}:{sha256_text(canonical_plain_json(sig))}"):
                return report()
            index = BatchFusion.from_signals(sig)
            fused = _fused_arrays(prefs, index, sig)
            fkey = stage_key("fusion", FUSION_VERSION, fusion_config(prefs), [skey])
            if not check(f"{split}/fusion", _pair(logged_stages["fusion"]),
                         f"{fkey}:{sha256_bytes(encode_arrays(fused.as_dict()))}"):
                return report()
            metrics = m.metrics or list(sm.metrics)
            scorer = QrelsScorer(ds.qrels[split])
            packed = scorer.evaluate_packed(
                index.qids, scorer.codes(index.docs)[fused.positions], fused.counts, metrics)
            mkey = stage_key("metrics", METRICS_VERSION, metrics_config(metrics, split), [fkey])
            if not check(f"{split}/metrics", _pair(logged_stages["metrics"]),
                         f"{mkey}:{sha256_bytes(encode_arrays(packed))}"):
                return report()
            if not check_values(split, sm.metrics, packed_means(packed),
                                (logged or {}).get(split, {})):
                return report()
    finally:
        store.close()
    return report()


@dataclass(frozen=True)
class _LoggedSpec:
    """What a pipeline point's stages read from its sweep spec, rebuilt from the logged config
    (the point's own splits stand in for the tune and report splits)."""

    name: str
    tune_split: str
    report_split: str
    metrics: list[str]
    query_limit: int | None
    chunk_k: list[int]
    reader: str
    reader_options: dict[str, Any]
    embedder: str
    prefs: RetrievalPrefs
    vectors: tuple[str, ...] = ()
    grid: Any = field(default_factory=lambda: SimpleNamespace(selection=None))
    """No swept axes: the logged effective parameters are the point's overrides."""

    def base_prefs(self) -> RetrievalPrefs:
        """The point's prefs (what the store opener asks of a spec)."""
        return self.prefs


def _verify_pipeline(m: PointManifest, ds: Dataset, prefs: RetrievalPrefs, db: str | None,
                     progress: bool, check: Callable[[str, str, str], bool],
                     check_values: Callable[..., bool],
                     logged: dict[str, dict[str, float]]) -> None:
    """Re-run every stage of a pipeline point in a fresh, temporary stage cache and compare each
    stage's key and output hash with the manifest, in pipeline order."""
    import tempfile

    from aiblox.eval.sweep.pipeline import _Sweep, pipeline_config
    from aiblox.eval.sweep.runner import _Pipeline
    from aiblox.eval.sweep.spec import PipelinePoint
    from aiblox.eval.sweep.stages import StageCache

    cfg = m.config
    splits = list(m.splits)
    reader = cfg.get("reader") or {}
    spec = _LoggedSpec(name=m.sweep, tune_split=splits[0], report_split=splits[-1],
                       metrics=list(m.metrics), query_limit=cfg["query_limit"],
                       chunk_k=list(cfg["chunk_k"]), reader=reader.get("name", "extractive"),
                       reader_options=dict(reader.get("options", {})),
                       embedder=m.embedder_name or "minilm", prefs=prefs)
    selection = cfg.get("selection")
    pt = PipelinePoint(prefs=prefs, policy=selection["policy"] if selection else None,
                       overrides=dict(selection["params"]) if selection else {})
    emb_id, backend = cfg["embedder"], cfg["backend"]
    chash, config = pipeline_config(spec, pt, emb_id, backend)  # type: ignore[arg-type]
    if not check("config", m.config_hash, chash):
        return
    if selection and not check("selection/policy", selection["policy_sha256"],
                               config["selection"]["policy_sha256"]):
        return
    opener = _Pipeline(spec, ds, db, progress)  # type: ignore[arg-type]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sweep = _Sweep(spec, ds, StageCache(tmp), opener, backend,  # type: ignore[arg-type]
                           emb_id, progress)
            for split, sm in m.splits.items():
                out = sweep.split_point(pt, split)
                for logged, again in zip(sm.stages, out["stages"], strict=False):
                    if not check(f"{split}/{logged['name']}", _pair(logged), _pair(again)):
                        return
                if len(sm.stages) != len(out["stages"]):
                    check(f"{split}/stages", str(len(sm.stages)), str(len(out["stages"])))
                    return
                if sm.prompts_sha256 is not None and not check(
                        f"{split}/prompts", sm.prompts_sha256, str(out["prompts_sha256"])):
                    return
                if not check_values(split, sm.metrics, out["metrics"], logged.get(split, {})):
                    return
    finally:
        opener.close()


def _pair(stage: dict[str, Any]) -> str:
    return f"{stage['key']}:{stage['output_hash']}"
