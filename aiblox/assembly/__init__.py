"""Answer assembly: retrieval bundle to a validated, cited answer or the exact refusal.

R2.0 contracts and input validation, R2.2 policy-driven chunk selection, R2.3 ``safe_normalize_v1``,
R2.4 citation anchors, R2.5 evidence block, R2.6 Prompt Contract V1 builder (exact bytes, PB4
budget loop), R3 LLM execution (``extractive`` offline reader, ``openai`` HTTP client) and R5
post-generation validation. :func:`answer_question` runs the whole chain.
"""

from aiblox.assembly.answer_assembly import assemble_answer_bundle, normalize_question
from aiblox.assembly.chunk_selection import SelectionOutcome, order_rank_strict, select_chunks
from aiblox.assembly.citation_anchors import anchor_map, assign_anchors
from aiblox.assembly.contracts import (
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
from aiblox.assembly.evidence_block import render_evidence_block
from aiblox.assembly.input_validation import InputValidation, validate_assembly_input
from aiblox.assembly.llm import LLM, available_llms, get_llm, register_llm
from aiblox.assembly.llm_extractive import ExtractiveLLM
from aiblox.assembly.llm_openai import LLMSettings, OpenAIChatLLM
from aiblox.assembly.overlap_ratio import overlap_ratio
from aiblox.assembly.pipeline import answer_from_input, answer_question, default_request_id
from aiblox.assembly.policy import PolicyError, SelectionPolicy, find_policies_dir, load_policy
from aiblox.assembly.post_validator import validate_answer
from aiblox.assembly.prompt_builder_v1 import build_prompt_v1
from aiblox.assembly.prompt_contract_v1 import (
    PROMPT_CONTRACT_VERSION,
    REFUSAL_TEXT,
    SECTION_HEADERS,
    TEMPLATE_SHA256,
    PromptContractError,
    load_prompt_contract_v1,
    parse_prompt_v1,
    render_prompt_v1,
)
from aiblox.assembly.retrieval_adapter import assembly_input_from_retrieval
from aiblox.assembly.safe_normalize_v1 import safe_normalize_v1
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
    "build_prompt_v1",
    "default_request_id",
    "find_policies_dir",
    "get_llm",
    "load_policy",
    "load_prompt_contract_v1",
    "normalize_question",
    "order_rank_strict",
    "overlap_ratio",
    "parse_prompt_v1",
    "register_llm",
    "render_evidence_block",
    "render_prompt_v1",
    "safe_normalize_v1",
    "select_chunks",
    "split_sentences",
    "validate_answer",
    "validate_assembly_input",
]
