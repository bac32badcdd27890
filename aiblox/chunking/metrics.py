"""Chunk-level evaluation (pure): answer recall@k, evidence tokens, max-passage projection.

Inputs are plain mappings keyed by query id, so the eval layer can feed them from any run.
Chunk lists are ranked best first. A chunk may be a :class:`RankedChunk` (or any 4-tuple
``(item_id, start, end, text)``) or any object with ``item_id``, ``start_idx``, ``end_idx`` and
``text`` attributes, such as :class:`aiblox.chunking.Chunk` or the retrieval contract's
``EvidenceChunk``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

__all__ = [
    "ANSWER_MATCH_RULE",
    "GoldSpan",
    "PROJECTION",
    "RankedChunk",
    "answer_recall_at_k",
    "max_passage_projection",
    "mean_evidence_tokens",
]

PROJECTION = "max_passage"
"""Name of the chunk-to-document projection of :func:`max_passage_projection`; record it with
every document-level metric computed from a chunk run."""

ANSWER_MATCH_RULE = "span"
"""Default rule of :func:`answer_recall_at_k`; see ``match`` there."""


class RankedChunk(NamedTuple):
    """A returned chunk: its document, character span in that document, and text."""

    item_id: str
    start_idx: int | None
    end_idx: int | None
    text: str


class GoldSpan(NamedTuple):
    """A gold answer: its document, the answer text, and its character offset (if known)."""

    doc_id: str
    text: str
    start: int | None


def _as_chunk(chunk: Any) -> RankedChunk:
    if isinstance(chunk, tuple):
        if len(chunk) != 4:
            raise ValueError(f"a chunk tuple must be (item_id, start, end, text), got {chunk!r}")
        return RankedChunk(*chunk)
    try:
        return RankedChunk(chunk.item_id, chunk.start_idx, chunk.end_idx, chunk.text)
    except AttributeError:
        raise ValueError(
            f"a chunk needs item_id, start_idx, end_idx and text, got {type(chunk).__name__}"
        ) from None


def _as_answer(answer: Any) -> GoldSpan:
    if isinstance(answer, tuple) and len(answer) == 3:
        return GoldSpan(*answer)
    raise ValueError(f"a gold answer must be (doc_id, answer_text, answer_start), got {answer!r}")


def _hit(chunk: RankedChunk, answer: GoldSpan, match: str) -> bool:
    if chunk.item_id != answer.doc_id:
        return False
    start, end, at = chunk.start_idx, chunk.end_idx, answer.start
    if match == "span" and start is not None and end is not None and at is not None:
        return start <= at and at + len(answer.text) <= end
    return bool(answer.text) and answer.text in chunk.text


def answer_recall_at_k(
    chunks_per_query: Mapping[str, Sequence[Any]],
    answers: Mapping[str, Iterable[Any]],
    k: int,
    match: Literal["span", "text"] = "span",
) -> tuple[float, dict[str, float]]:
    """Share of queries with a gold answer inside one of their top-``k`` chunks.

    A query scores 1.0 when one of its first ``k`` chunks comes from the gold answer's document
    and contains one of its gold answers, else 0.0. "Contains" depends on ``match``:

    * ``"span"`` (default): the chunk's span ``[start_idx, end_idx)`` contains the answer span
      ``[start, start + len(text))``; where the chunk's or the answer's offsets are unknown,
      the answer text must occur in the chunk text.
    * ``"text"``: the answer text occurs (case-sensitively) anywhere in the chunk text.

    The mean is over the queries in ``answers`` that have at least one gold answer (a query with
    no returned chunks scores 0.0); queries absent from ``answers`` are ignored. With no such
    query the mean is 0.0. Returns ``(mean, per_query)``.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if match not in ("span", "text"):
        raise ValueError(f"match must be 'span' or 'text', got {match!r}")
    per_query: dict[str, float] = {}
    for qid in sorted(answers):
        gold = [_as_answer(a) for a in answers[qid]]
        if not gold:
            continue
        top = [_as_chunk(c) for c in list(chunks_per_query.get(qid, ()))[:k]]
        hit = any(_hit(c, a, match) for c in top for a in gold)
        per_query[qid] = 1.0 if hit else 0.0
    mean = sum(per_query.values()) / len(per_query) if per_query else 0.0
    return mean, per_query


def mean_evidence_tokens(
    token_counts_per_query: Mapping[str, Sequence[int]],
    k: int | None = None,
) -> tuple[float, dict[str, int]]:
    """Mean over queries of the tokens of evidence returned (the first ``k`` chunks if given).

    ``token_counts_per_query`` maps a query id to its chunks' token counts, best first. Returns
    ``(mean, per_query)`` where ``per_query`` is each query's total; the mean of no queries is 0.0.
    """
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive int or None, got {k!r}")
    per_query: dict[str, int] = {}
    for qid in sorted(token_counts_per_query):
        counts = list(token_counts_per_query[qid])
        if k is not None:
            counts = counts[:k]
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
            raise ValueError(f"query {qid!r}: token counts must be non-negative ints: {counts!r}")
        per_query[qid] = sum(counts)
    mean = sum(per_query.values()) / len(per_query) if per_query else 0.0
    return mean, per_query


def max_passage_projection(
    chunk_run: Mapping[str, Iterable[tuple[str, float]]],
) -> dict[str, dict[str, float]]:
    """Document scores from chunk scores: a document scores as its best chunk (MaxP).

    ``chunk_run`` maps a query id to ``(item_id, score)`` pairs, one per chunk. Each query's
    documents come out ordered by score descending, then document id ascending, so equal
    scores never depend on input order. This is the projection named :data:`PROJECTION`
    (Dai and Callan, "Deeper Text Understanding for IR with Contextual Neural Language
    Modeling", SIGIR 2019).
    """
    out: dict[str, dict[str, float]] = {}
    for qid in sorted(chunk_run):
        best: dict[str, float] = {}
        for item_id, score in chunk_run[qid]:
            score = float(score)
            if score != score:
                raise ValueError(f"query {qid!r}: chunk of {item_id!r} has a NaN score")
            if item_id not in best or score > best[item_id]:
                best[item_id] = score
        out[qid] = dict(sorted(best.items(), key=lambda kv: (-kv[1], kv[0])))
    return out
