"""A sweep's fusion points computed many at a time: before the points of a batch run one by
one, the fusion and metrics outputs they will compute are computed together, one compiled pass
per split, signals, depth and blend (:meth:`aiblox.metrics.QrelsScorer.score_fusions`: the
same bytes as each point's own fusion and metrics stages), and handed to the points as outputs
computed ahead (:meth:`aiblox.engine.context.RunContext.ready`). While one batch's points run,
the next batch is computed on a worker thread (:func:`batches_ahead`).

Nothing about a point changes: its stages run in order, are keyed, stored or recorded,
counted and hashed as before; only their compute is a lookup. One pass over many settings
keeps both cores busy where a point's own kernels, a millisecond each, spend much of it
waking threads (``benchmarks/README.md``, "Fusion sweep", 2026-11-29).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiblox.compiled import compiled_threads, usable_cores
from aiblox.contracts.retrieval import ScoringConfig
from aiblox.engine.cache_bytes import HashedArrays
from aiblox.engine.configs import metrics_config
from aiblox.engine.context import RunContext
from aiblox.engine.settings import PipelinePoint
from aiblox.engine.task import STAGE_VERSIONS, stage_key
from aiblox.fusion import BatchFusion
from aiblox.metrics import QrelsScorer, canonical_metrics

__all__ = ["AHEAD_BYTES", "AHEAD_POINTS", "AheadGroup", "batches_ahead", "compute_groups",
           "plan_ahead", "point_batches"]

AHEAD_POINTS = 64
"""Points computed ahead at a time, at most."""
AHEAD_BYTES = 256 * 2**20
"""The fused runs a batch holds until its points run, at most (about 1.3 MB a point on
scifact's two splits, 100 kept: batches of 64; 10,000 queries: batches of 17)."""


def point_batches(ctx: RunContext, points: Sequence[PipelinePoint]
                  ) -> Iterator[Sequence[PipelinePoint]]:
    """``points`` in order, in batches of at most :data:`AHEAD_POINTS` points whose fused runs
    (12 bytes a kept hit: position and score) fit in :data:`AHEAD_BYTES`."""
    queries = sum(len(ctx.qids(split)) for split in ctx.splits)
    start, held = 0, 0
    for i, pt in enumerate(points):
        prefs = pt.prefs
        size = 12 * queries * min(prefs.top_k_items, prefs.fts.top_k + prefs.vector.top_k)
        if i > start and (i - start >= AHEAD_POINTS or held + size > AHEAD_BYTES):
            yield points[start:i]
            start, held = i, 0
        held += size
    if start < len(points):
        yield points[start:]


@dataclass(frozen=True)
class AheadGroup:
    """Fusion settings of one split, signals, depth and blend, ready to compute on any thread
    (their normalised scores made on the planning one)."""

    scorer: QrelsScorer
    index: BatchFusion
    codes: np.ndarray
    top_k: int
    metrics: list[str]
    members: list[tuple[ScoringConfig, str, str]]
    """Per setting: its scoring, fusion key, metrics key."""


def plan_ahead(ctx: RunContext, points: Sequence[PipelinePoint]) -> list[AheadGroup]:
    """The fusion and metrics outputs of ``points`` the stage cache lacks, grouped (hybrid
    fusion points: a point with a retrieval pipeline or a single signal computes its own).
    Reads and builds what the groups need (indexes, document codes, normalised scores)."""
    metrics = canonical_metrics(ctx.settings.metrics)  # as a point's metrics stage has them
    groups: dict[tuple[Any, ...], list[tuple[ScoringConfig, str, str]]] = {}
    for pt in points:
        prefs = pt.prefs
        if pt.pipeline is not None or prefs.mode != "hybrid":
            continue
        for split in ctx.splits:
            skey = ctx.plan_signals(prefs, split)
            fkey = ctx.fusion_stage(prefs, split, skey).key
            mkey = stage_key("metrics", STAGE_VERSIONS["metrics"], metrics_config(metrics, split),
                             [fkey])
            if ctx.cache.has("fusion", fkey) and ctx.cache.has("metrics", mkey):
                continue
            s = prefs.scoring
            blend = ("rrf",) if s.blend == "rrf" else ("linear", s.normalize, s.missing)
            groups.setdefault((split, skey, prefs.top_k_items, blend), []).append(
                (s, fkey, mkey))
    out = []
    for (split, skey, top_k, _), members in groups.items():
        index = ctx.fusion_index(split, skey)
        index.blend_inputs(members[0][0])
        out.append(AheadGroup(ctx.scorer(split), index, ctx.codes(split, skey), top_k, metrics,
                              members))
    return out


def compute_groups(groups: Sequence[AheadGroup], pool: Executor
                   ) -> list[tuple[str, str, Any]]:
    """``(stage, key, output)`` of every output of ``groups``: each group's settings in one
    compiled pass, each fused run hashed on ``pool`` (sha256 releases the GIL)."""
    out: list[tuple[str, str, Any]] = []
    for g in groups:
        scored = g.scorer.score_fusions(g.index, [s for s, _, _ in g.members], g.top_k,
                                        g.codes, g.metrics)
        hashed = pool.map(HashedArrays, [fused.as_dict() for fused, _ in scored])
        for (_, fkey, mkey), (_, values), fused in zip(g.members, scored, hashed, strict=True):
            out.append(("fusion", fkey, fused))
            if values is not None:
                out.append(("metrics", mkey, values))
    return out


def batches_ahead(ctx: RunContext, points: Sequence[PipelinePoint], jobs: int | None = None
                  ) -> Iterator[Sequence[PipelinePoint]]:
    """``points`` in :func:`point_batches`, each yielded with its outputs computed ahead and
    handed to ``ctx`` (:meth:`~aiblox.engine.context.RunContext.ready`; forgotten once the
    caller asks for the next batch). While the caller runs one batch's points, the next batch
    is computed on a worker thread (its kernel releases the GIL), where numba's threading layer
    takes parallel kernels from two threads at once (OpenMP, TBB); else one batch after the
    other. ``jobs``: the worker's numba threads (:func:`~aiblox.compiled.compiled_threads`)."""
    batches = list(point_batches(ctx, points))
    with ThreadPoolExecutor(max(1, usable_cores())) as pool, \
            ThreadPoolExecutor(1) as worker:
        def compute(groups: list[AheadGroup]) -> list[tuple[str, str, Any]]:
            with compiled_threads(jobs):  # numba's thread count is per calling thread
                return compute_groups(groups, pool)

        pending: Future[list[tuple[str, str, Any]]] | None = None
        for k, batch in enumerate(batches):
            outputs = (pending.result() if pending is not None
                       else compute(plan_ahead(ctx, batch)))
            pending = None
            if k + 1 < len(batches) and _two_callers_safe():
                pending = worker.submit(compute, plan_ahead(ctx, batches[k + 1]))
            for name, key, output in outputs:
                ctx.ready(name, key, output)
            yield batch
            ctx.drop_ready()


def _two_callers_safe() -> bool:
    """Whether numba's threading layer (known once a parallel kernel ran) takes parallel
    kernels from two threads at once: OpenMP and TBB do, the workqueue aborts the process."""
    import numba

    try:
        return numba.threading_layer() in ("omp", "tbb")
    except ValueError:  # no parallel kernel ran yet
        return False
