"""Re-execute a logged sweep point from its manifest alone and say whether every stage gives the
same bytes, or which stage first differs.

Nothing is read from the sweep's stage cache: the dataset is loaded and hashed, the config hash
is recomputed from the logged config, and every stage of the point (signals, fusion, metrics,
and for a pipeline point the chunk and answer stages) is recomputed through the sweep's own
chain (:func:`aiblox.engine.point.split_point`) into a fresh, temporary stage cache,
split by split, its key and output hash compared with the manifest's. The workspace named by
``db`` (default: the dataset's own store) is synced to the dataset first; it must be of the
backend the point was scored on (:func:`check_store`): a PostgreSQL point needs its store named
(``--db``), since no URL is logged.

The dataset is re-read where the point read it (:func:`point_dataset`): the manifest's
``dataset_path``, never another dataset that shares its name. Data changed there is the first
difference, said in words (``dataset at PATH changed since the point was computed: hash X, now
Y``); a path that is gone is an error unless the dataset's name finds the very same bytes
elsewhere, or a copy is named explicitly (checked by hash). A manifest written before the path
was recorded finds the dataset by name, with a note.

The models a sweep trained (``[finetune]``'s embedder, ``[finetune_reranker]``'s cross-encoder)
are read from the folders the manifest records (``models``, by the reference the point names them
with; an older manifest's ``embedder_name`` or stage ``model`` holds the folder), the very files
the point was scored with (their sha256 is in the embedder id and the stage keys), never trained
again: a folder that is gone is an error naming it and how to get it back
(:func:`check_model_folders`), not a difference.

Given a sweep, ``aiblox eval verify`` also recomputes what its parent run concluded from its
point runs (:mod:`aiblox.sweep.verify_summary`, :mod:`aiblox.sweep.verify_cv`).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import Dataset, DatasetError, load_dataset
from aiblox.embedding.device import device_class
from aiblox.embedding.sentence_transformers import trained_table, use_trained
from aiblox.engine.algebra import from_data
from aiblox.engine.cache import StageCache
from aiblox.engine.context import RunContext, embedder_id
from aiblox.engine.manifest import PointManifest, cpu
from aiblox.engine.outputs import StageReader, failed_generations_note
from aiblox.engine.point import split_point
from aiblox.engine.settings import PipelinePoint, SweepSettings, needs_vectors, point_config
from aiblox.hashing import short_hash
from aiblox.stores import mask_password, store_backend

__all__ = [
    "LoggedArtifacts",
    "StageCheck",
    "VerifyReport",
    "check_model_folders",
    "check_store",
    "logged_artifacts",
    "logged_device",
    "logged_manifest",
    "logged_metrics",
    "logged_point",
    "point_dataset",
    "verify_point",
]


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
    detail: str | None = None
    """What the check means in words, when the hashes alone do not say it (the dataset's:
    where it was read, and how it differs)."""


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
    dataset_path: str | None = None
    """Where the dataset was re-read (resolved); None for a dataset given in memory."""
    notes: list[str] = Field(default_factory=list)
    """How the dataset was found, when not at the manifest's path (an old manifest found by
    name, a copy named explicitly)."""


@dataclasses.dataclass(frozen=True)
class LoggedArtifacts:
    """What a logged point's MLflow run holds for one split besides its metrics: its per-query
    values (``per_query.<split>.parquet``, ``{metric: {query: value}}``) and its TREC run file
    (``run.<split>.trec``; None when not logged)."""

    per_query: dict[str, dict[str, float]] | None
    trec: str | None


def _load(manifest: PointManifest | dict[str, Any] | str | Path) -> PointManifest:
    if isinstance(manifest, PointManifest):
        return manifest
    if isinstance(manifest, str | Path):
        return _load_file(Path(manifest))
    return PointManifest.model_validate(manifest)


def _load_file(path: Path) -> PointManifest:
    """A ``manifest.json``; ``ValueError``, one line naming the file and the line (text that
    is not JSON) or the field (a manifest that lacks one or holds a wrong value)."""
    from pydantic import ValidationError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column "
                         f"{exc.colno})") from None
    try:
        return PointManifest.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        first = errs[0]
        field = ".".join(str(p) for p in first["loc"]) or "(manifest)"
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        what = "missing" if first["type"] == "missing" else first["msg"]
        raise ValueError(f"{path}: field {field!r}: {what}{more}: not a point manifest "
                         f"(a sweep point's manifest.json)") from None


def logged_manifest(run: str, tracking_uri: str) -> tuple[PointManifest, str]:
    """The manifest of a logged point and where it came from.

    ``run`` is a ``manifest.json`` path, a point's reference (an MLflow run id, ``SWEEP:LABEL``
    or a config-hash prefix, :func:`~aiblox.sweep.runs.resolve_run`), or a sweep (its
    parent run id or its name): then the sweep's best point, as chosen on the tune split.
    Raises :class:`ValueError` naming ``run`` when it is none of these (or is ambiguous)."""
    path = Path(run)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise ValueError(f"{run}: no such manifest file")
        return _load(path), str(path)
    from aiblox.engine.tracking import read_manifest, tracking_client
    from aiblox.sweep.runs import resolve_run

    ref = resolve_run(run, tracking_uri, sweep_best=True)
    client = tracking_client(tracking_uri)
    point = client.get_run(ref.run_id)
    if point.data.tags.get("aiblox.kind") != "point":
        raise ValueError(f"run {run} is not an aiblox sweep point or sweep")
    return (read_manifest(client, point.info.run_id, point),
            f"run {point.info.run_id} ({point.data.tags.get('aiblox.label')})")


def logged_metrics(manifest: PointManifest, run_id: str, tracking_uri: str
                   ) -> dict[str, dict[str, float]]:
    """The metric values MLflow holds for a point's run, ``{split: {metric: value}}``, for the
    manifest's splits and metrics (what a verification compares with a clean recomputation)."""
    from aiblox.engine.tracking import metric_key, tracking_client

    data = tracking_client(tracking_uri).get_run(run_id).data.metrics
    return {split: {name: float(data[metric_key(split, name)]) for name in sm.metrics
                    if metric_key(split, name) in data}
            for split, sm in manifest.splits.items()}


