"""Small hand-made inputs shared by the answer assembly tests."""

from __future__ import annotations

from typing import Any

from aiblox.assembly import SelectionPolicy, load_policy

QUESTION = "What is the capital of France?"


def policy_v1(**changes: Any) -> SelectionPolicy:
    """R2_POLICY_V1 from evals/policies, optionally with fields changed."""
    policy = load_policy("R2_POLICY_V1")
    return policy.with_updates(**changes) if changes else policy


def result(
    chunk_id: str,
    text: str,
    rank: int,
    *,
    knowledge_id: str | None = None,
    score: float = 0.5,
    source: str | None = None,
) -> dict[str, Any]:
    """One raw retrieval result."""
    return {
        "chunk_id": chunk_id,
        "knowledge_id": knowledge_id or f"k-{chunk_id}",
        "chunk_text": text,
        "rank": rank,
        "similarity_score": score,
        "source_reference": source,
    }


def make_input(results: list[dict[str, Any]], request_id: str = "req-1") -> dict[str, Any]:
    """A raw assembly input with trace fields."""
    return {
        "request_id": request_id,
        "results": results,
        "index_version": "idx-test-1",
        "embedding_model": "test-embedder",
        "retrieval_top_k": 12,
    }


FRANCE = [
    result(
        "c-paris",
        "Paris is the capital and largest city of France.",
        0,
        knowledge_id="france",
        score=0.91,
        source="wiki/France",
    ),
    result(
        "c-lyon",
        "Lyon is the third-largest city of France, on the Rhone.",
        1,
        knowledge_id="lyon",
        score=0.74,
        source="wiki/Lyon",
    ),
    result(
        "c-wine",
        "France produces many wines; Bordeaux is a famous region.",
        2,
        knowledge_id="france",
        score=0.55,
        source="wiki/France",
    ),
]
