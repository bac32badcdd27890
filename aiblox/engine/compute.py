"""What each stage of a sweep computes, one function per stage, on one split (the stages, their
configs and versions: :mod:`aiblox.engine.task`).

Every function takes plain inputs (the previous stages' outputs, JSON-shaped) and returns a
JSON-shaped output with no timestamps, latencies or cache counts in it, so the same inputs give
the same bytes and the same output hash. A point's chain (:mod:`aiblox.engine.point`)
memoises them by stage key. The fusion and metrics stages compute with
:class:`~aiblox.fusion.BatchFusion` and :class:`~aiblox.metrics.QrelsScorer` directly
(:func:`fused_arrays`); the chunk metrics and answer metrics are
:mod:`aiblox.metrics`'.

- :func:`signals_output`: the full-text and vector ranked lists of a split's queries.
- :func:`fused_arrays`: the fused run of a split, in compact form.
- :func:`chunk_output`: late chunking of the fused documents and chunk scoring (the retriever's
  :class:`~aiblox.retrieval.late_chunking.LateChunker`, without its embedder in bm25 mode): per
  query the returned evidence chunks and the max-passage projection of every scored chunk to
  documents.
- :func:`selection_output`: R2 input validation and chunk selection under a policy
  (:func:`~aiblox.assembly.assemble_answer_bundle`): selected chunk ids in order, dropped
  chunks with reasons, the answer bundle.
- :func:`prompt_output`: Prompt Contract V1 (:func:`~aiblox.assembly.build_prompt`): each
  prompt's sha256 and text, and the sha256 of all prompt bytes of the split.
- :func:`reader_output`: the reader's answer to each built prompt (latency left out); with a
  failed generation of a reader that calls an endpoint, not the stage's result
  (:func:`reader_reusable`: kept under a key of its own, asked again on the next run).
- :func:`validation_output`: R5 citation validation; NO_EVIDENCE, FAILED and refusals are data.
- :func:`answer_metrics_output`: the answer metrics (:mod:`aiblox.metrics.answers`) of
  every query, per query and mean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiblox.assembly import (
    AnswerBundle,
    LLMExecutionResult,
    SelectionPolicy,
    assemble_answer_bundle,
    build_prompt,
    validate_answer,
)
from aiblox.assembly.sanitize import kept_source_length
from aiblox.chunking import max_passage_projection
from aiblox.contracts.retrieval import RetrievalPrefs, ScoringConfig
from aiblox.data import Dataset
from aiblox.engine.chunk_eval import check_precomputed
from aiblox.fusion import BatchFusion, FusedArrays, FusedHit
from aiblox.hashing import sha256_hex
from aiblox.metrics import answer_metrics
from aiblox.metrics.answers import Gold
from aiblox.progress import phase, progress_bar
from aiblox.retrieval import HybridRetriever, SignalRuns

__all__ = [
    "answer_metrics_output",
    "chunk_output",
    "failed_generations",
    "fused_arrays",
    "prompt_output",
    "reference_fused_arrays",
    "reader_output",
    "reader_reusable",
    "selection_output",
    "signals_output",
    "validation_output",
]

# -- signals and fusion --------------------------------------------------------------------------
def signals_output(retriever: HybridRetriever, dataset: Dataset, split: str,
                   prefs: RetrievalPrefs, batch_size: int = 10_000,
                   limit: int | None = None, progress: bool = False) -> dict[str, Any]:
    """``{"qids", "text", "vec"}``: the full-text and vector lists (``[[doc_id, score], ...]``,
    best first) of the first ``limit`` judged queries of ``split`` (all when None), in id
    order, retrieved in batches; with ``progress``, timed as one phase
    (:func:`aiblox.progress.phase`: its start, a line every half minute, its time)."""
    queries = dataset.split_queries(split)[:limit]
    out: dict[str, Any] = {"qids": [q for q, _ in queries], "text": [], "vec": []}
    depth = f"depth {prefs.fts.top_k}/{prefs.vector.top_k}"
    with phase(f"signals: {dataset.name} {split} {prefs.mode} {depth} ({len(queries)} queries)",
               enabled=progress):
        for start in range(0, len(queries), batch_size):
            batch = queries[start:start + batch_size]
            group = [prefs.model_copy(update={"query_text": t, "query_id": q})
                     for q, t in batch]
            sig = retriever.signals(group)
            out["text"] += [[[d, s] for d, s in hits] for hits in sig.text]
            out["vec"] += [[[d, s] for d, s in hits] for hits in sig.vec]
    return out


def fused_arrays(prefs: RetrievalPrefs, index: BatchFusion) -> FusedArrays:
    """The fused run of a split's signals under ``prefs``, in compact form, from the split's
    index (the signals are not read): hybrid fusion vectorised (the same bytes as the
    HybridScorer), bm25 and dense modes each list passed through as :meth:`HybridRetriever.fuse`
    passes it (:meth:`~aiblox.fusion.BatchFusion.single_arrays`: the arrays of
    :func:`reference_fused_arrays`, that route, which the tests hold it to)."""
    if prefs.mode == "hybrid":
        return index.fuse_arrays(prefs.scoring, prefs.top_k_items)
    return index.single_arrays("text" if prefs.mode == "bm25" else "vec", prefs.top_k_items)


def reference_fused_arrays(prefs: RetrievalPrefs, index: BatchFusion,
                           signals: dict[str, Any]) -> FusedArrays:
    """:func:`fused_arrays` through :meth:`HybridRetriever.fuse` (the per-query reference) over
    the signals, encoded into ``index``'s compact form."""
    text = [[(d, s) for d, s in hits] for hits in signals["text"]]
    vec = [[(d, s) for d, s in hits] for hits in signals["vec"]]
    fused = HybridRetriever.fuse([prefs], SignalRuns(text=text, vec=vec))
    return index.encode({q: [[h.doc_id, h.score] for h in hs]
                         for q, hs in zip(signals["qids"], fused, strict=True)})


