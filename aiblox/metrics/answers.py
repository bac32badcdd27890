"""Answer metrics: how a query answered under a selection policy scores against its gold answers.

One definition for the sweep's ``answer_metrics`` stage and the notebooks' policy comparison.
Per query, from the final answer bundle and the R5 validation result (their JSON forms, as
``model_dump(mode="json")`` gives them):

- ``status:<STATUS>`` (1/0) for each of :data:`STATUSES` (:func:`answer_status`), ``answered``;
- ``answer_em`` and ``answer_f1``: SQuAD exact match and token F1 of the validated answer
  (:mod:`aiblox.metrics.squad`; 0 unless answered), for queries with gold answer texts;
- ``evidence_answer_recall``: a selected chunk's span holds a gold answer span
  (:func:`aiblox.chunking.answer_recall_at_k`'s span rule), for queries with gold spans;
- ``citation_precision``: the share of cited chunks holding one (queries with gold spans and
  citations);
- ``selected_chunks`` and ``selected_tokens``: the evidence the policy kept.

:func:`covers_span` and :func:`contains_answer` are the same tests for one chunk or one text
against a dataset's :class:`~aiblox.data.GoldAnswer` (the answer-assembly benchmark's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aiblox.chunking import answer_recall_at_k
from aiblox.metrics.squad import exact_match, token_f1

if TYPE_CHECKING:
    from aiblox.data import GoldAnswer

__all__ = [
    "ANSWER_METRICS",
    "STATUSES",
    "Gold",
    "answer_metrics",
    "answer_status",
    "contains_answer",
    "covers_span",
    "query_answer_metrics",
    "seen_spans",
]

ANSWER_METRICS: tuple[str, ...] = (
    "answer_em", "answer_f1", "answered", "evidence_answer_recall", "citation_precision",
    "selected_chunks", "selected_tokens",
)
"""Answer-level metrics (per query; means over queries): SQuAD exact match and token F1 of the
validated answer (0 when refused), answered (not refused, validation passed), whether the
selected evidence contains a gold span, the share of cited chunks holding a gold span, and the
selected chunks and tokens. Status rates are ``status:<STATUS>``."""

STATUSES = ("ANSWERED", "REFUSED", "NO_EVIDENCE", "INVALID", "FAILED")
"""Outcome of one query: answered and validated; the reader refused; no evidence survived
selection (no LLM call); the answer failed citation validation; assembly, prompt build or
generation failed."""

Gold = Mapping[str, Sequence[tuple[str, str, int]]]
"""``{qid: [(doc_id, answer_text, answer_start), ...]}`` (see
:func:`aiblox.engine.chunk_eval.gold_answers`)."""

Span = tuple[str, int | None, int | None, str]
"""A chunk's ``(item_id, start, end, text)``."""


def answer_status(bundle: Mapping[str, Any], validation: Mapping[str, Any]) -> str:
    """One of :data:`STATUSES` for a query's final bundle and validation result."""
    if bundle["assembly_status"] == "NO_EVIDENCE":
        return "NO_EVIDENCE"
    if bundle["assembly_status"] == "FAILED" or validation["generation_status"] == "FAILED":
        return "FAILED"
    if validation["is_refusal"]:
        return "REFUSED"
    if validation["validation_status"] != "PASSED":
        return "INVALID"
    return "ANSWERED"


Kept = Callable[[str, str], int]
"""``kept(chunk_text, sanitized_text)``: how many characters of a chunk's text its selected,
cut text covers (:func:`aiblox.assembly.sanitize.kept_source_length`)."""


def seen_spans(bundle: Mapping[str, Any], spans: Mapping[str, Span],
               kept: Kept | None = None) -> dict[str, Span]:
    """``spans`` as the reader saw them: a selected chunk the policy cut to its token budget
    (``truncated``) holds only the part it kept, ``kept`` characters of its text (without
    ``kept``: as many as its selected text has); an answer past the cut was never shown."""
    out = dict(spans)
    for s in bundle["selected_evidence"]:
        if s.get("truncated") and s["chunk_id"] in spans:
            item, start, _, text = spans[s["chunk_id"]]
            cut = s["sanitized_text"]
            n = min(kept(text, cut) if kept is not None else len(cut), len(text))
            out[s["chunk_id"]] = (item, start, None if start is None else start + n, text[:n])
    return out


