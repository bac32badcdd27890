"""Which settings apply to a point: what per-parameter plots and tables may group by, and what
a point's MLflow run logs as params.

A point carries every setting of its config, used or not: an RRF point still holds the default
``w_text`` and ``normalize``, a linear point the default ``rrf_k``, a ``whole``-document point a
``max_chunk_tokens``. Grouping points by a setting that does not apply to them mixes in points
the setting never touched (a linear point's ``rrf_k = 60`` would make k = 60 look best among RRF
points). So:

- ``w_text``, ``w_vec``, ``normalize`` and ``missing`` apply to hybrid points with the linear
  blend; ``rrf_k``, ``rrf_w_text`` and ``rrf_w_vec`` to hybrid points with the RRF blend;
  ``blend`` to hybrid points;
- ``max_chunk_tokens``, ``overlap_tokens`` and ``include_headers`` apply where the point's
  chunker takes them (its ``params``; a chunker that has none is assumed to take them all);
- every other setting applies to every point.

:func:`series_of` names the line a point belongs to in a per-parameter plot: its blend (or its
mode when it is not hybrid), so a setting that applies to both blends gets one line per blend.

:func:`param_applies` decides the same of a point's whole config, flattened (``prefs.fts.k1``),
for the params its MLflow run logs (the config hash and the manifest keep every setting):

- chunking, chunk cache and snippet settings, ``top_k_chunks`` and ``per_item_chunk_cap`` apply
  only where chunk stages run (a pipeline sweep's config, which holds ``chunk_k``);
- ``fts.*`` apply unless the mode is ``dense``, ``vector.*`` (and the embedder) unless it is
  ``bm25`` (with a retrieval ``pipeline`` both may, and both stay);
- the native full-text settings: ``fts.min_rank`` applies to the store's own search
  (``engine = "native"``), ``fts.config``, ``fts.rank_func`` and ``fts.mode`` to PostgreSQL's;
  field weighting (``title_weight``, ``title_b``) to the derived index; ``fts.delta`` to
  ``bm25l`` and ``bm25+``;
- HNSW settings unless the vector index is ``exact``, passage settings unless ``doc_score`` is
  ``first``;
- scoring settings as :func:`setting_applies` says (by mode and blend); with a retrieval
  pipeline, where its fusions read them from the base (``scoring``:
  :func:`aiblox.engine.settings.scoring_read`): ``bm25 >> rm3 >> bm25`` none, whatever the
  base's mode, ``fuse(bm25, dense, blend="linear")`` under an RRF base ``normalize`` and
  ``missing``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Any

from aiblox.contracts.retrieval import LINEAR_SETTINGS, RRF_SETTINGS

__all__ = ["CHUNKER_SETTINGS", "LINEAR_SETTINGS", "RRF_SETTINGS", "chunker_takes",
           "param_applies", "series_of", "setting_applies"]

CHUNKER_SETTINGS = frozenset({"max_chunk_tokens", "overlap_tokens", "include_headers"})
"""Chunking settings a chunker may ignore."""


@lru_cache(maxsize=64)
def chunker_takes(chunker_id: str) -> frozenset[str] | None:
    """The parameters the registered chunker ``chunker_id`` takes (from its ``params``, built
    with its defaults); None when it is unknown or does not say."""
    from aiblox.chunking import get_chunker

    try:
        params = getattr(get_chunker(chunker_id), "params", None)
    except Exception:  # noqa: BLE001 - an unknown chunker cannot say: every setting applies
        return None
    return frozenset(params) if isinstance(params, dict) else None


def setting_applies(setting: str, *, mode: str | None = "hybrid", blend: str | None = None,
                    chunker_id: str | None = None) -> bool:
    """Whether ``setting`` (a short name: ``rrf_k``, ``max_chunk_tokens`` ...) applies to a
    point with this retrieval ``mode``, ``blend`` and chunker (see the module doc)."""
    hybrid = mode in (None, "hybrid")
    if setting == "blend":
        return hybrid
    if setting in LINEAR_SETTINGS:
        return hybrid and blend == "linear"
    if setting in RRF_SETTINGS:
        return hybrid and blend == "rrf"
    if setting in CHUNKER_SETTINGS and chunker_id:
        takes = chunker_takes(chunker_id)
        return takes is None or setting in takes
    return True


def series_of(setting: str, *, mode: str | None = "hybrid", blend: str | None = None) -> str:
    """The line of a per-parameter plot a point belongs to: ``all`` for the blend (and mode)
    axis itself, else the point's blend (its mode when it is not hybrid)."""
    if setting in ("blend", "mode"):
        return "all"
    if mode not in (None, "hybrid"):
        return str(mode)
    return str(blend) if blend else "all"


_CHUNK_GROUPS = frozenset({"chunking", "cache", "snippet"})
_CHUNK_PREFS = frozenset({"top_k_chunks", "per_item_chunk_cap"})
_POSTGRES_FTS = frozenset({"config", "rank_func", "mode"})
_HNSW = frozenset({"hnsw_m", "ef_construction", "ef_search"})
_PASSAGE = frozenset({"passage_chunker", "passage_tokens", "passage_overlap"})


def param_applies(key: str, config: Mapping[str, Any],
                  scoring: Collection[str] | None = None) -> bool:
    """Whether the flattened setting ``key`` (``prefs.fts.k1``, ``embedder``) applies to the
    point whose effective config is ``config`` (see the module doc); ``scoring``: for a
    retrieval pipeline point, the base's scoring fields it reads
    (:func:`~aiblox.engine.settings.scoring_read`)."""
    parts = key.split(".")
    prefs = config.get("prefs") or {}
    mode = prefs.get("mode")
    piped = "pipeline" in config
    if parts == ["embedder"]:
        return piped or mode != "bm25" or "chunk_k" in config
    if parts[0] != "prefs" or len(parts) < 2:
        return True
    group, setting = parts[1], parts[-1]
    if group in _CHUNK_GROUPS or (len(parts) == 2 and setting in _CHUNK_PREFS):
        if "chunk_k" not in config:
            return False
        if group == "chunking" and setting in CHUNKER_SETTINGS:
            return setting_applies(setting,
                                   chunker_id=(prefs.get("chunking") or {}).get("chunker_id"))
        return True
    if group == "fts":
        if mode == "dense" and not piped:
            return False
        fts = prefs.get("fts") or {}
        native = fts.get("engine") == "native"
        if setting in _POSTGRES_FTS:
            return native and config.get("backend") == "postgres"
        if setting == "min_rank":
            return native
        if setting in ("title_weight", "title_b"):
            return not native
        if setting == "delta":
            return fts.get("method") in ("bm25l", "bm25+")
        return True
    if group == "vector":
        if mode == "bm25" and not piped:
            return False
        vector = prefs.get("vector") or {}
        if setting in _HNSW:
            return vector.get("index") != "exact"
        if setting in _PASSAGE:
            return vector.get("doc_score", "first") != "first"
        return True
    if group == "scoring":
        if piped and scoring is not None:
            return setting in scoring
        return setting_applies(setting, mode=mode, blend=(prefs.get("scoring") or {}).get(
            "blend"))
    return True
