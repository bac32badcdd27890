"""The audit pack of one answered query, built from what the pipeline already returned.

:func:`answer_evidence_pack` takes the retriever's :class:`RetrievalBundle`, the assembly's
:class:`~aiblox.assembly.records.AnswerResult` (answer bundle, prompt, LLM result, validation,
hashes) and, optionally, the ``rag.sources`` cards and the full texts of the items, and returns
an :class:`~aiblox.evidence.audit_pack.EvidencePack`:

- **decision**: ``answer`` when validation passed with an answer; ``refusal`` otherwise (the
  exact refusal, status ``NO_EVIDENCE`` or ``OK`` when the model refused; status ``FAILED``
  with the validation failure when the answer was withheld).
- **sources**: the cited evidence chunks in citation order, then the other chunks shown to the
  model in anchor order; with no selected evidence (a refusal before the model), the source
  cards (or the top candidates). Each source: ``name`` = the item's source (dataset),
  ``uri`` = the card's http link when there is one, ``internal_ref`` = ``item_id#chunk_id``
  (``item_id`` for a card), a verbatim excerpt of at most 2,000 characters of the retrieved
  chunk text (the card's snippet for a card), ``content_sha256`` of the item's full text when
  ``item_texts`` has it (else of the full retrieved chunk text or snippet), and
  ``confidence`` = the chunk's blended score (``w_vec * cosine + w_text * bm25 / max``)
  clamped to [0, 1] (a card: its item's best chunk score, else its vector similarity, clamped).
- **tool calls**: the retrieval (parameters, result counts) and the LLM call when one was
  made (intended: a cited answer; actual: what validation saw; a failed call is recorded with
  its error). Timings are left out: they are not evidence.
- **observations** (shown, never hashed): the retrieval's cache counts (``chunk_cache_*``,
  ``precomputed_*``: hits, misses, writes), the chunk-cache writes as side effects, and the
  retrieval's run parameters (:data:`RUN_PARAMS`: ``batch_size``, how many queries shared its
  round). They tell how warm the cache was and how the run was batched, not what the answer
  rests on.
- **prompts**: the Prompt Contract V1 template (name, version, sha256 of the prompt bytes).
- **model**: the LLM's configured model name; ``model_version`` the name the server reported.
- **trace id**: the answer's ``request_id`` (deterministic by default).
- **memo** (English): title, executive summary and a body that cites the top three sources
  as ``[1]``, ``[2]``, ``[3]`` and maps the answer's ``[Cn]`` anchors to them.

Same inputs, same pack id: ``retrieved_at`` is an argument, and ``created_at`` and the
observations are never hashed, so a query answered on a cold chunk cache (which writes the
cache) and on a warm one (which reads it), or retrieved alone (``aiblox answer``) and in a batch
of queries (a notebook's sample), gives the same pack id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from aiblox.assembly.records import AnswerResult
from aiblox.contracts.retrieval import EvidenceChunk, RetrievalBundle
from aiblox.evidence.audit_pack import (
    EXCERPT_MAX_CHARS,
    EvidencePack,
    PackSource,
    PromptRecord,
    ToolCallRecord,
    build_evidence_pack,
)
from aiblox.evidence.source_cards import (
    DefaultEvidencePacker,
    EvidencePackOptions,
    SourceItem,
)
from aiblox.hashing import sha256_text, to_plain

__all__ = [
    "INTENDED_ANSWER",
    "INTENDED_RETRIEVAL",
    "MEMO_SOURCES",
    "RUN_PARAMS",
    "answer_evidence_pack",
    "answer_source_cards",
]

INTENDED_RETRIEVAL = "retrieve evidence for the query"
"""Intended action of the retrieval call (its actual action equals it when evidence came back)."""
INTENDED_ANSWER = "generate an answer that cites the evidence"
"""Intended action of the LLM call (its actual action equals it when validation passed)."""
MEMO_SOURCES = 3
"""The memo body cites this many top sources."""
CACHE_COUNT_PREFIXES = ("chunk_cache_", "precomputed_")
"""Retrieval counts that describe the cache's state, not the result: recorded in the pack's
``observations``, outside its hashed content."""


RUN_PARAMS = frozenset({"batch_size"})
"""Retrieval parameters that say how the run was batched, not what was retrieved (the
retriever's ``batch_size``: how many queries shared one round; a query's results are the same
alone or in a batch): recorded in the pack's ``observations``, outside its hashed content."""


