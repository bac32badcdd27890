"""Step 6 of answer assembly: post-generation validation, fail closed; an answer is shown only
when every check passes.

Checks, in order (each failure adds its code to ``failure_codes``):

- ``NO_EVIDENCE``: assembly refused, the LLM was not called; the refusal string is the answer
  (PASSED, ``generation_status=NO_EVIDENCE``);
- ``ASSEMBLY_FAILED``: assembly or the prompt build failed; the LLM was not called;
- ``GENERATION_FAILED``: the LLM call failed; nothing to show;
- ``RESULT_MISMATCH``: the reader's result is not for this bundle's request, or (given the
  prompt) not for the prompt that was built: another prompt's answer is not validated;
- ``EMPTY_ANSWER``: the model returned only whitespace;
- refusal: an answer equal to the refusal string (surrounding whitespace stripped) PASSES with no
  citations; ``REFUSAL_MISMATCH`` when the text contains ``NO_EVIDENCE`` but is not exactly it;
- ``CUT_OFF``: the reader reported that the answer stopped before its end (``finish_reason``
  ``length``: the reserved output tokens ran out; ``content_filter``: the endpoint withheld the
  rest), so its last sentence may be half a claim however well it is cited;
- ``CONTROL_CHARACTER``: control characters (other than tab and line breaks), lone surrogates
  or bidirectional controls, which the sanitiser removes from evidence: an escape sequence
  that would retitle, clear or recolour a terminal, or reorder what a reader sees;
- ``MALFORMED_CITATION``: a citation-like marker that is not exactly ``[C<n>]``, whatever else
  the answer cites (:func:`~aiblox.assembly.prompt.answer_rules.malformed_citations`): an
  anchor-like token in or touching brackets of any kind (``[c0]``, ``[C 1]``, ``[C0, C1]``,
  ``[C0 | ...]``, ``(C9)``, ``【C9】``, ``［Ｃ9］``, ``[C0`` with its bracket missing), a numbered
  reference (``[1]``, ``[2, 3]``) or brackets glued to a marker (``[[C0]]``);
- ``UNKNOWN_ANCHOR``: a ``\\[C\\d+\\]`` marker outside the allowed anchor set (``[C01]`` is not C1);
- ``NO_CITATIONS``: an answer that is not the refusal cites nothing;
- ``NO_CONTENT``: an answer that is not the refusal has no sentence with content (only citation
  markers and punctuation, ``[C0]``): it answers nothing, so it is not shown;
- ``UNCITED_SENTENCE``: a sentence with factual content (a letter or digit outside markers)
  carrying no marker (sentences as :func:`~aiblox.assembly.sentence_split.split_sentences`
  splits them, failing closed on ambiguous boundaries);
- ``METADATA_LEAK``: evidence metadata in the answer: ``chunk_id``/``knowledge_id``/``source=``
  fields, an evidence header, or a selected chunk or knowledge id that none of the evidence texts
  contains (so quoting evidence that happens to contain an id is not a leak);
- ``META_COMMENTARY``: talk about the evidence, the prompt, the instructions or being an AI.
"""

from __future__ import annotations

import re

from aiblox.assembly.prompt.answer_rules import (
    META_COMMENTARY_PATTERN,
    METADATA_PATTERN,
    malformed_citations,
)
from aiblox.assembly.prompt.contract import CITATION_PATTERN, REFUSAL_TEXT
from aiblox.assembly.records import (
    AnswerBundle,
    GroundingMetrics,
    LLMExecutionResult,
    ValidationResult,
)
from aiblox.assembly.sentence_split import split_sentences

__all__ = ["validate_answer"]

_CONTENT = re.compile(r"\w")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff"
                      "\u202a-\u202e\u2066-\u2069]")
"""What :func:`~aiblox.assembly.sanitize.safe_normalize` removes from evidence (categories Cc
and Cs, bidirectional controls), but tab, line feed and carriage return."""
_CUT_OFF = {"length": "the reserved output tokens ran out",
            "content_filter": "the endpoint withheld the rest"}
"""Finish reasons (OpenAI's) of an answer that stopped before its end."""


def _id_pattern(value: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(value)}(?![\w-])")


def _result(
    request_id: str,
    generation_status: str,
    codes: list[str],
    reasons: list[str],
    metrics: GroundingMetrics,
    **fields: object,
) -> ValidationResult:
    if codes:
        return ValidationResult(
            request_id=request_id,
            generation_status=generation_status,  # type: ignore[arg-type]
            validation_status="FAILED",
            failure_reason=reasons[0],
            failure_codes=codes,
            grounding_metrics=metrics,
        )
    return ValidationResult(
        request_id=request_id,
        generation_status=generation_status,  # type: ignore[arg-type]
        validation_status="PASSED",
        grounding_metrics=metrics,
        **fields,  # type: ignore[arg-type]
    )


def _refusal(request_id: str, generation_status: str) -> ValidationResult:
    """The strict refusal: PASSED, every (zero) claim covered, the refusal string as the answer."""
    return _result(request_id, generation_status, [], [],
                   GroundingMetrics(citation_coverage=1.0), is_refusal=True,
                   validated_answer_text=REFUSAL_TEXT)


