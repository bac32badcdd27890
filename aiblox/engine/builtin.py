"""The built-in stage kinds the engine plans itself: retrieval on the topics (``bm25``,
``dense``, and ``retrieve``, the whole first stage of a :class:`RetrievalPrefs`), rank fusion
(``fuse``, the ``+`` operator) and ``identity`` (a run passed on unchanged, for score
combination such as ``bm25 >> (cross_encoder + identity)``).

Their parameters default to a sweep spec's ``[base]`` settings (or to
:class:`~aiblox.contracts.retrieval.RetrievalPrefs`' defaults in Python), so ``bm25 + dense``
in a spec is the spec's hybrid retrieval, with the same stage keys as a spec that names no
pipeline.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aiblox.contracts.filter_rule import Filters
from aiblox.contracts.retrieval import (
    LINEAR_SETTINGS,
    MAX_DEPTH,
    RRF_SETTINGS,
    FtsConfig,
    ScoringConfig,
    VectorConfig,
)
from aiblox.engine.registry import StageKind, add_kind

__all__ = ["FuseConfig", "IdentityConfig", "RetrieveConfig"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class RetrieveConfig(_Strict):
    """``retrieve``: the first stage of :class:`RetrievalPrefs` (both signals fused, or one)."""

    mode: Literal["hybrid", "bm25", "dense"] = "hybrid"
    """Which signals: both fused, or one."""
    fts: FtsConfig = Field(default_factory=FtsConfig)
    """BM25 settings (``top_k``: its depth)."""
    vector: VectorConfig = Field(default_factory=VectorConfig)
    """Vector search settings (``top_k``: its depth)."""
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    """Fusion of the two signals."""
    top_k_items: int = Field(default=100, ge=1, le=MAX_DEPTH)
    """Documents kept per query after fusion."""
    filters: Filters = Field(default_factory=dict)
    """Metadata filters (:attr:`~aiblox.contracts.retrieval.RetrievalPrefs.filters`), checked as
    they are set."""
    ignore_identical_ids: bool = False
    """Drop a document whose id equals the query's (BEIR's argument-retrieval protocol)."""


class FuseConfig(_Strict):
    """``fuse`` (``a + b``): rank fusion of two or more runs."""

    blend: Literal["rrf", "linear"] = "rrf"
    """Reciprocal rank fusion, or a normalised linear blend of the scores."""
    rrf_k: int = Field(default=60, ge=0, le=MAX_DEPTH)
    """RRF's k in ``w / (k + rank)``, at most :data:`~aiblox.contracts.retrieval.MAX_DEPTH` (see
    :attr:`~aiblox.contracts.retrieval.ScoringConfig.rrf_k`)."""
    weights: tuple[float, ...] | None = None
    """One weight per fused run, in order. None: for two runs, one lexical and one dense by
    their first stage (``bm25 + dense``, ``(bm25 % 100) + (dense >> x)``), the spec's
    ``w_text``/``w_vec`` (``rrf_w_text``/``rrf_w_vec`` under RRF) in member order; for any
    other fusion equal weights (:func:`aiblox.engine.plan.fuse_config`)."""
    normalize: Literal["minmax", "zscore", "sigmoid", "none"] = "sigmoid"
    """Per-run score normalisation before a linear blend."""
    missing: Literal["zero", "list_min"] = "zero"
    """Linear blend: the normalised score of a document absent from a run."""
    top_k: int | None = Field(default=None, ge=1, le=MAX_DEPTH)
    """Fused documents kept per query (None: the spec's ``top_k_items``)."""

    @field_validator("weights")
    @classmethod
    def _weights_rank_something(cls, v: tuple[float, ...] | None) -> tuple[float, ...] | None:
        # as ScoringConfig's w_text/w_vec, for any number of runs: each finite and >= 0, and
        # not all 0 (every document would score 0: the fused run in id order)
        if v is None:
            return v
        bad = next((w for w in v if not math.isfinite(w) or w < 0), None)
        if bad is not None:
            raise ValueError(f"each is a finite number >= 0, got {bad!r} in {list(v)!r}")
        total = sum(v)
        if not math.isfinite(total):
            raise ValueError(f"{list(v)!r} sum past the largest float")
        if v and total == 0:
            raise ValueError(f"{list(v)!r} sum to 0: every document would score 0 and come "
                             f"back in id order; give a run a positive weight")
        return v

    def canonical(self) -> FuseConfig:
        """This config with the settings its blend does not read at their defaults (RRF reads
        no ``normalize`` or ``missing``, the linear blend no ``rrf_k``), as
        :meth:`ScoringConfig.canonical <aiblox.contracts.retrieval.ScoringConfig.canonical>`
        does for the first stage's fusion: what a fusion's stage key is made of
        (:func:`aiblox.engine.plan.apply_pipeline`), so two fusions that fuse alike are one
        stage, and a fusion at the defaults keeps the key it always had."""
        unused = LINEAR_SETTINGS if self.blend == "rrf" else RRF_SETTINGS
        fields = type(self).model_fields
        reset = {k: fields[k].default for k in sorted(unused & set(fields))
                 if getattr(self, k) != fields[k].default}
        return self.model_copy(update=reset) if reset else self


class IdentityConfig(_Strict):
    """``identity``: no parameters."""


add_kind(StageKind("retrieve", "1", "queries", "run", RetrieveConfig,
                   reads=frozenset({"items", "vectors", "embedder"}),
                   doc="first-stage retrieval: BM25, dense or both fused (RetrievalPrefs)",
                   reads_queries=frozenset()))  # the topics' text: no feedback after it
# bm25 2, dense 2: after feedback they apply the first stage's filters and their own engine,
# min_rank, min_score and passage scoring (doc_score), as the first stage does; version 1 ignored
# them (their values were keyed, the run was the plain index search's)
add_kind(StageKind("bm25", "2", "queries", "run", FtsConfig, reads=frozenset({"items"}),
                   doc="BM25 over the store's items (top_k: depth); weighted terms after "
                       "feedback", reads_queries=frozenset({"terms"})))
add_kind(StageKind("dense", "2", "queries", "run", VectorConfig,
                   reads=frozenset({"items", "vectors", "embedder"}),
                   doc="nearest neighbours of the query's vector (top_k: depth)",
                   reads_queries=frozenset({"vector"})))
# fuse 2: a document listed twice in one input run keeps its first entry (its rank and score)
# in the linear blend too, as RRF did (aiblox.fusion.types.first_occurrences); a run from a
# researcher's own stage can list one twice, so a cached fusion of it may differ; fuse 3: the
# z-score (and sigmoid) of a list of equal scores is 0 (0.5) whatever their value (a float64
# value such as 0.1 thrice gave +-1 through its rounded mean)
add_kind(StageKind("fuse", "3", "run", "run", FuseConfig,
                   doc="rank fusion of two or more runs (the + operator)"))
add_kind(StageKind("identity", "1", "run", "run", IdentityConfig,
                   doc="the run unchanged (for score combination)"))
