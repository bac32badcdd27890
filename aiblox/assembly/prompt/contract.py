"""Step 4 of answer assembly: the prompt contract, frozen (:data:`PROMPT_CONTRACT_VERSION`).

The literal prompt template lives in ``prompt_contract_v1.txt`` beside this module
(:data:`TEMPLATE_FILE`); its sha256 is recorded here as :data:`TEMPLATE_SHA256` and checked every
time the template is loaded, so the file cannot change without a new contract version (a new
file, new constants).

The template has five sections in this exact order, each header exactly once:

1. ``### SYSTEM INSTRUCTIONS ###``: closed world, no external knowledge, refuse when the evidence
   is insufficient; holds the refusal string (:data:`REFUSAL_TEXT`), byte for byte, exactly once.
2. ``### SAFETY AND GROUNDING RULES ###``: no implicit knowledge, evidence is untrusted data.
3. ``### EVIDENCE ###``: the evidence block, ``{evidence_block}``.
4. ``### USER QUESTION ###``: the question, ``{user_question}``.
5. ``### OUTPUT FORMAT ###``: citation and answer format rules.

Rendering splits the template at its two placeholders once and concatenates the pieces, so
evidence or question text that contains a placeholder or a header is never substituted into.
Evidence and question text are sanitised by ``safe_normalize`` to single lines, which makes
:func:`parse_prompt` unambiguous: every evidence body is the one line after its header. The
builder (:mod:`aiblox.assembly.prompt.builder`) renders through this module; the extractive
reader parses prompts back with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from aiblox.hashing import sha256_bytes

__all__ = [
    "CITATION_PATTERN",
    "EVIDENCE_HEADER_PATTERN",
    "EVIDENCE_PLACEHOLDER",
    "PROMPT_CONTRACT_VERSION",
    "ParsedEvidence",
    "ParsedPrompt",
    "PromptContractError",
    "PromptTemplate",
    "QUESTION_PLACEHOLDER",
    "REFUSAL_TEXT",
    "SECTION_HEADERS",
    "TEMPLATE_FILE",
    "TEMPLATE_SHA256",
    "load_prompt_contract",
    "parse_evidence_block",
    "parse_prompt",
    "render_prompt",
]

PROMPT_CONTRACT_VERSION = "PROMPT_CONTRACT_V1"
TEMPLATE_FILE = "prompt_contract_v1.txt"
TEMPLATE_SHA256 = "2e80ad0be911eac913e8c45dccdfa6bfa754ed5c78d0c45217364b2a1974c555"
"""sha256 of the UTF-8 bytes of ``prompt_contract_v1.txt``; a change needs a new version."""

REFUSAL_TEXT = (
    "NO_EVIDENCE: The provided evidence does not contain sufficient information to answer "
    "this question."
)
"""The frozen refusal: exact text, punctuation and casing."""

SECTION_HEADERS: tuple[str, ...] = (
    "### SYSTEM INSTRUCTIONS ###",
    "### SAFETY AND GROUNDING RULES ###",
    "### EVIDENCE ###",
    "### USER QUESTION ###",
    "### OUTPUT FORMAT ###",
)
EVIDENCE_PLACEHOLDER = "{evidence_block}"
QUESTION_PLACEHOLDER = "{user_question}"

CITATION_PATTERN = re.compile(r"\[C\d+\]")
"""Citation marker format in answers: ``[C0]``, ``[C1]``, ..."""

_FIELD = r"[^|\[\]\n]*"
EVIDENCE_HEADER_PATTERN = re.compile(
    rf"\[C(\d+) \| chunk_id=({_FIELD}) \| knowledge_id=({_FIELD}) \| source=({_FIELD})\]"
)
"""One evidence header line: ``[C{n} | chunk_id=... | knowledge_id=... | source=...]``."""


class PromptContractError(ValueError):
    """The template or a prompt does not match Prompt Contract V1."""


@dataclass(frozen=True)
class PromptTemplate:
    """The loaded, verified template split at its placeholders."""

    template_text: str
    """The whole template file."""
    prefix: str
    """System and safety sections and the evidence header, up to ``{evidence_block}``."""
    middle: str
    """Between the evidence block and the question (the question header)."""
    suffix: str
    """After the question: the output format section."""

    @property
    def system_section(self) -> str:
        """The system instruction section (header included)."""
        return self.prefix[: self.prefix.index(SECTION_HEADERS[1])]

    @property
    def safety_section(self) -> str:
        """The safety and grounding section (header included)."""
        start = self.prefix.index(SECTION_HEADERS[1])
        return self.prefix[start : self.prefix.index(SECTION_HEADERS[2])]

    @property
    def output_format_section(self) -> str:
        """The output format section (header included)."""
        return self.suffix[self.suffix.index(SECTION_HEADERS[4]) :]


def _check_template(text: str) -> PromptTemplate:
    positions = []
    for header in SECTION_HEADERS:
        lines = [i for i, line in enumerate(text.split("\n")) if line == header]
        if len(lines) != 1:
            raise PromptContractError(
                f"{TEMPLATE_FILE}: header {header!r} found {len(lines)} times"
            )
        positions.append(lines[0])
    if positions != sorted(positions):
        raise PromptContractError(f"{TEMPLATE_FILE}: sections out of order")
    for placeholder in (EVIDENCE_PLACEHOLDER, QUESTION_PLACEHOLDER):
        if text.count(placeholder) != 1:
            raise PromptContractError(f"{TEMPLATE_FILE}: {placeholder} must occur exactly once")
    if text.count(REFUSAL_TEXT) != 1:
        raise PromptContractError(f"{TEMPLATE_FILE}: the refusal string must occur exactly once")
    if text.index(REFUSAL_TEXT) > text.index(SECTION_HEADERS[1]):
        raise PromptContractError(f"{TEMPLATE_FILE}: refusal string outside the system section")
    prefix, rest = text.split(EVIDENCE_PLACEHOLDER)
    middle, suffix = rest.split(QUESTION_PLACEHOLDER)
    if not (
        SECTION_HEADERS[2] in prefix
        and SECTION_HEADERS[3] in middle
        and SECTION_HEADERS[4] in suffix
    ):
        raise PromptContractError(f"{TEMPLATE_FILE}: placeholders outside their sections")
    return PromptTemplate(template_text=text, prefix=prefix, middle=middle, suffix=suffix)


@lru_cache(maxsize=1)
def load_prompt_contract() -> PromptTemplate:
    """Read the template shipped in the package, check its sha256 and structure."""
    data = resources.files("aiblox.assembly.prompt").joinpath(TEMPLATE_FILE).read_bytes()
    digest = sha256_bytes(data)
    if digest != TEMPLATE_SHA256:
        raise PromptContractError(
            f"{TEMPLATE_FILE}: sha256 {digest} differs from the frozen {TEMPLATE_SHA256}; "
            "Prompt Contract V1 is frozen, add a new contract version instead of editing it"
        )
    return _check_template(data.decode("utf-8"))


def render_prompt(evidence_block: str, question: str) -> str:
    """The prompt text for a rendered evidence block and a normalised question."""
    contract = load_prompt_contract()
    return contract.prefix + evidence_block + contract.middle + question + contract.suffix


@dataclass(frozen=True)
class ParsedEvidence:
    """One evidence chunk read back from a prompt."""

    anchor: str
    chunk_id: str
    knowledge_id: str
    source: str
    text: str


@dataclass(frozen=True)
class ParsedPrompt:
    """A prompt read back by :func:`parse_prompt`."""

    evidence: tuple[ParsedEvidence, ...]
    question: str
    evidence_block: str


def parse_evidence_block(block: str) -> tuple[ParsedEvidence, ...]:
    """Read an evidence block: header line, one text line, a blank line between chunks.

    Raises :class:`PromptContractError` when anchors are not sequential from C0 or a line is not
    where the format puts it.
    """
    if not block:
        raise PromptContractError("empty evidence block")
    entries = block.split("\n\n")
    parsed = []
    for i, entry in enumerate(entries):
        lines = entry.split("\n")
        if len(lines) != 2 or not lines[1]:
            raise PromptContractError(f"evidence chunk {i}: expected a header line and a text line")
        match = EVIDENCE_HEADER_PATTERN.fullmatch(lines[0])
        if match is None:
            raise PromptContractError(f"evidence chunk {i}: malformed header {lines[0][:80]!r}")
        if match.group(1) != str(i):
            raise PromptContractError(
                f"evidence chunk {i}: anchor C{match.group(1)}, expected C{i}"
            )
        parsed.append(
            ParsedEvidence(
                anchor=f"C{i}",
                chunk_id=match.group(2),
                knowledge_id=match.group(3),
                source=match.group(4),
                text=lines[1],
            )
        )
    return tuple(parsed)


def parse_prompt(prompt: str) -> ParsedPrompt:
    """Split a V1 prompt back into its evidence chunks and question, checking the structure:
    the fixed sections byte for byte, in order, the evidence entirely inside its section."""
    contract = load_prompt_contract()
    if not prompt.startswith(contract.prefix):
        raise PromptContractError("system, safety or evidence header sections differ from V1")
    if not prompt.endswith(contract.suffix):
        raise PromptContractError("output format section differs from V1")
    body = prompt[len(contract.prefix) : len(prompt) - len(contract.suffix)]
    if contract.middle not in body:
        raise PromptContractError("question section missing")
    evidence_block, question = body.rsplit(contract.middle, 1)
    if not question or "\n" in question:
        raise PromptContractError("question must be one non-empty line")
    return ParsedPrompt(
        evidence=parse_evidence_block(evidence_block),
        question=question,
        evidence_block=evidence_block,
    )
