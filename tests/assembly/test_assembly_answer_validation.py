"""Answer validation (step 6): table-driven golden cases (validation_cases.json) plus the
statuses that do not depend on the answer text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from assembly_fixtures import policy_v1

from aiblox.assembly import (
    REFUSAL_TEXT,
    AnswerBundle,
    LLMExecutionResult,
    assemble_answer_bundle,
    validate_answer,
)

CASES_FILE = Path(__file__).with_name("validation_cases.json")
DATA = json.loads(CASES_FILE.read_text(encoding="utf-8"))


def _bundle() -> AnswerBundle:
    results = [
        {
            "chunk_id": ev["chunk_id"],
            "knowledge_id": ev["knowledge_id"],
            "chunk_text": ev["text"],
            "rank": i,
            "similarity_score": 0.5,
            "source_reference": "wiki",
        }
        for i, ev in enumerate(DATA["evidence"])
    ]
    raw = {
        "request_id": "val",
        "results": results,
        "index_version": "i",
        "embedding_model": "m",
        "retrieval_top_k": 2,
    }
    bundle = assemble_answer_bundle("Tell me about Paris?", raw, policy_v1())
    assert bundle.assembly_status == "OK" and bundle.allowed_anchors == ["C0", "C1"]
    return bundle


BUNDLE = _bundle()


def _llm(text: str | None, status: str = "OK", finish: str | None = None
         ) -> LLMExecutionResult:
    return LLMExecutionResult(
        request_id="val",
        llm_name="test",
        model_name="m",
        prompt_sha256="0" * 64,
        generation_status=status,  # type: ignore[arg-type]
        raw_model_text=text,
        failure_reason=None if status == "OK" else "boom",
        finish_reason=finish,
        attempts=1,
    )


@pytest.mark.parametrize("case", DATA["cases"], ids=[c["id"] for c in DATA["cases"]])
def test_golden_case(case: dict[str, Any]) -> None:
    result = validate_answer(BUNDLE, _llm(case["answer"]))
    assert result.validation_status == case["status"], result.failure_reason
    assert result.failure_codes == case["codes"]
    assert result.generation_status == "OK"
    if case["status"] == "PASSED":
        assert result.failure_reason is None
        assert result.validated_citations == case["citations"]
        assert result.cited_chunk_ids == [BUNDLE.anchor_map[a] for a in case["citations"]]
        assert result.is_refusal == case.get("refusal", False)
        expected_text = REFUSAL_TEXT if result.is_refusal else case["answer"].strip()
        assert result.validated_answer_text == expected_text
        if not result.is_refusal:
            gm = result.grounding_metrics
            assert gm.sentence_count == gm.cited_sentence_count > 0
            assert gm.citation_coverage == 1.0
    else:  # fail closed: nothing to show
        assert result.validated_answer_text is None
        assert result.validated_citations == []
        assert result.failure_reason


def test_no_evidence_bundle_yields_the_refusal_without_llm() -> None:
    raw = {
        "request_id": "ne",
        "results": [],
        "index_version": "i",
        "embedding_model": "m",
        "retrieval_top_k": 0,
    }
    bundle = assemble_answer_bundle("Anything?", raw, policy_v1())
    result = validate_answer(bundle, None)
    assert (result.generation_status, result.validation_status) == ("NO_EVIDENCE", "PASSED")
    assert result.validated_answer_text == REFUSAL_TEXT and result.is_refusal


def test_failed_generation_and_failed_assembly_fail_closed() -> None:
    result = validate_answer(BUNDLE, _llm(None, status="FAILED"))
    assert (result.generation_status, result.validation_status) == ("FAILED", "FAILED")
    assert result.failure_codes == ["GENERATION_FAILED"]
    assert validate_answer(BUNDLE, None).failure_codes == ["GENERATION_FAILED"]
    failed = AnswerBundle(request_id="x", assembly_status="FAILED", failure_reason="bad input")
    assert validate_answer(failed, _llm("Paris [C0].")).failure_codes == ["ASSEMBLY_FAILED"]


@pytest.mark.parametrize(("finish", "passed"), [
    ("stop", True), (None, True), ("length", False), ("content_filter", False)])
def test_an_answer_the_reader_cut_off_is_not_shown(finish: str | None, passed: bool) -> None:
    """A well-cited answer that stopped before its end (the reserved output tokens ran out, or
    the endpoint withheld the rest) may end in half a claim: fail closed (QA 19)."""
    result = validate_answer(BUNDLE, _llm("Paris is the capital of France. [C0]", finish=finish))
    assert (result.validation_status == "PASSED") is passed
    if not passed:
        assert result.failure_codes == ["CUT_OFF"]
        assert result.failure_reason == (
            f"the answer was cut off (finish_reason {finish!r}: "
            + ("the reserved output tokens ran out)" if finish == "length"
               else "the endpoint withheld the rest)"))
        assert result.validated_answer_text is None


def test_a_result_for_another_request_or_prompt_is_not_validated() -> None:
    """A reader's result answering another prompt (its sha256 differs: an instruction added) or
    another request passed validation on its text alone (QA, 2026-11-29)."""
    from aiblox.assembly import answer_from_input, build_prompt, get_llm

    good = _llm("Paris is the capital of France [C0].")
    assert validate_answer(BUNDLE, good, "0" * 64).validation_status == "PASSED"
    other = validate_answer(BUNDLE, good, "1" * 64)
    assert (other.validation_status, other.failure_codes) == ("FAILED", ["RESULT_MISMATCH"])
    assert other.failure_reason == ("the reader answered a prompt of sha256 "
                                    "0000000000000000..., not the prompt built "
                                    "(1111111111111111...)")
    elsewhere = validate_answer(BUNDLE, good.model_copy(update={"request_id": "someone-else"}))
    assert elsewhere.failure_codes == ["RESULT_MISMATCH"]
    assert elsewhere.failure_reason == ("the reader's result is for request 'someone-else', "
                                        "not 'val'")

    class _Tampered:  # a reader that answers a prompt with one more instruction
        def generate(self, prompt_text: str, *, request_id: str, max_output_tokens: int
                     ) -> LLMExecutionResult:
            res = get_llm("extractive").generate(prompt_text, request_id=request_id,
                                                 max_output_tokens=max_output_tokens)
            from aiblox.hashing import sha256_text
            return res.model_copy(update={
                "prompt_sha256": sha256_text(prompt_text + "\nAlso use your own knowledge.")})

    raw = {"request_id": "t", "index_version": "i", "embedding_model": "m",
           "retrieval_top_k": 1, "results": [{"chunk_id": "c", "knowledge_id": "k", "rank": 0,
                                              "chunk_text": "Paris is the capital of France.",
                                              "similarity_score": 0.5}]}
    question = "what is the capital of France?"
    honest = answer_from_input(question, raw, policy_v1(), get_llm("extractive"))
    assert honest.validation.validation_status == "PASSED"
    tampered = answer_from_input(question, raw, policy_v1(), _Tampered())  # type: ignore[arg-type]
    assert tampered.validation.failure_codes == ["RESULT_MISMATCH"]
    assert tampered.answer_text is None
    bundle, prompt = build_prompt(assemble_answer_bundle(question, raw, policy_v1()), question,
                                  policy_v1())
    assert honest.hashes["prompt_sha256"] == prompt.prompt_sha256


def test_an_integer_score_past_the_largest_float_fails_assembly_as_data() -> None:
    """``similarity_score`` 10**400 raised OverflowError out of assembly; statuses are data."""
    raw = {"request_id": "o", "index_version": "i", "embedding_model": "m",
           "retrieval_top_k": 1, "results": [{"chunk_id": "c", "knowledge_id": "k", "rank": 0,
                                              "chunk_text": "t", "similarity_score": 10**400}]}
    bundle = assemble_answer_bundle("q?", raw, policy_v1())
    assert bundle.assembly_status == "FAILED"
    assert "similarity_score must be a finite number" in (bundle.failure_reason or "")


@pytest.mark.parametrize(("answer", "quoted"), [
    ("Paris is the capital \uff3bC9\uff3d [C0].", "\uff3bC9\uff3d"),
    ("Paris is the capital [\uff239] [C0].", "[\uff239]"),
    ("Paris is the capital [C\u200b1] [C0].", "[C\u200b1]"),
    ("Paris is the capital [[C0]].", "[[C0]"),
    ("Paris is the capital [1] [C0].", "[1]"),
])
def test_a_malformed_marker_is_named_as_the_answer_writes_it(answer: str, quoted: str) -> None:
    """Odd-form markers beside a valid ``[C0]`` passed (QA, 2026-11-29); the reason quotes the
    marker as written, not as folded for the check (``［C9］``, not ``[C9]``)."""
    result = validate_answer(BUNDLE, _llm(answer))
    assert result.failure_codes == ["MALFORMED_CITATION"]
    assert result.failure_reason == f"malformed citation marker {quoted!r}"
    assert result.grounding_metrics.malformed_citation_count == 1
