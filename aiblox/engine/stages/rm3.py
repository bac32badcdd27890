"""``rm3``: query expansion by a relevance model (RM3) estimated from the top documents of a run.

Lavrenko and Croft, "Relevance-Based Language Models" (SIGIR 2001) estimate a relevance model
``P(t|R) ~ sum_D P(t|D) P(D|Q)`` from the top-ranked documents (RM1); Abdul-Jaleel et al.
("UMass at TREC 2004: Novelty and HARD", TREC 2004) interpolate it with the original query
(RM3). This is Anserini's variant (``io.anserini.rerank.lib.Rm3Reranker`` and
``io.anserini.util.FeatureVector``, castorini/anserini at 81e3414, 2026-08-21), step for step,
from the store's own term statistics (:class:`~aiblox.indexes.term_stats.TermStats`):

1. The original query ``q``: its analysed terms' counts, L1-normalised (``q(t) = qtf(t) /
   sum qtf``; ``FeatureVector.fromTerms(...).scaleToUnitL1Norm()``). Queries that already
   carry weighted terms (feedback after feedback) use those weights, L1-normalised.
2. Feedback documents: the first ``fb_docs`` of the query's run, each weighted by its score in
   the run normalised to sum 1 over them, ``P(D|Q) = s_D / sum s`` (Anserini uses the raw BM25
   scores; step 4's normalisation makes the two the same). A document scoring 0 or less
   contributes nothing (a run of similarities may hold negative scores).
3. Each feedback document's vector: its terms' counts, keeping terms of 2 to 20 characters, of
   ``[a-z0-9]`` only when ``english_terms`` (Anserini's term filter, on by default), and held by
   no more than ``max_df`` of the collection's documents (``df / N <= 0.1``: Anserini's
   stop-word heuristic); then pruned to its ``fb_terms`` largest counts (ties by term) and
   L1-normalised, ``P(t|D) = tf(t, D) / sum of its kept counts``; a document whose kept counts
   sum to 0.001 or less is skipped.
4. RM1: ``rm(t) = sum_D P(t|D) P(D|Q)``, pruned to the ``fb_terms`` largest (ties by term) and
   L1-normalised.
5. RM3: ``q'(t) = orig_weight * q(t) + (1 - orig_weight) * rm(t)`` over the union of their
   terms; terms weighing exactly 0 are left out (they score nothing).

The ``bm25`` after it searches ``q'`` as weighted terms, ``score(d) = sum_t q'(t) bm25(t, d)``
(:meth:`~aiblox.indexes.bm25.BM25Index.search_terms`; Anserini's boosted term queries).
Defaults are Anserini's (``-rm3.fbDocs 10 -rm3.fbTerms 10 -rm3.originalQueryWeight 0.5``).
PyTerrier's ``pt.rewrite.RM3`` defaults to ``fb_docs=3, fb_terms=10, fb_lambda=0.6``
(terrier-org/pyterrier ``pyterrier/terrier/rewrite.py``), Terrier's ``RM3`` class
(terrierteam/terrier-prf) weighting the original query by ``lambda`` with documents weighted
by the softmax of their scores and ``P(t|D)`` over the whole document length: another
variant, not this one.

Arithmetic in float64, sums in a fixed order (documents in rank order), so the same run gives
the same bytes.
"""

from __future__ import annotations

import re

import numpy as np
from pydantic import Field

from aiblox.engine.data import Queries
from aiblox.engine.plan import StageInputs
from aiblox.engine.registry import register_stage
from aiblox.engine.retrieval import StageContext
from aiblox.engine.stages.feedback import (
    FeedbackConfig,
    check_feedback,
    feedback_docs,
    original_terms,
)
from aiblox.indexes.term_stats import TermStats

__all__ = ["Rm3Config", "rm3", "rm3_expand"]

_ENGLISH = re.compile(r"[a-z0-9]+")


class Rm3Config(FeedbackConfig):
    """``rm3``: RM3 query expansion (Anserini's variant; module doc)."""

    fb_docs: int = Field(default=10, ge=1)
    """Feedback documents: the top ``fb_docs`` of each query's run (Anserini: 10)."""
    fb_terms: int = Field(default=10, ge=1)
    """Terms kept per feedback document and in the relevance model (Anserini: 10)."""
    orig_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """The original query's weight in the interpolation (Anserini: 0.5); 1 gives the query
    back, 0 the relevance model alone."""
    max_df: float = Field(default=0.1, gt=0.0, le=1.0)
    """Feedback terms held by more than this share of the documents are left out (Anserini's
    0.1); 1 keeps every term."""
    english_terms: bool = True
    """Keep only feedback terms of ``[a-z0-9]`` (Anserini's term filter; off:
    ``-rm3.noTermFilter``)."""


