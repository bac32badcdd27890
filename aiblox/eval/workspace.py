"""A dataset's store, opened and synchronised the same way for every command and notebook.

A store belongs to one dataset (:mod:`aiblox.stores.identity`): the dataset's identity is its
name and its resolved folder, and its default store, :func:`default_store_path`, follows that
identity, so two folders that share a name never share a default store. :func:`prepare_store`
makes a store hold exactly the dataset's documents, with vectors for the embedder, doing only
what is missing; :func:`open_dataset_store` opens the store a command names (or the dataset's
default one) and prepares it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from aiblox.embedding.cache import CachedEmbedder
from aiblox.embedding.vectors import import_vectors
from aiblox.eval.datasets import Dataset, find_dataset
from aiblox.hashing import sha256_text
from aiblox.stores import Store, open_store
from aiblox.stores.identity import DatasetBinding, in_sync, items_digest
from aiblox.stores.ingest import IngestReport, sync_dataset

__all__ = [
    "dataset_binding",
    "default_store_path",
    "find_precomputed_vectors",
    "open_dataset_store",
    "prepare_store",
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
        name = path.name
    return DatasetBinding(name=name, source=path.resolve().as_posix())


def default_store_path(dataset: Dataset | DatasetBinding | str | Path) -> str:
    """``.aiblox/datasets/<name>-<12 hex of the folder's sha256>.duckdb``: one default store per
    dataset identity, the same for every command."""
    binding = dataset if isinstance(dataset, DatasetBinding) else dataset_binding(dataset)
    digest = hashlib.sha256(binding.source.encode("utf-8")).hexdigest()[:12]
    return (STORES_DIR / f"{binding.name}-{digest}.duckdb").as_posix()


def find_precomputed_vectors(dataset: Dataset, model_id: str) -> list[Path]:
    """Vector files for ``dataset`` made with ``model_id``, found beside the datasets folder
    (``<datasets>/../embeddings/<name>/*.<model_id>.parquet``, as in ``../shared``)."""
    folder = dataset.path.parent.parent / "embeddings" / dataset.name
    return sorted(folder.glob(f"*.{model_id}.parquet")) if folder.is_dir() else []


def prepare_store(store: Store, dataset: Dataset, embedder: CachedEmbedder | None,
                  vectors: Sequence[str | Path] = (), auto_vectors: bool = True,
                  replace: bool = False, progress: bool = True,
                  batch_size: int = 2000) -> IngestReport:
    """Make ``store`` hold exactly ``dataset``'s documents, with vectors for ``embedder``,
    doing only what is missing (see :func:`aiblox.stores.ingest.sync_dataset`: a store of
    another dataset is refused unless ``replace``).

    Precomputed vectors (given, or found beside the dataset when ``auto_vectors``) are imported
    into the embedding cache first, but only when some document or query text is not cached yet
    and the store is not already in sync.
    """
    binding = dataset_binding(dataset)
    items = list(dataset.corpus.values())
    corpus_hash = dataset.corpus_hash or items_digest({it.id: it.content_hash for it in items})
    if embedder is not None:
        files = [Path(v) for v in vectors]
        if auto_vectors and not files:
            files = find_precomputed_vectors(dataset, embedder.model_id)
        if files and in_sync(store, binding, corpus_hash, embedder.model_id) is None:
            needed = {sha256_text(d.embedding_text) for d in items}
            needed |= {sha256_text(q) for q in dataset.queries.values()}
            cached = store.get_embeddings(embedder.model_id, sorted(needed))
            if len(cached) < len(needed):
                for f in files:
                    import_vectors(f, store, embedder.model_id, embedder.dim)
    return sync_dataset(store, binding, corpus_hash, items, embedder, replace=replace,
                        batch_size=batch_size, progress=progress)


def open_dataset_store(dataset: Dataset, db: str | None = None) -> Store:
    """Open the store ``db`` names (a DuckDB path, ``:memory:`` or a PostgreSQL URL), or the
    dataset's default store, making the folder of a new DuckDB file."""
    path = db or default_store_path(dataset)
    if "://" not in path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open_store(path)
