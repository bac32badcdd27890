"""One question in a notebook: traced through retrieval, late chunking, selection, prompt
building, the reader and validation, every artifact with its hashes and its evidence pack; and
what differs between two evidence packs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from aiblox.assembly import AnswerResult, answer_question, get_llm, load_policy
from aiblox.contracts.retrieval import RetrievalBundle, RetrievalPrefs
from aiblox.engine.evaluate import config_hash
from aiblox.evidence import EvidencePack, answer_evidence_pack, answer_source_cards
from aiblox.explore.notebook import NotebookWorkspace, check_top_k_chunks
from aiblox.hashing import canonical_json, sha256_hex

__all__ = ["PACK_RETRIEVED_AT", "QueryTrace", "diff_packs", "evidence_pack", "inspect_question"]

PACK_RETRIEVED_AT = "2000-01-01T00:00:00Z"
"""The retrieval time the notebooks record in evidence packs: fixed, so that the same question
on the same store and settings gives the same pack id (``aiblox answer --retrieved-at`` with
this value reproduces it)."""


@dataclass
class QueryTrace:
    """One question through the whole pipeline, with every artifact."""

    question: str
    prefs: RetrievalPrefs
    bundle: RetrievalBundle
    result: AnswerResult
    sources: list[Any]
    candidates: pd.DataFrame
    chunks: pd.DataFrame
    selected: pd.DataFrame
    dropped: pd.DataFrame
    hashes: dict[str, str | None]
    pack: EvidencePack
    """The evidence pack of the answer (built with :data:`PACK_RETRIEVED_AT`)."""

    @property
    def prompt_bytes(self) -> bytes:
        """The exact prompt sent to the reader (UTF-8)."""
        return self.result.prompt.prompt_text.encode("utf-8")


def evidence_pack(ws: NotebookWorkspace, question: str, bundle: RetrievalBundle,
                  result: AnswerResult, *, retrieved_at: str = PACK_RETRIEVED_AT,
                  query_id: str | None = None) -> EvidencePack:
    """The evidence pack of ``question`` answered as ``result`` from ``bundle``, built as
    ``aiblox answer`` builds it (source cards for the links, the items' full texts from the
    store for the content hashes), at the fixed ``retrieved_at``. The retrieval's cache counts
    are recorded in the pack's ``observations``, outside its id: a cold and a warm chunk cache
    give the same pack id."""
    cards = answer_source_cards(bundle, result)
    items = ws.store.get_items(sorted({c.item_id for c in bundle.candidates}))
    return answer_evidence_pack(question, bundle, result, retrieved_at=retrieved_at,
                                source_cards=cards,
                                item_texts={k: v.text for k, v in items.items()},
                                query_id=query_id)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else canonical_json(value)


def _flat(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for k in sorted(value):
            _flat(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            # tool calls by kind (retrieval, llm), prompts by template, others by position
            key = v.get("kind") or v.get("template_name") or str(i)
            _flat(v, f"{prefix}[{key}]", out)
    else:
        out[prefix] = _cell(value)


_DIFF_COLUMNS = ["field", "change", "A", "B"]


def diff_packs(a: EvidencePack, b: EvidencePack) -> pd.DataFrame:
    """What differs from pack A to pack B, one row per change (``field``, ``change``, ``A``,
    ``B``): the pack id first, then the decision, then the sources (``added`` / ``removed`` by
    their ``internal_ref``, or uri, or name; for a source in both: a moved position and a changed
    excerpt, content hash or confidence), then every other field of the hashed content (tool
    calls keyed by kind, prompts by template) in field order. ``created_at``, the signature and
    the observations are not content and are left out. Empty when the packs have the same
    content."""
    rows: list[dict[str, str]] = []
    if a.pack_id != b.pack_id:
        rows.append({"field": "pack_id", "change": "changed", "A": a.pack_id, "B": b.pack_id})
    da, db_ = a.decision.model_dump(mode="json"), b.decision.model_dump(mode="json")
    for k in ("kind", "status", "reason", "text"):
        if da.get(k) != db_.get(k):
            rows.append({"field": f"decision.{k}", "change": "changed", "A": _cell(da.get(k)),
                         "B": _cell(db_.get(k))})

    def ref(s: Any) -> str:
        return s.internal_ref or s.uri or s.name

    sa = {ref(s): (i, s) for i, s in enumerate(a.sources, 1)}
    sb = {ref(s): (i, s) for i, s in enumerate(b.sources, 1)}
    for r, (i, _s) in sa.items():
        if r not in sb:
            rows.append({"field": "sources", "change": "removed", "A": f"[{i}] {r}", "B": ""})
    for r, (i, _s) in sb.items():
        if r not in sa:
            rows.append({"field": "sources", "change": "added", "A": "", "B": f"[{i}] {r}"})
    for r, (i, s) in sa.items():
        if r not in sb:
            continue
        j, t = sb[r]
        if i != j:
            rows.append({"field": f"sources[{r}].position", "change": "moved", "A": str(i),
                         "B": str(j)})
        for k in ("excerpt", "content_sha256", "confidence", "retrieved_at", "name", "uri"):
            va, vb = getattr(s, k), getattr(t, k)
            if va != vb:
                rows.append({"field": f"sources[{r}].{k}", "change": "changed",
                             "A": _cell(va), "B": _cell(vb)})
    skip = {"pack_id", "decision", "sources", "created_at", "signature", "observations"}
    fa: dict[str, str] = {}
    fb: dict[str, str] = {}
    _flat({k: v for k, v in a.model_dump(mode="json").items() if k not in skip}, "", fa)
    _flat({k: v for k, v in b.model_dump(mode="json").items() if k not in skip}, "", fb)
    order = list(fa) + [k for k in fb if k not in fa]
    for k in order:
        if k not in fb:
            rows.append({"field": k, "change": "removed", "A": fa[k], "B": ""})
        elif k not in fa:
            rows.append({"field": k, "change": "added", "A": "", "B": fb[k]})
        elif fa[k] != fb[k]:
            rows.append({"field": k, "change": "changed", "A": fa[k], "B": fb[k]})
    return pd.DataFrame(rows, columns=_DIFF_COLUMNS)


def inspect_question(ws: NotebookWorkspace, question: str, policy: str = "R2_POLICY_V1",
                     llm: str = "extractive", chunker: str = "sentences",
                     top_k_chunks: int = 12, retrieved_at: str = PACK_RETRIEVED_AT,
                     ) -> QueryTrace:
    """Run ``question`` through late-chunked hybrid retrieval, selection under ``policy``,
    Prompt Contract V1, the reader and R5 validation (what ``aiblox answer`` does), and build
    its evidence pack at ``retrieved_at``. ``top_k_chunks`` below 1 is refused as ``aiblox
    answer --top-k-chunks`` refuses it (a ``ValueError``): no chunk would always be a
    NO_EVIDENCE refusal, a bad setting rather than an answer."""
    check_top_k_chunks(top_k_chunks)
    prefs = RetrievalPrefs(query_text=question, top_k_chunks=top_k_chunks,
                           chunking={"chunker_id": chunker})  # type: ignore[arg-type]
    retriever = ws.workspace.late_retriever()
    # search_many is what the async search runs in its worker thread; called directly, it works
    # inside a running event loop too (marimo's kernel, Jupyter's)
    bundle = retriever.search_many([prefs])[0]
    index_version = ws.index_version()
    result = answer_question(question, bundle, load_policy(policy), get_llm(llm),
                             index_version=index_version, embedding_model=ws.embedder.model_id,
                             retrieval_top_k=top_k_chunks)
    sources = answer_source_cards(bundle, result)
    candidates = pd.DataFrame([{
        "rank": i, "item_id": c.item_id, "title": c.title, "score": round(c.score, 6),
        "rank_text": c.rank_text, "rank_vec": c.rank_vec,
        "score_text": c.score_text, "score_vec": c.score_vec} for i, c in
        enumerate(bundle.candidates, start=1)])
    chunks = pd.DataFrame([{
        "rank": i, "chunk_id": e.chunk_id, "item_id": e.item_id, "score": round(e.score, 6),
        "score_text": e.score_text, "score_vec": e.score_vec, "start": e.start_idx,
        "end": e.end_idx, "text": e.text} for i, e in enumerate(bundle.evidence, start=1)])
    selected = pd.DataFrame([{
        "anchor": s.citation_anchor, "rank": s.rank, "chunk_id": s.chunk_id,
        "item_id": s.knowledge_id, "similarity": round(s.similarity_score, 6),
        "tokens": s.token_count, "truncated": s.truncated,
        "cited": s.chunk_id in set(result.validation.cited_chunk_ids)}
        for s in result.answer_bundle.selected_evidence],
        columns=["anchor", "rank", "chunk_id", "item_id", "similarity", "tokens", "truncated",
                 "cited"])
    dropped = pd.DataFrame([{"rank": d.rank, "chunk_id": d.chunk_id, "reason": d.reason}
                            for d in result.answer_bundle.metrics.dropped],
                           columns=["rank", "chunk_id", "reason"])
    chash, _ = config_hash(prefs, ws.embedder.model_id, ws.store.kind)
    hashes: dict[str, str | None] = {
        "dataset": ws.dataset.hash, "index_version": index_version, "retrieval_config": chash,
        "evidence": sha256_hex([[e.chunk_id, e.score] for e in bundle.evidence]),
        **result.hashes}
    return QueryTrace(question=question, prefs=prefs, bundle=bundle, result=result,
                      sources=list(sources), candidates=candidates, chunks=chunks,
                      selected=selected, dropped=dropped, hashes=hashes,
                      pack=evidence_pack(ws, question, bundle, result,
                                         retrieved_at=retrieved_at))
