"""One configuration evaluated on one split: a one-point run of the engine.

:func:`evaluate_retrieval` scores a :class:`RetrievalPrefs` (BM25, dense or hybrid) or a
retrieval pipeline (``Stage("bm25") >> Stage("rm3") >> Stage("bm25")``, or its expression) the
way a sweep scores a point: the same stages (signals, fusion, a pipeline's own stages, metrics),
the same keys, the same fused runs and metric values, in a stage cache of its own (a temporary
folder unless ``cache_dir`` is given, whose entries a later call or sweep then reuses). So
``aiblox eval``, ``evaluate_retrieval`` and a sweep's point give one number, by one route, and
the result carries the point's stage records for its determinism manifest
(:func:`aiblox.experiment.tracking.result_manifest`) without scoring it again.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import Dataset, load_dataset
from aiblox.engine.algebra import Pipeline, PipelineError
from aiblox.engine.cache import StageCache
from aiblox.engine.context import RunContext
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.plan import check_pipeline_depth, first_stage_prefs
from aiblox.engine.point import split_point
from aiblox.engine.result import EvalResult, config_hash, run_hash
from aiblox.engine.settings import PipelinePoint, SweepSettings, needs_vectors, point_config
from aiblox.engine.workspace import Workspace, dataset_binding
from aiblox.memory import paused_gc
from aiblox.metrics import (
    DEFAULT_METRICS,
    check_depth,
    evaluation_prefs,
    validate_metrics,
)
from aiblox.retrieval.retriever import HybridRetriever
from aiblox.stores import StoreMismatch
from aiblox.stores.identity import read_binding

__all__ = [
    "EvalResult",
    "check_evaluation",
    "check_outside_sweep",
    "config_hash",
    "evaluate_retrieval",
    "run_hash",
]

_UNSET_FIX = ("set {names} to {cut} or more, or leave it unset (an evaluation then retrieves as "
              "deep as its metrics read), or use cutoffs of at most {depth}")
def _check_first_depth(prefs: RetrievalPrefs, first: RetrievalPrefs, metrics: Sequence[str],
                       pipe: Pipeline | None) -> None:
    """:func:`check_depth` of the first stage's prefs, worded for a pipeline when there is one
    (``bm25 % 5`` cuts the run, not a ``top_k_items`` the user never set)."""
    if pipe is None:
        check_depth(first, metrics, fix=_UNSET_FIX)
    else:
        check_pipeline_depth(pipe, prefs, metrics)


def evaluate_retrieval(retriever: HybridRetriever | Workspace, dataset: Dataset | str | Path,
                       split: str,
                       prefs: RetrievalPrefs | None = None,
                       metrics: Sequence[str] = DEFAULT_METRICS, *,
                       pipeline: Pipeline | str | None = None,
                       cache_dir: str | Path | None = None,
                       progress: bool = True, batch_size: int | None = None) -> EvalResult:
    """Score ``prefs`` (or ``pipeline``) on every judged query of ``split`` as a one-point run
    of the engine (see the module doc).

    ``retriever``: a workspace (:func:`~aiblox.engine.workspace.open_workspace`) or its
    retriever, over a store of ``dataset`` (a :class:`~aiblox.data.Dataset`, or a name or
    folder, loaded): a store that records another dataset raises
    :class:`~aiblox.stores.StoreMismatch`, as the CLI does (its documents would match no
    judgement: every metric 0). ``prefs`` (default ``RetrievalPrefs(query_text="")``): the
    retrieval settings; with a ``pipeline`` (a :class:`~aiblox.engine.Pipeline` or an expression
    such as ``"bm25 >> rm3 >> bm25"``) they are the defaults of its retrieval stages, as a
    spec's ``[base]`` is. The run is as deep as ``metrics`` need (:mod:`aiblox.metrics.depth`):
    a depth ``prefs`` leaves unset is the evaluation depth (100, or the deepest cutoff; 1,000
    for a metric without one), as ``aiblox eval`` retrieves; a depth set below a cutoff, or a
    pipeline whose run is shallower than one, raises :class:`~aiblox.metrics.DepthError` before
    anything is retrieved, as does a stage that cannot work here
    (:class:`~aiblox.engine.PipelineError`). ``cache_dir``: a stage cache to read and fill
    (default: a temporary one). ``batch_size`` is accepted for compatibility (retrieval runs in
    the engine's batches)."""
    del batch_size
    metrics = validate_metrics(metrics)
    if not isinstance(dataset, Dataset):
        dataset = load_dataset(dataset, splits=[split])
    prefs = evaluation_prefs(prefs or RetrievalPrefs(query_text=""), metrics)
    pipe = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    ws = _workspace(retriever, dataset)
    backend = ws.store.kind
    emb_id = getattr(ws.embedder, "model_id", None)
    if pipe is not None:
        check_outside_sweep(pipe)
    first = first_stage_prefs(pipe.check(), prefs) if pipe is not None else prefs
    settings = SweepSettings(name="eval", embedder=emb_id or "", metrics=tuple(metrics),
                             needs_vectors=needs_vectors(prefs, [pipe] if pipe else []))
    if first is not None:  # retrieval on the topics: its own depth settings decide
        _check_first_depth(prefs, first, metrics, pipe)
    with _stage_cache(cache_dir) as cache:
        ctx = RunContext(settings, dataset, cache, ws.db, backend, [split], embedder=emb_id,
                         progress=progress, workspace=ws)
        if pipe is not None and first is None:
            _check_pipeline_depth(pipe, prefs, metrics, ws)
        point = PipelinePoint(prefs, pipeline=pipe)
        t0 = time.perf_counter()
        with paused_gc():
            if first is not None:  # the first stage's retrieval, timed apart from the rest
                ctx.plan_signals(first, split)
            t1 = time.perf_counter()
            out = split_point(ctx, point, split)
            stages = out["stages"]
            per_query = ctx.reader.per_query(stages)
            run = {q: [(d, s) for d, s in hits] for q, hits in ctx.reader.point_run(stages).items()}
        t2 = time.perf_counter()
        ctx.close()
    retrieve_s = (t1 - t0) if first is not None else (t2 - t0)
    score_s = (t2 - t1) if first is not None else 0.0
    chash, config = point_config(settings, point, emb_id, backend)
    n = out["n_queries"]
    return EvalResult(
        dataset=dataset.name, split=split,
        mode=first.mode if first is not None else "pipeline",
        n_queries=n, metrics=dict(out["metrics"]),
        hashes={"dataset": dataset.hash, "config": chash, "run": run_hash(run)},
        timings={"retrieve_s": round(retrieve_s, 3), "score_s": round(score_s, 3),
                 "qps": round(n / retrieve_s, 1) if retrieve_s > 0 else 0.0},
        config=config, per_query=per_query, run=run,
        pipeline=pipe.expression() if pipe is not None else None,
        stages=stages, stage_run_hash=out["run_hash"])


def _workspace(retriever: HybridRetriever | Workspace, dataset: Dataset) -> Workspace:
    """``retriever`` as the workspace a one-point run reads (its own store and embedder)."""
    store = retriever.store
    held, wanted = read_binding(store), dataset_binding(dataset)
    if held is not None and held != wanted:
        raise StoreMismatch(f"store {getattr(store, 'location', store)} holds dataset "
                            f"{held.describe()}, not {wanted.describe()}: "
                            f"evaluate with that dataset, or open its own workspace "
                            f"(open_workspace(dataset))")
    if isinstance(retriever, Workspace):
        return retriever
    return Workspace(dataset=dataset, db=str(getattr(store, "location", "")), store=store,
                     embedder=retriever.embedder,  # type: ignore[arg-type]  # as the retriever's
                     _retriever=retriever)


@contextmanager
def _stage_cache(cache_dir: str | Path | None) -> Iterator[StageCache]:
    if cache_dir is not None:
        yield StageCache(cache_dir)
        return
    with tempfile.TemporaryDirectory(prefix="aiblox-eval-") as tmp:
        yield StageCache(tmp)


def check_outside_sweep(p: Pipeline) -> None:
    """Refuse a stage whose model is ``"finetune"`` (:class:`PipelineError`, one line): the
    model a sweep spec's ``[finetune_reranker]`` trains before its points run, which one
    evaluation has not (``aiblox eval`` built the BM25 index, then failed unprefixed)."""
    from aiblox.embedding.sentence_transformers import FINETUNED

    for s in p.stages():
        if s.param_dict().get("model") == FINETUNED:
            raise PipelineError(f"stage {s.name}: model = {FINETUNED!r} is the model a sweep "
                                f"spec's [finetune_reranker] trains, and one evaluation trains "
                                f"none: name a cross-encoder folder or installed package (a "
                                f"trained one by its folder)")


def check_evaluation(retriever: HybridRetriever | Workspace, dataset: Dataset,
                     pipeline: Pipeline | str, prefs: RetrievalPrefs | None = None,
                     metrics: Sequence[str] = DEFAULT_METRICS) -> None:
    """What :func:`evaluate_retrieval` refuses of ``pipeline`` before any work, checked alone
    (so a command with several systems refuses a bad one before scoring any): its stages'
    checks against the store, and its run's depth against the metrics' cutoffs."""
    metrics = validate_metrics(metrics)
    prefs = evaluation_prefs(prefs or RetrievalPrefs(query_text=""), metrics)
    pipe = (parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline).check()
    check_outside_sweep(pipe)
    first = first_stage_prefs(pipe, prefs)
    if first is not None:
        _check_first_depth(prefs, first, metrics, pipe)
        return
    ws = _workspace(retriever, dataset)
    _check_pipeline_depth(pipe, prefs, metrics, ws)


def _check_pipeline_depth(pipe: Pipeline, prefs: RetrievalPrefs, metrics: Sequence[str],
                          ws: Workspace) -> None:
    """A pipeline checked against the store before any stage computes (its stages' own
    checks), and its run's depth against the metrics' cutoffs."""
    from aiblox.engine.retrieval import StageContext

    check_pipeline_depth(pipe, prefs, metrics, ws.store.count_items(), StageContext(ws))