def recorded_fusion(config: Mapping[str, Any], index: BatchFusion) -> FusedArrays:
    """The fused run of a recorded ``fusion`` entry (a hybrid point's: the fusion the stage
    cache records rather than stores) from its config (:func:`aiblox.engine.configs.
    fusion_config`) and its signals' index: what :func:`fused_arrays` computed."""
    if config.get("mode") != "hybrid":
        raise ValueError(f"only a hybrid point's fusion is recorded, not {config.get('mode')!r}")
    return index.fuse_arrays(ScoringConfig.model_validate(config["scoring"]),
                             config["top_k_items"])


# -- chunks --------------------------------------------------------------------------------------
def chunk_output(late: Any, store: Any, prefs: RetrievalPrefs, queries: Sequence[tuple[str, str]],
                 run: Mapping[str, Sequence[Sequence[Any]]], batch_size: int = 50,
                 progress: bool = True, desc: str = "chunks") -> dict[str, Any]:
    """Late chunking and chunk scoring of each query's fused documents (``run``, already cut to
    ``top_k_items``), in batches: one chunk cache lookup and one embedding call per batch.

    In bm25 mode chunks are ranked by their BM25 alone (``late.text_only()``), as ``aiblox
    eval --mode bm25 --chunks`` and ``aiblox search`` rank them. The ``precomputed`` strategy
    over a store holding no chunk precomputed for the chunker is refused after the first batch
    (``ValueError``, as ``aiblox eval`` refuses it): every chunk metric would be 0.

    Output: ``evidence`` ``{qid: [chunk, ...]}`` (the top ``top_k_chunks``, best first; each
    with ``chunk_id``, ``item_id``, ``score``, ``score_text``, ``score_vec``, ``start``, ``end``,
    ``tokens``, ``text``, ``source_ref``), ``projection`` ``{qid: [[doc_id, score], ...]}``
    (every scored chunk projected to its document, max-passage) and ``chunks_scored``."""
    if prefs.mode == "bm25":
        late = late.text_only()
    chunker_id = late.chunker_for(prefs.chunking).chunker_id
    evidence: dict[str, list[dict[str, Any]]] = {}
    projection: dict[str, list[list[Any]]] = {}
    scored = 0
    bar = progress_bar(len(queries), desc, unit="q", enabled=progress, leave=False)
    for start in range(0, len(queries), batch_size):
        batch = queries[start:start + batch_size]
        ids = sorted({d for q, _ in batch for d, _ in run.get(q, [])})
        items = store.get_items(ids)
        counts: dict[str, int] = {}
        prepared = late.prepare(prefs, [items[i] for i in ids if i in items], counts)
        check_precomputed(prefs, counts, chunker_id, late.model_id)
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
        bundle, prompt = build_prompt(bundle, questions[qid], policy)
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


def failed_generations(reader: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(query id, failure reason)`` of every FAILED generation of a reader output, in query
    order."""
    return [(qid, str(res.get("failure_reason") or "no reason given"))
            for qid, res in sorted(reader["queries"].items())
            if res is not None and res.get("generation_status") == "FAILED"]


def reader_reusable(llm: Any) -> Callable[[Mapping[str, Any]], bool] | None:
    """Whether the reader stage's output is its result, reused by every later run
    (:attr:`~aiblox.engine.task.Task.reusable`): None (always) for a reader that is a function
    of its prompt (``deterministic = True``, the extractive reader: its FAILED is what that
    prompt gives, data); for any other, an output without a failed generation. Such a reader's
    FAILED says what its endpoint did (a refused connection, a timeout, an HTTP error status,
    a malformed response, an answer past ``max_tokens``), not what the prompt gives: stored as
    the result, it was served to every later run, a working endpoint or not. Its answers,
    refusals included, are the model's: reused."""
    if getattr(llm, "deterministic", False) is True:
        return None
    return lambda reader: not failed_generations(reader)


def validation_output(prompts: Mapping[str, Any], reader: Mapping[str, Any]) -> dict[str, Any]:
    """Per query: the R5 :class:`~aiblox.assembly.ValidationResult` of the reader's answer
    against the final bundle (statuses are data)."""
    out: dict[str, Any] = {}
    for qid in sorted(prompts["queries"]):
        bundle = AnswerBundle.model_validate(prompts["queries"][qid]["bundle"])
        raw = reader["queries"].get(qid)
        llm_result = LLMExecutionResult.model_validate(raw) if raw is not None else None
        out[qid] = validate_answer(bundle, llm_result, prompts["queries"][qid]["prompt_sha256"]
                                   ).model_dump(mode="json")
    return {"queries": out}


def answer_metrics_output(chunks: Mapping[str, Any], prompts: Mapping[str, Any],
                          validation: Mapping[str, Any], gold: Gold,
                          gold_texts: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """:func:`aiblox.metrics.answer_metrics` of every validated query: its final bundle
    (after the prompt build) and validation result, the returned chunks' spans."""
    spans = {c["chunk_id"]: (c["item_id"], c["start"], c["end"], c["text"])
             for ev in chunks["evidence"].values() for c in ev}
    queries = {qid: (prompts["queries"][qid]["bundle"], v)
               for qid, v in validation["queries"].items()}
    return answer_metrics(queries, spans, gold, gold_texts, kept=kept_source_length)