def logged_device(manifest: PointManifest) -> str:
    """The device class a logged point's embedder ran on (``cpu`` for a manifest from before
    devices): verification runs it on that class (``cuda``: the first GPU), so a GPU point is
    recomputed on a GPU and refused, naming the device, where there is none."""
    if not manifest.device:
        return "cpu"
    return device_class(manifest.device.split()[0])


def logged_point(manifest: PointManifest) -> tuple[SweepSettings, PipelinePoint]:
    """What a logged point's stages read (its sweep's settings, rebuilt from the logged config;
    the point's own splits stand in for the tune and report splits) and the point itself (the
    logged effective policy parameters are its overrides)."""
    cfg = manifest.config
    prefs = RetrievalPrefs(query_text="", **cfg["prefs"])
    reader = cfg.get("reader") or {}
    first = next(iter(manifest.splits.values()))
    settings = SweepSettings(
        name=manifest.sweep, embedder=manifest.embedder_name or "minilm",
        metrics=tuple(manifest.metrics) or tuple(first.metrics),
        chunk_stages="query_limit" in cfg, query_limit=cfg.get("query_limit"),
        chunk_k=tuple(cfg.get("chunk_k", (1, 5, 10))), reader=reader.get("name", "extractive"),
        reader_options=dict(reader.get("options", {})), needs_vectors=prefs.mode != "bm25",
        device=logged_device(manifest), trained=tuple(sorted((manifest.models or {}).items())))
    selection = cfg.get("selection")
    pipeline = None
    if cfg.get("pipeline") is not None:  # its own stage kinds registered first
        for module in cfg.get("stage_modules", []):
            importlib.import_module(module)
        pipeline = from_data(cfg["pipeline"])
        settings = dataclasses.replace(
            settings, stage_modules=tuple(cfg.get("stage_modules", [])),
            needs_vectors=needs_vectors(prefs, [pipeline]))
    pt = PipelinePoint(prefs=prefs, policy=selection["policy"] if selection else None,
                       overrides=dict(selection["params"]) if selection else {},
                       pipeline=pipeline)
    return settings, pt


