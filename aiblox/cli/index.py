"""``aiblox index``: list, build and drop a store's derived BM25 and vector indexes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import typer

from aiblox.cli._common import (
    DATASET_STORE_HELP,
    DEVICE_HELP,
    STORE_HELP,
    cached_embedder,
    checked_choice,
    checked_chunk_sizes,
    checked_chunker,
    checked_device,
    checked_embedder,
    checked_prefs,
    console,
    fail,
    field_choices,
    open_existing_store,
    out,
    print_json,
    show_progress,
    size_text,
    stored_text,
)

if TYPE_CHECKING:
    from rich.text import Text

index_app = typer.Typer(
    name="index",
    help="A store's derived indexes (BM25, vectors): built from its items, kept beside it, "
         "rebuilt when the items change.",
    no_args_is_help=True,
    add_completion=False,
)


def _describe(spec: dict) -> str:
    try:
        return _settings(spec)
    except (AttributeError, KeyError, TypeError):  # a manifest's spec of another shape
        return "?"


def _state(info: Any) -> Text:
    """``yes``; ``stale``: built from content the store no longer holds; ``damaged (why)``: no
    readable manifest, or a file missing or of another size (rebuilt when next used). The why
    names files and manifest values: escaped (:func:`~aiblox.cli._common.stored_text`)."""
    from rich.text import Text

    if not info.ok:
        return Text.assemble(("damaged", "red"), " (",
                             stored_text(info.problem or "damaged"), ")")
    return Text("yes") if info.current else Text("stale", style="yellow")


def _settings(spec: dict) -> str:
    if spec.get("kind") == "bm25":
        a, s = spec.get("analysis", {}), spec.get("scoring", {})
        return (f"{s.get('method')} k1={s.get('k1')} b={s.get('b')} stem={a.get('stemmer')} "
                f"stop={a.get('stopwords')} fields={'+'.join(a.get('fields', []))}")
    if spec.get("kind") == "knn":
        extra = ""
        if spec.get("hnsw"):
            extra = f" M={spec['hnsw']['m']} efC={spec['hnsw']['ef_construction']}"
        return f"{spec.get('model')} {spec.get('distance')} {spec.get('index')}{extra}"
    if spec.get("kind") == "terms":  # term statistics for feedback (rm3, bo1)
        a = spec.get("analysis", {})
        tw = f" title_weight={spec['title_weight']}" if "title_weight" in spec else ""
        return (f"term counts stem={a.get('stemmer')} stop={a.get('stopwords')} "
                f"fields={'+'.join(a.get('fields', []))}{tw}")
    return "?"


@index_app.command("list")
def list_indexes(
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The store's indexes: kind, documents, size on disk, when built, settings, and whether the
    store still holds what each was built from (yes; stale: built from older content; damaged,
    with why: no readable manifest, or a file missing or of another size; rebuilt when next
    used. A file of the right size whose sha256 differs is found when the index is used)."""
    from aiblox.indexes import StoreIndexes

    store = open_existing_store(db, dataset)
    try:
        ix = StoreIndexes(store)
        infos = ix.infos()
    finally:
        store.close()
    if as_json:
        print_json({"root": str(ix.root), "indexes": [
            {"name": i.name, "kind": i.kind, "n": i.n, "size_bytes": i.size_bytes,
             "built_at": i.built_at, "current": i.current, "damaged": not i.ok,
             "problem": i.problem,
             "config": i.config} for i in infos]})
        return
    from rich.table import Table

    # what the index folder holds (names, settings, a damaged manifest's problem), escaped and
    # never read as rich markup: a folder or manifest could hold an escape sequence
    table = Table(title=stored_text(f"indexes of {store.location} ({ix.root})"))
    for col in ("name", "kind", "docs", "size", "built (UTC)", "settings", "current"):
        table.add_column(col)
    for i in infos:
        table.add_row(*(stored_text(cell) for cell in (
            i.name, i.kind, str(i.n), size_text(i.size_bytes), i.built_at,
            _describe(i.config))), _state(i))
    out.print(table)