def _is_cache_count(key: str) -> bool:
    return key.startswith(CACHE_COUNT_PREFIXES)


def _confidence(score: float | None) -> float:
    if score is None or not math.isfinite(score):
        return 0.0
    return round(min(1.0, max(0.0, float(score))), 6)


def _full_hash(item_id: str, fallback: str, item_texts: Mapping[str, str] | None) -> str:
    text = (item_texts or {}).get(item_id)
    return sha256_text(text if text is not None else fallback)


def _chunk_sources(
    chunk_ids: Sequence[str],
    retrieval: RetrievalBundle,
    names: Mapping[str, str],
    urls: Mapping[str, str],
    item_texts: Mapping[str, str] | None,
    retrieved_at: str,
) -> list[PackSource]:
    chunks: dict[str, EvidenceChunk] = {}
    for ev in retrieval.evidence:
        if ev.chunk_id is not None:
            chunks.setdefault(ev.chunk_id, ev)
    out = []
    for cid in chunk_ids:
        held = chunks.get(cid)
        if held is None:  # a selected chunk the retrieval bundle does not hold: nothing to quote
            continue
        ev = held
        out.append(
            PackSource(
                name=names.get(ev.item_id, "unknown"),
                uri=urls.get(ev.item_id),
                internal_ref=f"{ev.item_id}#{cid}",
                excerpt=ev.text[:EXCERPT_MAX_CHARS],
                content_sha256=_full_hash(ev.item_id, ev.text, item_texts),
                retrieved_at=retrieved_at,
                confidence=_confidence(ev.score),
            )
        )
    return out


def _card_sources(
    retrieval: RetrievalBundle,
    cards: Sequence[SourceItem] | None,
    item_texts: Mapping[str, str] | None,
    retrieved_at: str,
    limit: int,
) -> list[PackSource]:
    best: dict[str, float] = {}
    for ev in retrieval.evidence:
        best[ev.item_id] = max(best.get(ev.item_id, -math.inf), ev.score)
    cands = {c.item_id: c for c in retrieval.candidates}
    order = [s.source_id for s in cards] if cards is not None else list(cands)
    url = {s.source_id: s.url for s in cards or []}
    snip = {s.source_id: s.snippet for s in cards or []}
    out = []
    for item_id in order[:limit]:
        cand = cands.get(item_id)
        excerpt = snip.get(item_id) or (cand.snippet if cand else None) or ""
        score = best.get(item_id, cand.score_vec if cand else None)
        out.append(
            PackSource(
                name=cand.source if cand else "unknown",
                uri=url.get(item_id),
                internal_ref=item_id,
                excerpt=excerpt[:EXCERPT_MAX_CHARS],
                content_sha256=_full_hash(item_id, excerpt, item_texts),
                retrieved_at=retrieved_at,
                confidence=_confidence(score),
            )
        )
    return out


def _decision(result: AnswerResult) -> dict[str, Any]:
    v = result.validation
    if v.validation_status == "PASSED" and not v.is_refusal and result.answer_text is not None:
        return {"kind": "answer", "text": result.answer_text, "status": "OK"}
    if v.is_refusal and result.answer_text is not None:
        status = result.answer_bundle.assembly_status
        reason = (
            result.answer_bundle.failure_reason or "no evidence survived selection"
            if status == "NO_EVIDENCE"
            else "the model refused: the evidence does not answer the question"
        )
        return {"kind": "refusal", "text": result.answer_text, "status": status, "reason": reason}
    reason = v.failure_reason or result.answer_bundle.failure_reason or "answer withheld"
    return {
        "kind": "refusal",
        "text": f"No answer was shown: {reason}",
        "status": "FAILED",
        "reason": reason,
    }


def _retrieval_call(retrieval: RetrievalBundle) -> ToolCallRecord:
    counts = {k: v for k, v in sorted(retrieval.stats.counts.items()) if not _is_cache_count(k)}
    n_cand, n_ev = len(retrieval.candidates), len(retrieval.evidence)
    if n_ev:
        actual = INTENDED_RETRIEVAL
    elif n_cand:
        actual = "retrieved candidates but no evidence chunks"
    else:
        actual = "retrieved nothing"
    return ToolCallRecord(
        tool_name=f"retriever:{retrieval.stats.params.get('mode', 'hybrid')}",
        kind="retrieval",
        intended_action=INTENDED_RETRIEVAL,
        actual_action=actual,
        inputs=to_plain({k: v for k, v in sorted(retrieval.stats.params.items())
                         if k not in RUN_PARAMS}),
        outputs={"candidates": n_cand, "evidence_chunks": n_ev, "counts": counts},
    )


