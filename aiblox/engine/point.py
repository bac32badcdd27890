"""The stages of one sweep point on one split, in pipeline order, each memoised by its key
(:mod:`aiblox.engine.task` lists them with their configs and versions).

Every point runs ``signals`` (planned for the whole sweep first, :meth:`RunContext.plan_signals`),
``fusion`` and ``metrics``; a pipeline point goes on to ``chunks`` and ``chunk_metrics``, and
with a selection policy to ``selection``, ``prompt``, ``reader``, ``validation`` and
``answer_metrics``. So changing a fusion weight recomputes fusion and what follows, nothing
before it; changing a chunker recomputes chunks and what follows; a repeated sweep reads every
stage back.

A fusion-only point reads its fused run only when its metrics must be computed: the sweep's hot
path never turns a fused run back into strings (the metrics are scored from the compact run's
document codes, :meth:`~aiblox.metrics.QrelsScorer.evaluate_packed`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aiblox.assembly import get_llm, reader_for_policy
from aiblox.engine import compute
from aiblox.engine.configs import (
    ANSWER_METRICS_CONFIG,
    PROMPT_CONFIG,
    VALIDATION_CONFIG,
    chunk_metrics_config,
    chunks_config,
    metrics_config,
    selection_config,
)
from aiblox.engine.context import RunContext
from aiblox.engine.plan import Value, apply_pipeline
from aiblox.engine.settings import PipelinePoint, point_policy
from aiblox.engine.task import StageRecord, make_task
from aiblox.fusion import FusedArrays
from aiblox.metrics import canonical_metrics, chunk_metrics, packed_means

__all__ = ["evaluate_point", "recheck_point", "split_point"]


def evaluate_point(ctx: RunContext, pt: PipelinePoint, read_all: bool = False
                   ) -> dict[str, dict[str, Any]]:
    """Every stage of one point on the tune and report splits: per split its stage records,
    run hash, metric means, scored queries and prompt hash (a :class:`SplitManifest`'s
    fields). ``read_all``: every output read, so checked."""
    return {split: split_point(ctx, pt, split, read_all) for split in ctx.splits}


def recheck_point(ctx: RunContext, pt: PipelinePoint) -> dict[str, dict[str, Any]]:
    """A point whose stages were not all read (a damaged entry turned up later): its signals
    read again, every stage read and checked, a damaged one computed again."""
    for split in ctx.splits:
        if pt.pipeline is not None:  # its stages are read (and checked) as it runs again
            continue
        key = ctx.plan_signals(pt.prefs, split)
        ctx.forget(split, key)
        ctx.fusion_index(split, key)
    return evaluate_point(ctx, pt, read_all=True)


def split_point(ctx: RunContext, pt: PipelinePoint, split: str, read_all: bool = False
                ) -> dict[str, Any]:
    """Every stage of one point on one split (see :func:`evaluate_point`). A point with a
    retrieval pipeline runs its stages first (:func:`aiblox.engine.plan.apply_pipeline`);
    retrieval on the topics alone is the prefs' own first stage, with the same keys."""
    if pt.pipeline is not None:
        for module in ctx.settings.stage_modules:
            importlib.import_module(module)
        value = apply_pipeline(pt.pipeline, pt.prefs, ctx, split)
        if value.prefs is None:
            return _pipeline_split(ctx, pt, split, value)
        pt = PipelinePoint(value.prefs, pt.policy, pt.overrides)
    prefs, settings = pt.prefs, ctx.settings
    skey = ctx.plan_signals(prefs, split)
    sig_rec = ctx.signals[(split, skey)][0]
    fusion = ctx.fusion_stage(prefs, split, skey)

    def score() -> dict[str, Any]:
        arrays = fused if fused is not None else ctx.run(fusion)[1]
        run = FusedArrays.from_dict(arrays)
        return ctx.scorer(split).evaluate_positions(ctx.fusion_index(split, skey).qids,
                                                    ctx.codes(split, skey), run.positions,
                                                    run.counts,
                                                    canonical_metrics(settings.metrics))

    metrics = make_task("metrics", metrics_config(settings.metrics, split), [fusion.key], score,
                         codec="arrays")
    # the fused run is read when a later stage needs it (or to check it)
    load = read_all or settings.chunk_stages or not ctx.cache.has("metrics", metrics.key)
    frec, fused = ctx.run(fusion, load=load)
    mrec, mout = ctx.run(metrics)
    out: dict[str, Any] = {"stages": [sig_rec, frec, mrec], "run_hash": frec.output_hash,
                           "metrics": _listed_means(mout, settings.metrics),
                           "n_queries": len(ctx.qids(split)),
                           "prompts_sha256": None}
    if settings.chunk_stages:
        def run_of() -> dict[str, Any]:
            return ctx.fusion_index(split, skey).decode(FusedArrays.from_dict(fused))

        _chunk_stages(ctx, pt, split, frec, run_of, out)
    out["stages"] = [r.as_dict() for r in out["stages"]]
    return out


