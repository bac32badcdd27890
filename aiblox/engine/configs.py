"""The config of every stage of a point: what decides its output besides its inputs (the
stages, their versions and keys: :mod:`aiblox.engine.task`).

The stages of a point per split, in pipeline order. A fusion sweep's points stop after
``metrics``; a pipeline point (a spec with ``[grid.chunking]`` or ``[grid.selection]``) goes on
to the chunk stages, and to the answer stages when it has a selection policy:

======================  ==========================================================  ==============
stage                   config (the function that builds it)                        inputs
======================  ==========================================================  ==============
``signals``             dataset, split, backend, embedder, store fingerprint,       (none)
                        retrieval settings, ``limit``, the passage chunker id
                        when documents are scored from passages, the filtered
                        vector search's version when filters may walk HNSW,
                        the filter rule's version when filtered
                        (:func:`signals_config`)
``fusion``              scoring, ``top_k_items`` (:func:`fusion_config`)            signals
``metrics``             ranx metric names, split (:func:`metrics_config`)           fusion
``chunks``              chunker id (parameters included), strategy,                 fusion
                        ``top_k_chunks``, ``per_item_chunk_cap``, late-chunking
                        weights and embedder (none for a bm25 point)
                        (:func:`chunks_config`); with the ``precomputed`` or
                        ``mixed`` strategy the digest of the store's precomputed
                        chunks it reads (added by :meth:`RunContext.run
                        <aiblox.engine.context.RunContext.run>`)
``chunk_metrics``       metrics, ``chunk_k``, answer match rule, projection         chunks
                        (:func:`chunk_metrics_config`)
``selection``           policy id, version, sha256 of the effective policy,         chunks
                        index version, embedder (:func:`selection_config`)
``prompt``              prompt contract version and template sha256                 selection
``reader``              reader name, its options, model name                        prompt
``validation``          validator version                                           prompt, reader
``answer_metrics``      metric names and the match rule                             chunks, prompt,
                                                                                    validation
======================  ==========================================================  ==============

What each stage computes is in :mod:`aiblox.engine.compute`; the chain of one point is
:mod:`aiblox.engine.point`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiblox.assembly import PROMPT_CONTRACT_VERSION, TEMPLATE_SHA256
from aiblox.chunking import ANSWER_MATCH_RULE, PROJECTION, make_chunker
from aiblox.contracts.filter_rule import FILTER_RULE_VERSION
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.indexes import filtered_search_key, passage_chunker_id
from aiblox.metrics import STATUSES, canonical_metrics
from aiblox.retrieval.late_chunking import LateChunker

__all__ = [
    "ANSWER_METRICS_CONFIG",
    "PROMPT_CONFIG",
    "STORED_CHUNK_STRATEGIES",
    "VALIDATION_CONFIG",
    "chunk_metrics_config",
    "chunks_config",
    "fusion_config",
    "metrics_config",
    "selection_config",
    "signals_config",
]


def signals_config(prefs: RetrievalPrefs, dataset_hash: str, split: str, backend: str,
                   embedder_id: str | None, limit: int | None = None,
                   store: dict[str, str | None] | None = None) -> dict[str, Any]:
    """What decides the signals stage's output. ``store`` is what the retrieval read from the
    store (:func:`aiblox.stores.identity.store_fingerprint`: the digests of its items and of the
    embedder's vectors), so a result computed on one store is never reused for another that
    holds other content. ``limit`` (the first ``limit`` queries of the split, as
    :meth:`Dataset.split_queries` orders them) enters the config only when set."""
    needs_vec = prefs.mode in ("hybrid", "dense") and prefs.vector.embed_query
    extra: dict[str, Any] = {} if limit is None else {"limit": int(limit)}
    passages = passage_chunker_id(prefs.vector) if needs_vec else None
    if passages is not None:  # the passage chunker with its parameters, encoding and version
        extra["passages"] = passages
    if prefs.filters:  # the version of what a filter matches (only filtered points' keys move)
        extra["filter_rule"] = FILTER_RULE_VERSION
    filtered = filtered_search_key(prefs.vector, bool(prefs.filters)) if needs_vec else None
    if filtered is not None:  # a filtered search that may walk HNSW: its version (only such
        extra["filtered_knn"] = filtered  # points' keys move)
    return {**extra, "store": store,
            "dataset": dataset_hash, "split": split, "backend": backend,
            "embedder": embedder_id if needs_vec else None,
            "mode": prefs.mode,
            "fts": prefs.fts.model_dump() if prefs.mode in ("hybrid", "bm25") else None,
            "vector": prefs.vector.model_dump() if needs_vec else None,
            "filters": prefs.filters,
            # "refilled": the lists are retrieved one deeper and cut after the identical id is
            # dropped (they were one short before: such entries get new keys, no other moves)
            "ignore_identical_ids": "refilled" if prefs.ignore_identical_ids else False,
            }


def fusion_config(prefs: RetrievalPrefs) -> dict[str, Any]:
    """What decides the fusion stage's output (given its signals): the scoring in canonical
    form (:meth:`~aiblox.contracts.retrieval.ScoringConfig.canonical_for` its mode)."""
    return {"mode": prefs.mode, "scoring": prefs.scoring.canonical_for(prefs.mode).model_dump(),
            "top_k_items": prefs.top_k_items}


def metrics_config(metrics: Sequence[str], split: str) -> dict[str, Any]:
    """What decides the metrics stage's output (given its run); qrels come with the split,
    and the dataset hash is already in the signals key upstream. The metrics in canonical
    order (:func:`~aiblox.metrics.canonical_metrics`), the order the stage computes them in:
    the order they were given in is how they are shown, not another output."""
    return {"metrics": canonical_metrics(metrics), "split": split}


STORED_CHUNK_STRATEGIES = ("precomputed", "mixed")
"""The chunking strategies that read chunks ``aiblox index build --chunks`` stored."""


def chunks_config(prefs: RetrievalPrefs, embedder_id: str | None) -> dict[str, Any]:
    """What decides the chunks stage's output (given the fused run): the chunker with its
    parameters, the chunk depths, and the default late chunker's weights and embedder. A bm25
    point's chunks are ranked by their BM25 alone (:func:`aiblox.engine.compute.chunk_output`,
    as ``aiblox eval --mode bm25 --chunks`` ranks them): its embedder is the text-only late
    chunker's, ``none``, whatever the sweep's."""
    late = LateChunker(None).params
    return {"chunker": make_chunker(prefs.chunking).chunker_id,
            "strategy": prefs.chunking.strategy, "top_k_items": prefs.top_k_items,
            "top_k_chunks": prefs.top_k_chunks, "per_item_chunk_cap": prefs.per_item_chunk_cap,
            "late": {**late, "embedder": late["embedder"] if prefs.mode == "bm25"
                     else embedder_id}}


def chunk_metrics_config(metrics: Sequence[str], chunk_k: Sequence[int],
                         split: str) -> dict[str, Any]:
    """What decides the chunk metrics (given the chunks); the metrics in canonical order, as
    :func:`metrics_config` has them (their output is keyed by name)."""
    return {"metrics": canonical_metrics(metrics), "k": sorted(set(chunk_k)),
            "match": ANSWER_MATCH_RULE,
            "projection": PROJECTION, "split": split}


def selection_config(policy_name: str, policy: Any, index_version: str,
                     embedder_id: str | None) -> dict[str, Any]:
    """What decides the selection stage's output (given the chunks): the effective policy."""
    return {"policy": policy_name, "policy_version": policy.policy_version,
            "policy_sha256": policy.sha256(), "index_version": index_version,
            "embedding_model": embedder_id}


PROMPT_CONFIG: dict[str, Any] = {"contract": PROMPT_CONTRACT_VERSION,
                                 "template_sha256": TEMPLATE_SHA256}
"""The prompt stage's config: Prompt Contract V1 and its template."""


VALIDATION_CONFIG: dict[str, Any] = {"validator": "R5"}
"""The validation stage's config."""


ANSWER_METRICS_CONFIG: dict[str, Any] = {"metrics": list(STATUSES), "match": ANSWER_MATCH_RULE,
                                         "squad": "v1.1"}
"""The answer metrics stage's config."""
