"""A sweep's fusion points computed many at a time: before the points of a batch run one by
one, the fusion and metrics outputs they will compute are computed together, one compiled pass
per split, signals, depth and blend (:meth:`aiblox.metrics.QrelsScorer.score_fusions`: the
same bytes as each point's own fusion and metrics stages), and handed to the points as outputs
computed ahead (:meth:`aiblox.engine.context.RunContext.ready`).

Nothing about a point changes: its stages run in order, are keyed, stored or recorded,
counted and hashed as before; only their compute is a lookup. One pass over many settings
keeps both cores busy where a point's own kernels, a millisecond each, spend much of it
starting threads (``benchmarks/README.md``, "Fusion sweep").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiblox.compiled import usable_cores
from aiblox.engine.cache_bytes import HashedArrays
from aiblox.engine.configs import metrics_config
from aiblox.engine.context import RunContext
from aiblox.engine.settings import PipelinePoint
from aiblox.engine.task import STAGE_VERSIONS, stage_key

__all__ = ["AHEAD_BYTES", "AHEAD_POINTS", "ahead_batches", "compute_ahead"]

AHEAD_POINTS = 64
"""Points computed ahead at a time, at most."""
AHEAD_BYTES = 256 * 2**20
"""The fused runs a batch holds until its points run, at most (about 1.3 MB a point on
scifact's two splits, 100 kept: batches of 64; 10,000 queries: batches of 17)."""


def ahead_batches(ctx: RunContext, points: Sequence[PipelinePoint]
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


def compute_ahead(ctx: RunContext, points: Sequence[PipelinePoint]) -> int:
    """Compute ahead the fusion and metrics outputs of ``points`` that the stage cache lacks
    (hybrid fusion points: a point with a retrieval pipeline or a single signal computes its
    own); returns how many fusion outputs were computed."""
    metrics = list(ctx.settings.metrics)
    groups: dict[tuple[Any, ...], list[tuple[Any, str, str]]] = {}
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
    done = 0
    with ThreadPoolExecutor(max(1, usable_cores())) as pool:
        for (split, skey, top_k, _), members in groups.items():
            scored = ctx.scorer(split).score_fusions(
                ctx.fusion_index(split, skey), [s for s, _, _ in members], top_k,
                ctx.codes(split, skey), metrics)
            # a fused run's hash is its output hash (sha256 releases the GIL: on every core)
            hashed = pool.map(HashedArrays, [fused.as_dict() for fused, _ in scored])
            for (_, fkey, mkey), (_, values), fused in zip(members, scored, hashed,
                                                           strict=True):
                ctx.ready("fusion", fkey, fused)
                if values is not None:
                    ctx.ready("metrics", mkey, values)
            done += len(members)
    return done
