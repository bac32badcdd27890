"""The incremental sweep runner: signals once per (dataset, split, backend, embedder, depth),
then fusion and metrics per point, every stage memoised by its key in a :class:`StageCache`.

Stages and their keys (sha256 of name, version, config, input keys):

- ``signals``: the full-text and vector ranked lists of every judged query of a split. Config:
  dataset hash, split, backend, embedder, and the retrieval settings that decide the lists
  (mode, ``fts``, ``vector`` including the depth ``top_k``, filters, ``ignore_identical_ids``).
  The expensive stage; it never depends on fusion settings.
- ``fusion``: the fused run under ``scoring`` and ``top_k_items``; input: the signals key.
  Stored in compact form (:class:`~aiblox.eval.sweep.split_fusion.FusedArrays`: positions into
  the split's :class:`BatchFusion` index, counts, scores), which is also what its output hash
  (the point's run hash) is taken over; :func:`fused_run` and :func:`load_fused_run` give it
  back as ``{qid: [[doc_id, score], ...]}``.
- ``metrics``: ranx means and per-query values, stored as arrays
  (:func:`~aiblox.eval.sweep.split_metrics.pack_metrics`; ``unpack_metrics`` gives the
  ``{"means", "per_query"}`` dictionaries); config: metric names and the split; input: the
  fusion key.

So changing a fusion weight reruns fusion and metrics, nothing before; a repeated sweep reads
every stage back; a killed sweep recomputes only the points (stages) it had not finished. The
store is always opened and synced to the dataset (a no-op when its sync record already names
the dataset), since its content digests enter the signals keys; the embedding model is loaded
only when some signals entry is missing.

The configuration is chosen on the tune split only (primary metric, ties broken by config hash
ascending) and reported on the report split.

Parallelism: points run one after another in this process, and each point's compiled work
(fused scores, per-query sorts, ranx's metrics) runs on ``jobs`` numba threads. Worker
processes were measured slower on 2 cores (each must read the signals back, normalise them
again and hand the runs back; ``benchmarks/README.md``, "Fusion sweep").
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from aiblox.compiled import compiled_threads
from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs
from aiblox.eval.datasets import Dataset, load_dataset
from aiblox.eval.metrics import QrelsScorer, packed_means, unpack_metrics
from aiblox.eval.metrics.significance import Comparison, bootstrap_ci, compare_to_baseline
from aiblox.eval.runner import config_hash
from aiblox.eval.sweep.manifest import PointManifest, SplitManifest, environment
from aiblox.eval.sweep.spec import SweepSpec, backend_of
from aiblox.eval.sweep.stages import StageCache, StageCacheCorrupt, StageRecord, stage_key
from aiblox.eval.sweep.tracking import release_on_error
from aiblox.fusion.batch import BatchFusion, FusedArrays
from aiblox.memory import paused_gc
from aiblox.retrieval.retriever import HybridRetriever, SignalRuns

__all__ = [
    "FUSION_VERSION",
    "METRICS_VERSION",
    "SIGNALS_VERSION",
    "PointResult",
    "SweepResult",
    "choose_best",
    "fused_run",
    "fusion_config",
    "load_fused_run",
    "metrics_config",
    "point_label",
    "run_sweep",
    "signals_config",
]

SIGNALS_VERSION = "1"
FUSION_VERSION = "2"  # 2: stored as compact arrays (flat positions, counts, scores)
METRICS_VERSION = "2"

DEFAULT_CACHE_DIR = ".aiblox/stages"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class PointResult(_Strict):
    """One scored sweep point."""

    label: str
    """Short readable name, e.g. ``linear-w0.35-minmax-zero-d100``."""
    config_hash: str
    """sha256 of the effective config."""
    scoring: dict[str, Any]
    """The point's fusion settings."""
    depth: tuple[int, int]
    """Full-text and vector candidate depth."""
    metrics: dict[str, dict[str, float]]
    """``{split: {metric: mean}}``."""
    manifest: PointManifest
    """Determinism manifest."""
    is_baseline: bool = False
    """True for the spec's named baseline point."""
    chunking: dict[str, Any] | None = None
    """Chunking settings of a pipeline point (chunker, sizes, chunk depth); None in a
    fusion-only sweep."""
    selection: dict[str, Any] | None = None
    """Selection policy of a pipeline point (id, version, overrides); None without one."""


