"""answer_question: RetrievalBundle to validated answer, end to end, offline."""

from __future__ import annotations

import ast
from pathlib import Path

import aiblox.assembly as assembly
from aiblox.assembly import (
    DROP_REASONS,
    REFUSAL_TEXT,
    ExtractiveLLM,
    LLMExecutionResult,
    answer_question,
    load_policy,
)
from aiblox.contracts.retrieval import (
    CandidateItem,
    EvidenceChunk,
    RetrievalBundle,
    RetrievalStats,
)
from aiblox.hashing import sha256_text

PACKAGE = Path(assembly.__file__).parent


def _bundle(*extra: EvidenceChunk) -> RetrievalBundle:
    return RetrievalBundle(
        candidates=[
            CandidateItem(
                item_id="fr", kind="doc", source="wiki", source_ref="wiki/France", score=1.0
            )
        ],
        evidence=[
            EvidenceChunk(
                item_id="fr",
                chunk_id="fr#0",
                text="Paris is the capital of France.\nIt is on the Seine.",
                score=0.9,
            ),
            EvidenceChunk(
                item_id="fr",
                chunk_id="fr#1",
                text="Paris is the capital of France. It is on the Seine.",
                score=0.8,
            ),
            EvidenceChunk(item_id="de", chunk_id="de#0", text="Berlin is in Germany.", score=0.3),
            *extra,
        ],
        stats=RetrievalStats(
            params={"index_version": "idx-9", "embedder_id": "minilm", "top_k_chunks": 12}
        ),
    )


def test_answer_with_citations_and_every_artifact() -> None:
    policy = load_policy("R2_POLICY_V1")
    result = answer_question("What is the capital of France?", _bundle(), policy, ExtractiveLLM())
    assert result.answer_text == "Paris is the capital of France. [C0]"
    assert result.validation.cited_chunk_ids == ["fr#0"]
    assert result.validation.validation_status == "PASSED"
    assert result.answer_bundle.assembly_status == "OK"
    assert [e.chunk_id for e in result.answer_bundle.selected_evidence] == ["fr#0", "de#0"]
    assert result.drop_counts == {**dict.fromkeys(DROP_REASONS, 0), "DROP_DUP": 1}
    assert result.prompt.build_status == "OK"
    assert isinstance(result.llm_result, LLMExecutionResult)
    assert result.llm_result.prompt_sha256 == result.prompt.prompt_sha256
    h = result.hashes
    assert h["prompt_sha256"] == sha256_text(result.prompt.prompt_text)
    assert h["evidence_block_sha256"] == result.answer_bundle.evidence_block_sha256
    assert h["policy_sha256"] == policy.sha256()
    assert h["answer_sha256"] == sha256_text(result.answer_text or "")
    trace = result.answer_bundle.trace
    assert trace is not None and (
        trace.index_version,
        trace.embedding_model,
        trace.retrieval_top_k,
    ) == ("idx-9", "minilm", 12)
    again = answer_question("What is the capital of France?", _bundle(), policy, ExtractiveLLM())
    assert again.request_id == result.request_id  # deterministic default request id
    assert again.hashes == result.hashes


def test_refusal_without_llm_call_when_no_evidence() -> None:
    class Exploding:
        name = "boom"
        model_name = "boom"

        def generate(
            self, prompt_text: str, *, request_id: str, max_output_tokens: int
        ) -> LLMExecutionResult:
            raise AssertionError("the LLM must not be called on NO_EVIDENCE")

    policy = load_policy("R2_POLICY_V1").with_updates(min_similarity_score=0.95)
    result = answer_question("What is the capital of France?", _bundle(), policy, Exploding())
    assert result.answer_bundle.assembly_status == "NO_EVIDENCE"
    assert result.prompt.build_status == "NO_EVIDENCE" and result.prompt.prompt_text == ""
    assert result.llm_result is None
    assert result.answer_text == REFUSAL_TEXT
    assert result.drop_counts["DROP_BELOW_SIMILARITY_FLOOR"] == 3


def test_missing_trace_fields_fail_without_llm_call() -> None:
    bundle = _bundle().model_copy(update={"stats": RetrievalStats()})
    result = answer_question("Q?", bundle, load_policy("R2_POLICY_V1"), ExtractiveLLM())
    assert result.answer_bundle.assembly_status == "FAILED"
    assert "index_version" in (result.answer_bundle.failure_reason or "")
    assert result.llm_result is None and result.answer_text is None
    assert result.validation.validation_status == "FAILED"
    ok = answer_question(
        "What is the capital of France?",
        bundle,
        load_policy("R2_POLICY_V1"),
        ExtractiveLLM(),
        index_version="v",
        embedding_model="m",
        retrieval_top_k=3,
        request_id="given",
    )
    assert ok.request_id == "given" and ok.validation.validation_status == "PASSED"


def test_two_policy_versions_side_by_side() -> None:
    v1, v2 = load_policy("R2_POLICY_V1"), load_policy("R2_POLICY_V2")
    extra = EvidenceChunk(
        item_id="fr",
        chunk_id="fr#2",
        text="Paris is the capital city of France today.",
        score=0.7,
    )
    r1 = answer_question("What is the capital of France?", _bundle(extra), v1, ExtractiveLLM())
    r2 = answer_question("What is the capital of France?", _bundle(extra), v2, ExtractiveLLM())
    assert r1.answer_bundle.trace and r1.answer_bundle.trace.policy_version == "R2_POLICY_V1"
    assert r2.answer_bundle.trace and r2.answer_bundle.trace.policy_version == "R2_POLICY_V2"
    # V2 dedups harder: 6 of fr#2's 8 words are fr#0's, 0.75 > 0.6 but not > 0.8
    assert "fr#2" in [e.chunk_id for e in r1.answer_bundle.selected_evidence]
    assert "fr#2" not in [e.chunk_id for e in r2.answer_bundle.selected_evidence]
    assert r1.hashes["prompt_sha256"] != r2.hashes["prompt_sha256"]


def test_public_api_is_sorted_and_complete() -> None:
    names = assembly.__all__
    assert names == sorted(names)
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(assembly, name), name
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == set(names)


def test_layering_assembly_imports_only_lower_layers() -> None:
    allowed = ("aiblox.assembly", "aiblox.contracts", "aiblox.hashing", "aiblox.inputs",
               "aiblox.text")
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for mod in mods:
                if mod.startswith("aiblox"):
                    assert mod.startswith(allowed), f"{path.relative_to(PACKAGE)} imports {mod}"
