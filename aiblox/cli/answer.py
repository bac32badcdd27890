"""``aiblox answer``: retrieve, select evidence, build the prompt, answer, validate citations."""

from __future__ import annotations

import asyncio

import typer
from rich.panel import Panel
from rich.table import Table

from aiblox.assembly import PolicyError, answer_question, get_llm, load_policy
from aiblox.cli._common import DEFAULT_DB, cached_embedder, console, fail, open_db, print_json
from aiblox.contracts.retrieval import RequestContext, RetrievalPrefs
from aiblox.evidence import DefaultEvidencePacker, rag_sources_event
from aiblox.hashing import sha256_hex
from aiblox.retrieval.late_chunking import make_retriever


def answer(
    question: str = typer.Argument(..., help="The question."),
    db: str = typer.Option(DEFAULT_DB, "--db", help="Store: a DuckDB file path."),
    policy: str = typer.Option("R2_POLICY_V1", "--policy",
                               help="Selection policy version (evals/policies/NAME.toml) or path."),
    llm: str = typer.Option("extractive", "--llm",
                            help="extractive (offline, deterministic) or openai (AIBLOX_LLM_* "
                                 "settings)."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder the store was built with."),
    chunker: str = typer.Option("sentences", "--chunker", help="Chunker for late chunking."),
    top_k_chunks: int = typer.Option(12, "--top-k-chunks", help="Evidence chunks retrieved."),
    as_json: bool = typer.Option(False, "--json", help="Print every artifact as JSON."),
) -> None:
    """Answer QUESTION from the store's evidence with citations, or give the exact refusal."""
    try:
        pol = load_policy(policy)
        reader = get_llm(llm)
    except (PolicyError, ValueError, KeyError) as exc:
        fail(str(exc))
    store = open_db(db)
    try:
        emb = cached_embedder(embedder, store, progress=False)
        prefs = RetrievalPrefs(query_text=question, top_k_chunks=top_k_chunks,
                               chunking={"chunker_id": chunker})  # type: ignore[arg-type]
        bundle = asyncio.run(make_retriever(store, emb).search(RequestContext(), prefs))
        index_version = sha256_hex(store.item_hashes())[:16]
    finally:
        store.close()
    result = answer_question(question, bundle, pol, reader, index_version=index_version,
                             embedding_model=emb.model_id, retrieval_top_k=top_k_chunks)
    sources = DefaultEvidencePacker().pack(bundle.candidates, bundle.evidence)
    if as_json:
        print_json({**result.model_dump(mode="json"),
                    "sources": rag_sources_event(sources)["payload"]["sources"]})
        return
    v = result.validation
    title = "refusal" if v.is_refusal else f"answer ({v.validation_status})"
    console.print(Panel(result.answer_text or f"[red]{v.failure_reason}[/red]", title=title))
    if result.answer_bundle.selected_evidence and not v.is_refusal:
        table = Table(title="cited evidence")
        for col in ("anchor", "item", "chunk", "score"):
            table.add_column(col)
        cited = set(v.validated_citations)
        for ev in result.answer_bundle.selected_evidence:
            if f"[{ev.citation_anchor}]" in cited or ev.citation_anchor in cited:
                table.add_row(ev.citation_anchor, ev.knowledge_id, ev.chunk_id,
                              f"{ev.similarity_score:.3f}")
        console.print(table)
    console.print(f"drops: {result.drop_counts}")
    for k, h in result.hashes.items():
        console.print(f"{k}: {h}", soft_wrap=True)
