"""``cutoff``: the first ``k`` documents of each query of a run, as a stage whose ``k`` is a sweep
axis (``bm25 >> cutoff >> cross_encoder`` with ``[grid.stages.cutoff] k = [20, 50, 100]``).

The ``%`` operator (``bm25 % 100``) is the same cut with ``k`` written into the expression; on
the topics it folds into the first stage's depth, where this stage is always a stage of its own
(keyed by ``k`` and its input). A ``k`` beyond the run's depth keeps the run whole.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.engine.data import Run
from aiblox.engine.registry import StageFacts, register_stage

__all__ = ["CutoffConfig", "cutoff"]


class CutoffConfig(BaseModel):
    """``cutoff``: keep the top of each query's list."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    k: int = Field(default=100, ge=1)
    """Documents kept per query."""


def _check(cfg: CutoffConfig, facts: StageFacts) -> int | None:
    """The depth it gives: ``k``, or the incoming depth when that is smaller."""
    return cfg.k if facts.depth is None else min(cfg.k, facts.depth)


@register_stage("cutoff", version="1", takes="run", gives="run", config=CutoffConfig,
                check=_check, doc="the first k documents of each query (k: a sweep axis)")
def cutoff(cfg: CutoffConfig, inputs: Any, ctx: Any) -> Run:
    """The first ``k`` documents of each query of the incoming run."""
    return inputs.run.cut(cfg.k)
