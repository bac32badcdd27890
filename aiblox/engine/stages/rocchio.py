"""``rocchio``: dense pseudo-relevance feedback, the query's vector moved toward the mean of its
top documents' vectors.

Li, Mourad, Zhuang, Koopman and Zuccon, "Pseudo Relevance Feedback with Deep Language Models and
Dense Retrievers: Successes and Pitfalls" (arXiv 2108.11044, 2021; ACM TOIS 2023), Rocchio's
method on dense representations, as Pyserini runs it (``DenseVectorRocchioPrf``,
castorini/pyserini ``pyserini/search/faiss/_prf.py``)::

    q' = alpha * q + beta * mean(d_1, ..., d_k)

where ``q`` is the query's vector and ``d_1..d_k`` are the vectors of the first ``k`` documents
of the query's run. Defaults are the setting the paper's reproduction guide runs on every model
and collection (castorini/pyserini ``docs/experiments-vector-prf.md``, "Rocchio PRF 5 A0.4
B0.6": ``--prf-depth 5 --rocchio-alpha 0.4 --rocchio-beta 0.6``); Pyserini's command line
defaults to alpha 0.9, beta 0.1. The paper's Average PRF, the mean of the query and its ``k``
documents, is ``alpha = 1, beta = k`` (the same direction, so the same run under ``cosine`` and
``ip``). The paper's Rocchio has no negative term; later Pyserini versions add one (``gamma``
over the bottom documents, ``--rocchio-bottomk``, off by default), not studied in the paper,
and left out here.

- ``q``: the vector the queries carry (feedback after feedback), else the embedder's embedding
  of the query text, through the store's embedding cache (the vector plain ``dense`` searches).
- ``d_i``: the store's item vectors of the spec's embedder as its vector index holds them
  (:mod:`aiblox.indexes.item_vectors`; never embedded again): L2-normalised under ``cosine``,
  as stored under ``ip`` and ``l2``. A query whose run holds fewer than ``k`` documents uses
  those it has; one with none keeps ``alpha * q``.
- Under ``cosine`` the vectors are combined as the index compares them, unit vectors: the
  documents' mean is scaled to the query vector's length, ``q' = alpha * q + beta * |q| *
  mean(d_i)``, which points where ``alpha * q/|q| + beta * mean(d_i)`` points; the index
  L2-normalises every query at search, so that direction is all it sees. With ``beta = 0`` and
  ``alpha = 1`` the query's vector is the embedder's, bit for bit, and ``dense`` after it gives
  the plain dense run. Under ``ip`` and ``l2`` the vectors are combined as they are (Pyserini's
  inner-product indexes).

``dense`` after it searches the new vectors (:func:`aiblox.engine.retrieval.retrieve`), exactly or
through HNSW as its settings say. Arithmetic in float64, rounded to float32 once.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from aiblox.engine.data import Queries
from aiblox.engine.plan import StageInputs
from aiblox.engine.registry import StageFacts, register_stage
from aiblox.engine.retrieval import StageContext
from aiblox.indexes.item_vectors import exact_index, positions

__all__ = ["RocchioConfig", "query_vectors", "rocchio", "rocchio_vectors"]


class RocchioConfig(BaseModel):
    """``rocchio``: dense pseudo-relevance feedback (Li et al. 2021; module doc)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True,
                              allow_inf_nan=False)

    k: int = Field(default=5, ge=1)
    """Feedback documents: the first ``k`` of each query's run (the paper's setting: 5)."""
    alpha: float = Field(default=0.4, ge=0.0)
    """The query vector's weight (the paper's setting: 0.4)."""
    beta: float = Field(default=0.6, ge=0.0)
    """The weight of the feedback documents' mean vector (the paper's setting: 0.6); 0 gives
    the query's own vector back."""
    distance: Literal["cosine", "ip", "l2"] = "cosine"
    """The vector index's similarity (the ``dense`` stage's ``distance``): which form of the
    documents' vectors is averaged (unit vectors for ``cosine``)."""

    @model_validator(mode="after")
    def _some_weight(self) -> RocchioConfig:
        if self.alpha == 0 and self.beta == 0:
            raise ValueError("alpha and beta are both 0: the query would have no vector")
        return self


def _check(cfg: RocchioConfig, facts: StageFacts) -> int | None:
    """Refuse more feedback documents than the incoming run holds."""
    if facts.depth is not None and cfg.k > facts.depth:
        raise ValueError(f"k = {cfg.k} feedback documents but its input run holds at most "
                         f"{facts.depth} documents per query")
    if facts.n_docs is not None and cfg.k > facts.n_docs:
        raise ValueError(f"k = {cfg.k} feedback documents but the store holds {facts.n_docs}")
    return None


def query_vectors(queries: Queries, embedder: Any) -> np.ndarray:
    """``(n, dim)`` float32: the vectors ``queries`` carry (after dense feedback), else the
    embedder's embeddings of their texts (through its cache: the vectors plain ``dense``
    searches)."""
    if queries.vectors is not None:
        return np.asarray(queries.vectors, dtype=np.float32)
    if not len(queries):
        return np.zeros((0, int(embedder.dim)), dtype=np.float32)
    return np.asarray(embedder.embed(list(queries.texts)), dtype=np.float32)


def rocchio_vectors(q: np.ndarray, docs: list[np.ndarray], alpha: float, beta: float,
                    distance: str) -> np.ndarray:
    """``alpha * q + beta * mean(docs)`` per query (``docs[i]``: the ``(k_i, dim)`` vectors of
    query ``i``'s feedback documents, as the index holds them); under ``cosine`` the mean scaled
    to the query's length (module doc). float64 arithmetic, float32 result."""
    q64 = np.asarray(q, dtype=np.float64)
    out = alpha * q64
    for i, d in enumerate(docs):
        if beta == 0 or not len(d):
            continue
        mean = np.asarray(d, dtype=np.float64).mean(axis=0)
        if distance == "cosine":
            mean = mean * np.linalg.norm(q64[i])
        out[i] = out[i] + beta * mean
    with np.errstate(over="ignore", invalid="ignore"):
        low = out.astype(np.float32)
        # the index squares each query's components in float32 to normalise it
        squares = np.einsum("ij,ij->i", low, low) if low.size else low.sum(axis=1)
    if not bool(np.isfinite(squares).all()):
        raise ValueError(f"rocchio: alpha {alpha!r} and beta {beta!r} move a query vector past "
                         f"the largest 32-bit float (vectors are float32); only their ratio "
                         f"points it under cosine, scale them down")
    return low


@register_stage("rocchio", version="1", takes="run", gives="queries", carries="vector",
                config=RocchioConfig,
                reads=["items", "vectors", "embedder"], check=_check,
                doc="dense feedback: the query vector moved toward its top k documents' "
                    "(Rocchio; alpha, beta, k)")
def rocchio(cfg: RocchioConfig, inputs: StageInputs, ctx: StageContext) -> Queries:
    """Each query's vector moved toward the mean vector of its run's first ``k`` documents."""
    assert inputs.run is not None
    queries = inputs.queries
    emb = ctx.embedder
    index = exact_index(ctx.indexes, emb.model_id, cfg.distance)
    q = query_vectors(queries, emb)
    run = inputs.run.as_dict()
    docs = []
    for qid in queries.qids:
        top = [d for d, _ in run.get(qid, [])[:cfg.k]]
        docs.append(np.asarray(index.vectors[positions(index, top)]) if top
                    else np.zeros((0, q.shape[1]), dtype=np.float32))
    return queries.with_vectors(rocchio_vectors(q, docs, cfg.alpha, cfg.beta, cfg.distance))
