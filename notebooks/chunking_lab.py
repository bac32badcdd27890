# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "aiblox[notebooks]",
#     "marimo>=0.9",
#     "matplotlib>=3.8",
# ]
#
# [tool.uv.sources]
# aiblox = { path = "..", editable = true }
# ///
"""Chunking lab: how each chunker cuts a document, and what that does to answer recall."""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="aiblox chunking lab")


@app.cell
def _():
    import marimo as mo
    import matplotlib.pyplot as plt

    from aiblox.chunking import default_registry
    from aiblox.explore import (
        available_datasets,
        available_embedders,
        chunk_table,
        compare_chunkers,
        open_notebook_workspace,
        split_choices,
    )

    return (
        available_datasets,
        available_embedders,
        chunk_table,
        compare_chunkers,
        default_registry,
        mo,
        open_notebook_workspace,
        plt,
        split_choices,
    )


@app.cell
def _(mo):
    mo.md("""
    # Chunking lab

    Pick a document and chunkers: each chunk with its character offsets, token count, the
    overlap it shares with the previous chunk and its heading path. Below, the chunkers are
    compared on a sample of queries (late chunking over hybrid retrieval): answer recall@k
    over the returned evidence, and the evidence tokens it costs.
    """)
    return


@app.cell
def _(available_datasets, available_embedders, default_registry, mo):
    dataset = mo.ui.dropdown(options=available_datasets(), value="sample", label="dataset")
    embedder = mo.ui.dropdown(options=available_embedders(), value="hashing", label="embedder")
    chunkers = mo.ui.multiselect(options=default_registry.names(),
                                 value=["headings", "sentences", "token_window"],
                                 label="chunkers")
    max_tokens = mo.ui.slider(16, 512, step=16, value=128, label="max chunk tokens",
                              show_value=True)
    overlap = mo.ui.slider(0, 64, step=8, value=16, label="overlap tokens", show_value=True)
    include_headers = mo.ui.checkbox(value=True, label="headings inside chunks")
    mo.vstack([mo.hstack([dataset, embedder], justify="start"), chunkers,
               mo.hstack([max_tokens, overlap, include_headers], justify="start")])
    return chunkers, dataset, embedder, include_headers, max_tokens, overlap


@app.cell
def _(dataset, mo, split_choices):
    # the dataset's judged splits: test when it has one, else its first
    _splits, _default = split_choices(dataset.value)
    split = mo.ui.dropdown(options=_splits, value=_default, label="split")
    split
    return (split,)


@app.cell
def _(dataset, embedder, mo, open_notebook_workspace, split):
    with mo.status.spinner(title="loading the dataset"):
        ws = open_notebook_workspace(dataset.value, embedder.value, split=split.value,
                                     max_depth=20)
    return (ws,)


@app.cell
def _(mo, ws):
    _corpus = ws.dataset.corpus
    _options = {f"{i}: {(_corpus[i].title or _corpus[i].text)[:60]}": i
                for i in list(_corpus)[:500]}
    document = mo.ui.dropdown(options=_options, value=next(iter(_options)), label="document")
    document
    return (document,)


@app.cell
def _(
    chunk_table,
    chunkers,
    document,
    include_headers,
    max_tokens,
    overlap,
    ws,
):
    doc = ws.dataset.corpus[document.value]
    # the document's content hash: the chunk ids are the ones retrieval's evidence carries
    tables = {name: chunk_table(doc.id, doc.text, name, max_chunk_tokens=max_tokens.value,
                                overlap_tokens=overlap.value,
                                include_headers=include_headers.value,
                                content_hash=doc.content_hash)
              for name in chunkers.value}
    return doc, tables


@app.cell
def _(doc, mo, tables):
    _summary = mo.md(
        f"**{doc.id}**: {len(doc.text)} characters. "
        + "; ".join(f"`{n}`: {len(t)} chunks, {int(t['tokens'].sum())} tokens, "
                    f"{int(t['overlap_tokens'].sum())} overlapping" for n, t in tables.items())
        # an overlap the sliders set at or past the budget is cut to fit, said here
        + "".join(f"\n\n_{t.attrs['note']}_" for t in tables.values() if t.attrs.get("note")))
    mo.vstack([_summary,
               mo.ui.tabs({n: mo.ui.table(t, selection=None, page_size=8)
                           for n, t in tables.items()}) if tables else mo.md("pick a chunker")])
    return


@app.cell
def _(mo):
    limit = mo.ui.slider(4, 100, step=4, value=12, label="queries in the sample",
                         show_value=True)
    limit
    return (limit,)


@app.cell
def _(chunkers, compare_chunkers, include_headers, limit, max_tokens, mo, overlap, ws):
    with mo.status.spinner(title="late chunking and scoring"):
        comparison = compare_chunkers(ws, chunkers.value, limit=limit.value,
                                      max_chunk_tokens=max_tokens.value,
                                      overlap_tokens=overlap.value,
                                      include_headers=include_headers.value)
    _note = comparison.attrs.get("note")
    mo.vstack([mo.md(f"_{_note}_") if _note else mo.md(""),
               mo.ui.table(comparison, selection=None)])
    return (comparison,)


@app.cell
def _(comparison, plt):
    _fig, _ax = plt.subplots(figsize=(6, 3))
    if "answer_recall@5" in comparison:
        _ax.scatter(comparison["tokens_all"], comparison["answer_recall@5"])
        for _, _r in comparison.iterrows():
            _ax.annotate(_r["chunker"], (_r["tokens_all"], _r["answer_recall@5"]),
                         textcoords="offset points", xytext=(4, 4))
        _ax.set_ylabel("answer recall@5")
    _ax.margins(0.2)
    _ax.set_xlabel("mean evidence tokens per query")
    _ax.set_title("answer recall vs evidence cost")
    _ax.grid(alpha=0.3)
    _fig.tight_layout()
    _fig
    return


if __name__ == "__main__":
    app.run()
