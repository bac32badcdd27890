"""Evaluate retrieval on a labelled dataset: prepare the store, retrieve in batches, score.

The config hash covers everything that decides the ranking (retrieval preferences without the
query, embedder, backend); the run hash covers the ranked lists themselves (query ids, document
ids, order, and the scores a TREC run file of them carries). Both are canonical-JSON sha256,
so they are identical in any process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.eval.datasets import Dataset
from aiblox.eval.metrics import (
    DEFAULT_METRICS,
    check_depth,
    evaluate_run,
    evaluation_prefs,
    validate_metrics,
)
from aiblox.eval.trec import trec_scores
from aiblox.fusion.types import RankedList
from aiblox.hashing import canonical_plain_json, sha256_hex, sha256_text
from aiblox.memory import paused_gc
from aiblox.progress import progress_bar
from aiblox.retrieval.retriever import HybridRetriever

__all__ = [
    "EvalResult",
    "config_hash",
    "evaluate_retrieval",
    "run_hash",
]


class EvalResult(BaseModel):
    """Scores of one retrieval configuration on one split."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dataset: str
    """Dataset name."""
    split: str
    """Split scored."""
    mode: str
    """bm25, dense or hybrid."""
    n_queries: int
    """Judged queries scored."""
    metrics: dict[str, float]
    """Mean metric values (ranx names, e.g. ``ndcg@10``)."""
    hashes: dict[str, str]
    """``dataset``, ``config`` and ``run`` sha256 hashes."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds for retrieval and scoring, and queries per second."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The effective configuration (what ``hashes['config']`` covers)."""
    per_query: SkipValidation[dict[str, dict[str, float]]] = Field(default_factory=dict,
                                                                   exclude=True)
    """Per-query metric values ``{metric: {qid: value}}`` (not serialised by default; built by
    the metrics, so not validated again: 10^5 values cost a fifth of a second)."""
    run: SkipValidation[dict[str, RankedList]] = Field(default_factory=dict, exclude=True)
    """The ranked run ``{qid: [(doc_id, score), ...]}`` (not serialised by default; built by
    the retriever, so not validated again)."""


def config_hash(prefs: RetrievalPrefs, embedder_id: str | None, backend: str) -> tuple[str, dict]:
    """Hash of what decides a ranking: prefs without the query, the embedder and the backend."""
    config = {
        "prefs": prefs.model_dump(exclude={"query_text", "query_id"}),
        "embedder": embedder_id,
        "backend": backend,
    }
    return sha256_hex(config), config


def run_hash(run: dict[str, RankedList]) -> str:
    """Hash of a ranked run: query ids, document ids, order and scores as a TREC run file
    carries them (the canonical JSON of ``{qid: [[doc, score], ...]}``, each query's scores
    made strictly decreasing by :func:`aiblox.eval.trec.trec_scores`: unchanged unless tied).
    So the run written by ``--save-runs`` and read back has the hash of the run it came from."""
    return sha256_text(canonical_plain_json(
        {q: [[h[0], s] for h, s in zip(hits, trec_scores([h[1] for h in hits]), strict=True)]
         for q, hits in sorted(run.items())}))


_UNSET_FIX = ("set {names} to {cut} or more, or leave it unset (an evaluation then retrieves as "
              "deep as its metrics read), or use cutoffs of at most {depth}")


def evaluate_retrieval(retriever: HybridRetriever, dataset: Dataset, split: str,
                       prefs: RetrievalPrefs, metrics: Sequence[str] = DEFAULT_METRICS,
                       batch_size: int = 1000, progress: bool = True) -> EvalResult:
    """Retrieve every judged query of ``split`` with ``prefs`` and score the run with ranx.

    The run is as deep as ``metrics`` need (:mod:`aiblox.eval.metrics.depth`): a depth
    ``prefs`` leaves unset (``top_k_items``, ``fts.top_k``, ``vector.top_k``; e.g.
    ``RetrievalPrefs(query_text="")``) is the evaluation depth, 100 or the deepest cutoff
    (1,000 for a metric without one), as ``aiblox eval`` retrieves; a depth set below a
    cutoff raises :class:`~aiblox.eval.metrics.DepthError` before anything is retrieved.
    ``EvalResult.config`` holds the depths used."""
    metrics = validate_metrics(metrics)
    prefs = evaluation_prefs(prefs, metrics)
    check_depth(prefs, metrics, fix=_UNSET_FIX)
    queries = dataset.split_queries(split)
    t0 = time.perf_counter()
    run: dict[str, RankedList] = {}
    bar = progress_bar(len(queries), f"{prefs.mode} {dataset.name}/{split}", unit="q",
                       enabled=progress)
    with paused_gc():
        for start in range(0, len(queries), batch_size):
            batch = queries[start:start + batch_size]
            group = [prefs.model_copy(update={"query_text": text, "query_id": qid})
                     for qid, text in batch]
            signals = retriever.signals(group)
            hits = retriever.fuse(group, signals)
            for (qid, _), hs in zip(batch, hits, strict=True):
                run[qid] = [(h.doc_id, h.score) for h in hs]
            bar.update(len(batch))
        bar.close()
        retrieve_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        means, per_query = evaluate_run(dataset.qrels[split], run, metrics)
        score_s = time.perf_counter() - t1
    chash, config = config_hash(prefs, getattr(retriever.embedder, "model_id", None),
                                retriever.store.kind)
    return EvalResult(
        dataset=dataset.name, split=split, mode=prefs.mode, n_queries=len(queries),
        metrics=means,
        hashes={"dataset": dataset.hash, "config": chash, "run": run_hash(run)},
        timings={"retrieve_s": round(retrieve_s, 3), "score_s": round(score_s, 3),
                 "qps": round(len(queries) / retrieve_s, 1) if retrieve_s > 0 else 0.0},
        config=config, per_query=per_query, run=run)
