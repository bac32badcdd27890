"""Normalised linear blend of scores (CombSUM with weights; Fox and Shaw, TREC-2, 1994).

Each list's scores are normalised (see :mod:`aiblox.fusion.normalize`), then
``score(d) = sum_i w_i * norm_i(d)``. A document absent from list ``i`` gets the ``missing``
value for that list: ``zero`` (ranx's convention) or ``list_min``, the lowest normalised score
in that list (pyserini's convention). The choice changes rankings, so it is part of the config.
A document listed more than once in one list keeps its first entry, whose score is the one
normalised and blended; a later entry is dropped before the list is normalised
(:func:`~aiblox.fusion.types.first_occurrences`, the rule of every fusion route).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from aiblox.fusion.normalize import get_normalizer
from aiblox.fusion.types import RankedList, check_blend_finite, first_occurrences, rank_sorted

__all__ = ["MISSING_POLICIES", "linear"]

MISSING_POLICIES = ("zero", "list_min")


def linear(runs: Sequence[RankedList], weights: Sequence[float], normalize: str = "minmax",
           missing: str = "zero") -> RankedList:
    """Fuse ranked lists by a weighted sum of normalised scores."""
    if len(weights) != len(runs):
        raise ValueError(f"linear: {len(runs)} runs but {len(weights)} weights")
    if missing not in MISSING_POLICIES:
        raise ValueError(f"unknown missing-document policy {missing!r}; known: {MISSING_POLICIES}")
    norm = get_normalizer(normalize)
    normed: list[dict[str, float]] = []
    floors: list[float] = []
    for run in runs:
        hits, _ranks = first_occurrences(run)
        for d, s in hits:  # a NaN would land anywhere in the blend (max() skips it)
            if not math.isfinite(s):
                raise ValueError(f"linear fusion: document {d!r} has score {s!r}: the scores "
                                 f"blended must be finite numbers")
        values = norm([s for _, s in hits])
        normed.append({d: v for (d, _), v in zip(hits, values, strict=True)})
        floors.append(min(values) if (values and missing == "list_min") else 0.0)
    all_ids = sorted({d for run in runs for d, _ in run})
    fused = {
        d: sum(w * n.get(d, floor) for n, w, floor in zip(normed, weights, floors, strict=True))
        for d in all_ids
    }
    check_blend_finite(max((abs(v) for v in fused.values()), default=0.0), normalize)
    return rank_sorted(fused)