def point_dataset(manifest: PointManifest, override: str | Path | None = None
                  ) -> tuple[Dataset, str | None, list[str]]:
    """The dataset ``manifest``'s point is re-executed on, what its hash check means when it
    differs (``dataset at PATH changed since the point was computed: ...``), and notes on how it
    was found. Its hash is not compared here.

    - ``override`` (a dataset folder or manifest, ``--dataset``): that one, whatever the
      manifest records;
    - the manifest's ``dataset_path``: the files there (loaded under the manifest's dataset
      name); when that path is gone, the dataset the name finds if it holds the very same bytes
      (same hash), else ``ValueError`` saying the path is gone and how to name a copy;
    - no ``dataset_path`` (a manifest written before it was recorded): found by name, noted.
    """
    splits, recorded, notes = list(manifest.splits), manifest.dataset_path, []
    if override is not None:
        ds = load_dataset(override, splits=splits, name=manifest.dataset)
        where = recorded or f"dataset {manifest.dataset!r}"
        if recorded != ds.source:
            notes.append(f"the point was computed from {where}; verifying against the dataset "
                         f"at {ds.source} instead (checked by its hash)")
        return ds, f"dataset at {ds.source} (named for {where}) is not the data the point was " \
                   f"computed from", notes
    if recorded is None:
        ds = load_dataset(manifest.dataset, splits=splits)
        notes.append(f"the manifest records no dataset path (a dataset built in memory, or a "
                     f"manifest older than the path): dataset {manifest.dataset!r} found by "
                     f"name at {ds.source}")
        return ds, f"dataset {manifest.dataset!r} found by name at {ds.source} is not the " \
                   f"data the point was computed from (the manifest records no path: name " \
                   f"the point's dataset with --dataset PATH)", notes
    if Path(recorded).exists():
        ds = load_dataset(recorded, splits=splits, name=manifest.dataset)
        return ds, f"dataset at {recorded} changed since the point was computed", notes
    try:
        by_name: Dataset | None = load_dataset(manifest.dataset, splits=splits)
    except DatasetError:
        by_name = None
    if by_name is not None and by_name.hash == manifest.dataset_hash:
        notes.append(f"dataset at {recorded} is gone; dataset {manifest.dataset!r} found by "
                     f"name at {by_name.source} holds the very same data (hash "
                     f"{manifest.dataset_hash[:16]})")
        return by_name, None, notes
    other = ("" if by_name is None else f"; dataset {manifest.dataset!r} found by name at "
             f"{by_name.source} holds other data (hash {by_name.hash[:16]})")
    raise ValueError(f"dataset at {recorded} is gone: the point was computed from it (hash "
                     f"{manifest.dataset_hash[:16]}){other}; name a copy with --dataset PATH "
                     f"(checked by its hash)")


