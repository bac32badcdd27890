"""Step 1 of answer assembly: the retriever's :class:`RetrievalBundle` as assembly input.

``EvidenceChunk`` maps as ``item_id -> knowledge_id``, ``chunk_id -> chunk_id``,
``text -> chunk_text``, position in ``bundle.evidence -> rank`` (0-based) and
``score -> similarity_score``. The source reference is the matching candidate's ``source_ref``,
else its ``source``. The result is a plain mapping, so a missing value (a ``None`` chunk id, a
missing trace field) is reported by :func:`validate_assembly_input` as FAILED instead of raising.

Trace fields not given explicitly are looked up in ``bundle.stats.params``: ``index_version``;
``embedding_model``, ``embedder_id`` or ``embedder``; ``retrieval_top_k`` or ``top_k_chunks``.
"""

from __future__ import annotations

from typing import Any

from aiblox.contracts.retrieval import RetrievalBundle

__all__ = ["assembly_input_from_retrieval"]

_TRACE_KEYS: dict[str, tuple[str, ...]] = {
    "index_version": ("index_version",),
    "embedding_model": ("embedding_model", "embedder_id", "embedder"),
    "retrieval_top_k": ("retrieval_top_k", "top_k_chunks"),
}


def _from_params(params: dict[str, Any], field: str) -> Any:
    for key in _TRACE_KEYS[field]:
        if params.get(key) is not None:
            return params[key]
    return None


def assembly_input_from_retrieval(
    bundle: RetrievalBundle,
    *,
    request_id: str,
    index_version: str | None = None,
    embedding_model: str | None = None,
    retrieval_top_k: int | None = None,
) -> dict[str, Any]:
    """Assembly input mapping for ``bundle`` (validate it with ``validate_assembly_input``)."""
    sources: dict[str, str] = {}
    for cand in bundle.candidates:
        ref = cand.source_ref or cand.source
        if ref and cand.item_id not in sources:
            sources[cand.item_id] = ref
    params = bundle.stats.params
    data: dict[str, Any] = {
        "request_id": request_id,
        "results": [
            {
                "chunk_id": ev.chunk_id,
                "knowledge_id": ev.item_id,
                "chunk_text": ev.text,
                "rank": rank,
                "similarity_score": ev.score,
                "source_reference": sources.get(ev.item_id),
            }
            for rank, ev in enumerate(bundle.evidence)
        ],
    }
    for field, explicit in (
        ("index_version", index_version),
        ("embedding_model", embedding_model),
        ("retrieval_top_k", retrieval_top_k),
    ):
        value = explicit if explicit is not None else _from_params(params, field)
        if value is not None:
            data[field] = value
    return data
