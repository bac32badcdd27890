"""``bm25`` and ``dense`` as stages after feedback: retrieval for :class:`Queries` that are not
the topics themselves (rewritten texts, weighted terms from RM3 or Bo1, Rocchio's vectors).
On the topics the engine plans them as the first stage instead (:mod:`aiblox.engine.plan`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs, VectorConfig
from aiblox.embedding.device import embedder_device
from aiblox.engine.data import Queries, Run
from aiblox.retrieval.retriever import blank_emptied, without_query_id, zero_emptied

__all__ = ["StageContext", "native_after_terms", "retrieve"]


class StageContext:
    """What a stage function may use besides its inputs: the dataset's workspace (store,
    indexes, retriever, embedder), opened on first need, and whether to show progress."""

    def __init__(self, workspace: Any, progress: bool = False) -> None:
        self._workspace = workspace
        self.progress = progress

    @property
    def workspace(self) -> Any:
        """The dataset's :class:`~aiblox.engine.workspace.Workspace`."""
        ws = self._workspace
        return ws() if callable(ws) else ws

    @property
    def retriever(self) -> Any:
        """The workspace's hybrid retriever."""
        return self.workspace.retriever

    @property
    def indexes(self) -> Any:
        """The store's BM25 and vector indexes."""
        return self.workspace.indexes

    @property
    def embedder(self) -> Any:
        """The workspace's embedder."""
        return self.workspace.retriever.embedder

    @property
    def store(self) -> Any:
        """The store (items by id: ``store.get_items(ids)``)."""
        return self.workspace.store


def retrieve(kind: str, cfg: FtsConfig | VectorConfig, queries: Queries,
             ctx: StageContext, ignore_identical_ids: bool = False,
             filters: dict[str, Any] | None = None) -> Run:
    """The ``kind`` (``bm25`` or ``dense``) run of ``queries`` under ``cfg``, ``cfg.top_k``
    deep: weighted terms or query vectors when the queries carry them, else their texts; as the
    first stage searches (:meth:`~aiblox.retrieval.retriever.HybridRetriever.signals`): only
    documents passing ``filters`` (the first stage's metadata filters), ``min_rank`` and
    ``min_score`` applied, the ``native`` engine or passage scoring (``doc_score``) where set.
    ``ignore_identical_ids``: without the document whose id is the query's, searched one
    deeper so that ``cfg.top_k`` are kept (as the first stage's signals are)."""
    if ignore_identical_ids:
        deeper = retrieve(kind, cfg.model_copy(update={"top_k": cfg.top_k + 1}), queries, ctx,
                          filters=filters)
        kept = [without_query_id(list(zip(docs, scores, strict=True)), q)[:cfg.top_k]
                for q, docs, scores in zip(deeper.qids, deeper.docs, deeper.scores, strict=True)]
        return Run.from_lists(deeper.qids, kept)
    if kind == "bm25":
        assert isinstance(cfg, FtsConfig)
        if queries.terms is not None:
            if cfg.engine != "index":
                raise ValueError(native_after_terms())
            index = ctx.indexes.lexical(cfg)
            lists = index.search_terms([dict(t) for t in queries.terms], cfg.top_k,
                                       ctx.indexes.allowed(index.ids, filters))
            if cfg.min_rank is not None:
                lists = [[h for h in run if h[1] >= cfg.min_rank] for run in lists]
            return Run.from_lists(queries.qids, blank_emptied(lists, queries.texts))
        return _by_text(queries, RetrievalPrefs(query_text="", mode="bm25", fts=cfg,
                                                filters=filters or {}), ctx)
    assert isinstance(cfg, VectorConfig)
    if queries.vectors is not None:
        emb = ctx.embedder
        vectors = np.ascontiguousarray(queries.vectors, dtype=np.float32)
        if cfg.doc_score != "first":  # documents scored from their passages
            passages = ctx.indexes.passages(emb, cfg)
            lists = passages.search(vectors, cfg.top_k, cfg.doc_score,
                                    ctx.indexes.allowed(passages.ids, filters), cfg.min_score)
        elif cfg.engine == "index":
            knn = ctx.indexes.vectors(emb.model_id, cfg)
            lists = knn.search(vectors, cfg.top_k, ctx.indexes.allowed(knn.ids, filters),
                               device=embedder_device(emb))
        else:
            lists = ctx.store.vector_search_many(vectors, emb.model_id, cfg.top_k, cfg,
                                                 filters)
        lists = zero_emptied(lists, vectors)
        return Run.from_lists(queries.qids, blank_emptied(lists, queries.texts))
    return _by_text(queries, RetrievalPrefs(query_text="", mode="dense", vector=cfg,
                                            filters=filters or {}), ctx)


def native_after_terms() -> str:
    """Why ``bm25(engine='native')`` cannot follow lexical feedback."""
    return ("bm25(engine='native') cannot score the weighted terms feedback gives (the store's "
            "own full-text search takes text): use engine='index', the default")


def _by_text(queries: Queries, prefs: RetrievalPrefs, ctx: StageContext) -> Run:
    group = [prefs.model_copy(update={"query_text": t, "query_id": q})
             for q, t in zip(queries.qids, queries.texts, strict=True)]
    if not group:
        return Run((), (), ())
    sig = ctx.retriever.signals(group)
    lists = sig.text if prefs.mode == "bm25" else sig.vec
    return Run.from_lists(queries.qids, lists)
