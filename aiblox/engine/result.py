"""What a one-point evaluation gives (:class:`EvalResult`), and the two hashes that identify it:
the config hash covers everything that decides the ranking (retrieval preferences without the
query, embedder, backend; a retrieval pipeline), the run hash the ranked lists themselves (query
ids, document ids, order, and the scores a TREC run file of them carries). Both are
canonical-JSON sha256, so they are identical in any process.
"""

from __future__ import annotations

from json.encoder import encode_basestring as json_string  # ensure_ascii=False's writer
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data.trec import trec_scores
from aiblox.embedding.minilm import MiniLMEmbedder
from aiblox.fusion.types import RankedList
from aiblox.hashing import canonical_plain_json, sha256_text

__all__ = ["UNREAD_EMBEDDER", "EvalResult", "config_hash", "run_hash"]


class EvalResult(BaseModel):
    """Scores of one retrieval configuration on one split."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dataset: str
    """Dataset name."""
    split: str
    """Split scored."""
    mode: str
    """bm25, dense or hybrid; ``pipeline`` for a retrieval pipeline (:attr:`pipeline`)."""
    n_queries: int
    """Judged queries scored."""
    metrics: dict[str, float]
    """Mean metric values (ranx names, e.g. ``ndcg@10``)."""
    hashes: dict[str, str]
    """``dataset``, ``config`` and ``run`` sha256 hashes."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds for retrieval and scoring, and queries per second."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The effective configuration (what ``hashes['config']`` covers)."""
    per_query: SkipValidation[dict[str, dict[str, float]]] = Field(default_factory=dict,
                                                                   exclude=True)
    """Per-query metric values ``{metric: {qid: value}}`` (not serialised by default; built by
    the metrics, so not validated again: 10^5 values cost a fifth of a second)."""
    run: SkipValidation[dict[str, RankedList]] = Field(default_factory=dict, exclude=True)
    """The ranked run ``{qid: [(doc_id, score), ...]}`` (not serialised by default; built by
    the retriever, so not validated again)."""
    pipeline: str | None = None
    """The retrieval pipeline's expression (None: the prefs' own retrieval)."""
    stages: SkipValidation[list[dict[str, Any]]] = Field(default_factory=list, exclude=True)
    """The point's stage records in pipeline order (name, version, key, inputs, output hash):
    what a determinism manifest records (not serialised by default)."""
    stage_run_hash: str | None = Field(default=None, exclude=True)
    """The output hash of the stage whose run the metrics scored (a manifest's run hash)."""


UNREAD_EMBEDDER = MiniLMEmbedder.base_id
"""The embedder a config names when nothing of its point reads one (``--mode bm25``): the
default embedder's model id on the CPU, so a BM25 point keeps the hash it has under the default
embedder whatever embedder (and device) its store was built with, as its signals key does."""


def config_hash(prefs: RetrievalPrefs, embedder_id: str | None, backend: str,
                reads_embedder: bool | None = None) -> tuple[str, dict]:
    """Hash of what decides a ranking: prefs without the query (its scoring in canonical form,
    :meth:`~aiblox.contracts.retrieval.ScoringConfig.canonical_for`: a setting its blend, or
    its single-signal mode, does not read is at its default), the embedder and the backend.
    The embedder is :data:`UNREAD_EMBEDDER` when the point reads none: ``reads_embedder``
    False, or None (the prefs' own retrieval) and the mode ``bm25`` (``--embedder hashing``
    ranks what the default does); a caller whose later stages read it (chunking, selection,
    a retrieval pipeline) says True."""
    data = prefs.model_dump(exclude={"query_text", "query_id"})
    data["scoring"] = prefs.scoring.canonical_for(prefs.mode).model_dump()
    if reads_embedder is None:
        reads_embedder = prefs.mode != "bm25"
    config = {
        "prefs": data,
        "embedder": embedder_id if reads_embedder else UNREAD_EMBEDDER,
        "backend": backend,
    }
    # plain data with string keys (a model's dump): the canonical bytes without a rebuild
    return sha256_text(canonical_plain_json(config)), config


def run_hash(run: dict[str, RankedList]) -> str:
    """Hash of a ranked run: query ids, document ids, order and scores as a TREC run file
    carries them (the canonical JSON of ``{qid: [[doc, score], ...]}``, each query's scores
    made strictly decreasing by :func:`aiblox.data.trec.trec_scores`: unchanged unless tied).
    So the run written by ``--save-runs`` and read back has the hash of the run it came from;
    a query that retrieved nothing has no line in a TREC file, so it is left out here too."""
    kept = sorted((q, hits) for q, hits in run.items() if hits)
    if not all(type(q) is str and all(type(h[0]) is str for h in hits) for q, hits in kept):
        return sha256_text(canonical_plain_json(  # ids of another type: json's own route
            {q: [[h[0], s] for h, s in zip(hits, trec_scores([h[1] for h in hits]),
                                           strict=True)] for q, hits in kept}))
    # the same canonical JSON written directly (twice as fast at 10^5 hits): string ids as
    # json.dumps(ensure_ascii=False) writes them, scores (floats, finite: trec_scores) by repr
    enc = json_string
    return sha256_text("{" + ",".join(
        enc(q) + ":[" + ",".join(f"[{enc(h[0])},{s!r}]" for h, s in zip(
            hits, trec_scores([h[1] for h in hits]), strict=True)) + "]"
        for q, hits in kept) + "}")