def _mismatch(bundle: AnswerBundle, llm_result: LLMExecutionResult,
              prompt_sha256: str | None) -> str | None:
    """Why ``llm_result`` is not the answer to this bundle's request (and prompt), or None."""
    if llm_result.request_id != bundle.request_id:
        return (f"the reader's result is for request {llm_result.request_id!r}, not "
                f"{bundle.request_id!r}")
    if prompt_sha256 is not None and llm_result.prompt_sha256 != prompt_sha256:
        return (f"the reader answered a prompt of sha256 {llm_result.prompt_sha256[:16]}..., "
                f"not the prompt built ({prompt_sha256[:16]}...)")
    return None


def validate_answer(
    bundle: AnswerBundle, llm_result: LLMExecutionResult | None,
    prompt_sha256: str | None = None,
) -> ValidationResult:
    """Validate the model's answer against the bundle's anchors and evidence (fail closed);
    given the sha256 of the prompt that was built, the answer must be the one to it."""
    rid = bundle.request_id
    empty = GroundingMetrics()
    if bundle.assembly_status == "NO_EVIDENCE":
        return _refusal(rid, "NO_EVIDENCE")
    if bundle.assembly_status == "FAILED":
        return _result(
            rid, "FAILED", ["ASSEMBLY_FAILED"], [f"assembly failed: {bundle.failure_reason}"], empty
        )
    if llm_result is None or llm_result.generation_status != "OK":
        reason = llm_result.failure_reason if llm_result is not None else "LLM was not called"
        return _result(
            rid, "FAILED", ["GENERATION_FAILED"], [f"generation failed: {reason}"], empty
        )
    mismatch = _mismatch(bundle, llm_result, prompt_sha256)
    if mismatch:
        return _result(rid, "OK", ["RESULT_MISMATCH"], [mismatch], empty)
    text = (llm_result.raw_model_text or "").strip()
    if not text:
        return _result(rid, "OK", ["EMPTY_ANSWER"], ["the answer is empty"], empty)
    if text == REFUSAL_TEXT:
        return _refusal(rid, "OK")

    codes: list[str] = []
    reasons: list[str] = []

    def fail(code: str, reason: str) -> None:
        if code not in codes:
            codes.append(code)
            reasons.append(reason)

    if llm_result.finish_reason in _CUT_OFF:
        fail("CUT_OFF", f"the answer was cut off (finish_reason {llm_result.finish_reason!r}: "
                        f"{_CUT_OFF[llm_result.finish_reason]})")
    control = _CONTROL.search(text)
    if control:
        fail("CONTROL_CHARACTER", f"the answer contains the control character "
                                  f"U+{ord(control.group(0)):04X}")
    if "NO_EVIDENCE" in text:
        fail("REFUSAL_MISMATCH", "the answer contains NO_EVIDENCE but is not the exact refusal")

    allowed = set(bundle.allowed_anchors)
    markers = [m.group(0)[1:-1] for m in CITATION_PATTERN.finditer(text)]
    malformed = malformed_citations(text)
    invalid = [a for a in markers if a not in allowed]
    if malformed:
        fail("MALFORMED_CITATION", f"malformed citation marker {malformed[0]!r}")
    if invalid:
        fail("UNKNOWN_ANCHOR", f"citation [{invalid[0]}] is not in the allowed anchor set")
    if not markers:
        fail("NO_CITATIONS", "the answer has no citation markers")

    sentences = [s for s in split_sentences(text) if _CONTENT.search(CITATION_PATTERN.sub("", s))]
    cited = [
        s
        for s in sentences
        if any(m.group(0)[1:-1] in allowed for m in CITATION_PATTERN.finditer(s))
    ]
    uncited = [s for s in sentences if not CITATION_PATTERN.search(s)]
    if not sentences:
        fail("NO_CONTENT", "the answer has no sentence with content, only markers or punctuation")
    if uncited:
        fail("UNCITED_SENTENCE", f"sentence without citation: {uncited[0][:80]!r}")

    if METADATA_PATTERN.search(text):
        fail("METADATA_LEAK", "the answer contains evidence metadata fields")
    evidence_text = "\n".join(ev.sanitized_text for ev in bundle.selected_evidence)
    for ev in bundle.selected_evidence:
        for value in (ev.chunk_id, ev.knowledge_id):
            pattern = _id_pattern(value)
            if pattern.search(text) and not pattern.search(evidence_text):
                fail("METADATA_LEAK", f"the answer contains the id {value!r}")
    if META_COMMENTARY_PATTERN.search(text):
        fail("META_COMMENTARY", "the answer comments on the evidence, prompt or system")

    unique = list(dict.fromkeys(markers))
    metrics = GroundingMetrics(
        sentence_count=len(sentences),
        cited_sentence_count=len(cited),
        citation_count=len(markers),
        unique_citation_count=len(unique),
        invalid_citation_count=len(invalid),
        malformed_citation_count=len(malformed),
        citation_coverage=(len(cited) / len(sentences)) if sentences else 0.0,
    )
    return _result(
        rid,
        "OK",
        codes,
        reasons,
        metrics,
        validated_answer_text=text,
        validated_citations=unique,
        cited_chunk_ids=[bundle.anchor_map[a] for a in unique if a in bundle.anchor_map],
    )
