"""``dense_rescore``: the top ``top_n`` documents of any stage's run rescored by the dense model.

The spec's embedder (MiniLM as it is, or the model ``[finetune]`` trained: whatever the
workspace's embedder is) scores each of a query's first ``top_n`` documents by the similarity of
its vector to the query's, as a dense search of the same index would (:mod:`aiblox.indexes.
item_vectors`: the store's item vectors, never embedded again; the same compiled float64 sum, so
with ``alpha = 1`` a document's score is bit for bit its score in a ``dense`` run). The query's
vector is the one its queries carry after dense feedback (``rocchio``), else the embedder's
embedding of its text through the store's embedding cache.

- ``alpha = 1`` (the default): the dense similarity alone, unnormalised.
- ``alpha < 1``: both scores normalised per query over the ``top_n`` documents first (``normalize``:
  :mod:`aiblox.fusion.normalize`, min-max by default, so both lie in [0, 1]), then ``alpha *
  dense + (1 - alpha) * incoming``: the interpolation of a second stage with the first
  (Anserini's and PyTerrier's reranker interpolation). ``alpha = 0`` keeps the incoming order.
- The documents below ``top_n`` are kept, after the rescored ones and in their incoming order
  (so recall at the run's depth does not move): the ``j``-th of them scores ``m - j``, ``m`` the
  lowest rescored score of its query. To drop them, cut first: ``bm25 % 100 >>
  dense_rescore(top_n=100)``.

Each query's rescored documents are ordered by score, ties by document id (the engine's rule).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from aiblox.engine.data import Run
from aiblox.engine.plan import StageInputs
from aiblox.engine.registry import StageFacts, register_stage
from aiblox.engine.retrieval import StageContext
from aiblox.engine.stages.rocchio import query_vectors
from aiblox.fusion.normalize import get_normalizer
from aiblox.indexes.item_vectors import exact_index, positions, prepared_queries, similarities

__all__ = ["DenseRescoreConfig", "dense_rescore", "interpolate"]


class DenseRescoreConfig(BaseModel):
    """``dense_rescore``: the dense model as a second stage (module doc)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    top_n: int = Field(default=100, ge=1)
    """Documents rescored per query: the first ``top_n`` of the incoming run (the rest follow
    in their order)."""
    alpha: float = Field(default=1.0, ge=0.0, le=1.0)
    """The dense score's weight: 1, the dense similarity alone; below 1, interpolated with the
    incoming score, both normalised first."""
    normalize: Literal["minmax", "zscore", "sigmoid"] = "minmax"
    """How both scores are normalised per query before interpolating (``alpha < 1`` only)."""
    distance: Literal["cosine", "ip", "l2"] = "cosine"
    """The similarity (the ``dense`` stage's ``distance``)."""


def _check(cfg: DenseRescoreConfig, facts: StageFacts) -> int | None:
    """Refuse a ``top_n`` deeper than the incoming run; the depth is unchanged."""
    if facts.depth is not None and cfg.top_n > facts.depth:
        raise ValueError(f"top_n = {cfg.top_n} but its input run holds at most {facts.depth} "
                         f"documents per query")
    return facts.depth


def interpolate(dense: list[float], incoming: list[float], alpha: float,
                normalize: str) -> list[float]:
    """``alpha * norm(dense) + (1 - alpha) * norm(incoming)``; ``alpha = 1``: ``dense``
    itself, unnormalised."""
    if alpha == 1.0:
        return list(dense)
    norm = get_normalizer(normalize)
    return [alpha * d + (1.0 - alpha) * s
            for d, s in zip(norm(list(dense)), norm(list(incoming)), strict=True)]


# version 2: a z-score (sigmoid) interpolation of a list of equal scores is 0 (0.5) whatever
# their value (aiblox.fusion.normalize.zscore: 0.1 thrice gave +-1 through its rounded mean)
@register_stage("dense_rescore", version="2", takes="run", gives="run",
                config=DenseRescoreConfig, reads=["items", "vectors", "embedder"], check=_check,
                doc="the dense model rescoring the top top_n of a run (alpha: interpolation "
                    "with its score)")
def dense_rescore(cfg: DenseRescoreConfig, inputs: StageInputs, ctx: StageContext) -> Run:
    """The first ``top_n`` documents of each query reordered by the dense model's score."""
    run = inputs.run
    assert run is not None
    emb = ctx.embedder
    index = exact_index(ctx.indexes, emb.model_id, cfg.distance)
    vectors = dict(zip(inputs.queries.qids, query_vectors(inputs.queries, emb), strict=True))
    if run.qids and set(run.qids) - set(vectors):
        missing = sorted(set(run.qids) - set(vectors))[0]
        raise ValueError(f"dense_rescore: query {missing!r} of the run is not among its "
                         f"queries")
    dim = index.vectors.shape[1] if index.n else emb.dim
    q = (prepared_queries(index, np.stack([vectors[qid] for qid in run.qids]))
         if run.qids else np.zeros((0, dim), dtype=np.float32))
    heads = [docs[:cfg.top_n] for docs in run.docs]
    dense = similarities(index, q, [positions(index, h) for h in heads])
    lists = []
    for docs, scores, head, sim in zip(run.docs, run.scores, heads, dense, strict=True):
        combined = interpolate([float(s) for s in sim], list(scores[:len(head)]), cfg.alpha,
                               cfg.normalize)
        order = sorted(range(len(head)), key=lambda i: (-combined[i], head[i]))
        ranked = [(head[i], combined[i]) for i in order]
        floor = min(combined, default=0.0)
        ranked += [(d, floor - j) for j, d in enumerate(docs[len(head):], start=1)]
        lists.append(ranked)
    return Run.from_lists(run.qids, lists)
