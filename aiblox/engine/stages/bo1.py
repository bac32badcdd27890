"""``bo1``: query expansion by Bo1, the Bose-Einstein term weighting of Amati's divergence from
randomness framework, from the top documents of a run.

Amati, "Probabilistic Models for Information Retrieval based on Divergence from Randomness"
(PhD thesis, Glasgow, 2003), ch. 8; Amati, Carpineto and Romano, "Query difficulty, robustness
and selective application of query expansion" (ECIR 2004). This is Terrier's implementation as
PyTerrier's ``pt.rewrite.Bo1QueryExpansion`` runs it by default (terrier-org/terrier-core at
3ceec7d: ``QueryExpansion``, ``DFRBagExpansionTerms``, ``queryexpansion.Bo1``; parameter-free
expansion, ``parameter.free.expansion = true``), from the store's own term statistics
(:class:`~aiblox.indexes.term_stats.TermStats`):

1. The original query: its analysed terms' counts over the largest count, ``qtw(t) = qtf(t) /
   max qtf`` (``MatchingQueryTerms.normaliseTermWeights``); queries that already carry weighted
   terms use those weights over the largest.
2. Feedback documents: the first ``fb_docs`` of the query's run (their scores are not read).
   For each term in them, ``tf_x``, its count summed over them, and ``n_x``, the feedback
   documents holding it.
3. With ``min_docs`` or more feedback documents, a term held by fewer than ``min_docs`` of them
   weighs 0, unless it is an original query term (``expansion.mindocuments = 2``).
4. Bo1: ``w(t) = tf_x log2((1 + f) / f) + log2(1 + f)``, ``f = F / N`` (``F`` the term's
   collection frequency, ``N`` the documents).
5. Normalised: ``w(t) / norm``. Parameter-free (``beta`` None, Terrier's default): ``norm`` is
   the Bo1 weight of the top term's own ``tf_x`` as its frequency, ``tf_m log2((1 + f_m) / f_m)
   + log2(1 + f_m)`` with ``f_m = tf_m / N`` (``Bo1.parameterFreeNormaliser``); with ``beta``
   set, ``norm`` is the largest ``w`` and each weight is multiplied by ``beta`` (Rocchio's
   beta, Terrier's ``rocchio.beta``).
6. The ``max(fb_terms, query terms)`` terms of largest normalised weight (ties by term) are
   added to the query: ``q'(t) = qtw(t) + w(t) / norm``; other original terms keep ``qtw``.
   Terms weighing exactly 0 are left out (they score nothing).

The ``bm25`` after it searches ``q'`` as weighted terms (Terrier scores the expanded query with
its weighting model, each term's score times its weight). Defaults are Terrier's and
PyTerrier's (``fb_docs=3, fb_terms=10``: ``expansion.documents``, ``expansion.terms``).
Arithmetic in float64, in a fixed order.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from aiblox.engine.data import Queries
from aiblox.engine.plan import StageInputs
from aiblox.engine.registry import register_stage
from aiblox.engine.retrieval import StageContext
from aiblox.engine.stages.feedback import (
    FeedbackConfig,
    check_feedback,
    concat_rows,
    feedback_docs,
    original_terms,
)
from aiblox.indexes.term_stats import TermStats

__all__ = ["Bo1Config", "bo1", "bo1_expand"]


class Bo1Config(FeedbackConfig):
    """``bo1``: Bo1 query expansion (Terrier's parameter-free variant; module doc)."""

    fb_docs: int = Field(default=3, ge=1)
    """Feedback documents: the top ``fb_docs`` of each query's run (Terrier: 3)."""
    fb_terms: int = Field(default=10, ge=1)
    """Expansion terms added (at least as many as the query's own terms; Terrier: 10)."""
    min_docs: int = Field(default=2, ge=1)
    """A term held by fewer feedback documents weighs 0 (not an original query term; only
    with at least this many feedback documents). Terrier's ``expansion.mindocuments``: 2."""
    beta: float | None = Field(default=None, gt=0.0, le=1e9)
    """None: parameter-free normalisation (Terrier's default); a number: weights over the
    largest, times ``beta`` (Terrier's ``rocchio.beta`` is 0.4). Finite and at most 10**9,
    refused when the pipeline is built: an expansion weight is at most ``beta + 1`` and the
    ``bm25`` after it sums weight times term score in float32, so 10**38 (or ``inf``) failed
    only after the feedback ran (a score past the largest float, a run that is no JSON). At
    10**9 the original terms' weights (at most 1) are already below the 32-bit resolution of
    the expansion terms' (the bound of :class:`~aiblox.contracts.retrieval.FtsConfig`'s
    ``k1``, with which the sums stay finite)."""


def _bo1(tf: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Amati's Bo1 weight of terms of feedback frequency ``tf`` and ``f = F / N``."""
    return np.asarray(tf * np.log2((1.0 + f) / f) + np.log2(1.0 + f), dtype=np.float64)


def bo1_expand(stats: TermStats, original: dict[str, float], rows: list[int],
               cfg: Bo1Config) -> dict[str, float]:
    """One query's Bo1-expanded terms and weights: ``original`` its terms' weights, ``rows``
    its feedback documents' rows (best first)."""
    top_q = max((abs(w) for w in original.values()), default=0.0)
    out = {t: w / top_q for t, w in original.items()} if top_q > 0 else {}
    cols, tfs = concat_rows(stats, rows)
    if not len(cols):
        return {t: w for t, w in out.items() if w != 0.0}
    uniq, inverse = np.unique(cols, return_inverse=True)
    tf_x = np.zeros(len(uniq), dtype=np.float64)
    np.add.at(tf_x, inverse, tfs.astype(np.float64))  # documents in rank order
    n_x = np.bincount(inverse, minlength=len(uniq))
    n = stats.n_docs
    f = np.asarray(stats.cf, dtype=np.float64)[uniq] / n
    w = _bo1(tf_x, f)
    if len(rows) >= cfg.min_docs:
        vocab = stats.vocab
        own = np.isin(uniq, [vocab[t] for t in original if t in vocab])
        w[(n_x < cfg.min_docs) & ~own] = 0.0
    best = int(np.argmax(w))  # the first of equal maxima: the lowest column (term order)
    if cfg.beta is None:
        tf_m = tf_x[best:best + 1]
        norm = float(_bo1(tf_m, tf_m / n)[0])
    else:
        norm = float(w[best])
    if not norm > 0.0:
        return {t: v for t, v in out.items() if v != 0.0}
    w = w / norm
    if cfg.beta is not None:
        w = w * cfg.beta
    n_exp = max(cfg.fb_terms, len(original))
    terms = stats.terms
    for i in np.lexsort((uniq, -w))[:n_exp].tolist():
        t = terms[int(uniq[i])]
        out[t] = out.get(t, 0.0) + float(w[i])
    return {t: v for t, v in out.items() if v != 0.0}


@register_stage("bo1", version="1", takes="run", gives="queries", carries="terms",
                config=Bo1Config,
                reads=["items"], check=check_feedback,
                doc="Bo1 (DFR) query expansion from the run's top documents (Terrier's)")
def bo1(cfg: Bo1Config, inputs: StageInputs, ctx: StageContext) -> Queries:
    """Each query expanded by Bo1 from its run's top ``fb_docs`` documents."""
    assert inputs.run is not None
    stats = ctx.indexes.term_stats(cfg.fts)
    queries = inputs.queries
    originals = original_terms(queries, stats.analyzer)
    docs = feedback_docs(inputs.run, queries.qids, cfg.fb_docs, stats.position)
    return queries.with_terms([bo1_expand(stats, o, [r for r, _ in d], cfg)
                               for o, d in zip(originals, docs, strict=True)])
