"""Step 2 of answer assembly: chunk selection, driven by a :class:`SelectionPolicy`.

Gates run in this order over the results sorted ``rank_strict`` (rank ascending, chunk_id
ascending on ties), each drop recorded with its reason code:

1. top similarity gate (``top_similarity_gate``): when the best similarity is below it, every
   chunk is dropped (DROP_BELOW_SIMILARITY_FLOOR);
2. similarity floor (``min_similarity_score``): chunks below it (DROP_BELOW_SIMILARITY_FLOOR);
3. sanitisation (``safe_normalize``): chunks empty afterwards (DROP_EMPTY_AFTER_SANITIZE);
4. near-duplicates: a chunk whose word overlap ratio with a better-ranked kept chunk (the
   share of its words the kept chunk has) exceeds ``overlap_ratio_threshold``, or whose
   sanitised text equals a kept chunk's (casefolded; so two copies of a text with no words,
   ``🙂🙂``, are duplicates too) (DROP_DUP; the better-ranked chunk is kept);
5. diversity cap: chunks beyond ``max_chunks_per_knowledge_id`` of one knowledge id
   (DROP_PER_KNOWLEDGE_CAP; a cap, the best chunks of the top document stay);
6. count budget: chunks beyond ``max_chunks`` (DROP_BUDGET);

Gates 4 and 5 run as one pass in order, so "kept" in gate 4 means kept by both: a chunk is
never dropped as the duplicate of a chunk that the cap then drops (seed R2.2: keep the
best-ranked chunk of near-duplicates; before, both copies could be lost). A chunk failing both
is a DROP_DUP; drops are recorded gate by gate.
7. per-chunk cap: a chunk longer than ``max_chunk_token_ratio * max_evidence_tokens`` tokens is
   cut to its longest prefix that fits and ends a sentence (``truncated``; not a drop;
   :mod:`~aiblox.assembly.selection.token_truncation`); the first chunk is cut
   further when even so it is over the token budget (a long question leaves less than the cap),
   rather than dropped with every chunk after it;
8. token budget: chunks are rendered in order with anchors C0, C1, ...; when adding the next
   chunk would take the evidence block over the budget, it and every lower-ranked chunk are
   dropped (DROP_BUDGET).

The kept chunks keep their order; their anchors (step 3) follow it. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aiblox.assembly.anchoring.evidence_block import render_evidence_block
from aiblox.assembly.policy import SelectionPolicy
from aiblox.assembly.records import (
    DROP_BELOW_SIMILARITY_FLOOR,
    DROP_BUDGET,
    DROP_DUP,
    DROP_EMPTY_AFTER_SANITIZE,
    DROP_PER_KNOWLEDGE_CAP,
    DroppedChunk,
    RetrievalResult,
    SelectedEvidence,
)
from aiblox.assembly.sanitize import SANITIZATION_MODE, safe_normalize
from aiblox.assembly.selection.overlap_ratio import overlap_ratio, word_set
from aiblox.assembly.selection.token_truncation import truncate_to_token_budget
from aiblox.text.tokens import count_tokens

__all__ = ["SelectionOutcome", "order_rank_strict", "select_chunks"]

UNKNOWN_SOURCE = "unknown"


@dataclass
class SelectionOutcome:
    """What selection kept (anchored, in order) and what it dropped."""

    selected: list[SelectedEvidence]
    evidence_block_text: str
    evidence_token_count: int
    dropped: list[DroppedChunk] = field(default_factory=list)


def order_rank_strict(results: Sequence[RetrievalResult]) -> list[RetrievalResult]:
    """Rank ascending, chunk_id ascending on ties; never the input's list order."""
    return sorted(results, key=lambda r: (r.rank, r.chunk_id))


