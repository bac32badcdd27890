"""A dataset's workspace, opened the same way for every command, sweep, verification and
notebook: :func:`open_workspace` opens the store a caller names (or the dataset's default one),
synchronises it to the dataset, and gives it with the embedder behind the store's embedding
cache and the retrievers over it (whose BM25 and vector indexes are built, or read back, on
first search).

A store belongs to one dataset (:mod:`aiblox.stores.identity`): the dataset's identity is its
name and its resolved folder, and its default store, :func:`default_store_path`, follows that
identity, so two folders that share a name never share a default store. :func:`prepare_store`
makes a store hold exactly the dataset's documents, with vectors for the embedder, doing only
what is missing; :func:`ingest_dataset` does the same streamed from a corpus file.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiblox.contracts.items import ItemRecord
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import (
    ID_RULE,
    LEXICAL_ANALYZER,
    Dataset,
    corpus_file,
    corpus_hash,
    dataset_name,
    document_gaps,
    find_dataset,
    iter_corpus,
    load_dataset,
    read_queries,
    warn_lexical_gaps,
)
from aiblox.data.facts import corpus_facts, trusts
from aiblox.data.judgments import check_judgments
from aiblox.embedding import Embedder, get_embedder
from aiblox.embedding.cache import CachedEmbedder, InMemoryEmbeddingCache
from aiblox.embedding.vectors import KnownTexts, import_vectors, plan_import, write_import
from aiblox.hashing import sha256_hex, sha256_text
from aiblox.indexes import StoreIndexes
from aiblox.progress import phase
from aiblox.retrieval import HybridRetriever, make_retriever
from aiblox.stores import (
    Store,
    StoreBusy,
    StoreError,
    mask_password,
    open_store,
    store_fingerprint,
    store_writes,
)
from aiblox.stores.base import ItemRefused, UpsertReport
from aiblox.stores.identity import (
    DatasetBinding,
    SyncMark,
    check_sync_complete,
    in_sync,
    note_replaced_vectors,
)
from aiblox.stores.ingest import IngestReport, sync_dataset

if TYPE_CHECKING:
    from aiblox.assembly import AnswerResult

__all__ = [
    "Workspace",
    "check_vectors",
    "close_made",
    "dataset_binding",
    "default_store_path",
    "find_precomputed_vectors",
    "ingest_dataset",
    "new_store_file",
    "open_workspace",
    "prepare_store",
    "sync_key",
]

STORES_DIR = Path(".aiblox") / "datasets"
"""Where default stores live, relative to the working directory."""


def dataset_binding(dataset: Dataset | str | Path) -> DatasetBinding:
    """The identity a store records for a dataset: its name and resolved folder. ``dataset`` is
    a loaded :class:`Dataset`, or a dataset name or folder (resolved like ``load_dataset``)."""
    if isinstance(dataset, Dataset):
        name, path = dataset.name, Path(dataset.path)
    else:
        path = find_dataset(dataset)
        name = dataset_name(path)
    return DatasetBinding(name=name, source=path.resolve().as_posix())


def default_store_path(dataset: Dataset | DatasetBinding | str | Path) -> str:
    """``.aiblox/datasets/<name>-<12 hex of the folder's sha256>.duckdb``: one default store per
    dataset identity, the same for every command."""
    binding = dataset if isinstance(dataset, DatasetBinding) else dataset_binding(dataset)
    digest = hashlib.sha256(binding.source.encode("utf-8")).hexdigest()[:12]
    return (STORES_DIR / f"{binding.name}-{digest}.duckdb").as_posix()


def find_precomputed_vectors(dataset: Dataset | DatasetBinding, model_id: str) -> list[Path]:
    """Vector files for ``dataset`` made with ``model_id``, found beside the datasets folder
    (``<datasets>/../embeddings/<folder>/*.<model_id>.parquet``, as in ``../shared``: one
    folder per collection folder). The dataset's folder is taken resolved and its embeddings
    folder named after it, so a dataset reached through a symlink (``myadi -> datasets/adi``),
    or named otherwise by its manifest, finds the files of the folder it is; a ``*.toml``
    manifest file given by path is looked up by the dataset's name."""
    if isinstance(dataset, Dataset):
        path = Path(dataset.source or dataset.path).resolve()
    else:
        path = Path(dataset.source)
    name = path.name if path.is_dir() else dataset.name
    folder = path.parent.parent / "embeddings" / name
    return sorted(folder.glob(f"*.{model_id}.parquet")) if folder.is_dir() else []


def sync_key(corpus_digest: str) -> str:
    """What a store's sync record names for a corpus: its hash together with the loaders' id
    rule (:data:`aiblox.data.ID_RULE`). A corpus file's hash is its bytes, which an
    id rule does not change, so a store synced from a file whose ids had surrounding
    whitespace before that rule (holding ``" d1 "`` where the dataset now says ``d1``) is not
    taken as up to date: it syncs once more, which rewrites only the record when no id
    changed."""
    return sha256_text(f"{ID_RULE}\x00{corpus_digest}")


def ingest_dataset(store: Store, dataset: str | Path, embedder: CachedEmbedder | None,
                   vectors: Sequence[str | Path] = (), auto_vectors: bool = True,
                   replace: bool = False, progress: bool = True,
                   batch_size: int = 2000) -> IngestReport:
    """:func:`prepare_store` for a dataset named or found by path, streamed from its corpus
    file: documents are read, written and embedded a batch at a time, so a corpus of any size
    ingests in bounded memory. The queries, qrels and answers files are checked first, as
    :func:`~aiblox.data.load_dataset` checks them. When the store already holds this corpus
    (its hash, and the embedder's vectors) and no vectors file is given, the corpus is not
    parsed at all; else the whole corpus is checked first (file, line and field of the first
    bad line; and that the store can hold each document: :func:`_fitting`), and every vectors
    file too (:func:`_sync_with_files`), so bad input changes nothing stored. Documents whose
    text BM25 cannot index are warned about as :func:`~aiblox.data.load_dataset` warns
    (:func:`~aiblox.data.warn_lexical_gaps`) whenever the corpus is read or its recorded
    facts are."""
    binding = dataset_binding(dataset)
    cpath = corpus_file(binding.source)
    check_judgments(binding.source)  # the corpus is streamed below: its other files first
    model = embedder.model_id if embedder is not None else None
    files = _vector_files(vectors, embedder, store)
    if files and embedder is not None:
        digest = sync_key(corpus_hash(cpath))
        docs: dict[str, str] = {}

        def hashed(items: Iterable[ItemRecord]) -> Iterator[ItemRecord]:
            for it in items:
                docs[it.id] = sha256_text(it.embedding_text)
                yield it

        gaps = document_gaps(hashed(_fitting(store, iter_corpus(cpath, binding.name), cpath)))
        warn_lexical_gaps(binding.name, {"documents": gaps})
        queries = {q: sha256_text(t) for q, t in read_queries(binding.source).items()}
        known = KnownTexts(docs, queries, binding.describe())
        return _sync_with_files(store, binding, digest, iter_corpus(cpath, binding.name),
                                embedder, files, known, replace=replace, batch_size=batch_size,
                                progress=progress, total=len(docs))
    if trusts(cpath):
        # one pass checks every line and records the corpus's facts (its hash, ids and lexical
        # gaps) for every later command; an unchanged file's are trusted, read before
        with phase(f"read {cpath.name}", progress):
            facts, _ = corpus_facts(cpath, partial(iter_corpus, cpath, binding.name),
                                    LEXICAL_ANALYZER, progress=False)
        warn_lexical_gaps(binding.name, {"documents": facts.doc_gaps})
        digest = sync_key(facts.corpus_hash)
        if in_sync(store, binding, digest, model) is not None:
            return sync_dataset(store, binding, digest, (), embedder)  # reports up to date
        if getattr(store, "check_item", None) is not None:  # the facts say nothing of it
            for _ in _fitting(store, iter_corpus(cpath, binding.name), cpath):
                pass
    else:
        digest = sync_key(corpus_hash(cpath))
        if in_sync(store, binding, digest, model) is not None:
            return sync_dataset(store, binding, digest, (), embedder)  # reports up to date
        # refuse bad input before any write; the same pass finds the text BM25 cannot index
        gaps = document_gaps(_fitting(store, iter_corpus(cpath, binding.name), cpath))
        warn_lexical_gaps(binding.name, {"documents": gaps})
    if embedder is not None:
        _import_precomputed(store, binding, embedder, auto_vectors, progress=progress)
    return sync_dataset(store, binding, digest, iter_corpus(cpath, binding.name), embedder,
                        replace=replace, batch_size=batch_size, progress=progress)


def prepare_store(store: Store, dataset: Dataset, embedder: CachedEmbedder | None,
                  vectors: Sequence[str | Path] = (), auto_vectors: bool = True,
                  replace: bool = False, progress: bool = True,
                  batch_size: int = 2000) -> IngestReport:
    """Make ``store`` hold exactly ``dataset``'s documents, with vectors for ``embedder``,
    doing only what is missing (see :func:`aiblox.stores.ingest.sync_dataset`: a store of
    another dataset is refused unless ``replace``).

    Vectors files given (``vectors``) are always read and checked, and their vectors replace
    those in the embedding cache and the store (:func:`_sync_with_files`). Precomputed vectors
    found beside the dataset (``auto_vectors``) are imported into the embedding cache first,
    but only when some document or query text is not cached yet and the store is not already
    in sync.
    """
    binding = dataset_binding(dataset)
    digest = sync_key(dataset.corpus_hash)
    files = _vector_files(vectors, embedder, store)
    if not files and in_sync(store, binding, digest,
                             embedder.model_id if embedder is not None else None) is not None:
        return sync_dataset(store, binding, digest, (), embedder)  # reports up to date
    with store_writes(store):  # a shared store is held alone once, for the whole sync
        return _prepare(store, dataset, binding, digest, embedder, files, auto_vectors,
                        replace=replace, progress=progress, batch_size=batch_size)


def _prepare(store: Store, dataset: Dataset, binding: DatasetBinding, digest: str,
             embedder: CachedEmbedder | None, files: list[Path], auto_vectors: bool, *,
             replace: bool, progress: bool, batch_size: int) -> IngestReport:
    items = list(dataset.corpus.values())  # a lazy corpus is read from its file only now
    for _ in _fitting(store, items, Path(dataset.path)):
        pass
    if files and embedder is not None:
        known = _known_texts(dataset, binding, items)
        return _sync_with_files(store, binding, digest, items, embedder, files, known,
                                replace=replace, batch_size=batch_size, progress=progress)
    if embedder is not None and in_sync(store, binding, digest, embedder.model_id) is None:
        texts = [d.embedding_text for d in items] + list(dataset.queries.values())
        _import_precomputed(store, binding, embedder, auto_vectors, texts, progress)
    return sync_dataset(store, binding, digest, items, embedder, replace=replace,
                        batch_size=batch_size, progress=progress)


def _known_texts(dataset: Dataset, binding: DatasetBinding,
                 items: Iterable[ItemRecord] | None = None) -> KnownTexts:
    """What the rows of a vectors file given for ``dataset`` must name: its documents
    (``items``, read from the dataset when None) and queries, each with its text's sha256."""
    docs = dataset.corpus.values() if items is None else items
    return KnownTexts({d.id: sha256_text(d.embedding_text) for d in docs},
                      {q: sha256_text(t) for q, t in dataset.queries.items()},
                      binding.describe())


def check_vectors(dataset: Dataset, vectors: Sequence[str | Path], model_id: str, dim: int, *,
                  claims: bool = True) -> int:
    """Every row of the vectors files checked as a sync checks them before its first write
    (:func:`~aiblox.embedding.vectors.plan_import` against ``dataset``'s texts: the columns,
    ``dim``, finite values, each ``_id`` a document or query and its text's sha256, and with
    ``claims`` the model a file says made it against ``model_id``), with no store opened and
    nothing written: for a caller with long work to do before its store syncs (a sweep
    training a model), so that a bad file is refused at once. Returns the rows read;
    :class:`~aiblox.embedding.VectorImportError` naming the file, row and field otherwise."""
    known = _known_texts(dataset, dataset_binding(dataset))
    return plan_import(vectors, InMemoryEmbeddingCache(), model_id, dim, known,
                       claims=claims).rows


def new_store_file(db: str) -> Path | None:
    """The DuckDB file ``db`` names (a path or ``duckdb:///path``) when no file is there yet:
    the one a command opening it makes; None for a file already there, ``:memory:`` or a
    PostgreSQL URL."""
    local = db.removeprefix("duckdb:///")
    if local == ":memory:" or "://" in local or local.startswith("postgresql"):
        return None  # (open_store's test of a PostgreSQL URL)
    return None if Path(local).exists() else Path(local)


def close_made(store: Store, made: Path | None) -> None:
    """Close ``store``, and when it is the file ``made`` (:func:`new_store_file`: this command
    made it) and holds no item (a command that failed before storing any), remove the file
    with its write-ahead log: a failed command leaves no empty store behind for the next one
    to find. A store that was there before, or that holds an item, is kept."""
    try:
        empty = made is not None and store.count_items() == 0
    except Exception:  # noqa: BLE001 - a store that cannot answer is kept
        empty = False
    store.close()
    if empty and made is not None:
        for leftover in (made, made.with_name(f"{made.name}.wal")):
            leftover.unlink(missing_ok=True)


def _fitting(store: Store, items: Iterable[ItemRecord], corpus: Path) -> Iterator[ItemRecord]:
    """``items``, each checked to fit the store first (a backend's limits: PostgreSQL's
    ``check_item``), so a document it cannot hold is refused before the sync's first write,
    naming the corpus file (``corpus``: it, its manifest or its folder) and line, and the
    store stays as it was."""
    check = getattr(store, "check_item", None)
    for it in items:
        if check is not None:
            try:
                check(it)
            except ItemRefused as exc:
                name, _, at = (it.source_ref or "").rpartition(":")
                path = corpus if corpus.name == name else \
                    (corpus if corpus.is_dir() else corpus.parent) / name
                where = f"{path}:{at}" if name else str(corpus)
                raise exc.located(where, "; nothing was written (the store is as it was)"
                                  ) from None
        yield it


def _vector_files(vectors: Sequence[str | Path], embedder: CachedEmbedder | None,
                  store: Store | None = None) -> list[Path]:
    """The vectors files as paths, once the embedder is known to fit the store: a store holds
    vectors of one dimension (:class:`~aiblox.stores.StoreError` naming both, before any
    write)."""
    files = [Path(v) for v in vectors]
    if files and embedder is None:
        raise ValueError(f"vectors files ({', '.join(map(str, files))}) need an embedder: "
                         f"their model and dimension")
    held = getattr(store, "dim", None)
    if embedder is not None and isinstance(held, int) and held != embedder.dim:
        raise StoreError(f"store {mask_password(getattr(store, 'location', '?'))} holds "
                         f"{held}-dim vectors and the embedder {embedder.model_id} makes "
                         f"{embedder.dim}-dim ones: a store holds vectors of one dimension; "
                         f"give this embedder another store")
    return files


def _sync_with_files(store: Store, binding: DatasetBinding, digest: str,
                     items: Iterable[ItemRecord], embedder: CachedEmbedder,
                     files: list[Path], known: KnownTexts, *, replace: bool, batch_size: int,
                     progress: bool, total: int | None = None) -> IngestReport:
    """Sync with vectors files: every row of every file is checked first (an id of a document
    or query of the dataset, the sha256 of its text, the embedder's dimension, finite values:
    else :class:`~aiblox.embedding.VectorImportError` naming the file and row, and nothing is
    written); the rows new to the embedding cache or differing from it are then written into
    it (replacing), and the vectors of the documents they are for written again, within the
    sync (so a killed import leaves the store marked half-synced; the rerun completes it)."""
    model = embedder.model_id
    plan = plan_import(files, store, model, embedder.dim, known)
    counts = {"vector_rows": plan.rows, "vectors_imported": len(plan.written)}
    done = in_sync(store, binding, digest, model)
    if done is not None and not plan.written:
        return IngestReport(items=UpsertReport(unchanged=done.n_items), up_to_date=True,
                            vector_rows=plan.rows)

    def prepare() -> set[str]:
        if plan.replaced_digest is not None:
            note_replaced_vectors(store, model, plan.replaced_digest)
        write_import(plan, store, model, embedder.dim)
        return {i for i, h in known.docs.items() if h in plan.written}

    mark = SyncMark.now(vectors=tuple(str(f.resolve()) for f in files))
    report = sync_dataset(store, binding, digest, items, embedder, replace=replace,
                          batch_size=batch_size, progress=progress, total=total,
                          prepare=prepare if plan.written else None, mark=mark)
    return report.model_copy(update=counts)


def _import_precomputed(store: Store, binding: DatasetBinding, embedder: CachedEmbedder,
                        auto_vectors: bool, texts: Sequence[str] | None = None,
                        progress: bool = True) -> None:
    """Import the precomputed vectors found beside the dataset (when ``auto_vectors``) into
    the embedding cache, adding only texts not cached yet; with ``texts``, only when one of
    them is not cached. A file of 16 MiB or more says so while it is imported (35 s at 1M)."""
    files = find_precomputed_vectors(binding, embedder.model_id) if auto_vectors else []
    if not files:
        return
    if texts is not None:
        needed = sorted({sha256_text(t) for t in texts})
        if len(store.cached_hashes(embedder.model_id, needed)) == len(needed):
            return
    for f in files:  # only texts not cached yet are added
        with phase(f"import {f.name} into the embedding cache",
                   enabled=progress and f.stat().st_size >= 16 << 20):
            import_vectors(f, store, embedder.model_id, embedder.dim)


@dataclass
class Workspace:
    """A dataset's store, in sync with the dataset, with the embedder behind its embedding
    cache and the retrievers over it (see :func:`open_workspace`)."""

    dataset: Dataset
    """The dataset the store holds."""
    db: str
    """The store's path or URL."""
    store: Store
    """The store (the system of record)."""
    embedder: CachedEmbedder
    """The embedder behind the store's embedding cache (its model loads on first embedding)."""
    synced: IngestReport | None = None
    """What opening it changed to bring the store in sync (:meth:`IngestReport.changes`;
    ``up_to_date``: nothing)."""
    _retriever: HybridRetriever | None = field(default=None, repr=False)

    @property
    def retriever(self) -> HybridRetriever:
        """The hybrid retriever over the store (its indexes are built on first search)."""
        if self._retriever is None:
            self._retriever = HybridRetriever(self.store, self.embedder)
        return self._retriever

    @property
    def indexes(self) -> StoreIndexes:
        """The store's derived BM25 and vector indexes (the retriever's: built, or read back
        from beside the store, on first use, and rebuilt when the items change)."""
        return self.retriever.indexes

    def late_retriever(self, **late_params: Any) -> HybridRetriever:
        """A retriever whose evidence builder is a late chunker over the store's chunk cache
        (:func:`aiblox.retrieval.make_retriever`; ``late_params`` go to the chunker)."""
        return make_retriever(self.store, self.embedder, **late_params)

    def answer(self, question: str, policy: str = "R2_POLICY_V1", llm: str = "extractive",
               prefs: RetrievalPrefs | None = None, **llm_options: Any) -> AnswerResult:
        """Answer ``question`` from the store's evidence as ``aiblox answer`` does (without the
        audit pack): late-chunked retrieval under ``prefs`` (the defaults when None), then the
        selection ``policy``, the prompt contract, the reader ``llm`` (``extractive``: offline,
        deterministic; ``openai``: an OpenAI-compatible endpoint) and citation validation."""
        from aiblox.assembly import answer_question, get_llm, load_policy

        prefs = (prefs or RetrievalPrefs(query_text=question)).model_copy(
            update={"query_text": question})
        bundle = self.late_retriever().search_many([prefs])[0]
        return answer_question(question, bundle, load_policy(policy), get_llm(llm, **llm_options),
                               index_version=self.index_version(),
                               embedding_model=self.embedder.model_id,
                               retrieval_top_k=prefs.top_k_chunks)

    def fingerprint(self, vectors: bool = True) -> dict[str, str | None]:
        """What retrieval reads from the store (:func:`aiblox.stores.store_fingerprint`: the
        digest of its items, and of the embedder's vectors when ``vectors``)."""
        return store_fingerprint(self.store, self.embedder.model_id if vectors else None)

    def index_version(self) -> str:
        """Short hash of the store's item content hashes (the ``index_version`` of answers)."""
        return sha256_hex(self.store.item_hashes())[:16]

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_workspace(dataset: Dataset | str | Path, db: str | None = None,
                   embedder: str | Embedder = "minilm", *, device: str | None = None,
                   vectors: Sequence[str | Path] = (), with_vectors: bool = True,
                   replace: bool = False, progress: bool = True) -> Workspace:
    """Open ``dataset``'s workspace: the store ``db`` names (a DuckDB path, ``:memory:`` or a
    PostgreSQL URL; None: the dataset's default store, its folder made), synchronised to the
    dataset (:func:`prepare_store`, only what is missing is done; with vectors for the embedder
    unless ``with_vectors`` is False, as for BM25 alone), and the embedder (a registry name,
    built on ``device``, None: ``auto``; or an embedder) behind the store's embedding cache.
    ``dataset``: a :class:`~aiblox.data.Dataset`, or a name or folder, loaded (every split), as
    :func:`~aiblox.engine.evaluate.evaluate_retrieval` takes it.

    The one way every caller opens a dataset: ``aiblox eval`` and ``quickstart``, the sweep,
    ``aiblox verify`` and the notebooks. Raises :class:`~aiblox.stores.StoreError` (``cannot
    open store ...`` when the store cannot be opened), ``ValueError`` for an unknown embedder
    (:class:`~aiblox.embedding.VectorImportError` for a bad vectors file). A DuckDB file it
    made, and a failed sync left without an item (a bad vectors file is refused before the
    first write), is removed again (:func:`close_made`), as ``aiblox ingest`` removes one.
    """
    if not isinstance(dataset, Dataset):  # a name or folder ("sample" crashed on .corpus_hash)
        dataset = load_dataset(dataset)
    model = get_embedder(embedder, device=device) if isinstance(embedder, str) else embedder
    if vectors and not with_vectors:
        warnings.warn(f"vectors files not read ({', '.join(map(str, vectors))}): nothing here "
                      f"uses vectors", stacklevel=2)
        vectors = ()
    path = db or default_store_path(dataset)
    if "://" not in path and path != ":memory:":
        Path(path.removeprefix("duckdb:///")).parent.mkdir(parents=True, exist_ok=True)
    made = new_store_file(path)
    try:
        store = open_store(path, dim=model.dim, shared=True)
    except StoreBusy:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised naming the store
        raise StoreError(f"cannot open store {mask_password(path)}: {exc}") from exc
    try:
        check_sync_complete(store)  # a store left half-synced is completed by `aiblox ingest`
        cached = CachedEmbedder(model, store, progress=progress)
        synced = prepare_store(store, dataset, cached if with_vectors else None,
                               vectors=vectors, replace=replace, progress=progress)
    except BaseException:
        close_made(store, made)  # a store made here and refused before any write: removed
        raise
    return Workspace(dataset=dataset, db=path, store=store, embedder=cached, synced=synced)
