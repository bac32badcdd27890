"""Each step's configuration defaults in a pipeline: a stage kind's defaults from the spec's
base prefs (:func:`stage_defaults`), and the base each step of a sequence reads
(:func:`step_bases`): feedback takes the analysis (``rm3``, ``bo1``) or the distance
(``rocchio``) of the retrieval stage it feeds, so what it gives is formed for the index that
stage searches."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel

from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs, VectorConfig
from aiblox.engine.algebra import Pipeline, PipelineError, Stage, Then, entry_stages
from aiblox.engine.builtin import RetrieveConfig
from aiblox.engine.registry import get_stage_kind

__all__ = ["FTS_READ", "stage_defaults", "step_bases"]


def stage_defaults(kind: str, base: RetrievalPrefs) -> dict[str, Any]:
    """The defaults of a retrieval kind's config from the spec's base prefs: ``bm25`` its
    ``fts``, ``dense`` its ``vector``, ``fuse`` its ``scoring`` and ``top_k_items``,
    ``retrieve`` all of its first stage; any other kind whose config has an ``fts`` field
    (feedback read from the BM25 index: ``rm3``, ``bo1``) the base's ``fts``, whose analysis
    :func:`step_bases` replaces by that of the ``bm25`` after it; one with a ``distance``
    (``rocchio``, ``dense_rescore``) the base's vector distance (``rocchio``'s that of the
    ``dense`` after it, :func:`step_bases`)."""
    if kind == "bm25":
        return base.fts.model_dump()
    if kind == "dense":
        return base.vector.model_dump()
    if kind == "retrieve":
        return {f: getattr(base, f) for f in RetrieveConfig.model_fields}
    fields = get_stage_kind(kind).config.model_fields
    out: dict[str, Any] = {}
    if "fts" in fields:  # feedback on the BM25 index (rm3, bo1): the analysis bm25 searches
        out["fts"] = base.fts.model_dump()
    if "distance" in fields:  # vectors compared as the dense stage does (rocchio, dense_rescore)
        out["distance"] = base.vector.distance
    return out


FTS_READ = ("lower", "stopwords", "stemmer", "fields", "title_weight", "engine")
"""The ``fts`` keys lexical feedback reads: the analysis that decides the term statistics
(:func:`aiblox.indexes.term_stats.term_stats_spec`), and the engine those settings are valid
for (``title_weight`` needs ``engine = "index"``); the BM25 scoring and search settings (``k1``,
``b``, ``top_k``, ...) are the ``bm25`` stage's."""


def step_bases(p: Then, base: RetrievalPrefs) -> list[RetrievalPrefs]:
    """The base each step of ``p`` is configured from: ``base``, but a lexical feedback step
    followed by ``bm25`` reads the analysis that stage searches with (``FTS_READ`` from its
    config, under what the feedback's own ``fts`` sets), so the expanded terms are its index's
    terms: ``bm25(stemmer=None) >> rm3 >> bm25(stemmer=None)`` expanded the base's stemmed
    terms, which an unstemmed index mostly lacks (cranfield nDCG@10 0.26 for 0.37). Where the
    base's analysis is the bm25's, nothing changes (nor does a stage key). bm25 stages after
    it that analyse differently, where the feedback does not set that itself, are a
    :class:`PipelineError` (one line)."""
    out = [base] * len(p.steps)
    for i, (step, nxt) in enumerate(zip(p.steps, p.steps[1:], strict=False)):
        if isinstance(step, Stage) and step.spec.carries == "vector":
            out[i] = _vector_base(step, nxt, base)
            continue
        if not isinstance(step, Stage) or step.spec.carries != "terms" \
                or "fts" not in step.spec.config.model_fields:
            continue
        told = step.param_dict().get("fts")
        own = set(FtsConfig.model_fields) if isinstance(told, BaseModel) else set(told or ())
        readers = {r.expression(): cast(FtsConfig, r.config(stage_defaults("bm25", base)))
                   for r in entry_stages(nxt) if r.kind == "bm25"}
        native = next((expr for expr, cfg in readers.items() if cfg.engine != "index"), None)
        if native is not None:
            from aiblox.engine.retrieval import native_after_terms

            raise PipelineError(f"stage {native} after {step.name}: {native_after_terms()}")
        analysis: dict[str, Any] = {}
        for f in (f for f in FTS_READ if f not in own):
            values = {repr(getattr(cfg, f)): (expr, getattr(cfg, f))
                      for expr, cfg in readers.items()}
            if len(values) > 1:
                said = ", ".join(f"{expr}: {f} = {v}" for v, (expr, _) in values.items())
                raise PipelineError(f"stage {step.name}: the bm25 stages after it analyse text "
                                    f"differently ({said}); feedback gives one set of terms: "
                                    f"give them one {f}, or set it on {step.name} (fts)")
            if values:
                analysis[f] = next(iter(values.values()))[1]
        if analysis:
            out[i] = base.model_copy(update={"fts": base.fts.model_copy(update=analysis)})
    return out


def _vector_base(step: Stage, nxt: Pipeline, base: RetrievalPrefs) -> RetrievalPrefs:
    """The base of vector feedback (``rocchio``) followed by ``dense``: the distance that stage
    searches with, unless the feedback sets its own, so the new query vector is formed for the
    index it searches (``dense(distance='l2') >> rocchio >> dense(distance='l2')`` formed a
    cosine one). Two ``dense`` stages after it of different distances: a :class:`PipelineError`
    unless the feedback sets one."""
    if "distance" not in step.spec.config.model_fields or "distance" in step.param_dict():
        return base
    told = {cast(VectorConfig, r.config(stage_defaults("dense", base))).distance: r.expression()
            for r in entry_stages(nxt) if r.kind == "dense"}
    if len(told) > 1:
        said = ", ".join(f"{expr}: distance = {d}" for d, expr in told.items())
        raise PipelineError(f"stage {step.name}: the dense stages after it compare vectors "
                            f"differently ({said}); feedback gives one vector: give them one "
                            f"distance, or set it on {step.name}")
    if not told:
        return base
    return base.model_copy(update={"vector": base.vector.model_copy(
        update={"distance": next(iter(told))})})
