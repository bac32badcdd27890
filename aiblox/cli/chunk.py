"""``aiblox chunk``: show how a chunker splits a document (offsets, token counts, heading paths)."""

from __future__ import annotations

from pathlib import Path

import typer

from aiblox.cli._common import (
    checked_at_least,
    checked_chunker,
    fail,
    out,
    print_json,
    stored_text,
)
from aiblox.cli._defaults import TOKEN_ENCODING
from aiblox.cli._errors import print_error

__all__ = ["chunk_command"]


def chunk_command(
    dataset: str = typer.Option("", "--dataset", help=(
        "Dataset name, data folder or dataset.toml (with --doc).")),
    doc: str = typer.Option("", "--doc", help="Document id in the dataset's corpus."),
    text: Path | None = typer.Option(None, "--text", help="A UTF-8 text or markdown file to "
                                                          "chunk instead of a dataset document."),
    chunker: str = typer.Option("sentences", "--chunker",
                                help="Chunker name (token_window, sentences, headings, whole)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", "--max-chunk-tokens",
                                          help="Token budget per chunk (chunker default)."),
    overlap_tokens: int | None = typer.Option(None, "--overlap-tokens",
                                              help="Tokens shared by consecutive chunks."),
    include_headers: bool = typer.Option(True, "--headers/--no-headers",
                                         help="Heading chunker: heading lines inside chunks."),
    encoding: str = typer.Option(TOKEN_ENCODING, "--encoding",
                                 help="tiktoken encoding (cl100k_base, o200k_base)."),
    preview: int = typer.Option(60, "--preview", help="Characters of each chunk shown."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Split one document with a chunker and show the chunks."""
    from rich.table import Table

    from aiblox.chunking import UnknownChunkerError, get_chunker
    from aiblox.data import DatasetError, load_dataset
    from aiblox.hashing import sha256_text

    checked_at_least(preview, 1, "--preview")
    checked_chunker(chunker, {"--max-tokens": max_tokens, "--overlap-tokens": overlap_tokens})
    if not include_headers and chunker != "headings":  # as a budget given to `whole` is said
        print_error(f"--no-headers: only the headings chunker puts heading lines inside its "
                    f"chunks; {chunker} ignores it", prefix="warning")
    if text is not None and (dataset or doc):
        fail("give either --text FILE or --dataset NAME --doc ID, not both")
    if text is not None:
        from aiblox.inputs import InputFileError, read_bounded

        try:  # a regular file of a bounded size (/dev/zero filled memory, a FIFO blocked)
            body = read_bounded(text).decode("utf-8")  # as given: offsets index the file
        except InputFileError as exc:
            fail(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"{text}: cannot read as UTF-8 text: {exc}")
        item_id, content_hash, source = text.name, sha256_text(body), str(text)
    else:
        if not dataset or not doc:
            fail("give --text FILE, or --dataset NAME with --doc ID")
        try:
            ds = load_dataset(dataset, splits=[])
        except DatasetError as exc:
            fail(str(exc))
        if doc not in ds.corpus:
            fail(f"document {doc!r} is not in {ds.name}'s corpus ({len(ds.corpus)} documents)")
        item = ds.corpus[doc]
        body, item_id, content_hash, source = item.text, item.id, item.content_hash, ds.name
    try:
        splitter = get_chunker(chunker, max_chunk_tokens=max_tokens,
                               overlap_tokens=overlap_tokens, include_headers=include_headers,
                               encoding=encoding)
    except (UnknownChunkerError, ValueError, TypeError) as exc:
        fail(str(exc))
    chunks = splitter.chunk(item_id, body, content_hash)
    if as_json:
        print_json({"source": source, "item_id": item_id, "content_hash": content_hash,
                    "chars": len(body), "chunker_id": splitter.chunker_id,
                    "n_chunks": len(chunks),
                    "chunks": [c.model_dump(mode="json") for c in chunks]})
        return
    # document text, heading paths and file names are shown as text, never read as markup
    # (`[/b]` in a heading was an internal error, `[bold]` vanished), controls escaped
    table = Table(title=stored_text(f"{item_id} ({len(body)} chars): {splitter.chunker_id}"))
    for col, justify in (("#", "right"), ("start", "right"), ("end", "right"),
                         ("tokens", "right"), ("heading path", "left"), ("text", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for c in chunks:
        path = "" if c.heading_path is None else " > ".join(c.heading_path)
        snippet = " ".join(c.text.split())
        if len(snippet) > preview:
            snippet = snippet[:max(preview - 1, 0)] + "\u2026"
        table.add_row(str(c.position), str(c.start_idx), str(c.end_idx), str(c.token_count),
                      stored_text(path), stored_text(snippet))
    out.print(table)
    total = sum(c.token_count for c in chunks)
    out.print(f"{len(chunks)} chunks, {total} tokens in all")