def verify_point(manifest: PointManifest | dict[str, Any] | str | Path, *, db: str | None = None,
                 dataset: Dataset | None = None, dataset_path: str | Path | None = None,
                 progress: bool = False,
                 logged: dict[str, dict[str, float]] | None = None,
                 artifacts: dict[str, LoggedArtifacts] | None = None) -> VerifyReport:
    """Re-execute the point of ``manifest`` (a model, a dict or a ``manifest.json`` path).

    The dataset is ``dataset`` (in memory), else the one at ``dataset_path`` (a copy of the
    point's dataset, ``--dataset``), else the one the manifest's path (or, in an old manifest,
    its name) finds (:func:`point_dataset`); its hash is the first check. Besides every stage's
    key and output hash, the recomputed metric values are compared with the values the
    manifest records and, given ``logged`` (``{split: {metric: value}}``, e.g.
    :func:`logged_metrics` of its MLflow run), with those: a logged number that differs from a
    clean recomputation is a difference even when every hash matches; given ``artifacts``
    (per split, :func:`logged_artifacts` of the run), its per-query values and its TREC run
    file are compared with the recomputed ones too (what ``aiblox compare`` and ``aiblox runs
    export`` read). ``ValueError`` (a
    :class:`~aiblox.data.DatasetError` for unreadable data) when no dataset can be
    read: the manifest's path is gone and no copy is named; and, first, when ``db`` is not a
    store of the point's backend (:func:`check_store`: a PostgreSQL point needs its URL)."""
    m = _load(manifest)
    check_store(m, db)
    checks: list[StageCheck] = []
    notes: list[str] = []

    def check(where: str, expected: str, actual: str, detail: str | None = None) -> bool:
        checks.append(StageCheck(where=where, expected=expected, actual=actual,
                                 identical=expected == actual, detail=detail))
        return expected == actual

    differs: str | None
    if dataset is not None:
        ds, differs = dataset, f"dataset {dataset.name!r} given is not the data the point " \
                               f"was computed from"
    else:
        ds, differs, notes = point_dataset(m, dataset_path)

    def report() -> VerifyReport:
        bad = next((c.where for c in checks if not c.identical), None)
        said = [*notes, *_cpu_note(m, bad)]
        return VerifyReport(config_hash=m.config_hash, identical=bad is None,
                            first_difference=bad, checks=checks, dataset_path=ds.source,
                            notes=said)

    same = ds.hash == m.dataset_hash
    detail = (f"read from {ds.source or 'memory'}" if same or differs is None
              else f"{differs}: hash {m.dataset_hash}, now {ds.hash}")
    if not check("dataset", m.dataset_hash, ds.hash, detail):
        return report()
    check_model_folders(m)
    settings, pt = logged_point(m)
    use_trained(dict(settings.trained))  # the folders its references stand for
    emb_id, backend = m.config["embedder"], m.config["backend"]
    chash, config = point_config(settings, pt, emb_id, backend)
    if not check("config", m.config_hash, chash):
        return report()
    selection = m.config.get("selection")
    if selection and not check("selection/policy", selection["policy_sha256"],
                               config["selection"]["policy_sha256"]):
        return report()
    if settings.needs_vectors and emb_id is not None:  # the very model (a fine-tuned one's files)
        try:
            actual = embedder_id(settings.embedder, settings.device)
        except (ImportError, ValueError) as exc:
            actual = f"{settings.embedder}: {exc}"
        if not check("embedder", emb_id, actual):
            return report()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = RunContext(settings, ds, StageCache(tmp), db, backend, list(m.splits),
                           embedder=emb_id, progress=progress)
        computed: list[tuple[str, list[dict[str, Any]]]] = []
        try:
            for split, sm in m.splits.items():
                if not _verify_split(ctx, pt, split, sm, check, (logged or {}).get(split, {}),
                                     (artifacts or {}).get(split), computed):
                    break
        finally:
            ctx.close()
        failed = failed_generations_note(ctx.cache, computed)
        if failed is not None:  # the recomputation's reader: an endpoint that failed it
            warnings.warn(failed, stacklevel=2)
    return report()


