"""Input validation: hard-fail conditions of the input contract give FAILED with a reason,
never raise."""

from __future__ import annotations

from typing import Any

import pytest
from assembly_fixtures import QUESTION, make_input, policy_v1, result

from aiblox.assembly import (
    assemble_answer_bundle,
    assembly_input_from_retrieval,
    validate_assembly_input,
)
from aiblox.contracts.retrieval import (
    CandidateItem,
    EvidenceChunk,
    RetrievalBundle,
    RetrievalStats,
)


def _good() -> dict[str, Any]:
    return make_input([result("a", "Alpha text.", 0), result("b", "Beta text.", 1)])


def _without(field: str) -> dict[str, Any]:
    data = _good()
    del data["results"][1][field]
    return data


def _with(field: str, value: Any, index: int = 1) -> dict[str, Any]:
    data = _good()
    data["results"][index][field] = value
    return data


def _trace_without(field: str) -> dict[str, Any]:
    data = _good()
    del data[field]
    return data


CASES = [
    ("missing chunk_id", _without("chunk_id"), "results[1].chunk_id: missing"),
    ("missing knowledge_id", _without("knowledge_id"), "results[1].knowledge_id: missing"),
    ("missing chunk_text", _without("chunk_text"), "results[1].chunk_text: missing"),
    ("missing rank", _without("rank"), "results[1].rank: missing"),
    ("missing similarity", _without("similarity_score"), "results[1].similarity_score: missing"),
    ("null chunk_text", _with("chunk_text", None), "results[1].chunk_text"),
    ("empty chunk_text", _with("chunk_text", ""), "results[1].chunk_text"),
    ("rank as string", _with("rank", "1"), "results[1].rank"),
    ("rank as float", _with("rank", 1.0), "results[1].rank"),
    ("rank as bool", _with("rank", True), "results[1].rank"),
    ("negative rank", _with("rank", -1), "results[1].rank"),
    ("similarity as string", _with("similarity_score", "0.5"), "results[1].similarity_score"),
    ("similarity NaN", _with("similarity_score", float("nan")), "results[1].similarity_score"),
    ("similarity bool", _with("similarity_score", True), "results[1].similarity_score"),
    ("ranks not from 0", _with("rank", 5, index=0), "ranks must start at 0"),
    ("duplicate chunk id", _with("chunk_id", "a"), "duplicate"),
    ("unknown field", _with("page", 3), "results[1].page"),
    ("missing index_version", _trace_without("index_version"), "index_version: missing"),
    ("missing embedding_model", _trace_without("embedding_model"), "embedding_model: missing"),
    ("missing retrieval_top_k", _trace_without("retrieval_top_k"), "retrieval_top_k: missing"),
    ("missing request_id", _trace_without("request_id"), "request_id: missing"),
]


@pytest.mark.parametrize(("data", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hard_fail_conditions(data: dict[str, Any], needle: str) -> None:
    checked = validate_assembly_input(data)
    assert checked.status == "FAILED"
    assert needle in (checked.failure_reason or "")
    bundle = assemble_answer_bundle(QUESTION, data, policy_v1())
    assert bundle.assembly_status == "FAILED"
    assert needle in (bundle.failure_reason or "")
    assert bundle.selected_evidence == [] and bundle.evidence_block_text is None


def test_good_input_and_empty_input() -> None:
    assert validate_assembly_input(_good()).status == "OK"
    empty = make_input([])
    assert validate_assembly_input(empty).status == "OK"
    bundle = assemble_answer_bundle(QUESTION, empty, policy_v1())
    assert bundle.assembly_status == "NO_EVIDENCE"
    assert bundle.failure_reason == "retrieval returned no results"


def test_equal_ranks_are_allowed_and_ordered_by_chunk_id() -> None:
    data = make_input([result("b", "Beta text here.", 0), result("a", "Alpha words there.", 0)])
    bundle = assemble_answer_bundle(QUESTION, data, policy_v1())
    assert [e.chunk_id for e in bundle.selected_evidence] == ["a", "b"]


def _retrieval_bundle(**params: Any) -> RetrievalBundle:
    return RetrievalBundle(
        candidates=[
            CandidateItem(
                item_id="doc1", kind="doc", source="squad", source_ref="squad/doc1", score=1.0
            ),
            CandidateItem(item_id="doc2", kind="doc", source="squad", score=0.5),
        ],
        evidence=[
            EvidenceChunk(item_id="doc1", chunk_id="doc1#0", text="First chunk.", score=0.9),
            EvidenceChunk(item_id="doc2", chunk_id="doc2#0", text="Second chunk.", score=0.4),
            EvidenceChunk(item_id="doc3", chunk_id="doc3#0", text="Third chunk.", score=0.1),
        ],
        stats=RetrievalStats(params=params),
    )


def test_adapter_maps_evidence_chunks() -> None:
    bundle = _retrieval_bundle(index_version="v7", embedder_id="minilm", top_k_chunks=12)
    data = assembly_input_from_retrieval(bundle, request_id="r")
    checked = validate_assembly_input(data)
    assert checked.status == "OK" and checked.assembly_input is not None
    got = checked.assembly_input
    assert [
        (r.chunk_id, r.knowledge_id, r.chunk_text, r.rank, r.similarity_score) for r in got.results
    ] == [
        ("doc1#0", "doc1", "First chunk.", 0, 0.9),
        ("doc2#0", "doc2", "Second chunk.", 1, 0.4),
        ("doc3#0", "doc3", "Third chunk.", 2, 0.1),
    ]
    assert [r.source_reference for r in got.results] == ["squad/doc1", "squad", None]
    assert (got.index_version, got.embedding_model, got.retrieval_top_k) == ("v7", "minilm", 12)


def test_adapter_missing_trace_or_chunk_id_fails_as_data() -> None:
    bundle = _retrieval_bundle()
    checked = validate_assembly_input(assembly_input_from_retrieval(bundle, request_id="r"))
    assert checked.status == "FAILED"
    assert "index_version: missing" in (checked.failure_reason or "")
    explicit = assembly_input_from_retrieval(
        bundle, request_id="r", index_version="v", embedding_model="m", retrieval_top_k=3
    )
    assert validate_assembly_input(explicit).status == "OK"
    no_id = bundle.model_copy(
        update={"evidence": [EvidenceChunk(item_id="x", text="t", score=1.0)]}
    )
    checked = validate_assembly_input(
        assembly_input_from_retrieval(
            no_id, request_id="r", index_version="v", embedding_model="m", retrieval_top_k=3
        )
    )
    assert checked.status == "FAILED" and "results[0].chunk_id" in (checked.failure_reason or "")