@index_app.command("build")
def build(
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    embedder: str = typer.Option("minilm", "--embedder",
                                 help="Vector index of this embedder's vectors."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    bm25: bool = typer.Option(True, "--bm25/--no-bm25", help="Build the BM25 index."),
    vectors: bool = typer.Option(True, "--vectors/--no-vectors", help="Build the vector index."),
    k1: float = typer.Option(1.2, "--k1", help="BM25 k1."),
    b: float = typer.Option(0.75, "--b", help="BM25 b."),
    method: str = typer.Option("lucene", "--method", help="BM25 variant: lucene, robertson, "
                               "atire, bm25l or bm25+."),
    stemmer: str = typer.Option("english", "--stemmer", help="PyStemmer stemmer, or none."),
    index: str = typer.Option("auto", "--index", help="Vector index: auto, exact or hnsw."),
    distance: str = typer.Option("cosine", "--distance", help="cosine, ip or l2."),
    chunks: bool = typer.Option(False, "--chunks", help="Also precompute every document's "
                                "chunks for --chunker (with --embedder's vectors, and without "
                                "them for --mode bm25): what `aiblox eval --chunk-strategy "
                                "precomputed` (or mixed) reads."),
    chunker: str = typer.Option("sentences", "--chunker", help="Chunker for --chunks (as "
                                "aiblox eval's --chunker)."),
    max_chunk_tokens: int | None = typer.Option(None, "--max-chunk-tokens",
                                                help="Token budget per chunk, for --chunks."),
    overlap_tokens: int | None = typer.Option(None, "--overlap-tokens",
                                              help="Tokens shared by consecutive chunks, for "
                                                   "--chunks."),
) -> None:
    """Build (or check and reuse) the store's indexes for these settings; with --chunks,
    precompute the documents' chunks too."""
    from aiblox.contracts.retrieval import FtsConfig, VectorConfig

    if not bm25 and not vectors and not chunks:
        fail("--no-bm25 and --no-vectors leave nothing to build")
    chunking = _chunking(chunker, max_chunk_tokens, overlap_tokens) if chunks else None
    checked_choice(method, field_choices(FtsConfig, "method"), "--method")
    checked_choice(index, field_choices(VectorConfig, "index"), "--index")
    checked_choice(distance, field_choices(VectorConfig, "distance"), "--distance")
    model = checked_embedder(embedder, checked_device(device)) if vectors or chunks else None
    prefs = checked_prefs(  # --k1 -1: out of range, named as typed (not FtsConfig's field)
        {"query_text": "", "fts": {"k1": k1, "b": b, "method": method,
                                   "stemmer": None if stemmer == "none" else stemmer},
         "vector": {"index": index, "distance": distance}},
        {"fts.k1": ("--k1", k1), "fts.b": ("--b", b), "fts.method": ("--method", method),
         "fts.stemmer": ("--stemmer", stemmer), "vector.index": ("--index", index),
         "vector.distance": ("--distance", distance)})
    fts, vec = prefs.fts, prefs.vector
    from aiblox.indexes import StoreIndexes
    from aiblox.stores import StoreError
    from aiblox.stores.identity import check_searchable

    store = open_existing_store(db, dataset)
    try:
        ix = StoreIndexes(store)
        # both checked before either is built: a store without these vectors is refused
        # before the BM25 index is built for nothing
        emb = cached_embedder(model, store, progress=False) if model is not None else None
        check_searchable(store, emb.model_id if emb is not None and vectors else None)
        if bm25:
            t0 = time.perf_counter()
            lex = ix.lexical(fts)
            console.print(f"bm25: {lex.n_docs} documents, {len(lex.vocab)} terms "
                          f"({time.perf_counter() - t0:.1f} s)")
        if emb is not None and vectors:
            t0 = time.perf_counter()
            knn = ix.vectors(emb.model_id, vec)
            console.print(f"vectors ({emb.model_id}, {knn.kind}): {knn.n} vectors "
                          f"({time.perf_counter() - t0:.1f} s)")
        if chunking is not None and emb is not None:
            _precompute(store, emb, chunking)
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    built = ", ".join(ix.built) or "none (all were current)"
    damaged = ", ".join(f"{n} ({ix.damage.get(n, 'damaged')})" for n in ix.rebuilt)
    out.print(f"built: {built}" + (f"; rebuilt damaged: {damaged}" if damaged else ""))


@index_app.command("drop")
def drop(
    name: str = typer.Argument("", help="Index name (from `aiblox index list`); empty: all."),
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
) -> None:
    """Delete one index, or all of them (they are rebuilt on next use)."""
    from aiblox.indexes import StoreIndexes

    store = open_existing_store(db, dataset)
    try:
        dropped = StoreIndexes(store).drop(name or None)
    finally:
        store.close()
    if name and not dropped:
        fail(f"no index {name!r} (see `aiblox index list`)")
    out.print(f"dropped {len(dropped)}: {', '.join(dropped) or '-'}")


def _chunking(chunker: str, max_chunk_tokens: int | None, overlap_tokens: int | None) -> Any:
    """The chunking of ``--chunks`` (the ``precomputed`` strategy's), checked as ``aiblox
    eval`` checks its chunk options: one error line before any work."""
    checked_chunker(chunker, {"--max-chunk-tokens": max_chunk_tokens,
                              "--overlap-tokens": overlap_tokens})
    chunking = checked_prefs(
        {"query_text": "", "chunking": {"strategy": "precomputed", "chunker_id": chunker,
                                        "max_chunk_tokens": max_chunk_tokens,
                                        "overlap_tokens": overlap_tokens}},
        {"chunking.max_chunk_tokens": ("--max-chunk-tokens", max_chunk_tokens),
         "chunking.overlap_tokens": ("--overlap-tokens", overlap_tokens)}).chunking
    checked_chunk_sizes(chunking)
    return chunking


def _precompute(store: Any, emb: Any, chunking: Any, batch: int = 2000) -> None:
    """Write every document's chunks (and their vectors) to the store's chunk cache, marked
    precomputed; documents whose entry is there already are skipped. A progress bar.

    Cache keys hold the embedding model id because an entry holds that model's chunk
    vectors; ``aiblox eval --mode bm25`` scores chunks by text alone, with no embedder, so it
    reads the entries keyed ``none`` (:data:`~aiblox.retrieval.late_chunking.NO_EMBEDDER`,
    no vectors). Both are written: bm25's precomputed strategy had no command that wrote its
    entries (``--embedder none`` is no embedder to build vectors with), and could never run."""
    from aiblox.progress import progress_bar
    from aiblox.retrieval.late_chunking import LateChunker, make_retriever

    late = make_retriever(store, emb).evidence_builder
    assert isinstance(late, LateChunker)  # make_retriever's evidence builder
    text_only = LateChunker(None, late.chunk_cache, registry=late.registry,
                            encoding=late.encoding)
    ids = sorted(store.item_hashes())
    chunker_id = late.chunker_for(chunking).chunker_id
    bar = progress_bar(len(ids), f"chunks {chunker_id}", unit="doc", enabled=show_progress())
    t0 = time.perf_counter()
    written = bare = 0
    try:
        for start in range(0, len(ids), batch):
            items = store.get_items(ids[start:start + batch])
            ordered = [items[i] for i in sorted(items)]
            written += late.precompute(ordered, chunking)
            bare += text_only.precompute(ordered, chunking)
            bar.update(len(items))
    finally:
        bar.close()
    console.print(f"chunks ({chunker_id}, {emb.model_id}): {len(ids)} documents, {written} "
                  f"written; text-only (for --mode bm25): {bare} written "
                  f"({time.perf_counter() - t0:.1f} s)", soft_wrap=True)