def check_store(m: PointManifest, db: str | None) -> None:
    """The store ``db`` names (None: the dataset's own DuckDB store) is of the backend the
    point was scored on (its config's ``backend``, which its config hash and stage keys name):
    else ``ValueError`` in one line, before any dataset is read or store made. A PostgreSQL
    point's URL is not in its manifest (nor, with its password, anywhere MLflow holds), so
    verifying one needs ``--db``: its stages recomputed on another store would be keyed as the
    PostgreSQL ones and match them."""
    logged = m.config.get("backend", "duckdb")
    given = "duckdb" if db is None else store_backend(db)
    if given == logged:
        return
    point = f"point {short_hash(m.config_hash)} of sweep {m.sweep!r}"
    if db is None:
        raise ValueError(f"{point} was scored on PostgreSQL (backend {logged!r}), whose URL "
                         f"the manifest does not record (no password is logged): name the "
                         f"store with --db (the sweep's store, e.g. --db \"$AIBLOX_DB\")")
    raise ValueError(f"{point} was scored on backend {logged!r}; --db {mask_password(db)} "
                     f"names a {given} store: name a {logged} store with --db"
                     + ("" if logged == "postgres" else
                        " (or leave it out: the dataset's own store)"))


def _is_path(name: Any) -> TypeGuard[str]:
    """``name`` is a folder's path (not a registry name or a model reference)."""
    return isinstance(name, str) and ("/" in name or "\\" in name)


def _model_paths(data: Any) -> list[str]:
    """Every stage's ``model`` parameter in a logged pipeline that names a folder by its path
    (a manifest from before trained models were named by reference names the folder)."""
    if isinstance(data, dict):
        model = (data.get("params") or {}).get("model") if "stage" in data else None
        own = [model] if _is_path(model) else []
        return own + [m for v in data.values() for m in _model_paths(v)]
    if isinstance(data, list):
        return [m for v in data for m in _model_paths(v)]
    return []


def check_model_folders(m: PointManifest) -> None:
    """The model folders the point was scored with are there (the embedder's when it is a
    folder, as a ``[finetune]`` model's is; each trained model of ``models``; a stage's model
    named by its path): ``ValueError`` in one line naming the first one gone and how to get
    it back. Verification scores with the very files (their id is in the keys) and trains no
    model again: a missing folder is not a difference."""
    name, embedder = m.embedder_name or "", f"embedder {m.config.get('embedder')}"
    wanted = [(embedder, name)] if _is_path(name) else []
    wanted += [(embedder if ref == name else f"cross-encoder {ref}", folder)
               for ref, folder in sorted((m.models or {}).items())]
    wanted += [("cross-encoder", path) for path in _model_paths(m.config.get("pipeline"))]
    for what, folder in wanted:
        path = Path(folder)
        if path.exists():
            continue
        table = trained_table(path.name)
        if path.parent.name != "models" or table is None:
            raise ValueError(f"the {what} the point was scored with is gone: no model folder "
                             f"{folder}; copy it back there (verification scores with the very "
                             f"files)")
        raise ValueError(f"the {what} the point was scored with is gone: no model folder "
                         f"{folder} (trained by sweep {m.sweep!r}; verification scores with the "
                         f"very files and trains nothing): copy it back there, or run the sweep "
                         f"again with --cache-dir {path.parent.parent} (its {table} table trains "
                         f"it there again: the same recipe and seed give the same files on the "
                         f"same machine)")


def _cpu_note(m: PointManifest, bad: str | None) -> list[str]:
    """Why a stage's bytes can differ with nothing else changed: the point was computed on
    another CPU (``environment.cpu``), whose floating-point kernels (a neural embedder's
    above all) round differently."""
    logged, here = m.environment.get("cpu"), cpu()
    if bad is None or "/" not in bad or not logged or logged == here:
        return []
    return [f"the point was computed on another CPU ({logged}; this one: {here}): a neural "
            f"embedder's vectors differ in their last bits between CPUs' kernels, and so do "
            f"the scores and every hash after them; run the sweep on this machine to compare "
            f"its metric values"]


