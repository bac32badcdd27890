"""What each stage of a pipeline sweep computes, one function per stage, on one split.

Every function takes plain inputs (the previous stages' outputs, JSON-shaped) and returns a
JSON-shaped output with no timestamps, latencies or cache counts in it, so the same inputs give
the same bytes and the same output hash. The runner (:mod:`aiblox.eval.sweep.pipeline`) memoises
them by stage key.

- :func:`chunk_output`: late chunking of the fused documents and chunk scoring (the retriever's
  :class:`~aiblox.retrieval.late_chunking.LateChunker`): per query the returned evidence chunks
  and the max-passage projection of every scored chunk to documents.
- :func:`chunk_metrics`: answer recall@k over the returned chunks (gold answers), evidence
  tokens, and ranx metrics of the projection (``max_passage:<metric>``).
- :func:`selection_output`: R2 input validation and chunk selection under a policy
  (:func:`~aiblox.assembly.assemble_answer_bundle`): selected chunk ids in order, dropped
  chunks with reasons, the answer bundle.
- :func:`prompt_output`: Prompt Contract V1 (:func:`~aiblox.assembly.build_prompt_v1`): each
  prompt's sha256 and text, and the sha256 of all prompt bytes of the split.
- :func:`reader_output`: the reader's answer to each built prompt (latency left out).
- :func:`validation_output`: R5 citation validation; NO_EVIDENCE, FAILED and refusals are data.
- :func:`answer_metrics`: SQuAD exact match and token F1, answered rate, status rates,
  evidence answer recall and citation precision, per query and mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tqdm.auto import tqdm

from aiblox.assembly import (
    AnswerBundle,
    LLMExecutionResult,
    SelectionPolicy,
    assemble_answer_bundle,
    build_prompt_v1,
    validate_answer,
)
from aiblox.chunking.metrics import answer_recall_at_k, max_passage_projection
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.eval.sweep.spec import ANSWER_METRICS, PROJECTION_PREFIX
from aiblox.eval.sweep.squad_answer import exact_match, token_f1
from aiblox.fusion.types import FusedHit
from aiblox.hashing import sha256_hex

__all__ = [
    "STATUSES",
    "answer_metrics",
    "answer_status",
    "chunk_metrics",
    "chunk_output",
    "prompt_output",
    "reader_output",
    "selection_output",
    "validation_output",
]

STATUSES = ("ANSWERED", "REFUSED", "NO_EVIDENCE", "INVALID", "FAILED")
"""Outcome of one query: answered and validated; the reader refused; no evidence survived
selection (no LLM call); the answer failed citation validation; assembly, prompt build or
generation failed."""

Gold = Mapping[str, Sequence[tuple[str, str, int]]]
"""``{qid: [(doc_id, answer_text, answer_start), ...]}`` (see ``chunk_eval.gold_answers``)."""


# -- chunks --------------------------------------------------------------------------------------
def chunk_output(late: Any, store: Any, prefs: RetrievalPrefs, queries: Sequence[tuple[str, str]],
                 run: Mapping[str, Sequence[Sequence[Any]]], batch_size: int = 50,
                 progress: bool = True, desc: str = "chunks") -> dict[str, Any]:
    """Late chunking and chunk scoring of each query's fused documents (``run``, already cut to
    ``top_k_items``), in batches: one chunk cache lookup and one embedding call per batch.

    Output: ``evidence`` ``{qid: [chunk, ...]}`` (the top ``top_k_chunks``, best first; each
    with ``chunk_id``, ``item_id``, ``score``, ``score_text``, ``score_vec``, ``start``, ``end``,
    ``tokens``, ``text``, ``source_ref``), ``projection`` ``{qid: [[doc_id, score], ...]}``
    (every scored chunk projected to its document, max-passage) and ``chunks_scored``."""
    evidence: dict[str, list[dict[str, Any]]] = {}
    projection: dict[str, list[list[Any]]] = {}
    scored = 0
    bar = tqdm(total=len(queries), desc=desc, unit="q", disable=not progress, leave=False)
    for start in range(0, len(queries), batch_size):
        batch = queries[start:start + batch_size]
        ids = sorted({d for q, _ in batch for d, _ in run.get(q, [])})
        items = store.get_items(ids)
        counts: dict[str, int] = {}
        prepared = late.prepare(prefs, [items[i] for i in ids if i in items], counts)
        qvecs = (late.embedder.embed([t for _, t in batch]) if late.embedder is not None
                 else [None] * len(batch))
        for (qid, text), qv in zip(batch, qvecs, strict=True):
            hits = [FusedHit(str(d), float(s), None, None, None, None) for d, s in run.get(qid, [])]
            p = prefs.model_copy(update={"query_text": text, "query_id": qid})
            ranked = late.rank(p, hits, items, counts, prepared=prepared, query_vector=qv)
            evidence[qid] = [{
                "chunk_id": s.chunk.chunk_id, "item_id": s.chunk.item_id, "score": s.score,
                "score_text": s.score_text, "score_vec": s.score_vec,
                "start": s.chunk.start_idx, "end": s.chunk.end_idx,
                "tokens": s.chunk.token_count, "text": s.chunk.text,
                "source_ref": _source_ref(items.get(s.chunk.item_id)),
            } for s in ranked[:prefs.top_k_chunks]]
            proj = max_passage_projection({qid: [(s.chunk.item_id, s.score) for s in ranked]})
            projection[qid] = [[d, v] for d, v in proj[qid].items()]
        scored += counts.get("chunks_scored", 0)
        bar.update(len(batch))
    bar.close()
    return {"evidence": evidence, "projection": projection, "chunks_scored": scored}


def _source_ref(item: Any) -> str | None:
    if item is None:
        return None
    return item.source_ref or item.source or None


def chunk_metrics(chunks: Mapping[str, Any], qrels: Mapping[str, Mapping[str, int]], gold: Gold,
                  metrics: Sequence[str], k_values: Sequence[int], scorer: Any
                  ) -> dict[str, Any]:
    """``{"means", "per_query"}``: ``answer_recall@k`` (queries with gold answers; a chunk
    counts when its span holds a gold answer span of the gold document), ``evidence_tokens``
    (tokens of the returned chunks), ``max_passage:<metric>`` (ranx, via ``scorer``, a
    :class:`~aiblox.eval.sweep.split_metrics.SplitMetrics` over ``qrels``)."""
    evidence = chunks["evidence"]
    per_query: dict[str, dict[str, float]] = {}
    as_tuples = {q: [(c["item_id"], c["start"], c["end"], c["text"]) for c in ev]
                 for q, ev in evidence.items()}
    wanted = {q: g for q, g in gold.items() if q in evidence}
    if wanted:
        for k in sorted(set(k_values)):
            _, per = answer_recall_at_k(as_tuples, wanted, int(k))
            per_query[f"answer_recall@{k}"] = per
    per_query["evidence_tokens"] = {q: float(sum(c["tokens"] for c in ev))
                                    for q, ev in sorted(evidence.items())}
    if qrels:
        _, proj = scorer.evaluate(chunks["projection"], list(metrics))
        for m, vals in proj.items():
            per_query[f"{PROJECTION_PREFIX}{m}"] = vals
    means = {m: (sum(v.values()) / len(v) if v else 0.0) for m, v in per_query.items()}
    return {"means": means, "per_query": per_query}


# -- selection, prompt, reader, validation -------------------------------------------------------
def request_id(question: str, evidence: Sequence[Mapping[str, Any]]) -> str:
    """The deterministic request id :func:`aiblox.assembly.default_request_id` gives: sha256 of
    the question and the evidence chunk ids (16 hex)."""
    return sha256_hex({"question": question,
                       "chunks": [[c["item_id"], c["chunk_id"]] for c in evidence]})[:16]


def selection_output(chunks: Mapping[str, Any], questions: Mapping[str, str],
                     policy: SelectionPolicy, index_version: str, embedding_model: str,
                     top_k_chunks: int) -> dict[str, Any]:
    """Per query (ids sorted): ``status`` (the bundle's assembly status), ``selected`` chunk
    ids in evidence order, ``dropped`` ``[[chunk_id, reason], ...]`` and ``bundle``."""
    out: dict[str, Any] = {}
    for qid in sorted(chunks["evidence"]):
        ev = chunks["evidence"][qid]
        raw = {
            "request_id": request_id(questions[qid], ev),
            "results": [{"chunk_id": c["chunk_id"], "knowledge_id": c["item_id"],
                         "chunk_text": c["text"], "rank": rank,
                         "similarity_score": c["score"], "source_reference": c["source_ref"]}
                        for rank, c in enumerate(ev)],
            "index_version": index_version, "embedding_model": embedding_model,
            "retrieval_top_k": max(int(top_k_chunks), 1),
        }
        bundle = assemble_answer_bundle(questions[qid], raw, policy)
        out[qid] = {
            "status": bundle.assembly_status,
            "selected": [s.chunk_id for s in bundle.selected_evidence],
            "dropped": [[d.chunk_id, d.reason] for d in bundle.metrics.dropped],
            "bundle": bundle.model_dump(mode="json"),
        }
    return {"queries": out}


def prompt_output(selection: Mapping[str, Any], questions: Mapping[str, str],
                  policy: SelectionPolicy) -> dict[str, Any]:
    """Per query: ``build_status``, ``prompt_sha256``, ``prompt_text`` and the ``bundle`` after
    the PB4 budget loop (a failed build fails an OK bundle, as
    :func:`~aiblox.assembly.answer_from_input` does); and ``prompts_sha256``, the sha256 of
    every prompt's bytes of the split (``[[qid, prompt_text], ...]`` in query order)."""
    out: dict[str, Any] = {}
    for qid in sorted(selection["queries"]):
        bundle = AnswerBundle.model_validate(selection["queries"][qid]["bundle"])
        bundle, prompt = build_prompt_v1(bundle, questions[qid], policy)
        if prompt.build_status == "FAILED" and bundle.assembly_status == "OK":
            bundle = bundle.model_copy(update={"assembly_status": "FAILED",
                                               "failure_reason": prompt.failure_reason})
        out[qid] = {"build_status": prompt.build_status, "failure_reason": prompt.failure_reason,
                    "prompt_sha256": prompt.prompt_sha256, "prompt_text": prompt.prompt_text,
                    "prompt_tokens": prompt.prompt_tokens,
                    "bundle": bundle.model_dump(mode="json")}
    prompts = sha256_hex([[q, out[q]["prompt_text"]] for q in sorted(out)])
    return {"queries": out, "prompts_sha256": prompts}


def reader_output(prompts: Mapping[str, Any], llm: Any, max_output_tokens: int
                  ) -> dict[str, Any]:
    """Per query: the reader's :class:`~aiblox.assembly.LLMExecutionResult` for a built prompt
    (``llm_latency_ms`` set to 0: time is not content), None when no prompt was built."""
    out: dict[str, Any] = {}
    for qid in sorted(prompts["queries"]):
        p = prompts["queries"][qid]
        if p["build_status"] != "OK":
            out[qid] = None
            continue
        res = llm.generate(p["prompt_text"], request_id=p["bundle"]["request_id"],
                           max_output_tokens=max_output_tokens)
        out[qid] = res.model_copy(update={"llm_latency_ms": 0.0}).model_dump(mode="json")
    return {"queries": out}


def validation_output(prompts: Mapping[str, Any], reader: Mapping[str, Any]) -> dict[str, Any]:
    """Per query: the R5 :class:`~aiblox.assembly.ValidationResult` of the reader's answer
    against the final bundle (statuses are data)."""
    out: dict[str, Any] = {}
    for qid in sorted(prompts["queries"]):
        bundle = AnswerBundle.model_validate(prompts["queries"][qid]["bundle"])
        raw = reader["queries"].get(qid)
        llm_result = LLMExecutionResult.model_validate(raw) if raw is not None else None
        out[qid] = validate_answer(bundle, llm_result).model_dump(mode="json")
    return {"queries": out}


# -- answer metrics ------------------------------------------------------------------------------
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


def answer_metrics(chunks: Mapping[str, Any], prompts: Mapping[str, Any],
                   validation: Mapping[str, Any], gold: Gold,
                   gold_texts: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """``{"means", "per_query", "status_counts"}``. Per query: ``answer_em`` and
    ``answer_f1`` (SQuAD, 0 unless answered; queries with gold answers), ``answered``,
    ``evidence_answer_recall`` (a selected chunk's span holds a gold span), ``citation_precision``
    (share of cited chunks holding one; queries with gold answers and citations),
    ``selected_chunks``, ``selected_tokens`` and ``status:<STATUS>`` (1/0). Means are over the
    queries with a value; on a dataset with gold answers, an answer metric no query has a value
    for (no citations at all) reads 0.0, and without gold answers the gold-based ones are
    absent."""
    spans = {c["chunk_id"]: (c["item_id"], c["start"], c["end"], c["text"])
             for ev in chunks["evidence"].values() for c in ev}
    per_query: dict[str, dict[str, float]] = {}
    counts = dict.fromkeys(STATUSES, 0)

    def put(metric: str, qid: str, value: float) -> None:
        per_query.setdefault(metric, {})[qid] = float(value)

    for qid in sorted(validation["queries"]):
        v = validation["queries"][qid]
        bundle = prompts["queries"][qid]["bundle"]
        status = answer_status(bundle, v)
        counts[status] += 1
        for s in STATUSES:
            put(f"status:{s}", qid, status == s)
        answered = status == "ANSWERED"
        put("answered", qid, answered)
        selected = [s["chunk_id"] for s in bundle["selected_evidence"]]
        put("selected_chunks", qid, len(selected))
        put("selected_tokens", qid, sum(s["token_count"] for s in bundle["selected_evidence"]))
        if qid in gold_texts and gold_texts[qid]:
            text = v["validated_answer_text"] or ""
            put("answer_em", qid, exact_match(text, gold_texts[qid]) if answered else 0.0)
            put("answer_f1", qid, token_f1(text, gold_texts[qid]) if answered else 0.0)
        if qid in gold and gold[qid]:
            chosen = {qid: [spans[c] for c in selected if c in spans]}
            _, hit = answer_recall_at_k(chosen, {qid: gold[qid]}, max(len(selected), 1))
            put("evidence_answer_recall", qid, hit[qid])
            cited = [c for c in v["cited_chunk_ids"] if c in spans]
            if cited:
                good = [answer_recall_at_k({qid: [spans[c]]}, {qid: gold[qid]}, 1)[1][qid]
                        for c in cited]
                put("citation_precision", qid, sum(good) / len(good))
    means = {m: sum(vals.values()) / len(vals) for m, vals in per_query.items() if vals}
    if gold_texts:  # with gold answers, a metric no query has a value for reads 0.0
        for m in ANSWER_METRICS:
            means.setdefault(m, 0.0)
    return {"means": means, "per_query": per_query, "status_counts": counts}