def query_answer_metrics(qid: str, bundle: Mapping[str, Any], validation: Mapping[str, Any],
                         spans: Mapping[str, Span], gold: Sequence[tuple[str, str, int]],
                         gold_texts: Sequence[str], kept: Kept | None = None
                         ) -> dict[str, float]:
    """The metrics of one query (see the module doc): ``bundle`` and ``validation`` in JSON
    form, ``spans`` of the chunks by chunk id, the query's gold spans and gold answer texts
    (empty without gold answers: the gold-based metrics are then left out). A chunk the policy
    cut holds only what it kept (:func:`seen_spans`, ``kept``): an answer past the cut counted
    as held before."""
    spans = seen_spans(bundle, spans, kept)
    status = answer_status(bundle, validation)
    out = {f"status:{s}": float(status == s) for s in STATUSES}
    answered = status == "ANSWERED"
    out["answered"] = float(answered)
    selected = [s["chunk_id"] for s in bundle["selected_evidence"]]
    out["selected_chunks"] = float(len(selected))
    out["selected_tokens"] = float(sum(s["token_count"] for s in bundle["selected_evidence"]))
    if gold_texts:
        text = validation["validated_answer_text"] or ""
        out["answer_em"] = exact_match(text, gold_texts) if answered else 0.0
        out["answer_f1"] = token_f1(text, gold_texts) if answered else 0.0
    if gold:
        chosen = {qid: [spans[c] for c in selected if c in spans]}
        _, hit = answer_recall_at_k(chosen, {qid: gold}, max(len(selected), 1))
        out["evidence_answer_recall"] = float(hit[qid])
        cited = [c for c in validation["cited_chunk_ids"] if c in spans]
        if cited:
            good = [answer_recall_at_k({qid: [spans[c]]}, {qid: gold}, 1)[1][qid]
                    for c in cited]
            out["citation_precision"] = float(sum(good) / len(good))
    return out


def answer_metrics(queries: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]],
                   spans: Mapping[str, Span], gold: Gold,
                   gold_texts: Mapping[str, Sequence[str]], kept: Kept | None = None
                   ) -> dict[str, Any]:
    """``{"means", "per_query", "status_counts"}`` over ``queries`` ``{qid: (bundle,
    validation)}`` (:func:`query_answer_metrics` per query, in sorted id order; ``kept``: what a
    cut chunk kept of its text, :func:`seen_spans`). Means are over
    the queries with a value; on a dataset with gold answers, an answer metric no query has a
    value for (no citations at all) reads 0.0, and without gold answers the gold-based ones are
    absent."""
    per_query: dict[str, dict[str, float]] = {}
    counts = dict.fromkeys(STATUSES, 0)
    for qid in sorted(queries):
        bundle, validation = queries[qid]
        counts[answer_status(bundle, validation)] += 1
        values = query_answer_metrics(qid, bundle, validation, spans, gold.get(qid) or (),
                                      gold_texts.get(qid) or (), kept)
        for metric, value in values.items():
            per_query.setdefault(metric, {})[qid] = value
    means = {m: sum(vals.values()) / len(vals) for m, vals in per_query.items() if vals}
    if gold_texts:  # with gold answers, a metric no query has a value for reads 0.0
        for m in ANSWER_METRICS:
            means.setdefault(m, 0.0)
    return {"means": means, "per_query": per_query, "status_counts": counts}


def covers_span(chunk: Any, gold: GoldAnswer) -> bool:
    """Whether ``chunk`` (an evidence chunk: ``item_id``, ``start_idx``, ``end_idx``, ``text``)
    holds one gold answer span of ``gold``'s document: the span rule of ``answer_recall@k`` and
    ``evidence_answer_recall``."""
    spans = [(gold.corpus_id, a, s) for a, s in zip(gold.answers, gold.answer_starts, strict=True)]
    if not spans:
        return False
    return answer_recall_at_k({"q": [chunk]}, {"q": spans}, 1)[1]["q"] == 1.0


def contains_answer(text: str | None, gold: GoldAnswer) -> bool:
    """Whether ``text`` contains one gold answer string (casefolded)."""
    if not text:
        return False
    folded = text.casefold()
    return any(a.casefold() in folded for a in gold.answers if a.strip())
