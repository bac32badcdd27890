"""``extractive``: a deterministic offline reader (step 5 of answer assembly) that answers only
by quoting evidence.

It reads the prompt it is given (Prompt Contract V1, parsed back with ``parse_prompt``), so it
sees exactly what a hosted model would. Question terms are casefolded ``\\w+`` words minus a small
stop list (a trailing plural ``s`` removed from words over three letters). Each evidence sentence
scores the share of distinct question terms it contains. Sentences that carry citation-like
markers, the refusal tag, or evidence metadata are never quoted (a chunk the policy's
per-chunk cap cut ends at a sentence end, :mod:`~aiblox.assembly.selection.token_truncation`,
so no cut-off fragment reaches the prompt from there). The best ``max_sentences``
sentences scoring at least ``min_overlap`` (ties: evidence order, then sentence order) are quoted
verbatim, each on its own line followed by its chunk's ``[Cn]`` marker, in evidence order; a
sentence whose line would carry a malformed citation marker by validation's rule
(:func:`~aiblox.assembly.prompt.answer_rules.malformed_citations`: a numbered reference
``[1]``, an anchor-like ``(C2)`` in brackets) is never quoted, so every answer it gives passes
that check. When none qualifies, the answer is the exact refusal string.

Tokens (the prompt's, and the answer's against ``max_output_tokens``) are counted with
``token_encoding``; left unset, it is the policy's when the answer chain runs the reader
(:func:`~aiblox.assembly.llm.registry.reader_for_policy`), ``cl100k_base`` otherwise.
"""

from __future__ import annotations

import re
import time

from pydantic import BaseModel, ConfigDict, Field

from aiblox.assembly.prompt.answer_rules import is_quotable, malformed_citations
from aiblox.assembly.prompt.contract import REFUSAL_TEXT, PromptContractError, parse_prompt
from aiblox.assembly.records import LLMExecutionResult
from aiblox.assembly.sentence_split import split_sentences
from aiblox.hashing import sha256_text
from aiblox.text.tokens import DEFAULT_ENCODING, count_tokens

__all__ = ["EXTRACTIVE_MODEL_NAME", "ExtractiveLLM", "ExtractiveOptions", "question_terms"]

EXTRACTIVE_MODEL_NAME = "extractive-v1"

_WORD = re.compile(r"\w+")
_STOPWORDS_TEXT = (
    "a an and are as at be been being but by can could did do does for from had has have "
    "how i if in into is it its many much of on or so such than that the their them then "
    "there these they this those to was were what when where which who whom whose why "
    "will with would you your about after before between during over under up out other "
    "some any each most more name called"
)
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def _terms(text: str) -> frozenset[str]:
    out = set()
    for m in _WORD.finditer(text.casefold()):
        w = m.group(0)
        if w in _STOPWORDS or (len(w) == 1 and not w.isdigit()):
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return frozenset(out)


def question_terms(question: str) -> frozenset[str]:
    """The content terms of ``question`` the reader matches on."""
    return _terms(question)


class ExtractiveOptions(BaseModel):
    """Settings of the extractive reader."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_sentences: int = Field(default=2, ge=1)
    """At most this many sentences are quoted."""
    min_overlap: float = Field(default=0.3, gt=0.0, le=1.0)
    """A sentence must contain at least this share of the question's content terms."""


class ExtractiveLLM:
    """Offline reader implementing the :class:`~aiblox.assembly.llm.LLM` protocol."""

    name = "extractive"
    deterministic = True
    """Its result is a function of the prompt (and its options) alone, a FAILED one included:
    a sweep's stage cache keeps every result of it (see :class:`~aiblox.assembly.llm.LLM`)."""

    def __init__(
        self, max_sentences: int = 2, min_overlap: float = 0.3, token_encoding: str | None = None
    ) -> None:
        self.options = ExtractiveOptions(max_sentences=max_sentences, min_overlap=min_overlap)
        self.model_name = (
            f"{EXTRACTIVE_MODEL_NAME}(max_sentences={max_sentences},min_overlap={min_overlap})"
        )
        self.token_encoding = token_encoding
        """The encoding tokens are counted with; None: the policy's in the answer chain."""

    def with_token_encoding(self, token_encoding: str) -> ExtractiveLLM:
        """The same reader counting tokens with ``token_encoding``."""
        return ExtractiveLLM(self.options.max_sentences, self.options.min_overlap,
                             token_encoding)

    def answer(self, prompt_text: str) -> str:
        """The answer text for a V1 prompt (raises PromptContractError on another prompt)."""
        parsed = parse_prompt(prompt_text)
        q_terms = question_terms(parsed.question)
        if not q_terms:
            return REFUSAL_TEXT
        scored: list[tuple[float, int, int, str, str]] = []
        for ci, ev in enumerate(parsed.evidence):
            for si, sentence in enumerate(split_sentences(ev.text)):
                if not is_quotable(sentence) or malformed_citations(f"{sentence} [{ev.anchor}]"):
                    continue
                score = len(q_terms & _terms(sentence)) / len(q_terms)
                if score >= self.options.min_overlap:
                    scored.append((-score, ci, si, sentence, ev.anchor))
        if not scored:
            return REFUSAL_TEXT
        best = sorted(scored)[: self.options.max_sentences]
        best.sort(key=lambda s: (s[1], s[2]))
        return "\n".join(f"{sentence} [{anchor}]" for _, _, _, sentence, anchor in best)

    def generate(
        self, prompt_text: str, *, request_id: str, max_output_tokens: int = 800
    ) -> LLMExecutionResult:
        """Answer ``prompt_text``; FAILED when it is not a Prompt Contract V1 prompt."""
        start = time.perf_counter()
        prompt_sha = sha256_text(prompt_text)
        encoding = self.token_encoding or DEFAULT_ENCODING
        prompt_tokens = count_tokens(prompt_text, encoding)
        try:
            text = self.answer(prompt_text)
        except PromptContractError as err:
            return LLMExecutionResult(
                request_id=request_id,
                llm_name=self.name,
                model_name=self.model_name,
                prompt_sha256=prompt_sha,
                generation_status="FAILED",
                failure_reason=f"not a Prompt Contract V1 prompt: {err}",
                attempts=1,
                llm_latency_ms=(time.perf_counter() - start) * 1000.0,
                prompt_tokens_actual=prompt_tokens,
            )
        completion = count_tokens(text, encoding)
        # over the reserved tokens a model would have been cut there: reported as such, and
        # validation fails it (CUT_OFF) as it fails a model's cut-off answer
        finish = "length" if completion > max_output_tokens else "stop"
        return LLMExecutionResult(
            request_id=request_id,
            llm_name=self.name,
            model_name=self.model_name,
            prompt_sha256=prompt_sha,
            generation_status="OK",
            raw_model_text=text,
            finish_reason=finish,
            attempts=1,
            llm_latency_ms=(time.perf_counter() - start) * 1000.0,
            prompt_tokens_actual=prompt_tokens,
            completion_tokens_actual=completion,
            total_tokens_actual=prompt_tokens + completion,
        )
