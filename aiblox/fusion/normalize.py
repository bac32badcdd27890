"""Score normalisers for linear fusion, registered by name.

Each maps a ranked list's raw scores to a comparable scale:

- ``minmax``: ``(s - min) / (max - min)``, all 1.0 when every score is equal.
- ``zscore``: ``(s - mean) / std`` (population std), all 0.0 when every score is equal.
- ``sigmoid``: the logistic function of the z-score, ``1 / (1 + exp(-z))``, so scores land in
  (0, 1) whatever the raw scale (BM25 scores in the tens, cosine similarities below one).
- ``none``: raw scores unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["NORMALIZERS", "get_normalizer", "minmax", "none", "register_normalizer", "sigmoid",
           "zscore"]

Normalizer = Callable[[list[float]], list[float]]


def minmax(scores: list[float]) -> list[float]:
    """Min-max scaling to [0, 1]."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    span = hi - lo
    return [(s - lo) / span for s in scores]


def zscore(scores: list[float]) -> list[float]:
    """Standard scores with the population standard deviation."""
    if not scores:
        return []
    n = len(scores)
    if max(scores) == min(scores):  # all equal: fsum(xs) / n need not give x back (0.1 * 3)
        return [0.0] * n
    mean = math.fsum(scores) / n
    var = math.fsum((s - mean) ** 2 for s in scores) / n
    if var == 0.0:
        return [0.0] * n
    std = math.sqrt(var)
    return [(s - mean) / std for s in scores]


def sigmoid(scores: list[float]) -> list[float]:
    """Logistic function of the z-scores."""
    return [1.0 / (1.0 + math.exp(-z)) for z in zscore(scores)]


def none(scores: list[float]) -> list[float]:
    """Identity."""
    return list(scores)


NORMALIZERS: dict[str, Normalizer] = {}


def register_normalizer(name: str, fn: Normalizer) -> None:
    """Register a normaliser under ``name`` (the built-ins use this too)."""
    NORMALIZERS[name] = fn


def get_normalizer(name: str) -> Normalizer:
    """The normaliser registered as ``name``."""
    try:
        return NORMALIZERS[name]
    except KeyError:
        raise ValueError(
            f"unknown normaliser {name!r}; known: {', '.join(sorted(NORMALIZERS))}"
        ) from None


for _name, _fn in (("minmax", minmax), ("zscore", zscore), ("sigmoid", sigmoid), ("none", none)):
    register_normalizer(_name, _fn)
