"""Which settings apply to a point: what per-parameter plots and tables may group by.

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
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["CHUNKER_SETTINGS", "LINEAR_SETTINGS", "RRF_SETTINGS", "chunker_takes",
           "series_of", "setting_applies"]

LINEAR_SETTINGS = frozenset({"w_text", "w_vec", "normalize", "missing"})
"""Scoring settings of the linear blend only."""
RRF_SETTINGS = frozenset({"rrf_k", "rrf_w_text", "rrf_w_vec"})
"""Scoring settings of reciprocal rank fusion only."""
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