def _retrieval_observations(retrieval: RetrievalBundle) -> dict[str, Any]:
    """The retrieval's cache counts, the cache writes it made and its run parameters (not
    hashed)."""
    cache = {k: v for k, v in sorted(retrieval.stats.counts.items()) if _is_cache_count(k)}
    run = {k: v for k, v in sorted(retrieval.stats.params.items()) if k in RUN_PARAMS}
    seen: dict[str, Any] = {}
    if cache:
        writes = int(cache.get("chunk_cache_writes", 0))
        seen["counts"] = to_plain(cache)
        seen["side_effects"] = [f"wrote {writes} chunk cache entries"] if writes else []
    if run:
        seen["params"] = to_plain(run)
    return {"retrieval": seen} if seen else {}


def _llm_call(result: AnswerResult) -> ToolCallRecord | None:
    llm = result.llm_result
    if llm is None:
        return None
    v = result.validation
    inputs = {
        "model": llm.model_name,
        "prompt_sha256": llm.prompt_sha256,
        "template_sha256": result.prompt.template_sha256,
        "policy_sha256": result.hashes.get("policy_sha256"),
    }
    outputs: dict[str, Any] = {
        "finish_reason": llm.finish_reason,
        "attempts": llm.attempts,
        "completion_tokens": llm.completion_tokens_actual,
        "raw_text_sha256": sha256_text(llm.raw_model_text) if llm.raw_model_text else None,
        "validation_status": v.validation_status,
        "failure_codes": list(v.failure_codes),
        "cited_chunk_ids": list(v.cited_chunk_ids),
    }
    if llm.generation_status == "FAILED":
        return ToolCallRecord(
            tool_name=llm.llm_name, kind="llm", intended_action=INTENDED_ANSWER,
            actual_action="the call failed", status="failed",
            error=llm.failure_reason or "generation failed", inputs=inputs, outputs=outputs,
        )
    if v.validation_status == "PASSED" and not v.is_refusal:
        actual = INTENDED_ANSWER
    elif v.is_refusal:
        actual = "refused to answer"
    else:
        actual = f"generated an answer that failed validation ({v.failure_reason})"
    return ToolCallRecord(
        tool_name=llm.llm_name, kind="llm", intended_action=INTENDED_ANSWER,
        actual_action=actual, inputs=inputs, outputs=outputs,
    )


def _memo(question: str, decision: dict[str, Any], sources: Sequence[PackSource],
          anchors: Mapping[str, int]) -> dict[str, Any]:
    top = list(sources[:MEMO_SOURCES])
    cites = " ".join(f"[{i}]" for i in range(1, len(top) + 1))
    listing = "; ".join(
        f"[{i}] {s.name} {s.internal_ref or s.uri} (confidence {s.confidence:.2f})"
        for i, s in enumerate(top, 1)
    )
    short_q = question if len(question) <= 80 else question[:79] + "\u2026"
    if decision["kind"] == "answer":
        title = f"Answer: {short_q}"
        summary = decision["text"].split("\n")[0][:300]
        mapping = ", ".join(f"[{a}] = [{n}]" for a, n in sorted(anchors.items(),
                                                                key=lambda kv: kv[1]))
        body = (f"The question was answered from {len(sources)} source(s); the top ones are "
                f"{cites}: {listing}. Citation anchors: {mapping or 'none'}. "
                f"Answer: {decision['text']}")
    else:
        title = f"Refusal: {short_q}"
        summary = f"No answer was given ({decision['status']}): {decision.get('reason')}"
        consulted = (f"The top sources consulted were {cites}: {listing}." if top
                     else "No source was consulted.")
        body = f"{summary}. {consulted}"
    return {"primary": {"language": "en", "title": title, "executive_summary": summary,
                        "body": body}}


def _evidence_order(result: AnswerResult) -> list[str]:
    """The chunk ids of the evidence the reader was given, the cited ones first (in citation
    order), then the rest in anchor order: the order of an answer's pack sources."""
    ab, v = result.answer_bundle, result.validation
    given = {ev.chunk_id for ev in ab.selected_evidence}
    cited = [cid for cid in v.cited_chunk_ids if cid in given]
    return cited + [ev.chunk_id for ev in ab.selected_evidence if ev.chunk_id not in cited]


