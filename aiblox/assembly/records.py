"""The records answer assembly hands from step to step: the input (step 1), the
:class:`AnswerBundle` of selected, anchored evidence (steps 2 and 3), the
:class:`PromptBuildResult` (step 4), the :class:`LLMExecutionResult` (step 5), the
:class:`ValidationResult` (step 6) and the :class:`AnswerResult` of one whole run; and the drop
reason codes of selection.

Field names are the answer assembly seed's input and output schemas, so they are what a stored or
printed record holds. Every model rejects unknown keys. Statuses (``OK``, ``NO_EVIDENCE``,
``FAILED``) and drop reason codes are data carried by these models, never exceptions.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

__all__ = [
    "ANSWER_BUNDLE_VERSION",
    "DROP_BELOW_SIMILARITY_FLOOR",
    "DROP_BUDGET",
    "DROP_DUP",
    "DROP_EMPTY_AFTER_SANITIZE",
    "DROP_PER_KNOWLEDGE_CAP",
    "DROP_REASONS",
    "AnswerBundle",
    "AnswerResult",
    "AssemblyInput",
    "AssemblyMetrics",
    "AssemblyStatus",
    "AssemblyTrace",
    "BuildStatus",
    "DroppedChunk",
    "GenerationStatus",
    "GroundingMetrics",
    "LLMExecutionResult",
    "PromptBuildResult",
    "RetrievalResult",
    "SelectedEvidence",
    "ValidationResult",
    "ValidationStatus",
]

ANSWER_BUNDLE_VERSION = "R2_ANSWER_BUNDLE_V1"

DROP_DUP = "DROP_DUP"
DROP_BUDGET = "DROP_BUDGET"
DROP_PER_KNOWLEDGE_CAP = "DROP_PER_KNOWLEDGE_CAP"
DROP_EMPTY_AFTER_SANITIZE = "DROP_EMPTY_AFTER_SANITIZE"
DROP_BELOW_SIMILARITY_FLOOR = "DROP_BELOW_SIMILARITY_FLOOR"
DROP_REASONS: tuple[str, ...] = (
    DROP_BELOW_SIMILARITY_FLOOR,
    DROP_BUDGET,
    DROP_DUP,
    DROP_EMPTY_AFTER_SANITIZE,
    DROP_PER_KNOWLEDGE_CAP,
)
"""Every drop reason code, sorted; ``AssemblyMetrics.drop_reasons`` always has all of them."""

AssemblyStatus = Literal["OK", "NO_EVIDENCE", "FAILED"]
BuildStatus = Literal["OK", "NO_EVIDENCE", "FAILED"]
GenerationStatus = Literal["OK", "FAILED", "NO_EVIDENCE"]
ValidationStatus = Literal["PASSED", "FAILED"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


# ----------------------------------------------------------------------- step 1: input


class RetrievalResult(_Strict):
    """One retrieval result as assembly receives it (the seed's minimum fields, the source)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, strict=True)

    chunk_id: str = Field(min_length=1)
    """Stable id of the chunk; the anchor map points at it."""
    knowledge_id: str = Field(min_length=1)
    """Id of the knowledge item (document) the chunk was cut from; the diversity cap counts it."""
    chunk_text: str = Field(min_length=1)
    """Raw chunk text as retrieved; sanitised by ``safe_normalize``, never rewritten."""
    rank: StrictInt = Field(ge=0)
    """0-based retrieval rank; the primary ordering key (ties broken by chunk_id)."""
    similarity_score: float
    """Retrieval similarity (higher is better); compared with the policy's similarity gates."""
    source_reference: str | None = None
    """Where the chunk came from (URL, path, dataset name), shown as ``source=`` in evidence."""

    @field_validator("similarity_score", mode="before")
    @classmethod
    def _finite_number(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("similarity_score must be a number")
        try:
            number = float(value)
        except OverflowError:  # an int past the largest float (10**400)
            number = math.inf
        if not math.isfinite(number):
            raise ValueError("similarity_score must be a finite number")
        return number


class AssemblyInput(_Strict):
    """Everything assembly needs from retrieval: the results and the trace fields."""

    request_id: str = Field(min_length=1)
    """Caller's id for this request, echoed into every artifact."""
    results: list[RetrievalResult]
    """Retrieval results; an empty list is treated explicitly as NO_EVIDENCE."""
    index_version: str = Field(min_length=1)
    """Version (or content hash) of the index the results came from."""
    embedding_model: str = Field(min_length=1)
    """Embedding model id used by retrieval."""
    retrieval_top_k: StrictInt = Field(ge=0)
    """Number of chunks retrieval was asked for."""


# ---------------------------------------------- steps 2 and 3: selection and anchoring


class SelectedEvidence(_Strict):
    """One chunk that survived selection, in final evidence order."""

    chunk_id: str
    """Chunk id (from the input)."""
    knowledge_id: str
    """Knowledge item id (from the input)."""
    rank: int
    """Retrieval rank (from the input)."""
    similarity_score: float
    """Retrieval similarity (from the input)."""
    citation_anchor: str
    """``C{n}``, n the position in the final ordered evidence list (assigned after ordering)."""
    sanitized_text: str
    """Chunk text after ``safe_normalize`` (and the per-chunk token cap when truncated)."""
    source_reference: str
    """Source shown in the evidence header (``unknown`` when retrieval had none)."""
    token_count: int
    """Tokens in ``sanitized_text`` under the policy's encoding."""
    truncated: bool = False
    """True when the per-chunk cap (``max_chunk_token_ratio``) cut the text to a word prefix."""


class DroppedChunk(_Strict):
    """One chunk dropped by selection, with its reason code."""

    chunk_id: str
    """Chunk id of the dropped chunk."""
    rank: int
    """Its retrieval rank."""
    reason: str
    """Drop reason code (one of ``DROP_REASONS``)."""


class AssemblyTrace(_Strict):
    """Trace fields for audit and replay."""

    index_version: str
    """Version of the index retrieval read."""
    policy_version: str
    """Selection policy version (e.g. ``R2_POLICY_V1``)."""
    policy_sha256: str
    """sha256 of the canonical JSON of the whole policy."""
    embedding_model: str
    """Embedding model id used by retrieval."""
    retrieval_top_k: int
    """Number of chunks retrieval was asked for."""
    thresholds: dict[str, float | int | None]
    """Every threshold and budget the selection used, by policy field name."""
    sanitization_mode: str
    """Sanitiser applied to evidence and question text."""
    ordering_mode: str
    """Evidence ordering mode."""
    prompt_contract_version: str
    """Prompt contract the evidence block was rendered for."""
    token_encoding: str
    """tiktoken encoding used for every token count."""
    question_sha256: str
    """sha256 of the normalised question text."""


class AssemblyMetrics(_Strict):
    """Counts and flags of one selection."""

    retrieved_k: int = 0
    """Number of retrieval results received."""
    selected_k: int = 0
    """Number of chunks in the final evidence."""
    dedup_dropped_count: int = 0
    """Chunks dropped as near-duplicates (DROP_DUP)."""
    budget_dropped_count: int = 0
    """Chunks dropped by the chunk-count or token budgets, the prompt builder's final budget
    loop included (DROP_BUDGET)."""
    per_knowledge_cap_dropped_count: int = 0
    """Chunks dropped by the per-knowledge-id cap (DROP_PER_KNOWLEDGE_CAP)."""
    empty_after_sanitize_dropped_count: int = 0
    """Chunks empty after sanitisation (DROP_EMPTY_AFTER_SANITIZE)."""
    below_similarity_floor_dropped_count: int = 0
    """Chunks below a similarity gate (DROP_BELOW_SIMILARITY_FLOOR)."""
    drop_reasons: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    """Count per drop reason code; every code present, zeros included."""
    dropped: list[DroppedChunk] = Field(default_factory=list)
    """Every dropped chunk in the order it was dropped."""
    evidence_token_count: int = 0
    """Tokens in ``evidence_block_text``."""
    evidence_token_budget: int = 0
    """Tokens the evidence block was allowed: min(max_evidence_tokens, what the total leaves)."""
    per_chunk_token_cap: int = 0
    """Largest token count one chunk may have (max_chunk_token_ratio * max_evidence_tokens)."""
    truncation_applied: bool = False
    """True when at least one chunk was cut by the per-chunk cap."""
    truncated_count: int = 0
    """Number of chunks cut by the per-chunk cap."""


class AnswerBundle(_Strict):
    """Assembly's output: the selected, anchored evidence and its exact evidence block text."""

    version: str = ANSWER_BUNDLE_VERSION
    """Schema version of this record."""
    request_id: str
    """Caller's request id."""
    assembly_status: AssemblyStatus
    """OK, NO_EVIDENCE (nothing survived selection) or FAILED (hard contract failure)."""
    failure_reason: str | None = None
    """Why the status is FAILED (or what emptied the evidence for NO_EVIDENCE); None when OK."""
    selected_evidence: list[SelectedEvidence] = Field(default_factory=list)
    """Final evidence, in anchor order (rank asc, chunk_id asc)."""
    anchor_map: dict[str, str] = Field(default_factory=dict)
    """Citation anchor (``C0``...) to chunk_id, for post-generation validation."""
    allowed_anchors: list[str] = Field(default_factory=list)
    """Anchors an answer may cite, in order."""
    evidence_block_text: str | None = None
    """Exact evidence block text placed in the prompt; None unless OK."""
    evidence_block_sha256: str | None = None
    """sha256 of the UTF-8 bytes of ``evidence_block_text``."""
    trace: AssemblyTrace | None = None
    """Trace fields; None only when FAILED before the trace could be built."""
    metrics: AssemblyMetrics = Field(default_factory=AssemblyMetrics)
    """Selection counts, token counts, drop reasons and truncation flags."""

    @model_validator(mode="after")
    def _ok_is_complete(self) -> AnswerBundle:
        if self.assembly_status == "FAILED":
            if not self.failure_reason:
                raise ValueError("a FAILED AnswerBundle needs a failure_reason")
            return self
        if self.trace is None:
            raise ValueError("missing trace fields")
        if self.assembly_status == "NO_EVIDENCE":
            if self.selected_evidence or self.evidence_block_text is not None:
                raise ValueError("a NO_EVIDENCE AnswerBundle carries no evidence")
            return self
        if not self.selected_evidence:
            raise ValueError("an OK AnswerBundle needs selected evidence")
        if not self.evidence_block_text:
            raise ValueError("missing evidence_block_text with assembly_status OK")
        expected = [f"C{i}" for i in range(len(self.selected_evidence))]
        actual = [ev.citation_anchor for ev in self.selected_evidence]
        if actual != expected:
            raise ValueError(f"anchors {actual} are not sequential from C0")
        if self.allowed_anchors != expected:
            raise ValueError("allowed_anchors do not match the selected evidence")
        if self.anchor_map != {ev.citation_anchor: ev.chunk_id for ev in self.selected_evidence}:
            raise ValueError("missing citation_anchor mapping for the selected evidence")
        return self


# ---------------------------------------------------------------------- step 4: prompt


class PromptBuildResult(_Strict):
    """The prompt builder's output: the exact prompt text and its token accounting.

    ``final_budget_dropped_count`` is stored and printed as ``pb4_dropped_count``, the name
    records have carried since the first version (PB4 is the seed's final token budget check).
    """

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        serialize_by_alias=True,
        validate_by_alias=True,
        validate_by_name=True,
    )

    request_id: str
    """Caller's request id."""
    prompt_contract_version: str
    """Prompt contract the prompt follows (``PROMPT_CONTRACT_V1``)."""
    template_sha256: str
    """sha256 of the frozen template file the prompt was rendered from."""
    build_status: BuildStatus
    """OK, NO_EVIDENCE (empty prompt, no LLM call) or FAILED."""
    failure_reason: str | None = None
    """Why the build is not OK; None when OK."""
    prompt_text: str = ""
    """The exact prompt (UTF-8 encoded, these are the bytes sent); empty unless OK."""
    prompt_sha256: str | None = None
    """sha256 of the UTF-8 bytes of ``prompt_text``; None unless OK."""
    prompt_bytes: int = 0
    """Length of ``prompt_text`` in UTF-8 bytes."""
    question_text: str = ""
    """The question as inserted (whitespace-normalised only)."""
    system_tokens: int = 0
    """Tokens of the system instruction section."""
    safety_tokens: int = 0
    """Tokens of the safety and grounding section."""
    evidence_tokens: int = 0
    """Tokens of the evidence block text."""
    question_tokens: int = 0
    """Tokens of the question text."""
    output_format_tokens: int = 0
    """Tokens of the output formatting section."""
    prompt_tokens: int = 0
    """Tokens of the whole prompt text."""
    reserved_output_tokens: int = 0
    """Tokens reserved for the model's answer."""
    total_prompt_tokens: int = 0
    """``prompt_tokens + reserved_output_tokens``; at most ``max_total_prompt_tokens`` when OK."""
    max_total_prompt_tokens: int = 0
    """The policy's total budget."""
    final_budget_dropped_count: int = Field(default=0, alias="pb4_dropped_count")
    """Chunks the final budget loop dropped (lowest ranked first) to fit the total budget."""


# ------------------------------------------------------------------------- step 5: LLM


class LLMExecutionResult(_Strict):
    """Telemetry of one LLM execution (one logical call, retries included)."""

    request_id: str
    """Caller's request id."""
    llm_name: str
    """Registry name of the LLM implementation (``openai``, ``extractive``)."""
    model_name: str
    """Model identity as configured and sent (never switched on failure)."""
    model_reported: str | None = None
    """Model name the server reported in its response, when it reported one."""
    prompt_sha256: str
    """sha256 of the exact prompt bytes sent."""
    generation_status: Literal["OK", "FAILED"]
    """OK when the model returned a completion; FAILED otherwise."""
    failure_reason: str | None = None
    """Why the generation failed; None when OK."""
    raw_model_text: str | None = None
    """The model's text, unedited; None when FAILED."""
    finish_reason: str | None = None
    """Finish reason reported by the model (``stop``, ``length``...)."""
    attempts: int = 0
    """HTTP attempts made (1 + retries of transient failures)."""
    llm_latency_ms: float = 0.0
    """Wall-clock milliseconds over all attempts and backoffs (not hashed anywhere)."""
    prompt_tokens_actual: int | None = None
    """Prompt tokens reported by the model (counted locally by offline readers)."""
    completion_tokens_actual: int | None = None
    """Completion tokens reported by the model."""
    total_tokens_actual: int | None = None
    """Total tokens reported by the model."""


# ----------------------------------------------------------- step 6: answer validation


class GroundingMetrics(_Strict):
    """Counts from post-generation validation."""

    sentence_count: int = 0
    """Sentences with factual content in the answer."""
    cited_sentence_count: int = 0
    """Of those, sentences carrying at least one valid citation marker."""
    citation_count: int = 0
    """Citation markers found by ``\\[C\\d+\\]``."""
    unique_citation_count: int = 0
    """Distinct anchors cited."""
    invalid_citation_count: int = 0
    """Markers citing an anchor outside the allowed set."""
    malformed_citation_count: int = 0
    """Citation-like markers not in the exact ``[C<n>]`` format."""
    citation_coverage: float = 0.0
    """``cited_sentence_count / sentence_count`` (1.0 for a refusal)."""


class ValidationResult(_Strict):
    """Answer validation's output: whether the answer may be shown, fail closed."""

    request_id: str
    """Caller's request id."""
    generation_status: GenerationStatus
    """OK, FAILED (the LLM call failed) or NO_EVIDENCE (assembly refused, no LLM call)."""
    validation_status: ValidationStatus
    """PASSED only when every check passed; anything else is FAILED."""
    failure_reason: str | None = None
    """The first failed check, in words; None when PASSED."""
    failure_codes: list[str] = Field(default_factory=list)
    """Every failed check's code, in check order."""
    is_refusal: bool = False
    """True when the validated answer is the exact refusal string."""
    validated_answer_text: str | None = None
    """The answer to show (the refusal for NO_EVIDENCE); None when FAILED."""
    validated_citations: list[str] = Field(default_factory=list)
    """Distinct anchors cited, in order of first appearance; empty when FAILED."""
    cited_chunk_ids: list[str] = Field(default_factory=list)
    """The chunk ids of ``validated_citations`` through the anchor map."""
    grounding_metrics: GroundingMetrics = Field(default_factory=GroundingMetrics)
    """Sentence and citation counts."""


# --------------------------------------------------------------------------- whole run


class AnswerResult(_Strict):
    """Every artifact of one ``answer_question`` run."""

    request_id: str
    """Caller's request id."""
    answer_bundle: AnswerBundle
    """Assembly's output (after the prompt builder's final budget loop)."""
    prompt: PromptBuildResult
    """The prompt builder's output."""
    llm_result: LLMExecutionResult | None = None
    """The LLM's output; None when the LLM was not called (NO_EVIDENCE or FAILED assembly)."""
    validation: ValidationResult
    """Answer validation's output."""
    answer_text: str | None = None
    """The answer to show: validated text or the refusal; None when validation failed."""
    drop_counts: dict[str, int]
    """Selection drops per reason code (copy of ``answer_bundle.metrics.drop_reasons``)."""
    hashes: dict[str, str | None]
    """sha256 hashes: policy, template, question, evidence block, prompt, answer bundle, answer."""
