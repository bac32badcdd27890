"""``aiblox search``: hybrid retrieval for one query, printed as a table or JSON."""

from __future__ import annotations

import asyncio

import typer
from rich.table import Table

from aiblox.cli._common import (
    DATASET_STORE_HELP,
    STORE_HELP,
    cached_embedder,
    console,
    fail,
    open_existing_store,
    print_json,
)
from aiblox.contracts.retrieval import RequestContext, RetrievalPrefs
from aiblox.retrieval.late_chunking import make_retriever
from aiblox.stores import StoreError


def search(
    query: str = typer.Argument(..., help="Query text."),
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    mode: str = typer.Option("hybrid", help="hybrid, bm25 or dense."),
    k: int = typer.Option(10, "-k", "--top-k", help="Candidates to show."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder the store was built with."),
    blend: str = typer.Option("rrf", help="Fusion: rrf or linear."),
    as_json: bool = typer.Option(False, "--json", help="Print the RetrievalBundle as JSON."),
) -> None:
    """Search the store for QUERY."""
    store = open_existing_store(db, dataset)
    try:
        emb = cached_embedder(embedder, store, progress=False)
        prefs = RetrievalPrefs(query_text=query, mode=mode, top_k_items=k,  # type: ignore[arg-type]
                               scoring={"blend": blend})  # type: ignore[arg-type]
        bundle = asyncio.run(make_retriever(store, emb).search(RequestContext(), prefs))
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json(bundle.model_dump(mode="json"))
        return
    table = Table(title=f"{mode} results for {query!r}")
    for col in ("#", "id", "score", "bm25 rank", "vec rank", "title / snippet"):
        table.add_column(col)
    for i, c in enumerate(bundle.candidates, start=1):
        table.add_row(str(i), c.item_id, f"{c.score:.4f}", str(c.rank_text or "-"),
                      str(c.rank_vec or "-"), f"[bold]{c.title or ''}[/bold]\n{c.snippet or ''}")
    console.print(table)