def _verify_split(ctx: RunContext, pt: PipelinePoint, split: str, sm: Any,
                  check: Callable[[str, str, str], bool], mlflow: dict[str, float],
                  files: LoggedArtifacts | None = None,
                  computed: list[tuple[str, list[dict[str, Any]]]] | None = None) -> bool:
    """One split of a point recomputed and compared, stage by stage in pipeline order, then its
    metric values (the manifest's and MLflow's), then its logged per-query values and TREC run
    file; False at the first difference. ``computed``: the split's recomputed stage records
    are appended to it."""
    out = split_point(ctx, pt, split)
    if computed is not None:
        computed.append((split, out["stages"]))
    for logged, again in zip(sm.stages, out["stages"], strict=False):
        if not check(f"{split}/{logged['name']}", _pair(logged), _pair(again)):
            return False
    if len(sm.stages) != len(out["stages"]):
        return check(f"{split}/stages", str(len(sm.stages)), str(len(out["stages"])))
    if sm.prompts_sha256 is not None and not check(f"{split}/prompts", sm.prompts_sha256,
                                                   str(out["prompts_sha256"])):
        return False
    recomputed = out["metrics"]
    for source, values in (("manifest", sm.metrics), ("mlflow", mlflow)):
        for name in sorted(values):
            if name in recomputed and not check(f"{split}/{name} ({source})",
                                                repr(float(values[name])),
                                                repr(float(recomputed[name]))):
                return False
    if files is None:
        return True
    reader = StageReader(ctx.cache)
    if files.per_query is not None:
        again = reader.per_query(out["stages"])
        for name in sorted(files.per_query):
            if name in again and not check(
                    f"{split}/{name} per query (mlflow)",
                    *_first_difference(files.per_query[name], again[name])):
                return False
    if files.trec is not None:
        lines = _trec_rows(reader.point_trec(out["stages"], "x"))
        if not check(f"{split}/run file (mlflow)",
                     *_first_difference(_trec_rows(files.trec), lines, "line")):
            return False
    return True


def logged_artifacts(manifest: PointManifest, run_id: str, tracking_uri: str
                     ) -> dict[str, LoggedArtifacts]:
    """Per split of ``manifest``, what its MLflow run ``run_id`` logged of it
    (:class:`LoggedArtifacts`)."""
    from aiblox.engine.tracking import artifact_bytes, read_per_query, run_file, tracking_client

    client = tracking_client(tracking_uri)
    run = client.get_run(run_id)
    out = {}
    for split in manifest.splits:
        try:
            per_query: dict[str, dict[str, float]] | None = read_per_query(
                client, run_id, split, run)
        except ValueError:  # none logged for this split
            per_query = None
        data = artifact_bytes(client, run_id, run_file(split), run)
        out[split] = LoggedArtifacts(per_query, None if data is None else data.decode("utf-8"))
    return out


def _trec_rows(text: str) -> dict[int, str]:
    """A TREC run's lines by number, without their run tag (the tag is a label, not data)."""
    return {i: " ".join(line.split()[:5])
            for i, line in enumerate(text.splitlines(), start=1) if line.strip()}


def _first_difference(logged: dict[Any, Any], again: dict[Any, Any], what: str = "query"
                      ) -> tuple[str, str]:
    """The check's two sides: ``N values`` twice when ``logged`` equals ``again`` (keys and
    values, exactly); else the first key (a query id, a line number) that differs with each
    side's value."""
    if logged == again:
        count = f"{len(logged)} {'lines' if what == 'line' else 'values'}"
        return count, count
    key = min((set(logged) ^ set(again))
              | {k for k in logged if k in again and logged[k] != again[k]})

    def side(d: dict[Any, Any]) -> str:
        return f"{what} {key}: {d[key]!r}" if key in d else f"{what} {key}: missing"

    return side(logged), side(again)


def _pair(stage: dict[str, Any]) -> str:
    return f"{stage['key']}:{stage['output_hash']}"
