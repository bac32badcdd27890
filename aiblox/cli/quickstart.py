"""``aiblox quickstart``: the main job. Sample dataset in, BM25, dense and hybrid scored.

Nothing to configure. When the shared SciFact collection is found (``../shared/datasets``),
it is scored too, with precomputed vectors, next to the published figures.
"""

from __future__ import annotations

import typer

from aiblox.cli._common import checked_embedder, console, fail, out, show_progress

PUBLISHED = {  # nDCG@10 on the test split, from ../shared/datasets/README.md: BM25 (BEIR paper,
    # bm25s), all-MiniLM-L6-v2 (MTEB), BM25 + dense fusion as reported
    ("scifact", "bm25"): "0.665-0.679",
    ("scifact", "dense"): "0.645",
    ("scifact", "hybrid"): "0.686-0.713",
}


def quickstart(
    db: str = typer.Option("", "--db", help="Store to build for the sample dataset (default: "
                           "its own store, the one `aiblox ingest sample` builds)."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder name."),
    scifact: bool = typer.Option(True, help="Also score SciFact when ../shared/datasets has it."),
) -> None:
    """Ingest the sample dataset, score bm25, dense and hybrid retrieval, print a table."""
    from rich.table import Table

    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.data import DatasetError, load_dataset
    from aiblox.engine.evaluate import evaluate_retrieval
    from aiblox.engine.workspace import open_workspace
    from aiblox.metrics import DEFAULT_METRICS
    from aiblox.stores import StoreError

    checked_embedder(embedder)
    datasets = ["sample"]
    if scifact:
        try:
            load_dataset("scifact", splits=[])
            datasets.append("scifact")
        except DatasetError:
            console.print("[yellow]SciFact not found; scoring the sample dataset only[/yellow]")
    table = Table(title="aiblox quickstart: retrieval scored with ranx (test split)")
    for col in ("dataset", "mode", *DEFAULT_METRICS, "q/s", "published nDCG@10"):
        table.add_column(col, justify="right" if col not in ("dataset", "mode") else "left")
    for name in datasets:
        try:
            ds = load_dataset(name, splits=["test"])
        except DatasetError as exc:
            fail(str(exc))
        console.print(f"[bold]{name}[/bold]: {len(ds.corpus)} documents, "
                      f"{len(ds.qrels['test'])} judged queries")
        try:
            ws = open_workspace(ds, (db or None) if name == "sample" else None, embedder,
                                progress=show_progress())
        except (StoreError, ValueError, ImportError) as exc:
            fail(str(exc))
            raise  # unreachable
        try:
            for mode in ("bm25", "dense", "hybrid"):
                prefs = RetrievalPrefs(query_text="", mode=mode, top_k_items=100)
                r = evaluate_retrieval(ws.retriever, ds, "test", prefs,
                                       progress=show_progress())
                table.add_row(name, mode, *[f"{r.metrics[m]:.4f}" for m in DEFAULT_METRICS],
                              f"{r.timings['qps']:.0f}", PUBLISHED.get((name, mode), ""))
        finally:
            ws.close()
    out.print(table)
    where = (f"--db {db}" if db else "--dataset sample") + (
        f" --embedder {embedder}" if embedder != "minilm" else "")
    console.print(f"Next: aiblox search 'how does BM25 saturate term frequency?' {where}",
                  soft_wrap=True)
