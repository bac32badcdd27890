"""Two small stage kinds for the engine's tests, registered on import (a spec names this module
in ``stage_modules``): ``t_expand`` (feedback: each query's text plus the first words of its top
document) and ``t_flip`` (a reranker: the top ``top_n`` documents in reverse order). ``CALLS``
records every computation, so tests see what the stage cache spared."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from aiblox.engine import register_stage
from aiblox.engine.data import Queries, Run

CALLS: list[str] = []


class ExpandConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    words: int = Field(default=5, ge=1)


class FlipConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    top_n: int = Field(default=5, ge=1)


@register_stage("t_expand", version="1", takes="run", gives="queries", config=ExpandConfig,
                reads=["items"])
def t_expand(cfg: ExpandConfig, inputs, ctx) -> Queries:
    """Each query's text plus the first words of its top document."""
    CALLS.append("t_expand")
    run = inputs.run.as_dict()
    top = {q: hits[0][0] for q, hits in run.items() if hits}
    items = ctx.store.get_items(sorted(set(top.values())))
    texts = []
    for q, text in zip(inputs.queries.qids, inputs.queries.texts, strict=True):
        extra = items[top[q]].text.split()[:cfg.words] if q in top else []
        texts.append(" ".join([text, *extra]))
    return Queries(inputs.queries.qids, tuple(texts))


def _check_flip(cfg: FlipConfig, facts) -> int | None:
    """Refuse a top_n deeper than the run it receives."""
    if facts.depth is not None and cfg.top_n > facts.depth:
        raise ValueError(f"top_n = {cfg.top_n} but its input run holds at most {facts.depth} "
                         f"documents per query")
    return None


@register_stage("t_flip", version="1", takes="run", gives="run", config=FlipConfig,
                check=_check_flip)
def t_flip(cfg: FlipConfig, inputs, ctx) -> Run:
    """The top ``top_n`` of each query reversed (scores rewritten to keep the order)."""
    CALLS.append("t_flip")
    lists = []
    for docs in inputs.run.docs:
        top = list(reversed(docs[:cfg.top_n])) + list(docs[cfg.top_n:])
        lists.append([(d, float(len(top) - i)) for i, d in enumerate(top)])
    return Run.from_lists(inputs.run.qids, lists)