def select_chunks(
    results: Sequence[RetrievalResult], policy: SelectionPolicy, *, evidence_token_budget: int
) -> SelectionOutcome:
    """Apply every selection gate; ``evidence_token_budget`` is the most tokens the evidence block
    may take (the caller takes the total prompt budget into account)."""
    if policy.ordering_mode != "rank_strict":  # pragma: no cover - the policy type forbids it
        raise ValueError(f"unsupported ordering_mode {policy.ordering_mode!r}")
    if policy.sanitization_mode != SANITIZATION_MODE:  # pragma: no cover - the type forbids it
        raise ValueError(f"unsupported sanitization_mode {policy.sanitization_mode!r}")
    enc = policy.token_encoding
    dropped: list[DroppedChunk] = []

    def drop(r: RetrievalResult, reason: str) -> None:
        dropped.append(DroppedChunk(chunk_id=r.chunk_id, rank=r.rank, reason=reason))

    ordered = order_rank_strict(results)

    # 1-2. similarity gates
    if (
        ordered
        and policy.top_similarity_gate is not None
        and max(r.similarity_score for r in ordered) < policy.top_similarity_gate
    ):
        for r in ordered:
            drop(r, DROP_BELOW_SIMILARITY_FLOOR)
        ordered = []
    gated = []
    for r in ordered:
        if (
            policy.min_similarity_score is not None
            and r.similarity_score < policy.min_similarity_score
        ):
            drop(r, DROP_BELOW_SIMILARITY_FLOOR)
        else:
            gated.append(r)

    # 3. sanitisation
    sanitized: list[tuple[RetrievalResult, str]] = []
    for r in gated:
        text = safe_normalize(r.chunk_text)
        if text:
            sanitized.append((r, text))
        else:
            drop(r, DROP_EMPTY_AFTER_SANITIZE)

    # 4-5. near-duplicates and the per-knowledge-id cap, in one pass in order: a chunk is
    # compared only with chunks both gates keep, so a duplicate is never dropped for a chunk
    # that the cap then drops (both copies lost)
    dup_drops: list[DroppedChunk] = []
    cap_drops: list[DroppedChunk] = []
    kept: list[tuple[frozenset[str], str]] = []
    per_knowledge: dict[str, int] = {}
    capped: list[tuple[RetrievalResult, str]] = []
    for r, text in sanitized:
        words, key = word_set(text), text.casefold()
        if any(
            key == k_key or overlap_ratio(words, k_words) > policy.overlap_ratio_threshold
            for k_words, k_key in kept
        ):  # identical texts are duplicates even without words ("🙂🙂")
            dup_drops.append(DroppedChunk(chunk_id=r.chunk_id, rank=r.rank, reason=DROP_DUP))
        elif per_knowledge.get(r.knowledge_id, 0) >= policy.max_chunks_per_knowledge_id:
            cap_drops.append(
                DroppedChunk(chunk_id=r.chunk_id, rank=r.rank, reason=DROP_PER_KNOWLEDGE_CAP)
            )
        else:
            per_knowledge[r.knowledge_id] = per_knowledge.get(r.knowledge_id, 0) + 1
            capped.append((r, text))
            kept.append((words, key))
    dropped += dup_drops + cap_drops  # recorded gate by gate, as before

    # 6. chunk count budget (a duplicate ranks after the chunk it copies, so when that chunk is
    # beyond the budget the duplicate is too)
    for r, _ in capped[policy.max_chunks :]:
        drop(r, DROP_BUDGET)
    capped = capped[: policy.max_chunks]

    # 7-8. per-chunk cap, then the evidence token budget, in order
    selected: list[SelectedEvidence] = []
    block = ""
    block_tokens = 0
    for i, (r, text) in enumerate(capped):
        cut, truncated = truncate_to_token_budget(text, policy.per_chunk_token_cap, enc)
        if not cut.strip():
            # not even its first character fits the per-chunk cap (one character can take
            # several tokens): nothing of it can be cited, so it is pruned, not sent empty
            drop(r, DROP_BUDGET)
            continue
        candidate = SelectedEvidence(
            chunk_id=r.chunk_id,
            knowledge_id=r.knowledge_id,
            rank=r.rank,
            similarity_score=r.similarity_score,
            citation_anchor=f"C{len(selected)}",
            sanitized_text=cut,
            source_reference=r.source_reference or UNKNOWN_SOURCE,
            token_count=count_tokens(cut, enc),
            truncated=truncated,
        )
        trial = render_evidence_block([*selected, candidate])
        trial_tokens = count_tokens(trial, enc)
        if trial_tokens > evidence_token_budget and not selected:
            # the best chunk, cut to the per-chunk cap, is still over a budget a long question
            # shrank (a cap near the whole budget): cut it to what the budget holds rather than
            # drop every chunk and refuse an answerable question
            room = candidate.token_count
            while trial_tokens > evidence_token_budget and room > 0:
                # the header and a cut text may merge a token at their seam: shrink until it fits
                room = min(room - 1, room - (trial_tokens - evidence_token_budget))
                cut, _ = truncate_to_token_budget(text, max(room, 0), enc)
                if not cut.strip():
                    break
                candidate = candidate.model_copy(update={
                    "sanitized_text": cut, "token_count": count_tokens(cut, enc),
                    "truncated": True})
                trial = render_evidence_block([candidate])
                trial_tokens = count_tokens(trial, enc)
        if trial_tokens > evidence_token_budget:
            for rest, _ in capped[i:]:
                drop(rest, DROP_BUDGET)
            break
        selected.append(candidate)
        block, block_tokens = trial, trial_tokens
    return SelectionOutcome(
        selected=selected,
        evidence_block_text=block,
        evidence_token_count=block_tokens,
        dropped=dropped,
    )
