"""Step 4 of answer assembly: the exact prompt bytes for an :class:`AnswerBundle`, under the
prompt contract :data:`~aiblox.assembly.prompt.contract.PROMPT_CONTRACT_VERSION`.

- Section order: the frozen sections in the frozen order (system, safety, evidence header,
  evidence block, question header, question, output format); nothing else.
- The question is inserted as received, whitespace-normalised only.
- Final budget loop: ``total = prompt_tokens + reserved_output_tokens`` (``prompt_tokens``
  counts the whole prompt text, so every header is included); while it exceeds
  ``max_total_prompt_tokens`` or the evidence block exceeds ``max_evidence_tokens``, the
  lowest-ranked chunk is dropped (DROP_BUDGET) and the evidence block is rebuilt; the surviving
  anchors do not move, as the dropped chunk is always the last.
- Byte determinism: no timestamps, ids or unordered iteration, so identical inputs give
  identical bytes. The built prompt is parsed back with :func:`parse_prompt` and compared
  with the bundle before it is returned.

The next step is the reader (:mod:`aiblox.assembly.llm`).
"""

from __future__ import annotations

from aiblox.assembly.anchoring.citation_anchors import anchor_map
from aiblox.assembly.anchoring.evidence_block import render_evidence_block
from aiblox.assembly.policy import SelectionPolicy
from aiblox.assembly.prompt.contract import (
    PROMPT_CONTRACT_VERSION,
    TEMPLATE_SHA256,
    PromptContractError,
    load_prompt_contract,
    parse_prompt,
    render_prompt,
)
from aiblox.assembly.records import (
    DROP_BUDGET,
    AnswerBundle,
    DroppedChunk,
    PromptBuildResult,
    SelectedEvidence,
)
from aiblox.assembly.sanitize import normalize_question
from aiblox.assembly.selection.outcome import build_metrics
from aiblox.hashing import sha256_text
from aiblox.text.tokens import count_tokens

__all__ = ["build_prompt"]


def _result(
    bundle: AnswerBundle, policy: SelectionPolicy, status: str, reason: str | None, **fields: object
) -> PromptBuildResult:
    return PromptBuildResult(
        request_id=bundle.request_id,
        prompt_contract_version=PROMPT_CONTRACT_VERSION,
        template_sha256=TEMPLATE_SHA256,
        build_status=status,  # type: ignore[arg-type]
        failure_reason=reason,
        reserved_output_tokens=policy.reserved_output_tokens,
        max_total_prompt_tokens=policy.max_total_prompt_tokens,
        **fields,  # type: ignore[arg-type]
    )


def _rebundle(
    bundle: AnswerBundle,
    policy: SelectionPolicy,
    kept: list[SelectedEvidence],
    dropped: list[SelectedEvidence],
    block: str,
    block_tokens: int,
) -> AnswerBundle:
    """The bundle after the final budget loop dropped ``dropped`` (its tail): evidence, block
    and metrics."""
    metrics = bundle.metrics
    all_dropped = [
        *metrics.dropped,
        *(DroppedChunk(chunk_id=ev.chunk_id, rank=ev.rank, reason=DROP_BUDGET) for ev in dropped),
    ]
    new_metrics = build_metrics(
        retrieved_k=metrics.retrieved_k,
        selected=kept,
        dropped=all_dropped,
        evidence_token_count=block_tokens if kept else 0,
        evidence_token_budget=metrics.evidence_token_budget,
        policy=policy,
    )
    if not kept:
        return AnswerBundle(
            request_id=bundle.request_id,
            assembly_status="NO_EVIDENCE",
            failure_reason="no evidence fits the total prompt budget (PB4)",
            trace=bundle.trace,
            metrics=new_metrics,
        )
    return bundle.model_copy(
        update={
            "selected_evidence": kept,
            "anchor_map": anchor_map(kept),
            "allowed_anchors": [ev.citation_anchor for ev in kept],
            "evidence_block_text": block,
            "evidence_block_sha256": sha256_text(block),
            "metrics": new_metrics,
        }
    )


def build_prompt(
    bundle: AnswerBundle, question: str, policy: SelectionPolicy
) -> tuple[AnswerBundle, PromptBuildResult]:
    """Build the exact prompt for an AnswerBundle.

    Returns the bundle as it stands after the final budget loop (the same object when nothing was
    dropped) and the PromptBuildResult. A NO_EVIDENCE bundle gives ``build_status=NO_EVIDENCE``
    with an empty ``prompt_text``; a FAILED bundle, a policy or question that differs from the
    one the bundle was assembled with, or a prompt that does not parse back gives FAILED.
    """
    if bundle.assembly_status == "FAILED":
        return bundle, _result(
            bundle, policy, "FAILED", f"assembly failed: {bundle.failure_reason}"
        )
    if bundle.assembly_status == "NO_EVIDENCE":
        return bundle, _result(bundle, policy, "NO_EVIDENCE", bundle.failure_reason)
    assert bundle.trace is not None  # guaranteed by AnswerBundle's validator
    if bundle.trace.policy_sha256 != policy.sha256():
        return bundle, _result(
            bundle, policy, "FAILED", "policy differs from the one the bundle was assembled with"
        )
    q = normalize_question(question)
    if sha256_text(q) != bundle.trace.question_sha256:
        return bundle, _result(
            bundle, policy, "FAILED", "question differs from the one the bundle was assembled with"
        )
    if render_evidence_block(bundle.selected_evidence) != bundle.evidence_block_text:
        return bundle, _result(
            bundle, policy, "FAILED", "evidence_block_text does not match the selected evidence"
        )
    enc = policy.token_encoding
    kept = list(bundle.selected_evidence)
    dropped: list[SelectedEvidence] = []
    while True:
        block = render_evidence_block(kept)
        prompt = render_prompt(block, q)
        block_tokens = count_tokens(block, enc)
        prompt_tokens = count_tokens(prompt, enc)
        total = prompt_tokens + policy.reserved_output_tokens
        if total <= policy.max_total_prompt_tokens and block_tokens <= policy.max_evidence_tokens:
            break
        dropped.insert(0, kept.pop())
        if not kept:
            break
    if dropped:
        bundle = _rebundle(bundle, policy, kept, dropped, block, block_tokens)
        if not kept:
            build = _result(
                bundle,
                policy,
                "NO_EVIDENCE",
                bundle.failure_reason,
                final_budget_dropped_count=len(dropped),
            )
            return bundle, build
    try:
        parsed = parse_prompt(prompt)
    except PromptContractError as err:
        return bundle, _result(bundle, policy, "FAILED", f"prompt structure: {err}")
    if parsed.question != q or [e.text for e in parsed.evidence] != [
        ev.sanitized_text for ev in kept
    ]:
        return bundle, _result(bundle, policy, "FAILED", "prompt does not parse back to its inputs")
    contract = load_prompt_contract()
    build = _result(
        bundle,
        policy,
        "OK",
        None,
        prompt_text=prompt,
        prompt_sha256=sha256_text(prompt),
        prompt_bytes=len(prompt.encode("utf-8")),
        question_text=q,
        system_tokens=count_tokens(contract.system_section, enc),
        safety_tokens=count_tokens(contract.safety_section, enc),
        evidence_tokens=block_tokens,
        question_tokens=count_tokens(q, enc),
        output_format_tokens=count_tokens(contract.output_format_section, enc),
        prompt_tokens=prompt_tokens,
        total_prompt_tokens=total,
        final_budget_dropped_count=len(dropped),
    )
    return bundle, build
