"""``aiblox search``: hybrid retrieval for one query, printed as a table or JSON."""

from __future__ import annotations

import typer

from aiblox.cli._common import (
    DATASET_STORE_HELP,
    DEVICE_HELP,
    STORE_HELP,
    cached_embedder,
    check_store_searchable,
    checked_choice,
    checked_device,
    checked_embedder,
    checked_prefs,
    fail,
    field_choices,
    open_existing_store,
    out,
    print_json,
    stored_text,
)


def search(
    query: str = typer.Argument(..., help="Query text."),
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    mode: str = typer.Option("hybrid", help="hybrid, bm25 or dense."),
    k: int = typer.Option(10, "-k", "--top-k", help="Candidates to show."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder the store was built "
                                 "with (--mode bm25 builds none)."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    blend: str = typer.Option("rrf", help="Fusion: rrf or linear."),
    normalize: str = typer.Option("sigmoid", help="Linear blend: per-list score normalisation "
                                  "(minmax, zscore, sigmoid or none)."),
    as_json: bool = typer.Option(False, "--json", help="Print the RetrievalBundle as JSON."),
) -> None:
    """Search the store for QUERY (results on stdout)."""
    from aiblox.contracts.retrieval import (
        FtsConfig,
        RequestContext,
        RetrievalPrefs,
        ScoringConfig,
        VectorConfig,
    )

    # every option is checked before the store is opened
    if not query.strip():
        fail("the query is empty: give the text to search for")
    checked_choice(mode, field_choices(RetrievalPrefs, "mode"), "--mode")
    checked_choice(blend, field_choices(ScoringConfig, "blend"), "--blend")
    checked_choice(normalize, field_choices(ScoringConfig, "normalize"), "--normalize")
    scoring = {"blend": blend} if normalize == "sigmoid" else {"blend": blend,
                                                              "normalize": normalize}
    # -k above each list's default depth deepens the lists: -k 150 showed 100 (118 fused)
    deep = {name: {"top_k": max(k, cfg.model_fields["top_k"].default)}
            for name, cfg in (("fts", FtsConfig), ("vector", VectorConfig))}
    prefs = checked_prefs({"query_text": query, "mode": mode, "top_k_items": k,
                           "scoring": scoring, **deep},
                          {"top_k_items": ("--top-k", k), "fts.top_k": ("--top-k", k),
                           "vector.top_k": ("--top-k", k), "scoring.blend": ("--blend", blend),
                           "scoring.normalize": ("--normalize", normalize)})
    # bm25 needs no vectors: no embedder is built, so its evidence is ranked by text alone
    model = None if mode == "bm25" else checked_embedder(embedder, checked_device(device))
    import asyncio

    from aiblox.retrieval.late_chunking import make_retriever
    from aiblox.stores import StoreError

    store = open_existing_store(db, dataset)
    try:
        check_store_searchable(store, None if model is None else model.model_id, embedder,
                               dim=None if model is None else model.dim)
        emb = None if model is None else cached_embedder(model, store, progress=False)
        bundle = asyncio.run(make_retriever(store, emb).search(RequestContext(), prefs))
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json(bundle.model_dump(mode="json"))
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"{mode} results for {query!r}"))  # the query as typed, not markup
    for col in ("#", "id", "score", "bm25 rank", "vec rank", "title / snippet"):
        table.add_column(col)
    for i, c in enumerate(bundle.candidates, start=1):
        # stored ids, titles and text: escaped (an escape sequence in a document reached the
        # terminal), never read as rich markup
        table.add_row(str(i), stored_text(c.item_id), f"{c.score:.4f}", str(c.rank_text or "-"),
                      str(c.rank_vec or "-"),
                      Text.assemble(stored_text(c.title or "", style="bold"), "\n",
                                    stored_text(c.snippet or "")))
    out.print(table)
