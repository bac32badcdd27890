"""Steps 1 to 3 of answer assembly: raw input and a question to an :class:`AnswerBundle`.

Order (the seed's "correct production order"): input validation (step 1) with the prompt contract
already frozen and the policy loaded; question normalisation and its token cap; the fixed prompt
overhead checked against the total budget; chunk selection with sanitisation (step 2); anchors
after ordering and the evidence block (step 3). Every failure is a status on the returned bundle.
The prompt builder (step 4) takes the bundle on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from aiblox.assembly.anchoring.citation_anchors import anchor_map
from aiblox.assembly.input.validation import validate_assembly_input
from aiblox.assembly.policy import SelectionPolicy
from aiblox.assembly.prompt.contract import PROMPT_CONTRACT_VERSION, render_prompt
from aiblox.assembly.records import (
    AnswerBundle,
    AssemblyInput,
    AssemblyTrace,
)
from aiblox.assembly.sanitize import normalize_question
from aiblox.assembly.selection.chunk_selection import select_chunks
from aiblox.assembly.selection.outcome import build_metrics
from aiblox.hashing import sha256_text
from aiblox.text.tokens import count_tokens

__all__ = ["assemble_answer_bundle", "build_metrics", "normalize_question"]


def _failed(request_id: str, reason: str, trace: AssemblyTrace | None = None) -> AnswerBundle:
    return AnswerBundle(
        request_id=request_id or "unknown",
        assembly_status="FAILED",
        failure_reason=reason,
        trace=trace,
    )


def assemble_answer_bundle(
    question: str, raw_input: AssemblyInput | Mapping[str, Any], policy: SelectionPolicy
) -> AnswerBundle:
    """Run steps 1 to 3 and return the AnswerBundle (status OK, NO_EVIDENCE or FAILED)."""
    request_id = (
        raw_input.request_id
        if isinstance(raw_input, AssemblyInput)
        else str(raw_input.get("request_id") or "unknown")
    )
    checked = validate_assembly_input(raw_input)
    if checked.status == "FAILED" or checked.assembly_input is None:
        return _failed(request_id, f"invalid input: {checked.failure_reason}")
    inp = checked.assembly_input
    enc = policy.token_encoding
    q = normalize_question(question)
    trace = AssemblyTrace(
        index_version=inp.index_version,
        policy_version=policy.policy_version,
        policy_sha256=policy.sha256(),
        embedding_model=inp.embedding_model,
        retrieval_top_k=inp.retrieval_top_k,
        thresholds=policy.thresholds(),
        sanitization_mode=policy.sanitization_mode,
        ordering_mode=policy.ordering_mode,
        prompt_contract_version=PROMPT_CONTRACT_VERSION,
        token_encoding=enc,
        question_sha256=sha256_text(q),
    )
    if not q:
        return _failed(inp.request_id, "question is empty after normalisation", trace)
    q_tokens = count_tokens(q, enc)
    if q_tokens > policy.max_question_tokens:
        return _failed(
            inp.request_id,
            f"question has {q_tokens} tokens, over "
            f"max_question_tokens={policy.max_question_tokens}",
            trace,
        )
    overhead = count_tokens(render_prompt("", q), enc)
    room = policy.max_total_prompt_tokens - policy.reserved_output_tokens - overhead
    if room <= 0:
        return _failed(
            inp.request_id,
            f"prompt without evidence needs {overhead} tokens + {policy.reserved_output_tokens} "
            f"reserved, over max_total_prompt_tokens={policy.max_total_prompt_tokens}",
            trace,
        )
    budget = min(policy.max_evidence_tokens, room)
    if not inp.results:
        return AnswerBundle(
            request_id=inp.request_id,
            assembly_status="NO_EVIDENCE",
            failure_reason="retrieval returned no results",
            trace=trace,
            metrics=build_metrics(
                retrieved_k=0,
                selected=[],
                dropped=[],
                evidence_token_count=0,
                evidence_token_budget=budget,
                policy=policy,
            ),
        )
    outcome = select_chunks(inp.results, policy, evidence_token_budget=budget)
    metrics = build_metrics(
        retrieved_k=len(inp.results),
        selected=outcome.selected,
        dropped=outcome.dropped,
        evidence_token_count=outcome.evidence_token_count,
        evidence_token_budget=budget,
        policy=policy,
    )
    if not outcome.selected:
        summary = ", ".join(f"{k}={v}" for k, v in metrics.drop_reasons.items() if v)
        return AnswerBundle(
            request_id=inp.request_id,
            assembly_status="NO_EVIDENCE",
            failure_reason=f"no evidence survived selection ({summary})",
            trace=trace,
            metrics=metrics,
        )
    try:
        return AnswerBundle(
            request_id=inp.request_id,
            assembly_status="OK",
            selected_evidence=outcome.selected,
            anchor_map=anchor_map(outcome.selected),
            allowed_anchors=[ev.citation_anchor for ev in outcome.selected],
            evidence_block_text=outcome.evidence_block_text,
            evidence_block_sha256=sha256_text(outcome.evidence_block_text),
            trace=trace,
            metrics=metrics,
        )
    except ValidationError as err:  # a broken invariant is a FAILED bundle, not a crash
        return _failed(inp.request_id, f"output contract violated: {err.errors()[0]['msg']}", trace)