class SweepResult(_Strict):
    """A finished sweep: every point, the choice made on the tune split, stage counts."""

    name: str
    """Sweep name."""
    sweep_hash: str
    """sha256 of the spec."""
    dataset: str
    """Dataset name."""
    dataset_hash: str
    """sha256 of the dataset files."""
    tune_split: str
    """Split the best point was chosen on."""
    report_split: str
    """Split the best point is reported on."""
    primary: str
    """Metric the choice was made by."""
    points: list[PointResult]
    """Every point, in grid order (baseline last when it is not a grid point)."""
    best: PointResult
    """The point with the highest primary metric on the tune split."""
    baseline: PointResult | None = None
    """The spec's baseline point, when named."""
    significance: list[Comparison] = Field(default_factory=list)
    """The top points (on tune) against the baseline on the report split, Holm-adjusted."""
    ci: dict[str, tuple[float, float, float]] = Field(default_factory=dict)
    """Per split: ``(mean, low, high)`` 95% bootstrap interval of the best point's primary
    metric."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds: ``signals_s`` (retrieval, or reading its cached lists back), ``points_s``
    (fusion, metrics, logging), ``total_s``; and ``points_per_s``."""
    computed: dict[str, int] = Field(default_factory=dict)
    """Per stage: outputs computed in this run."""
    reused: dict[str, int] = Field(default_factory=dict)
    """Per stage: outputs read back from the stage cache."""
    repaired: dict[str, int] = Field(default_factory=dict)
    """Per stage: damaged cache entries found (a flipped bit, a truncated or missing file),
    removed and computed again."""
    tracking: dict[str, Any] = Field(default_factory=dict)
    """MLflow parent run id, children logged and skipped (empty without tracking)."""


# -- stage configs ------------------------------------------------------------------------------
def signals_config(prefs: RetrievalPrefs, dataset_hash: str, split: str, backend: str,
                   embedder_id: str | None, limit: int | None = None,
                   store: dict[str, str | None] | None = None) -> dict[str, Any]:
    """What decides the signals stage's output. ``store`` is what the retrieval read from the
    store (:func:`aiblox.stores.identity.store_fingerprint`: the digests of its items and of the
    embedder's vectors), so a result computed on one store is never reused for another that
    holds other content. ``limit`` (the first ``limit`` queries of the split, as
    :meth:`Dataset.split_queries` orders them) enters the config only when set."""
    needs_vec = prefs.mode in ("hybrid", "dense") and prefs.vector.embed_query
    extra: dict[str, Any] = {} if limit is None else {"limit": int(limit)}
    return {**extra, "store": store,
        "dataset": dataset_hash, "split": split, "backend": backend,
        "embedder": embedder_id if needs_vec else None,
        "mode": prefs.mode,
        "fts": prefs.fts.model_dump() if prefs.mode in ("hybrid", "bm25") else None,
        "vector": prefs.vector.model_dump() if needs_vec else None,
        "filters": prefs.filters, "ignore_identical_ids": prefs.ignore_identical_ids,
    }


def fusion_config(prefs: RetrievalPrefs) -> dict[str, Any]:
    """What decides the fusion stage's output (given its signals)."""
    return {"mode": prefs.mode, "scoring": prefs.scoring.model_dump(),
            "top_k_items": prefs.top_k_items}


def metrics_config(metrics: Sequence[str], split: str) -> dict[str, Any]:
    """What decides the metrics stage's output (given its run); qrels come with the split,
    and the dataset hash is already in the signals key upstream."""
    return {"metrics": list(metrics), "split": split}