def _pipeline_split(ctx: RunContext, pt: PipelinePoint, split: str, value: Value
                    ) -> dict[str, Any]:
    """The metrics (and chunk and answer stages) of a point whose retrieval pipeline ends in
    a stage of its own (feedback, reranking, a fusion of stage outputs)."""
    settings = ctx.settings
    last = value.records[-1]

    def score() -> dict[str, Any]:
        run = value.get()
        scorer = ctx.scorer(split)
        codes = scorer.codes([d for docs in run.docs for d in docs])
        counts = np.asarray([len(d) for d in run.docs], dtype=np.int64)
        return scorer.evaluate_packed(list(run.qids), codes, counts,
                                      canonical_metrics(settings.metrics))

    mrec, mout = ctx.run(make_task("metrics", metrics_config(settings.metrics, split),
                                    [value.key], score, codec="arrays"))
    out: dict[str, Any] = {"stages": [*value.records, mrec], "run_hash": last.output_hash,
                           "metrics": _listed_means(mout, settings.metrics),
                           "n_queries": len(ctx.qids(split)),
                           "prompts_sha256": None}
    if settings.chunk_stages:
        def run_of() -> dict[str, Any]:
            return {q: [[d, s] for d, s in hits] for q, hits in value.get().as_dict().items()}

        _chunk_stages(ctx, pt, split, last, run_of, out)
    out["stages"] = [r.as_dict() for r in out["stages"]]
    return out


def _chunk_stages(ctx: RunContext, pt: PipelinePoint, split: str, frec: StageRecord,
                  run_of: Callable[[], dict[str, Any]], out: dict[str, Any]) -> None:
    """The chunk stages of a pipeline point (and its answer stages with a policy), appended
    to ``out``'s records and metrics."""
    prefs, settings = pt.prefs, ctx.settings
    qids = ctx.qids(split)
    questions = {q: ctx.dataset.queries[q] for q in qids}

    def chunk() -> dict[str, Any]:
        run = run_of()
        return compute.chunk_output(ctx.late, ctx.workspace().store, prefs,
                                    [(q, questions[q]) for q in qids], run,
                                    progress=ctx.progress,
                                    desc=f"chunks {split} {ccfg['chunker']}")

    ccfg = chunks_config(prefs, ctx.embedder_id)
    crec, chunks = ctx.run(make_task("chunks", ccfg, [frec.key], chunk), keep=True)
    gold, gold_texts = ctx.gold(qids)
    kcfg = chunk_metrics_config(settings.metrics, settings.chunk_k, split)
    krec, kout = ctx.run(make_task("chunk_metrics", kcfg, [crec.key], lambda: chunk_metrics(
        chunks, ctx.qrels(split), gold, settings.metrics, settings.chunk_k, ctx.scorer(split))),
        keep=True)
    out["stages"] += [crec, krec]
    out["metrics"] = {**out["metrics"], **kout["means"]}
    if pt.policy is None:
        return
    policy = point_policy(pt)
    scfg = selection_config(pt.policy, policy, ctx.index_version, ctx.embedder_id)
    srec, sel = ctx.run(make_task("selection", scfg, [crec.key], lambda: (
        compute.selection_output(chunks, questions, policy, ctx.index_version,
                                 str(ctx.embedder_id), prefs.top_k_chunks))), keep=True)
    prec, prompts = ctx.run(make_task("prompt", PROMPT_CONFIG, [srec.key], lambda: (
        compute.prompt_output(sel, questions, policy))), keep=True)
    llm = reader_for_policy(get_llm(settings.reader, **settings.reader_options), policy)
    rcfg = {"name": settings.reader, "options": dict(settings.reader_options),
            "model": getattr(llm, "model_name", None)}
    # a failed generation of an endpoint is kept under a key of its own, asked again next run
    rrec, reader = ctx.run(make_task("reader", rcfg, [prec.key], lambda: (
        compute.reader_output(prompts, llm, policy.reserved_output_tokens)),
        reusable=compute.reader_reusable(llm)), keep=True)
    vrec, valid = ctx.run(make_task("validation", VALIDATION_CONFIG, [prec.key, rrec.key],
                                     lambda: compute.validation_output(prompts, reader)),
                          keep=True)
    arec, aout = ctx.run(make_task("answer_metrics", ANSWER_METRICS_CONFIG,
                                    [crec.key, prec.key, vrec.key],
                                    lambda: compute.answer_metrics_output(
                                        chunks, prompts, valid, gold, gold_texts)), keep=True)
    out["stages"] += [srec, prec, rrec, vrec, arec]
    out["metrics"] = {**out["metrics"], **aout["means"]}
    out["prompts_sha256"] = prompts["prompts_sha256"]


def _listed_means(arrays: dict[str, Any], metrics: Sequence[str]) -> dict[str, float]:
    """The means of a metrics stage's output (computed in canonical order:
    :func:`~aiblox.engine.configs.metrics_config`) in the order ``metrics`` lists them, the
    order they are shown and logged in."""
    means = packed_means(arrays)
    return {m: means[m] for m in metrics}
