"""The whole answer chain in one call: RetrievalBundle and question to a validated answer.

``answer_question`` runs every step of answer assembly: input validation, chunk selection,
anchors and the evidence block (:func:`assemble_answer_bundle`), the prompt build with its final
budget loop (:func:`build_prompt`), the reader (skipped unless the prompt is OK) and answer
validation (:func:`validate_answer`), and returns every artifact with its hashes. It never raises
for the chain's statuses: NO_EVIDENCE gives the refusal without an LLM call, FAILED gives
``answer_text=None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiblox.assembly.answer_bundle import assemble_answer_bundle, normalize_question
from aiblox.assembly.answer_validation.checks import validate_answer
from aiblox.assembly.input.from_retrieval import assembly_input_from_retrieval
from aiblox.assembly.llm.registry import LLM, reader_for_policy
from aiblox.assembly.policy import SelectionPolicy
from aiblox.assembly.prompt.builder import build_prompt
from aiblox.assembly.prompt.contract import TEMPLATE_SHA256
from aiblox.assembly.records import AnswerResult, AssemblyInput, LLMExecutionResult
from aiblox.contracts.retrieval import RetrievalBundle
from aiblox.hashing import sha256_hex, sha256_text

__all__ = ["answer_from_input", "answer_question", "default_request_id"]


def default_request_id(question: str, bundle: RetrievalBundle) -> str:
    """A deterministic request id: sha256 of the question and the evidence chunk ids (16 hex)."""
    return sha256_hex(
        {"question": question, "chunks": [[ev.item_id, ev.chunk_id] for ev in bundle.evidence]}
    )[:16]


def answer_from_input(
    question: str,
    raw_input: AssemblyInput | Mapping[str, Any],
    policy: SelectionPolicy,
    llm: LLM,
) -> AnswerResult:
    """Run the chain from assembly input (typed or a plain mapping); the reader counts tokens
    with the policy's encoding where it follows the policy (:func:`reader_for_policy`)."""
    llm = reader_for_policy(llm, policy)
    bundle = assemble_answer_bundle(question, raw_input, policy)
    bundle, prompt = build_prompt(bundle, question, policy)
    llm_result: LLMExecutionResult | None = None
    if prompt.build_status == "OK":
        llm_result = llm.generate(
            prompt.prompt_text,
            request_id=bundle.request_id,
            max_output_tokens=policy.reserved_output_tokens,
        )
    elif prompt.build_status == "FAILED" and bundle.assembly_status == "OK":
        bundle = bundle.model_copy(
            update={"assembly_status": "FAILED", "failure_reason": prompt.failure_reason}
        )
    validation = validate_answer(bundle, llm_result, prompt.prompt_sha256)
    answer_text = validation.validated_answer_text
    hashes: dict[str, str | None] = {
        "policy_sha256": policy.sha256(),
        "template_sha256": TEMPLATE_SHA256,
        "question_sha256": sha256_text(normalize_question(question)),
        "evidence_block_sha256": bundle.evidence_block_sha256,
        "prompt_sha256": prompt.prompt_sha256,
        "answer_bundle_sha256": sha256_hex(bundle.model_dump(mode="json")),
        "answer_sha256": sha256_text(answer_text) if answer_text is not None else None,
    }
    return AnswerResult(
        request_id=bundle.request_id,
        answer_bundle=bundle,
        prompt=prompt,
        llm_result=llm_result,
        validation=validation,
        answer_text=answer_text,
        drop_counts=dict(bundle.metrics.drop_reasons),
        hashes=hashes,
    )


def answer_question(
    question: str,
    bundle: RetrievalBundle,
    policy: SelectionPolicy,
    llm: LLM,
    *,
    request_id: str | None = None,
    index_version: str | None = None,
    embedding_model: str | None = None,
    retrieval_top_k: int | None = None,
) -> AnswerResult:
    """Answer ``question`` from a retriever's ``bundle``: the whole chain.

    Trace fields not given are read from ``bundle.stats.params`` (see
    :func:`assembly_input_from_retrieval`); a trace field found nowhere fails assembly.
    """
    rid = request_id or default_request_id(question, bundle)
    raw = assembly_input_from_retrieval(
        bundle,
        request_id=rid,
        index_version=index_version,
        embedding_model=embedding_model,
        retrieval_top_k=retrieval_top_k,
    )
    return answer_from_input(question, raw, policy, llm)