def term_filter(stats: TermStats, max_df: float, english: bool) -> np.ndarray:
    """Which vocabulary terms may be feedback terms (step 3 of the module doc)."""
    ok = np.fromiter(((2 <= len(t) <= 20) and (not english or _ENGLISH.fullmatch(t) is not None)
                      for t in stats.terms), dtype=np.bool_, count=stats.n_terms)
    if stats.n_docs:
        ok &= np.asarray(stats.df, dtype=np.float64) / stats.n_docs <= max_df
    return ok


def rm3_expand(stats: TermStats, original: dict[str, float], docs: list[tuple[int, float]],
               cfg: Rm3Config, allowed: np.ndarray) -> dict[str, float]:
    """One query's RM3 terms and weights: ``original`` its terms' weights, ``docs`` its
    feedback documents as ``(row, score)``, ``allowed`` :func:`term_filter`'s mask."""
    total_q = sum(abs(w) for w in original.values())
    q = {t: w / total_q for t, w in original.items()} if total_q > 0 else {}
    rm = _relevance_model(stats, docs, cfg.fb_terms, allowed)
    terms = stats.terms
    a = cfg.orig_weight
    out = {t: a * w for t, w in q.items()}
    for c, p in rm:
        t = terms[c]
        out[t] = out.get(t, 0.0) + (1.0 - a) * p
    return {t: w for t, w in out.items() if w != 0.0}


def _relevance_model(stats: TermStats, docs: list[tuple[int, float]], fb_terms: int,
                     allowed: np.ndarray) -> list[tuple[int, float]]:
    """RM1 pruned to ``fb_terms`` and L1-normalised, as ``(column, weight)`` best first."""
    docs = [(r, s) for r, s in docs if s > 0.0]
    total = sum(s for _, s in docs)
    cols_parts: list[np.ndarray] = []
    vals_parts: list[np.ndarray] = []
    for r, s in docs:
        cols, tfs = stats.row(r)
        keep = allowed[cols]
        cols, tfs = cols[keep], tfs[keep].astype(np.float64)
        if len(cols) > fb_terms:  # the document's fb_terms largest counts, ties by term
            top = np.lexsort((cols, -tfs))[:fb_terms]
            cols, tfs = cols[top], tfs[top]
        norm = float(tfs.sum())
        if norm <= 0.001:
            continue
        cols_parts.append(cols)
        vals_parts.append(tfs / norm * (s / total))
    if not cols_parts:
        return []
    cols = np.concatenate(cols_parts)
    uniq, inverse = np.unique(cols, return_inverse=True)
    weights = np.zeros(len(uniq), dtype=np.float64)
    np.add.at(weights, inverse, np.concatenate(vals_parts))  # documents in rank order
    top = np.lexsort((uniq, -weights))[:fb_terms]
    kept_c, kept_w = uniq[top], weights[top]
    norm = float(np.abs(kept_w).sum())
    if norm <= 0.0:
        return []
    return list(zip(kept_c.tolist(), (kept_w / norm).tolist(), strict=True))


@register_stage("rm3", version="1", takes="run", gives="queries", carries="terms",
                config=Rm3Config,
                reads=["items"], check=check_feedback,
                doc="RM3 query expansion from the run's top documents (Anserini's variant)")
def rm3(cfg: Rm3Config, inputs: StageInputs, ctx: StageContext) -> Queries:
    """Each query expanded by RM3 from its run's top ``fb_docs`` documents."""
    assert inputs.run is not None
    stats = ctx.indexes.term_stats(cfg.fts)
    queries = inputs.queries
    allowed = term_filter(stats, cfg.max_df, cfg.english_terms)
    originals = original_terms(queries, stats.analyzer)
    docs = feedback_docs(inputs.run, queries.qids, cfg.fb_docs, stats.position)
    return queries.with_terms([rm3_expand(stats, o, d, cfg, allowed)
                               for o, d in zip(originals, docs, strict=True)])