def answer_source_cards(retrieval: RetrievalBundle, result: AnswerResult,
                        max_sources: int = 6) -> list[SourceItem]:
    """The ``rag.sources`` cards (:class:`~aiblox.evidence.source_cards.DefaultEvidencePacker`)
    of an answered query: one per document of the evidence the reader was given, cited
    documents first, in the order its pack lists them, so that every citation's document has
    a card (and its link) however low it ranked among the candidates; at least
    ``max_sources`` of them when the evidence spans more documents. A refusal before the model
    (no evidence selected) shows the retrieval's top ``max_sources`` documents by score, as the
    packer does by default."""
    packer = DefaultEvidencePacker()
    chunk_item = {ev.chunk_id: ev.knowledge_id for ev in result.answer_bundle.selected_evidence}
    items = list(dict.fromkeys(chunk_item[c] for c in _evidence_order(result)))
    if not items:
        return packer.pack(retrieval.candidates, retrieval.evidence,
                           EvidencePackOptions(max_sources=max_sources))
    by_id = {c.item_id: c for c in retrieval.candidates}
    given = [by_id[i] for i in items if i in by_id]
    return packer.pack(given, retrieval.evidence,
                       EvidencePackOptions(max_sources=max(max_sources, len(given)),
                                           order_by="input"))


def answer_evidence_pack(
    question: str,
    retrieval: RetrievalBundle,
    result: AnswerResult,
    *,
    retrieved_at: str,
    source_cards: Sequence[SourceItem] | None = None,
    item_texts: Mapping[str, str] | None = None,
    tenant_id: str = "default",
    query_id: str | None = None,
    evidence_bundle_id: str | None = None,
    created_at: str | None = None,
    max_sources: int = 6,
) -> EvidencePack:
    """The :class:`EvidencePack` of one answered query (see the module docstring).

    ``retrieved_at`` (ISO-8601) is recorded on every source and hashed into the pack id;
    ``source_cards`` are the query's ``rag.sources`` cards (:func:`answer_source_cards`; used
    for links and for the sources of a refusal before the model); ``item_texts`` maps item ids
    to their full text so that ``content_sha256`` covers the whole item; ``created_at`` and the
    retrieval's cache counts and run parameters (``observations``) are recorded, never hashed.
    """
    names = {c.item_id: c.source for c in retrieval.candidates}
    urls = {s.source_id: s.url for s in source_cards or [] if s.url}
    ab, v = result.answer_bundle, result.validation
    anchor_of = {ev.chunk_id: ev.citation_anchor for ev in ab.selected_evidence}
    cited = [cid for cid in v.cited_chunk_ids if cid in anchor_of]
    ordered = _evidence_order(result)
    if ordered:
        sources = _chunk_sources(ordered, retrieval, names, urls, item_texts, retrieved_at)
    else:
        sources = _card_sources(retrieval, source_cards, item_texts, retrieved_at, max_sources)
    ref_pos = {s.internal_ref: i for i, s in enumerate(sources, 1)}
    anchors = {
        anchor_of[cid]: ref_pos[f"{ev.knowledge_id}#{cid}"]
        for ev in ab.selected_evidence
        for cid in [ev.chunk_id]
        if cid in cited and f"{ev.knowledge_id}#{cid}" in ref_pos
    }
    decision = _decision(result)
    calls = [_retrieval_call(retrieval)]
    llm_call = _llm_call(result)
    if llm_call is not None:
        calls.append(llm_call)
    prompts = []
    if result.prompt.prompt_sha256:
        prompts.append(PromptRecord(template_name="prompt_contract",
                                    template_version=result.prompt.prompt_contract_version,
                                    prompt_sha256=result.prompt.prompt_sha256))
    llm = result.llm_result
    return build_evidence_pack(
        tenant_id=tenant_id,
        query=question,
        query_id=query_id,
        decision=decision,
        sources=sources,
        tool_calls=calls,
        prompts=prompts,
        model=llm.model_name if llm else None,
        model_version=llm.model_reported if llm else None,
        trace_id=result.request_id,
        evidence_bundle_id=evidence_bundle_id,
        memo=_memo(question, decision, sources, anchors),
        created_at=created_at,
        observations=_retrieval_observations(retrieval),
    )
