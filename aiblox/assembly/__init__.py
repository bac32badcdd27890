"""Answer assembly: a retrieval bundle to a validated, cited answer or the exact refusal.

The chain, one subpackage per step, in the order a question goes through them:

1. ``input/``: the retriever's bundle as assembly input (``from_retrieval``), checked into a
   typed :class:`AssemblyInput` or a FAILED status (``validation``);
2. ``selection/``: the policy's gates choose and order the chunks (``chunk_selection``), with
   the sanitiser (``sanitize``), the near-duplicate measure (``overlap_ratio``) and the per-chunk
   token cap (``token_truncation``);
3. ``anchoring/``: anchors ``C0, C1, ...`` in evidence order (``citation_anchors``) and the
   evidence block text (``evidence_block``); ``answer_bundle`` runs steps 1 to 3 into an
   :class:`AnswerBundle`;
4. ``prompt/``: Prompt Contract V1, the frozen template (``contract``), the builder of the exact
   prompt bytes with its final token budget loop (``builder``), and the answer rules the
   template states (``answer_rules``);
5. ``llm/``: the reader answers the prompt: the :class:`LLM` protocol and its registry
   (``registry``), the offline ``extractive`` reader, the OpenAI-compatible HTTP client
   (``openai_chat``);
6. ``answer_validation/``: citations, refusal, metadata leaks and meta commentary checked, fail
   closed (``checks``).

``sentence_split`` is the one sentence rule of steps 2, 5 and 6 (where the per-chunk cap cuts, what
the reader quotes, what validation checks for a citation). ``answer_chain`` runs the whole chain
(:func:`answer_question`). ``records`` holds the records the steps hand on (input,
:class:`AnswerBundle`, :class:`PromptBuildResult`, :class:`LLMExecutionResult`,
:class:`ValidationResult`, :class:`AnswerResult`) and the drop reason codes; ``policy`` the
versioned selection policy every step reads. ``docs/seed_ids.md`` maps the
seed's requirement ids (R2.0 to R5) to these modules.
"""

from aiblox.assembly.anchoring.citation_anchors import anchor_map, assign_anchors
from aiblox.assembly.anchoring.evidence_block import render_evidence_block
from aiblox.assembly.answer_bundle import assemble_answer_bundle, normalize_question
from aiblox.assembly.answer_chain import answer_from_input, answer_question, default_request_id
from aiblox.assembly.answer_validation.checks import validate_answer
from aiblox.assembly.input.from_retrieval import assembly_input_from_retrieval
from aiblox.assembly.input.validation import InputValidation, validate_assembly_input
from aiblox.assembly.llm.extractive import ExtractiveLLM
from aiblox.assembly.llm.openai_chat import LLMSettings, OpenAIChatLLM
from aiblox.assembly.llm.registry import (
    LLM,
    available_llms,
    get_llm,
    reader_for_policy,
    register_llm,
)
from aiblox.assembly.policy import PolicyError, SelectionPolicy, find_policies_dir, load_policy
from aiblox.assembly.prompt.builder import build_prompt
from aiblox.assembly.prompt.contract import (
    PROMPT_CONTRACT_VERSION,
    REFUSAL_TEXT,
    SECTION_HEADERS,
    TEMPLATE_SHA256,
    PromptContractError,
    load_prompt_contract,
    parse_prompt,
    render_prompt,
)
from aiblox.assembly.records import (
    DROP_BELOW_SIMILARITY_FLOOR,
    DROP_BUDGET,
    DROP_DUP,
    DROP_EMPTY_AFTER_SANITIZE,
    DROP_PER_KNOWLEDGE_CAP,
    DROP_REASONS,
    AnswerBundle,
    AnswerResult,
    AssemblyInput,
    AssemblyMetrics,
    AssemblyTrace,
    DroppedChunk,
    GroundingMetrics,
    LLMExecutionResult,
    PromptBuildResult,
    RetrievalResult,
    SelectedEvidence,
    ValidationResult,
)
from aiblox.assembly.sanitize import safe_normalize
from aiblox.assembly.selection.chunk_selection import (
    SelectionOutcome,
    order_rank_strict,
    select_chunks,
)
from aiblox.assembly.selection.overlap_ratio import overlap_ratio
from aiblox.assembly.sentence_split import split_sentences

__all__ = [
    "AnswerBundle",
    "AnswerResult",
    "AssemblyInput",
    "AssemblyMetrics",
    "AssemblyTrace",
    "DROP_BELOW_SIMILARITY_FLOOR",
    "DROP_BUDGET",
    "DROP_DUP",
    "DROP_EMPTY_AFTER_SANITIZE",
    "DROP_PER_KNOWLEDGE_CAP",
    "DROP_REASONS",
    "DroppedChunk",
    "ExtractiveLLM",
    "GroundingMetrics",
    "InputValidation",
    "LLM",
    "LLMExecutionResult",
    "LLMSettings",
    "OpenAIChatLLM",
    "PROMPT_CONTRACT_VERSION",
    "PolicyError",
    "PromptBuildResult",
    "PromptContractError",
    "REFUSAL_TEXT",
    "RetrievalResult",
    "SECTION_HEADERS",
    "SelectedEvidence",
    "SelectionOutcome",
    "SelectionPolicy",
    "TEMPLATE_SHA256",
    "ValidationResult",
    "anchor_map",
    "answer_from_input",
    "answer_question",
    "assemble_answer_bundle",
    "assembly_input_from_retrieval",
    "assign_anchors",
    "available_llms",
    "build_prompt",
    "default_request_id",
    "find_policies_dir",
    "get_llm",
    "load_policy",
    "load_prompt_contract",
    "normalize_question",
    "order_rank_strict",
    "overlap_ratio",
    "parse_prompt",
    "reader_for_policy",
    "register_llm",
    "render_evidence_block",
    "render_prompt",
    "safe_normalize",
    "select_chunks",
    "split_sentences",
    "validate_answer",
    "validate_assembly_input",
]