def point_label(prefs: RetrievalPrefs) -> str:
    """A short readable name for a point (not unique on its own; the config hash is)."""
    s = prefs.scoring
    head: str
    if prefs.mode != "hybrid":
        head = prefs.mode
    elif s.blend == "rrf":
        head = f"rrf-k{s.rrf_k}"
    else:
        head = f"linear-w{s.w_text!r}-{s.normalize}-{s.missing}"
    f, default = prefs.fts, FtsConfig()
    bm25 = ""
    if prefs.mode != "dense" and (f.k1, f.b, f.method) != (default.k1, default.b, default.method):
        bm25 = f"-{f.method}-k1{f.k1!r}-b{f.b!r}"
    return f"{head}{bm25}-d{prefs.fts.top_k}"


def choose_best(points: Sequence[PointResult], split: str, metric: str) -> PointResult:
    """Highest ``metric`` on ``split``; ties broken by config hash ascending."""
    if not points:
        raise ValueError("no points to choose from")
    return min(points, key=lambda p: (-p.metrics[split][metric], p.config_hash))


# -- point computation ------------------------------------------------------------------------
@dataclass
class _Context:
    cache_root: str
    metrics: list[str]
    splits: list[str]
    qrels: dict[str, dict[str, dict[str, int]]]
    signals: dict[tuple[str, str], tuple[StageRecord, dict[str, Any] | None]] = field(
        default_factory=dict)
    """``(split, signals key) -> (record, output)``; the output is None until first needed."""
    loaders: dict[tuple[str, str], Callable[[], tuple[StageRecord, Any]]] = field(
        default_factory=dict)
    """``(split, signals key) -> `` the memoised signals stage run again with its output read
    (checked; a damaged entry is computed again)."""
    read_s: float = 0.0
    """Seconds spent reading cached signals back (part of the signals phase, not of points)."""
    _fusion: dict[str, BatchFusion] = field(default_factory=dict)
    _scorers: dict[str, QrelsScorer] = field(default_factory=dict)
    _codes: dict[str, np.ndarray] = field(default_factory=dict)

    def fusion_index(self, split: str, key: str) -> BatchFusion:
        """The split's lists indexed for fast fusion (built on first use, per process)."""
        if key not in self._fusion:
            self._fusion[key] = _index(key, self.signals_output(split, key))
        return self._fusion[key]

    def signals_output(self, split: str, key: str) -> dict[str, Any]:
        """The split's signals, read from the stage cache on first use: a sweep whose fusion
        and metrics are all cached never reads them."""
        rec, out = self.signals[(split, key)]
        if out is None:
            t0 = time.perf_counter()
            rec, out = self.loaders[(split, key)]()
            self.signals[(split, key)] = (rec, out)
            self.read_s += time.perf_counter() - t0
        return out

    def forget(self, split: str, key: str) -> None:
        """Drop what was read of one split's signals (read again, checked, on next use)."""
        rec, _ = self.signals[(split, key)]
        self.signals[(split, key)] = (rec, None)
        self._fusion.pop(key, None)
        self._codes.pop(key, None)
        _INDEXES.pop(key, None)

    def codes(self, split: str, key: str) -> np.ndarray:
        """Per flat position of the split's index: its document's code for the split's scorer."""
        if key not in self._codes:
            self._codes[key] = self.scorer(split).codes(self.fusion_index(split, key).docs)
        return self._codes[key]

    def scorer(self, split: str) -> QrelsScorer:
        """The split's qrels ready for ranx (built on first use, per process)."""
        if split not in self._scorers:
            self._scorers[split] = QrelsScorer(self.qrels[split])
        return self._scorers[split]


_INDEXES: dict[str, BatchFusion] = {}
"""Per process: :class:`BatchFusion` indexes by signals key (a few per sweep: one per depth and
split)."""


def _index(signals_key: str, signals: dict[str, Any]) -> BatchFusion:
    if signals_key not in _INDEXES:
        if len(_INDEXES) >= 16:
            _INDEXES.pop(next(iter(_INDEXES)))
        _INDEXES[signals_key] = BatchFusion.from_signals(signals)
    return _INDEXES[signals_key]


