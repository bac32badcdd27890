"""The sweep runner: every point of a spec scored on its tune and report splits, every stage
memoised by its key in a :class:`~aiblox.engine.cache.StageCache`.

A fusion sweep is a pipeline sweep without chunk and answer stages: both run here, point by
point through the same chain of stages (:mod:`aiblox.engine.point`). The run has three
phases:

1. signals: the store is opened and synced to the dataset (a no-op when its sync record already
   names the dataset), since its content digests enter the signals keys, and the retrieval of
   every (split, retrieval setting) the points need runs once, or is found cached (then not
   read: a sweep whose fusion and metrics are all cached never reads its signals);
2. points: one after another in this process, each point's compiled work (fused scores,
   per-query sorts, the metrics) on ``jobs`` numba threads; each point is logged to MLflow
   (``tracker``: buffered, written in batches) as it finishes. Worker processes were measured
   slower on 2 cores (each must read the signals back, normalise them again and hand the runs back;
   ``benchmarks/README.md``, "Fusion sweep"). With a model-based ``[search] strategy`` the points
   are the trials Optuna chooses among the grid's points, one after another
   (:mod:`aiblox.sweep.search`), their signals planned as they come; the baseline after.
   With ``executor="ray"`` the points run as Ray tasks on a cluster's workers over the same
   (shared) stage cache and come back in point order, to be logged here
   (:mod:`aiblox.sweep.distributed`);
3. the conclusion (:func:`aiblox.sweep.results.conclude`): the best point on the tune
   split, the baseline, significance and intervals on the report split.

So changing a fusion weight reruns fusion and metrics, nothing before; a repeated sweep reads
every stage back; a killed sweep recomputes only the points (stages) it had not finished. A
damaged cache entry is computed again wherever it is found, even after its point was scored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiblox.chunking import make_chunker
from aiblox.cluster import check_executor, connect
from aiblox.compiled import compiled_threads, usable_cores
from aiblox.data import Dataset, load_dataset
from aiblox.embedding.device import describe_device, resolve_device
from aiblox.embedding.sentence_transformers import trained_ref
from aiblox.engine.ahead import batches_ahead
from aiblox.engine.cache import StageCache, StageCacheCorrupt
from aiblox.engine.context import RunContext
from aiblox.engine.manifest import PointManifest, SplitManifest, environment
from aiblox.engine.outputs import failed_generations_note
from aiblox.engine.plan import check_pipeline
from aiblox.engine.point import evaluate_point, recheck_point
from aiblox.engine.settings import PipelinePoint, point_config, point_title
from aiblox.engine.tracking import release_on_error
from aiblox.memory import paused_gc
from aiblox.metrics.pareto import objective_values
from aiblox.progress import progress_bar, settle
from aiblox.sweep.crossval import check_folds
from aiblox.sweep.distributed import RayPoints, RecordingCache, check_shared_cache, merge_counts
from aiblox.sweep.finetune import check_spec_vectors, ensure_fine_tuned
from aiblox.sweep.finetune_reranker import ensure_reranker, with_reranker
from aiblox.sweep.results import PointResult, SweepResult, conclude
from aiblox.sweep.spec import SweepSpec, backend_of

__all__ = ["DEFAULT_CACHE_DIR", "check_cv", "check_held_out", "check_pipelines", "default_jobs",
           "run_sweep", "sweep_device", "sweep_points"]

DEFAULT_CACHE_DIR = ".aiblox/stages"
"""The stage cache ``aiblox sweep`` uses unless told otherwise."""


def default_jobs() -> int:
    """Threads for ``--jobs 0``: the available cores not busy with other work (the cores
    less the one-minute load average, this process's own share of it given back), at least
    one. A point's kernels are a few milliseconds long: on a busy machine a second thread
    waits for a core at every one of them: a dense scifact grid ran 7-50% faster on one
    thread than on two at a load of 4-5 on 2 cores (``benchmarks/README.md``, "Fusion
    sweep").
    The thread count never changes a result."""
    cores = usable_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this platform
        return cores
    return free_cores(cores, load)


def free_cores(cores: int, load: float) -> int:
    """Of ``cores``, those a load average of ``load`` leaves free, counting this process's
    own running thread as free (rounded; at least one)."""
    return max(1, min(cores, int(cores - load + 1.5)))


def sweep_device(spec: SweepSpec, device: str | None = None, option: str = "device") -> str:
    """The device a sweep's embedder runs on: ``device`` (None: the spec's ``device``)
    resolved (:func:`~aiblox.embedding.device.resolve_device`, a :class:`DeviceError` naming
    ``option``); ``cpu`` for an embedder that runs no model (``hashing``), which gives the
    same bits everywhere, so its sweep is one run on any machine."""
    from aiblox.embedding import get_embedder

    resolved = resolve_device(device or spec.device, option)
    return resolved if hasattr(get_embedder(spec.embedder, device="cpu"), "device") else "cpu"


def sweep_points(spec: SweepSpec) -> tuple[list[PipelinePoint], PipelinePoint | None]:
    """The grid's points (the ``[search]`` draw applied) and the baseline point (None without
    one): a fusion sweep's are its retrieval settings without chunking or selection; with a
    retrieval pipeline, each setting times every pipeline variant."""
    return spec.grid_points(), spec.grid_baseline()


def check_pipelines(ctx: RunContext | None, points: list[PipelinePoint]) -> None:
    """Every distinct retrieval pipeline of the points checked before any stage computes
    (:func:`aiblox.engine.plan.check_pipeline`: a reranker asked for more documents than its
    input holds, a model that is not there or not a cross-encoder, feedback from more documents
    than the store has); ``PipelineError`` naming the stage. Without ``ctx`` (before any model
    is trained or the store opened) what needs no store; with it, against the store too."""
    seen: set[tuple[Any, str]] = set()
    n_docs = None
    for pt in points:
        if pt.pipeline is None:
            continue
        key = (pt.pipeline, pt.prefs.model_dump_json())
        if key in seen:
            continue
        seen.add(key)
        if ctx is None:
            check_pipeline(pt.pipeline, pt.prefs)
            continue
        if n_docs is None:
            n_docs = ctx.workspace().store.count_items()
        check_pipeline(pt.pipeline, pt.prefs, n_docs, ctx.stage_context())


def check_cv(spec: SweepSpec, ds: Dataset) -> list[str]:
    """The tune split's scored query ids (its judged queries by id, the first ``query_limit``
    when set); with ``[cv]``, ``ValueError`` naming both counts when there are fewer queries
    than folds. Checked before anything is built or logged."""
    qids = [q for q, _ in ds.split_queries(spec.tune_split)]
    if spec.query_limit is not None:
        qids = qids[:spec.query_limit]
    if spec.cv is not None:
        check_folds(spec.cv.folds, len(qids), spec.tune_split)
    return qids


def check_held_out(spec: SweepSpec, ds: Dataset) -> None:
    """``ValueError`` naming ``report_split`` when a query it scores is also one ``tune_split``
    scores (the same query id, judged in both: a dataset's query ids name one query whichever
    split judges it), so the choice would be reported on queries it was made on. The spec
    check (:func:`~aiblox.sweep.spec_checks.check_splits`) sees only the split names: two
    splits from different files (``train`` and ``test``) that judge the same queries pass it.
    Both splits as scored: their first ``query_limit`` queries when set. Checked before
    anything is built or logged."""
    if spec.report_split is None:
        return
    limit = spec.query_limit
    tune = [q for q, _ in ds.split_queries(spec.tune_split)][:limit]
    report = [q for q, _ in ds.split_queries(spec.report_split)][:limit]
    shared = sorted(set(tune) & set(report))
    if shared:
        shown = ", ".join(repr(q) for q in shared[:3]) + (", ..." if len(shared) > 3 else "")
        raise ValueError(f"report_split = {spec.report_split!r}: {len(shared)} of its "
                         f"{len(report)} scored queries are also scored in tune_split = "
                         f"{spec.tune_split!r} (query ids {shown}), so the choice would be "
                         f"reported on queries it was made on: report on a split whose "
                         f"queries the tuning split does not judge")


@release_on_error
def run_sweep(spec: SweepSpec, *, cache_dir: str | Path = DEFAULT_CACHE_DIR,
              db: str | None = None, jobs: int = 0, tracker: Any = None,
              progress: bool = True, dataset: Dataset | None = None,
              on_point: Callable[[PointResult], None] | None = None,
              executor: str = "local", address: str | None = None) -> SweepResult:
    """Score every point of ``spec`` on its tune and report splits, reusing cached stages.

    ``tracker`` (a :class:`aiblox.engine.tracking.SweepTracker`) logs each point to MLflow
    and skips points it already logged. ``on_point`` is called after each point is scored (and
    logged). ``jobs``: numba threads for the compiled fusion and metrics kernels, 0 for every
    available core (points run one after another in this process; the thread count never
    changes a result).

    ``executor``: ``"local"`` (this process) or ``"ray"``: the points as Ray tasks on the
    cluster at ``address`` (``ray.init(address=...)``; None: the cluster this process is
    attached to, or a local Ray instance), each task on one core, every node reading and writing
    the stage cache at ``cache_dir`` (a folder all of them see). The result, its stage keys and
    run hashes are the local executor's. ``ValueError`` (:class:`ExecutorError`) for a bad
    executor or an address where no cluster answers, before anything is opened.
    """
    check_executor(executor, address)
    if executor == "ray":  # before the signals are planned, let alone computed
        check_shared_cache(cache_dir)
    cpus = connect(address) if executor == "ray" else 0
    jobs = default_jobs() if jobs <= 0 else jobs
    t_start = time.perf_counter()
    splits = spec.splits
    ds = dataset or load_dataset(spec.dataset, splits=splits)
    if tracker is not None:  # points must not land in another data's parent
        tracker.bind_dataset(ds.hash)
    tune_qids = check_cv(spec, ds)  # before any work: k folds need k queries
    check_held_out(spec, ds)  # no query both chosen on and reported on
    # one device for the whole sweep, resolved here: the workers embed where the keys say
    device = sweep_device(spec)
    settings = dataclasses.replace(spec.settings(), device=device)
    grid, baseline = sweep_points(spec)
    # what needs no store refused before a model trains or the store is opened and embedded
    check_pipelines(None, [*grid, *([baseline] if baseline is not None else [])])
    # an explicit db may name another backend; one naming no store is refused before any work
    backend = backend_of(db or spec.db, spec.backend)
    check_spec_vectors(spec, ds, cache_dir, device)  # read once a model is trained
    # the trained models are named by reference, their folders carried beside (settings.trained)
    if spec.finetune is not None:  # the tuned model is the sweep's embedder (trained once)
        model = ensure_fine_tuned(spec, ds, cache_dir, db or spec.db, progress=progress,
                                  device=device)
        embedder = trained_ref(model)
        settings = dataclasses.replace(settings, embedder=embedder, trained=(
            *settings.trained, (embedder, str(model))))
    reranker = None
    if spec.finetune_reranker is not None:  # named by its id in place of model = "finetune"
        folder = ensure_reranker(spec, ds, cache_dir, db or spec.db, progress=progress,
                                 device=device)
        reranker = trained_ref(folder)
        settings = dataclasses.replace(settings, trained=(
            *settings.trained, (reranker, str(folder))))
    cache = RecordingCache(cache_dir) if cpus else StageCache(cache_dir)
    ctx = RunContext(settings, ds, cache, db or spec.db, backend, splits, progress=progress)
    if reranker is not None:
        grid = with_reranker(grid, reranker)
        baseline = None if baseline is None else with_reranker([baseline], reranker)[0]
    model_based = spec.search.model_based  # trials chosen while it runs, among the grid's points
    todo = [] if model_based else list(grid)
    configs: dict[int, tuple[str, dict[str, Any]]] = {}  # id(point) -> point_config, once

    def config_of(pt: PipelinePoint) -> tuple[str, dict[str, Any]]:
        """The point's config hash and config, computed once (the points live as long as
        this sweep: ``grid``, ``todo``)."""
        out = configs.get(id(pt))
        if out is None:
            out = configs[id(pt)] = point_config(settings, pt, ctx.embedder_id, backend)
        return out

    base_key = None
    if baseline is not None:
        base_key = config_of(baseline)[0]
        if model_based or base_key not in {config_of(p)[0] for p in grid}:
            todo.append(baseline)
    remote = None
    try:
        check_pipelines(ctx, [*grid, *([baseline] if baseline is not None else [])])
        if settings.chunk_stages:  # precomputed chunks looked up (and a store without refused)
            for prefs in {pt.prefs.model_dump_json(): pt.prefs for pt in
                          [*grid, *([baseline] if baseline is not None else [])]}.values():
                ctx.check_chunks(prefs)
        for pt in todo:
            if pt.pipeline is not None:  # planned as its stages come (pipeline.split_point)
                continue
            for split in splits:
                ctx.plan_signals(pt.prefs, split)
        if cpus:  # the workers open the store only for a chunk stage not yet cached
            remote = RayPoints(ctx, cpus)
    except BaseException:  # a refused sweep does not hold its store open
        ctx.close()
        raise
    finally:
        if not settings.chunk_stages or cpus:  # fusion points need no store (a late repair
            ctx.close()                        # reopens it)

    t_points = time.perf_counter()
    if model_based:  # the baseline is scored after the trials, unless a trial was it
        todo = []
    results: list[PointResult | None] = [None] * len(todo)
    done = tracker.logged_config_hashes() if tracker is not None else set()
    total = (min(int(spec.search.n or 0), len(grid)) + (baseline is not None)
             if model_based else len(todo))  # a trial that is the baseline: settled below
    bar = progress_bar(total, f"sweep {spec.name}", unit="pt", enabled=progress)
    sweep_hash = spec.hash  # a property that hashes the spec: once, not per point
    shown_device = describe_device(device)

    def make_point(i: int, out: dict[str, Any]) -> PointResult:
        pt = todo[i]
        chash, config = config_of(pt)
        manifest = PointManifest(
            sweep=spec.name, sweep_hash=sweep_hash, dataset=ds.name, dataset_hash=ds.hash,
            dataset_path=ds.source, config_hash=chash, config=config,
            embedder_name=settings.embedder, device=shown_device, metrics=list(spec.metrics),
            models=dict(settings.trained) or None,
            splits={s: SplitManifest(split=s, **out[s]) for s in splits},
            environment=environment())
        c = pt.prefs.chunking
        point = PointResult(
            label=point_title(settings, pt), config_hash=chash,
            scoring=pt.prefs.scoring.model_dump(),
            depth=(pt.prefs.fts.top_k, pt.prefs.vector.top_k),
            metrics={s: out[s]["metrics"] for s in splits}, manifest=manifest,
            is_baseline=chash == base_key, outside_grid=pt is baseline,
            chunking=None if not settings.chunk_stages else {
                "chunker_id": c.chunker_id, "max_chunk_tokens": c.max_chunk_tokens,
                "overlap_tokens": c.overlap_tokens, "top_k_chunks": pt.prefs.top_k_chunks,
                "per_item_chunk_cap": pt.prefs.per_item_chunk_cap,
                "chunker": make_chunker(c).chunker_id},
            selection=None if pt.policy is None else {
                **config["selection"], "overrides": dict(pt.overrides)})
        results[i] = point
        return point

    def log(point: PointResult) -> None:
        if tracker is not None and point.config_hash not in done:
            tracker.log_point(point, ctx.reader)
            done.add(point.config_hash)

    def finish(i: int, out: dict[str, Any], tick: bool = True) -> PointResult:
        point = make_point(i, out)
        try:
            log(point)
        except StageCacheCorrupt:  # an entry the point had not read: read all, log again
            point = make_point(i, recheck_point(ctx, todo[i]))
            log(point)
        if on_point is not None:
            on_point(point)
        if tick:
            bar.update(1)
        return point

    def evaluate(pt: PipelinePoint) -> dict[str, Any]:
        return remote.one(pt) if remote is not None else evaluate_point(ctx, pt)

    # Points allocate millions of small lists that reference counting frees; CPython's cyclic
    # collector would rescan the cached signals over and over (10x slower), so it pauses here.
    scored: dict[str, PointResult] = {}
    trials: list[str] = []

    objectives = list(spec.objective_directions()) if spec.search.objectives else None

    def score(i: int) -> float | list[float]:
        """A trial of a model-based search: grid point ``i``, scored once however often it is
        chosen; its primary metric on the tune split (its objectives, when the spec names
        several)."""
        pt = grid[i]
        chash = config_of(pt)[0]
        point = scored.get(chash)
        if point is None:
            todo.append(pt)
            results.append(None)
            point = scored[chash] = finish(len(todo) - 1, evaluate(pt))
        else:
            bar.update(1)
        trials.append(chash)
        if objectives is not None:
            return objective_values(point, spec.tune_split, objectives)
        value = point.metrics[spec.tune_split].get(spec.primary)
        if value is None:
            raise ValueError(f"primary metric {spec.primary!r} was not computed for "
                             f"{point.label} on {spec.tune_split}: a model-based search "
                             f"needs it at every trial")
        return float(value)

    n_grid = len(grid)
    try:
        # the points' entries written as packs (a few files, not several per point): here
        # when this process scores the points; with Ray each task batches its own
        # (distributed.run_points), published before it returns
        batch = cache.batched() if remote is None else contextlib.nullcontext()
        with paused_gc(), compiled_threads(jobs), batch:
            if model_based:
                from aiblox.sweep.search import run_search

                run_search(spec, grid, cache_dir, score, context={
                    "dataset_hash": ds.hash, "embedder": ctx.embedder_id, "backend": backend})
                n_grid = len(todo)
                if baseline is not None and base_key not in scored:
                    todo.append(baseline)
                    results.append(None)
                    finish(len(todo) - 1, evaluate(baseline))
                settle(bar)  # the baseline was a trial (or trials ended early): ends at n/n
            elif remote is not None:  # as the tasks return; handed on in point order
                for i, out in remote.ordered(todo, bar.update):
                    finish(i, out, tick=False)
            else:  # the fusion points of each batch computed together, then run in order
                first = 0
                for points_ahead in batches_ahead(ctx, todo, jobs):
                    for i, pt in enumerate(points_ahead, first):
                        finish(i, evaluate_point(ctx, pt))
                    first += len(points_ahead)
    finally:
        bar.close()
        ctx.close()

    points = [p for p in results if p is not None]
    t_end = time.perf_counter()
    failed = failed_generations_note(cache, ((s, sm.stages) for p in points
                                             for s, sm in p.manifest.splits.items()))
    if failed is not None:  # one line for the sweep (the CLI's "warning:")
        warnings.warn(failed, stacklevel=2)
    points_s = t_end - t_points - ctx.read_s  # signals read back lazily count as signals time

    def per_query(point: PointResult, split: str) -> dict[str, dict[str, float]]:
        stages = point.manifest.splits[split].stages
        try:
            return ctx.reader.per_query(stages)
        except StageCacheCorrupt:
            recheck_point(ctx, todo[results.index(point)])
            return ctx.reader.per_query(stages)

    try:
        end = conclude(spec, points, n_grid, per_query, dataset=ds.name,
                       has_answers=bool(ds.answers), tune_qids=tune_qids)
    finally:
        ctx.close()
    computed, reused, repaired = dict(cache.computed), dict(cache.reused), dict(cache.repaired)
    if remote is not None and isinstance(cache, RecordingCache):  # as one process counts
        computed, reused, repaired = merge_counts(cache.events + remote.events)
    result = SweepResult(
        name=spec.name, sweep_hash=sweep_hash, dataset=ds.name, dataset_hash=ds.hash,
        tune_split=spec.tune_split, report_split=spec.report_split, primary=spec.primary,
        points=points, best=end.best, baseline=end.baseline, significance=end.significance,
        ci=end.ci, cv=end.cv,
        timings={"signals_s": round(t_points - t_start + ctx.read_s, 3),
                 "points_s": round(points_s, 3),
                 "total_s": round(time.perf_counter() - t_start, 3),
                 "points_per_s": round(len(points) / points_s, 1) if points_s > 0 else 0.0},
        computed=computed, reused=reused, repaired=repaired, trials=trials,
        objectives=end.objectives,
        pareto=[p.config_hash for p in end.pareto])
    if tracker is not None:
        def runs(point: PointResult) -> dict[str, str]:
            """The TREC text of a point the conclusion names, per split (its run file)."""
            tag = f"aiblox-{point.config_hash[:12]}"
            splits = point.manifest.splits
            try:
                return {s: ctx.reader.point_trec(sm.stages, tag) for s, sm in splits.items()}
            except StageCacheCorrupt:
                recheck_point(ctx, todo[results.index(point)])
                return {s: ctx.reader.point_trec(sm.stages, tag) for s, sm in splits.items()}

        result = result.model_copy(update={"tracking": tracker.finish(result, runs)})
    return result
