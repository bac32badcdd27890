"""What the lexical pseudo-relevance feedback kinds (:mod:`~aiblox.engine.stages.rm3`,
:mod:`~aiblox.engine.stages.bo1`) share: their common parameters, the original query's terms,
the feedback documents of a run as rows of the store's term statistics
(:class:`~aiblox.indexes.term_stats.TermStats`), and the check that refuses settings that cannot
work before any stage computes.

Both read the statistics of the analysis the ``bm25`` stage after them searches with: their
config's ``fts`` field, which a spec's ``[base]`` fills
(:func:`aiblox.engine.stage_bases.stage_defaults`) and the ``bm25`` after them overrides with its
own analysis (:func:`aiblox.engine.stage_bases.step_bases`: ``bm25(stemmer=None) >> rm3 >>
bm25(stemmer=None)`` expands unstemmed terms), so the expanded terms are the BM25 index's own
terms.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from aiblox.contracts.retrieval import FtsConfig
from aiblox.engine.data import Queries, Run
from aiblox.engine.registry import StageFacts
from aiblox.engine.stage_bases import FTS_READ

__all__ = ["FeedbackConfig", "check_feedback", "concat_rows", "feedback_docs",
           "original_terms"]

class FeedbackConfig(BaseModel):
    """Parameters every lexical feedback kind has (each kind sets its own defaults)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True,
                              allow_inf_nan=False)

    fb_docs: int = Field(default=10, ge=1)
    """Feedback documents: the top ``fb_docs`` of each query's run (fewer where a query's run
    is shorter)."""
    fb_terms: int = Field(default=10, ge=1)
    """Feedback terms kept."""
    fts: FtsConfig = Field(default_factory=FtsConfig)
    """The analysis whose term statistics are read (its ``lower``, ``stopwords``,
    ``stemmer``, ``fields`` and ``title_weight``): those of the ``bm25`` stage after it (in a
    spec, over the ``[base]``'s ``fts``) where this table does not set them itself (an
    experiment's choice, such as RM3 weights from title-weighted counts). Set on the stage,
    only those keys (:data:`FTS_READ`): another (``k1``) would change the stage's key and
    label, not its terms."""

    @field_validator("fts", mode="before")
    @classmethod
    def _reads_the_analysis(cls, value: Any, info: ValidationInfo) -> Any:
        # the stage's own fts (the validation context's, aiblox.engine.registry.make_config),
        # not the base's under it: a spec's [base] fts holds every key
        own = (info.context or {}).get("own")
        told = own.get("fts") if isinstance(own, Mapping) else None
        if isinstance(told, BaseModel):  # a config given whole: the keys it moves
            told = {k: v for k, v in told if v != FtsConfig.model_fields[k].get_default(
                call_default_factory=True)}
        unread = [k for k in (told if isinstance(told, Mapping) else ()) if k not in FTS_READ
                  and k in FtsConfig.model_fields]
        if unread:
            raise ValueError(f"sets {', '.join(unread)}, which feedback does not read (it "
                             f"reads the term statistics of the analysis: "
                             f"{', '.join(FTS_READ)}); set {'them' if len(unread) > 1 else 'it'}"
                             f" on the bm25 stage")
        return value


def check_feedback(cfg: FeedbackConfig, facts: StageFacts) -> int | None:
    """Refuse, before any stage computes, feedback from more documents than the store holds
    or than the incoming run holds per query, and more feedback terms than the vocabulary
    holds (the statistics are read, built if missing, for that): one line naming the
    parameter and the limit."""
    if facts.n_docs is not None and cfg.fb_docs > facts.n_docs:
        raise ValueError(f"fb_docs = {cfg.fb_docs} but the store holds {facts.n_docs} "
                         f"documents")
    if facts.depth is not None and cfg.fb_docs > facts.depth:
        raise ValueError(f"fb_docs = {cfg.fb_docs} but its input run holds at most "
                         f"{facts.depth} documents per query")
    if facts.context is not None:
        n_terms = facts.context.indexes.term_stats(cfg.fts).n_terms
        if cfg.fb_terms > n_terms:
            raise ValueError(f"fb_terms = {cfg.fb_terms} but the index's vocabulary holds "
                             f"{n_terms} terms")
    return None


def original_terms(queries: Queries, analyzer: Any) -> list[dict[str, float]]:
    """Each query's original terms with their weights: the counts of its analysed text's
    terms (repeats counted; terms outside the vocabulary kept, they score nothing), or, for
    queries that already carry weighted terms (feedback after feedback), those weights."""
    if queries.terms is not None:
        return [dict(ts) for ts in queries.terms]
    return [{t: float(c) for t, c in Counter(terms).items()}
            for terms in analyzer.terms_many(list(queries.texts))]


def feedback_docs(run: Run, qids: Sequence[str], fb_docs: int, position: dict[str, int]
                  ) -> list[list[tuple[int, float]]]:
    """Per query (in ``qids``' order) its top ``fb_docs`` documents as ``(row, score)``; a
    document the statistics do not hold (built from other items) is an error naming it."""
    by_q = dict(zip(run.qids, zip(run.docs, run.scores, strict=True), strict=True))
    out = []
    for q in qids:
        docs, scores = by_q.get(q, ((), ()))
        rows = []
        for d, s in zip(docs[:fb_docs], scores[:fb_docs], strict=True):
            pos = position.get(d)
            if pos is None:
                raise ValueError(f"feedback document {d!r} (query {q!r}) is not in the store's "
                                 f"term statistics")
            rows.append((pos, float(s)))
        out.append(rows)
    return out


def concat_rows(stats: Any, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The term columns and counts of the documents ``rows``, one after another (in order)."""
    parts = [stats.row(r) for r in rows]
    if not parts:
        return np.zeros(0, np.int32), np.zeros(0, np.float32)
    return np.concatenate([c for c, _ in parts]), np.concatenate([f for _, f in parts])