def _fuse(prefs: RetrievalPrefs, sig: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """Reference fusion through :meth:`HybridRetriever.fuse` (bm25 and dense modes)."""
    text = [[(d, s) for d, s in hits] for hits in sig["text"]]
    vec = [[(d, s) for d, s in hits] for hits in sig["vec"]]
    fused = HybridRetriever.fuse([prefs], SignalRuns(text=text, vec=vec))
    return {q: [[h.doc_id, h.score] for h in hs] for q, hs in zip(sig["qids"], fused, strict=True)}


def _fusion_stage(ctx: _Context, cache: StageCache, prefs: RetrievalPrefs,
                  sig_keys: dict[str, str], read_all: bool = False
                  ) -> dict[str, tuple[StageRecord, Any]]:
    """Fused runs per split; a run is not loaded (None) when its metrics are cached already,
    unless ``read_all`` (every output read, so checked)."""
    out: dict[str, tuple[StageRecord, Any]] = {}
    fcfg = fusion_config(prefs)
    for split in ctx.splits:
        sig_rec, _ = ctx.signals[(split, sig_keys[split])]
        fkey = stage_key("fusion", FUSION_VERSION, fcfg, [sig_rec.key])
        mkey = stage_key("metrics", METRICS_VERSION, metrics_config(ctx.metrics, split), [fkey])

        def compute(split: str = split) -> dict[str, Any]:
            key = sig_keys[split]
            return _fused_arrays(prefs, ctx.fusion_index(split, key),
                                 ctx.signals_output(split, key)).as_dict()

        out[split] = cache.run("fusion", FUSION_VERSION, fcfg, [sig_rec.key], compute,
                               load=read_all or not cache.has("metrics", mkey), codec="arrays")
    return out


def _fused_arrays(prefs: RetrievalPrefs, index: BatchFusion, sig: dict[str, Any]) -> FusedArrays:
    if prefs.mode == "hybrid":  # same bytes as HybridScorer, vectorised over the split
        return index.fuse_arrays(prefs.scoring, prefs.top_k_items)
    return index.encode(_fuse(prefs, sig))


def fused_run(cache: StageCache, prefs: RetrievalPrefs,
              signals: tuple[StageRecord, dict[str, Any]]
              ) -> tuple[StageRecord, dict[str, list[list[Any]]]]:
    """The memoised fusion stage of one split's signals (its record and output): the record and
    the fused run ``{qid: [[doc_id, score], ...]}``, best first, cut to ``top_k_items``. The
    same key and bytes as the fusion-sweep points."""
    sig_rec, sig = signals
    index = _index(sig_rec.key, sig)
    rec, arrays = cache.run("fusion", FUSION_VERSION, fusion_config(prefs), [sig_rec.key],
                            lambda: _fused_arrays(prefs, index, sig).as_dict(), codec="arrays")
    return rec, index.decode(FusedArrays.from_dict(arrays))


def load_fused_run(cache: StageCache, signals_key: str, fusion_key: str
                   ) -> dict[str, list[list[Any]]]:
    """A cached fused run as ``{qid: [[doc_id, score], ...]}`` (for TREC files and reports);
    :class:`StageCacheCorrupt` when an entry it reads is damaged."""
    index = _INDEXES.get(signals_key) or _index(signals_key, cache.load("signals", signals_key))
    return index.decode(FusedArrays.from_dict(cache.load("fusion", fusion_key)))


def _compute_point(ctx: _Context, cache: StageCache, prefs: RetrievalPrefs,
                   sig_keys: dict[str, str], read_all: bool = False) -> dict[str, Any]:
    fused = _fusion_stage(ctx, cache, prefs, sig_keys, read_all)
    out: dict[str, Any] = {}
    for split in ctx.splits:
        sig_rec, _ = ctx.signals[(split, sig_keys[split])]
        frec, run = fused[split]

        def score(run: Any = run, split: str = split) -> dict[str, Any]:
            if run is None:  # not read (its metrics were cached, then found damaged): read it
                run = _fusion_stage(ctx, cache, prefs, sig_keys, read_all=True)[split][1]
            fused = FusedArrays.from_dict(run)
            key = sig_keys[split]
            codes = ctx.codes(split, key)[fused.positions]
            return ctx.scorer(split).evaluate_packed(
                ctx.fusion_index(split, key).qids, codes, fused.counts, ctx.metrics)

        mrec, mout = cache.run("metrics", METRICS_VERSION, metrics_config(ctx.metrics, split),
                               [frec.key], score, codec="arrays")
        out[split] = {"stages": [sig_rec.as_dict(), frec.as_dict(), mrec.as_dict()],
                      "run_hash": frec.output_hash, "metrics": packed_means(mout),
                      "n_queries": len(ctx.qrels[split])}
    return out


def _recheck_point(ctx: _Context, cache: StageCache, prefs: RetrievalPrefs,
                   sig_keys: dict[str, str]) -> dict[str, Any]:
    """A point whose stages were not all read (a damaged entry turned up later): every stage
    read again, checked, and a damaged one computed again."""
    for split in ctx.splits:
        ctx.forget(split, sig_keys[split])
        ctx.fusion_index(split, sig_keys[split])
    return _compute_point(ctx, cache, prefs, sig_keys, read_all=True)


def point_done(point: PointResult, cache: StageCache, tracker: Any, logged: set[str],
               on_point: Callable[[PointResult], None] | None, bar: Any) -> None:
    """After a point is scored: log it to MLflow unless a run with its config hash is there
    already, call ``on_point``, advance the progress bar (fusion and pipeline sweeps alike)."""
    if tracker is not None and point.config_hash not in logged:
        tracker.log_point(point, cache)
        logged.add(point.config_hash)
    if on_point is not None:
        on_point(point)
    bar.update(1)


# -- signals ------------------------------------------------------------------------------------
def _signals_output(retriever: HybridRetriever, dataset: Dataset, split: str,
                    prefs: RetrievalPrefs, batch_size: int = 10_000,
                    limit: int | None = None) -> dict[str, Any]:
    queries = dataset.split_queries(split)[:limit]
    out: dict[str, Any] = {"qids": [q for q, _ in queries], "text": [], "vec": []}
    for start in range(0, len(queries), batch_size):
        batch = queries[start:start + batch_size]
        group = [prefs.model_copy(update={"query_text": t, "query_id": q}) for q, t in batch]
        sig = retriever.signals(group)
        out["text"] += [[[d, s] for d, s in hits] for hits in sig.text]
        out["vec"] += [[[d, s] for d, s in hits] for hits in sig.vec]
    return out


class _Pipeline:
    """The sweep's store, synced to its dataset on first need, and the retriever over it (the
    embedding model is loaded only when some signals must be computed)."""

    def __init__(self, spec: SweepSpec, dataset: Dataset, db: str | None,
                 progress: bool) -> None:
        self.spec, self.dataset, self.progress = spec, dataset, progress
        self.db = db
        self.store: Any = None
        self.embedder: Any = None
        self.retriever: HybridRetriever | None = None
        self._fingerprint: dict[str, str | None] | None = None

    @property
    def embedder_id(self) -> str | None:
        from aiblox.embedding import get_embedder

        return get_embedder(self.spec.embedder).model_id

    @property
    def needs_vectors(self) -> bool:
        return self.spec.base_prefs().mode != "bm25"

    def open(self) -> Any:
        """The store, synced to the dataset (only what is missing is done)."""
        if self.store is None:
            from aiblox.embedding import CachedEmbedder, get_embedder
            from aiblox.eval.workspace import open_dataset_store, prepare_store

            self.store = open_dataset_store(self.dataset, self.db)
            self.embedder = CachedEmbedder(get_embedder(self.spec.embedder), self.store,
                                           progress=self.progress)
            prepare_store(self.store, self.dataset,
                          self.embedder if self.needs_vectors else None,
                          vectors=self.spec.vectors, progress=self.progress)
        return self.store

    def fingerprint(self) -> dict[str, str | None]:
        """What retrieval reads from the store (:func:`store_fingerprint`), for signals keys."""
        if self._fingerprint is None:
            from aiblox.stores.identity import store_fingerprint

            self._fingerprint = store_fingerprint(
                self.open(), self.embedder_id if self.needs_vectors else None)
        return self._fingerprint

    def get_retriever(self) -> HybridRetriever:
        if self.retriever is None:
            self.open()
            self.retriever = HybridRetriever(self.store, self.embedder)
        return self.retriever

    def close(self) -> None:
        """Close the store (a later need opens it again: a damaged signals entry found late)."""
        if self.store is not None:
            self.store.close()
        self.store = self.embedder = self.retriever = None


# -- the sweep ----------------------------------------------------------------------------------
@release_on_error
def run_sweep(spec: SweepSpec, *, cache_dir: str | Path = DEFAULT_CACHE_DIR,
              db: str | None = None, jobs: int = 0, tracker: Any = None,
              progress: bool = True, dataset: Dataset | None = None,
              on_point: Callable[[PointResult], None] | None = None) -> SweepResult:
    """Score every point of ``spec`` on its tune and report splits, reusing cached stages.

    ``tracker`` (a :class:`aiblox.eval.sweep.tracking.SweepTracker`) logs each point to MLflow
    and skips points it already logged. ``on_point`` is called after each point is scored (and
    logged). ``jobs``: numba threads for the compiled fusion and metrics kernels, 0 for every
    available core (points run one after another in this process; the thread count never
    changes a result).
    """
    jobs = default_jobs() if jobs <= 0 else jobs
    if spec.has_pipeline_axes:  # chunking or selection: the answer pipeline's stages follow
        from aiblox.eval.sweep.pipeline import run_pipeline_sweep

        return run_pipeline_sweep(spec, cache_dir=cache_dir, db=db, jobs=jobs, tracker=tracker,
                                  progress=progress, dataset=dataset, on_point=on_point)
    t_start = time.perf_counter()
    splits = [spec.tune_split, spec.report_split]
    ds = dataset or load_dataset(spec.dataset, splits=splits)
    cache = StageCache(cache_dir)
    pipe = _Pipeline(spec, ds, db or spec.db, progress)
    backend = backend_of(db or spec.db, spec.backend)  # an explicit db may name another backend
    grid = spec.points()
    baseline = spec.baseline_prefs()
    base_key = None
    points_prefs = list(grid)
    if baseline is not None:
        base_key = config_hash(baseline, pipe.embedder_id, backend)[0]
        if base_key not in {config_hash(p, pipe.embedder_id, backend)[0] for p in grid}:
            points_prefs.append(baseline)
    ctx = _Context(cache_root=str(cache.root), metrics=list(spec.metrics), splits=splits,
                   qrels={s: ds.qrels[s] for s in splits})
    emb_id = pipe.embedder_id
    tasks: list[tuple[RetrievalPrefs, dict[str, str]]] = []
    try:
        for prefs in points_prefs:
            keys: dict[str, str] = {}
            for split in splits:
                scfg = signals_config(prefs, ds.hash, split, backend, emb_id,
                                      store=pipe.fingerprint())
                key = stage_key("signals", SIGNALS_VERSION, scfg, [])
                if (split, key) not in ctx.signals:

                    def compute(split: str = split, prefs: RetrievalPrefs = prefs
                                ) -> dict[str, Any]:
                        return _signals_output(pipe.get_retriever(), ds, split, prefs)

                    # a cached output is not read here, only when a point needs it
                    rec, out = cache.run("signals", SIGNALS_VERSION, scfg, [], compute,
                                         load=False)
                    ctx.signals[(split, key)] = (rec, out)
                    ctx.loaders[(split, key)] = partial(
                        cache.run, "signals", SIGNALS_VERSION, scfg, [], compute,
                        count_reuse=False)
                keys[split] = key
            tasks.append((prefs, keys))
    finally:
        pipe.close()

    t_points = time.perf_counter()
    results: list[PointResult | None] = [None] * len(tasks)
    done = tracker.logged_config_hashes() if tracker is not None else set()
    bar = tqdm(total=len(tasks), desc=f"sweep {spec.name}", unit="pt", disable=not progress)
    sweep_hash = spec.hash

    def make_point(i: int, out: dict[str, Any]) -> PointResult:
        prefs = tasks[i][0]
        chash, config = config_hash(prefs, emb_id, backend)
        manifest = PointManifest(
            sweep=spec.name, sweep_hash=sweep_hash, dataset=ds.name, dataset_hash=ds.hash,
            config_hash=chash, config=config, embedder_name=spec.embedder,
            metrics=list(spec.metrics),
            splits={s: SplitManifest(split=s, **out[s]) for s in splits},
            environment=environment())
        point = PointResult(
            label=point_label(prefs), config_hash=chash, scoring=prefs.scoring.model_dump(),
            depth=(prefs.fts.top_k, prefs.vector.top_k),
            metrics={s: out[s]["metrics"] for s in splits}, manifest=manifest,
            is_baseline=chash == base_key)
        results[i] = point
        return point

    def finish(i: int, out: dict[str, Any]) -> None:
        try:
            point_done(make_point(i, out), cache, tracker, done, on_point, bar)
        except StageCacheCorrupt:  # an entry the point had not read: read all, log again
            point_done(make_point(i, _recheck_point(ctx, cache, *tasks[i])), cache, tracker,
                       done, on_point, bar)

    # Points allocate millions of small lists that reference counting frees; CPython's cyclic
    # collector would rescan the cached signals over and over (10x slower), so it pauses here.
    try:
        with paused_gc(), compiled_threads(jobs):
            for i, (prefs, keys) in enumerate(tasks):
                finish(i, _compute_point(ctx, cache, prefs, keys))
    finally:
        bar.close()

    points = [p for p in results if p is not None]
    t_end = time.perf_counter()
    points_s = t_end - t_points - ctx.read_s  # signals read back lazily count as signals time
    best = choose_best(points[:len(grid)], spec.tune_split, spec.primary)
    baseline_point = next((p for p in points if p.is_baseline), None)

    def per_query(point: PointResult, split: str) -> dict[str, dict[str, float]]:
        stage = point.manifest.splits[split].stages[-1]
        try:
            return unpack_metrics(cache.load("metrics", stage["key"]))["per_query"]
        except StageCacheCorrupt:
            i = results.index(point)
            _recheck_point(ctx, cache, *tasks[i])
            return unpack_metrics(cache.load("metrics", stage["key"]))["per_query"]

    significance: list[Comparison] = []
    if baseline_point is not None:
        ranked = sorted(points[:len(grid)], key=lambda p: (-p.metrics[spec.tune_split][
            spec.primary], p.config_hash))[:spec.significance_top]
        significance = compare_to_baseline(
            per_query(baseline_point, spec.report_split),
            [(p.label, per_query(p, spec.report_split)) for p in ranked],
            spec.metrics, test=spec.stat_test, alpha=spec.alpha)
    ci = {s: bootstrap_ci(per_query(best, s)[spec.primary]) for s in splits}
    result = SweepResult(
        name=spec.name, sweep_hash=spec.hash, dataset=ds.name, dataset_hash=ds.hash,
        tune_split=spec.tune_split, report_split=spec.report_split, primary=spec.primary,
        points=points, best=best, baseline=baseline_point, significance=significance, ci=ci,
        timings={"signals_s": round(t_points - t_start + ctx.read_s, 3),
                 "points_s": round(points_s, 3),
                 "total_s": round(time.perf_counter() - t_start, 3),
                 "points_per_s": round(len(points) / points_s, 1) if points_s > 0 else 0.0},
        computed=dict(cache.computed), reused=dict(cache.reused),
        repaired=dict(cache.repaired))
    if tracker is not None:
        result = result.model_copy(update={"tracking": tracker.finish(result)})
    return result


def default_jobs() -> int:
    """Threads for ``--jobs 0``: the available cores."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
