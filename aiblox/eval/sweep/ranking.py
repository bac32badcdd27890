"""The one ranking of sweep points (:func:`ranking_order`), below every module that ranks: the
conclusion (:mod:`aiblox.eval.sweep.results`, which re-exports it), the k-fold choice
(:mod:`aiblox.eval.sweep.crossval`) and the reports."""

from __future__ import annotations

__all__ = ["ranking_order"]


def ranking_order(value: float, config_hash: str) -> tuple[float, str]:
    """The one ranking of sweep points: by value descending, ties by config hash ascending (a
    point logged to MLflow ranks the same way, :mod:`aiblox.eval.sweep.report`)."""
    return -value, config_hash
