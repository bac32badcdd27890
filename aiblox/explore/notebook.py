"""The notebooks' workspace: a dataset's workspace (:func:`aiblox.engine.workspace.open_workspace`,
the one way every caller opens a dataset) with the full-text and vector lists of every query of
one split computed once, at the deepest depth offered; and the pickers the notebooks offer.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from aiblox.assembly import find_policies_dir
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import Dataset, available_splits, find_dataset, load_dataset
from aiblox.embedding import CachedEmbedder
from aiblox.engine.workspace import Workspace, default_store_path
from aiblox.engine.workspace import open_workspace as open_dataset_workspace
from aiblox.metrics import DEFAULT_DEPTH
from aiblox.retrieval import HybridRetriever, SignalRuns
from aiblox.stores import Store

__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_EMBEDDER",
    "NotebookWorkspace",
    "available_datasets",
    "available_embedders",
    "available_policies",
    "check_top_k_chunks",
    "default_db",
    "open_notebook_workspace",
    "split_choices",
]

DEFAULT_DATASET = "sample"
"""The project's own small dataset: fast and offline."""
DEFAULT_EMBEDDER = "hashing"
"""The offline hashing embedder (no model to load)."""
DEFAULT_SPLIT = "test"
"""The split a notebook opens when the dataset has it (else its first, :func:`split_choices`)."""


def _dataset_roots() -> list[Path]:
    roots = [Path(r) for r in os.environ.get("AIBLOX_DATASETS", "").split(os.pathsep) if r]
    repo = Path(__file__).resolve().parents[2]
    roots += [Path("datasets"), Path("../shared/datasets"), repo / "datasets",
              repo.parent / "shared" / "datasets"]
    return roots


def available_datasets() -> list[str]:
    """Dataset names the notebooks offer: ``sample`` first, then every BEIR-layout folder
    found where :func:`aiblox.data.find_dataset` looks (``../shared/datasets`` and so on)."""
    names: set[str] = set()
    for root in _dataset_roots():
        if root.is_dir():
            names |= {p.name for p in root.iterdir() if (p / "queries.jsonl").is_file()}
    names.discard(DEFAULT_DATASET)
    return [DEFAULT_DATASET, *sorted(names)]


def available_embedders() -> list[str]:
    """``hashing`` always; ``minilm`` when sentence-transformers is installed."""
    out = [DEFAULT_EMBEDDER]
    if importlib.util.find_spec("sentence_transformers") is not None:
        out.append("minilm")
    return out


def available_policies() -> list[str]:
    """Selection policy versions in ``evals/policies`` (sorted names)."""
    folder = find_policies_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder is not None else []


def check_top_k_chunks(top_k_chunks: int) -> None:
    """``ValueError`` for ``top_k_chunks`` below 1, in ``aiblox answer --top-k-chunks``'s words:
    no chunk would make every answer a NO_EVIDENCE refusal, a bad setting rather than data."""
    if top_k_chunks < 1:
        raise ValueError(f"top_k_chunks {top_k_chunks}: out of range; valid: a whole number "
                         ">= 1")


def split_choices(dataset: str) -> tuple[list[str], str | None]:
    """``(splits, default)`` of the split picker the notebooks offer for ``dataset``: its
    judged splits (:func:`aiblox.data.available_splits`, sorted), and ``test`` when it has one,
    else the first of them (None when it has no qrels at all)."""
    splits = sorted(available_splits(find_dataset(dataset)))
    return splits, (DEFAULT_SPLIT if DEFAULT_SPLIT in splits else next(iter(splits), None))


@dataclass
class NotebookWorkspace:
    """A dataset's workspace with every query's full-text and vector lists of one split
    computed once."""

    workspace: Workspace
    """The dataset's store, embedder and retrievers."""
    split: str
    """The split the notebook works on."""
    queries: list[tuple[str, str]]
    """``(qid, text)`` of the split's judged queries, in id order."""
    signals: SignalRuns
    """Their full-text and vector lists at :attr:`max_depth`."""
    max_depth: int
    """The deepest depth offered (and computed)."""

    @property
    def dataset(self) -> Dataset:
        """The dataset."""
        return self.workspace.dataset

    @property
    def store(self) -> Store:
        """The store."""
        return self.workspace.store

    @property
    def embedder(self) -> CachedEmbedder:
        """The embedder behind the store's embedding cache."""
        return self.workspace.embedder

    @property
    def retriever(self) -> HybridRetriever:
        """The hybrid retriever over the store."""
        return self.workspace.retriever

    @property
    def db(self) -> str:
        """The store's path or URL."""
        return self.workspace.db

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        """The split's judgements."""
        return self.dataset.split_qrels(self.split)

    @property
    def query_text(self) -> dict[str, str]:
        """``{qid: text}`` of the split's queries."""
        return dict(self.queries)

    def index_version(self) -> str:
        """Short hash of the store's item content hashes (the CLI's ``index_version``)."""
        return self.workspace.index_version()

    def close(self) -> None:
        """Close the store."""
        self.workspace.close()


def default_db(dataset: str) -> str:
    """``:memory:`` for the sample; the dataset's default store otherwise (the CLI's
    :func:`~aiblox.engine.workspace.default_store_path`), so a notebook reuses what ``aiblox eval``
    ingested (and the other way round)."""
    return ":memory:" if dataset == DEFAULT_DATASET else default_store_path(dataset)


def open_notebook_workspace(dataset: str = DEFAULT_DATASET, embedder: str = DEFAULT_EMBEDDER,
                   split: str | None = None, db: str | None = None,
                   max_depth: int = DEFAULT_DEPTH,
                   backend: str = "duckdb") -> NotebookWorkspace:
    """Load ``dataset``, open its workspace (:func:`aiblox.engine.workspace.open_workspace`: the
    store :func:`default_db` names unless ``db`` is given, made to hold the dataset, only what
    is missing is done), and compute the hybrid signals of every query of ``split`` at
    ``max_depth``. ``split`` None: ``test`` when the dataset has it, else its first split
    (:func:`split_choices`)."""
    if backend not in ("duckdb", "postgres"):
        raise ValueError(f"unknown backend {backend!r}; known: duckdb, postgres")
    if backend == "postgres" and not (db or "").startswith("postgres"):
        raise ValueError("backend 'postgres' needs db='postgresql+psycopg://...' (the server URL)")
    if max_depth < 1:
        raise ValueError(f"max_depth must be >= 1, got {max_depth}")
    if split is None:
        _, split = split_choices(dataset)
        if split is None:
            raise ValueError(f"dataset {dataset!r} has no qrels split (no qrels/<split> file): "
                             "nothing to score")
    ds = load_dataset(dataset, splits=[split])
    path = db or (":memory:" if ds.name == DEFAULT_DATASET else default_store_path(ds))
    ws = open_dataset_workspace(ds, path, embedder, progress=False)
    queries = ds.split_queries(split)
    base = RetrievalPrefs(query_text="", mode="hybrid", top_k_items=max_depth,
                          fts={"top_k": max_depth},  # type: ignore[arg-type]
                          vector={"top_k": max_depth})  # type: ignore[arg-type]
    group = [base.model_copy(update={"query_text": t, "query_id": q}) for q, t in queries]
    try:
        signals = ws.retriever.signals(group) if group else SignalRuns(text=[], vec=[])
    except BaseException:
        ws.close()
        raise
    return NotebookWorkspace(workspace=ws, split=split, queries=queries, signals=signals,
                             max_depth=max_depth)
