"""The grid axes of a sweep spec (:mod:`aiblox.sweep.spec`): exact numeric steps, the axes
over fusion (and BM25), over late chunking and over answer selection, and the ``[search]``
draw. Validated by pydantic; unknown keys are rejected; every numeric axis is checked against
its bounds arithmetically (a ``Steps`` axis is counted, never built, to be checked).
"""

from __future__ import annotations

import math
import random
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from aiblox.contracts.retrieval import MAX_DEPTH, FtsConfig, ScoringConfig, VectorConfig
from aiblox.hashing import canonical_plain_json
from aiblox.sweep.grid import GridError, decimal_count, decimal_range, to_decimal

__all__ = [
    "BM25_AXES",
    "CHUNKING_KEYS",
    "CHUNK_DEPTH_KEYS",
    "ChunkingGrid",
    "DEPTH_AXES",
    "FIELD_AXES",
    "DEFAULT_MAX_POINTS",
    "DENSE_AXES",
    "FusionGrid",
    "DIRECTIONS",
    "MODEL_STRATEGIES",
    "MULTI_OBJECTIVE_STRATEGIES",
    "NUMERIC_STRATEGIES",
    "SEARCH_STRATEGIES",
    "SCORING_FIELDS",
    "SearchConfig",
    "SelectionGrid",
    "Steps",
    "axis_len",
    "axis_value_key",
    "check_numbers",
    "int_axis",
    "load_policy_by_name",
    "nonempty_axis",
    "point_limit",
    "policy_fields",
]

DEFAULT_MAX_POINTS = 10_000
"""The most grid points a spec may expand to unless the caller raises the limit (``aiblox sweep
--max-points N``, ``load_spec(path, max_points=N)``): a fusion sweep scores about 50 points a
second once retrieval is cached, so this is minutes of work, and memory for the point list."""

SCORING_FIELDS = frozenset(ScoringConfig.model_fields)
CHUNKING_KEYS = ("chunker_id", "max_chunk_tokens", "overlap_tokens")
"""Chunking axes that are :class:`ChunkingConfig` fields."""
CHUNK_DEPTH_KEYS = ("top_k_chunks", "per_item_chunk_cap")
"""Chunking axes that are :class:`RetrievalPrefs` fields."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True,
                              strict=True)  # no true for 1, no "10" for 10


class Steps(_Strict):
    """An exact numeric axis ``start, start + step, ..., stop`` (built in decimal arithmetic)."""

    start: float | str
    """First value (written as a number or a decimal string)."""
    stop: float | str
    """Last value, included; ``(stop - start) / step`` must be whole."""
    step: float | str
    """Step between values."""

    def values(self) -> list[float]:
        """The axis values, exactly: ``{start=0, stop=1, step=0.05}`` gives 21 values."""
        return decimal_range(self.start, self.stop, self.step)

    def count(self) -> int:
        """How many values :meth:`values` gives (computed, nothing built)."""
        return decimal_count(self.start, self.stop, self.step)

    @model_validator(mode="after")
    def _check(self) -> Steps:
        try:
            self.count()  # validates the axis without building it: a tiny step costs nothing
        except GridError as exc:
            raise ValueError(str(exc)) from exc
        return self


def point_limit(info: ValidationInfo | None) -> int:
    """The point limit of this validation: ``context={"max_points": N}``, else the default."""
    ctx = info.context if info is not None else None
    value = ctx.get("max_points") if isinstance(ctx, dict) else None
    return DEFAULT_MAX_POINTS if value is None else int(value)


def axis_len(v: list[Any] | Steps | None) -> int:
    """Distinct values of an axis (1 when not swept), without building a ``Steps`` axis; a
    list or table value (a fusion's ``weights = [[0.3, 0.7], [0.5, 0.5]]``) by its canonical
    JSON (:func:`axis_value_key`)."""
    if v is None:
        return 1
    if isinstance(v, Steps):
        return v.count()
    return len(dict.fromkeys(map(axis_value_key, v)))


def axis_value_key(value: Any) -> Any:
    """An axis value as a key for telling values apart: itself, or for a list or table (not
    hashable) its canonical plain JSON."""
    return canonical_plain_json(value) if isinstance(value, list | tuple | dict) else value


def check_numbers(v: list[Any] | Steps | None, *, low: int | float | None = None,
                   high: int | float | None = None, whole: bool = False, what: str) -> None:
    """Refuse axis values outside ``[low, high]`` (or not whole), arithmetically for ``Steps``
    (its values lie between ``start`` and ``stop``; they are whole when both ``start`` and
    ``step`` are)."""
    if v is None:
        return
    if isinstance(v, Steps):
        lo, hi, step = to_decimal(v.start), to_decimal(v.stop), to_decimal(v.step)
        if whole and (lo != lo.to_integral_value() or step != step.to_integral_value()):
            raise ValueError("steps must give whole numbers (whole start and step)")
        bad = [x for x in (lo, hi) if (low is not None and x < low)
               or (high is not None and x > high)]
        shown = [float(x) if not whole else int(x) for x in bad]
    else:
        odd = next((x for x in v if isinstance(x, float) and not math.isfinite(x)), None)
        if odd is not None:  # NaN passed every bound; an infinity reached the contract models
            raise ValueError(f"{what} must be finite numbers, got {odd}")
        if whole and any(x != int(x) for x in v):
            raise ValueError("values must be whole numbers")
        shown = [x for x in v if (low is not None and x < low) or (high is not None and x > high)]
    if shown:
        bounds = (f"in [{low}, {high}]" if low is not None and high is not None
                  else f">= {low}" if low is not None else f"<= {high}")
        raise ValueError(f"{what} must be {bounds}, got {shown}")


def _upper_bound(model: Any, name: str) -> int | float | None:
    """The ``le`` bound a contract model sets on field ``name`` (``FtsConfig.k1``: 1e9), or
    None: an axis is refused in the spec's words, not by the model later."""
    return next((m.le for m in model.model_fields[name].metadata
                 if getattr(m, "le", None) is not None), None)


def nonempty_axis(cls: Any, v: Any) -> Any:
    """Field validator of every grid axis: an empty list is refused (leave the axis out)."""
    if isinstance(v, list) and not v:
        raise ValueError("an axis needs at least one value (leave it out to keep the base)")
    return v


_CHUNK_MINIMUM = {"max_chunk_tokens": 1, "overlap_tokens": 0, "top_k_chunks": 1,
                  "per_item_chunk_cap": 1}
"""The smallest value of each numeric chunking axis (a zero budget or chunk count scores 0)."""


def int_axis(v: list[int] | Steps | None) -> list[int] | None:
    if isinstance(v, Steps):
        return [int(x) for x in v.values()]
    return list(v) if v is not None else None


class ChunkingGrid(_Strict):
    """Grid axes over late chunking (``[grid.chunking]``); see the module doc for expansion."""

    chunker_id: list[str] | None = None
    """Chunker names (``sentences``, ``token_window``, ``whole``, ...); None: the base's."""
    max_chunk_tokens: list[int] | Steps | None = None
    """Token budgets per chunk (chunkers that take one)."""
    overlap_tokens: list[int] | Steps | None = None
    """Tokens shared by consecutive chunks (chunkers that take them)."""
    top_k_chunks: list[int] | Steps | None = None
    """Evidence chunks returned per query."""
    per_item_chunk_cap: list[int] | Steps | None = None
    """At most this many chunks of one document."""

    @field_validator("max_chunk_tokens", "overlap_tokens", "top_k_chunks", "per_item_chunk_cap")
    @classmethod
    def _whole_numbers(cls, v: list[int] | Steps | None,
                       info: ValidationInfo) -> list[int] | Steps | None:
        name = str(info.field_name)
        check_numbers(v, low=_CHUNK_MINIMUM[name], whole=True, what=f"{name} values")
        return v

    @field_validator("chunker_id")
    @classmethod
    def _known_chunkers(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        from aiblox.chunking import default_registry

        known = default_registry.names() if hasattr(default_registry, "names") else None
        if known is not None:
            bad = [c for c in v if c not in known]
            if bad:
                raise ValueError(f"unknown chunker(s) {bad}; known: {sorted(known)}")
        return v

    _not_empty = field_validator(*CHUNKING_KEYS, *CHUNK_DEPTH_KEYS)(nonempty_axis)

    def axis(self, name: str) -> list[Any] | None:
        """Values of one axis (None when not swept), in the order written."""
        v = getattr(self, name)
        return list(v) if name == "chunker_id" and v is not None else int_axis(v)


class SelectionGrid(BaseModel):
    """Grid axes over answer selection (``[grid.selection]``): ``policy`` versions, and any
    :class:`~aiblox.assembly.SelectionPolicy` field as an override axis (a list, or ``Steps``
    for numbers). Unknown parameters are rejected."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, frozen=True)

    policy: list[str] | None = None
    """Policy versions (names in ``evals/policies``); None: ``R2_POLICY_V1``."""

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> SelectionGrid:
        from aiblox.assembly import PolicyError, SelectionPolicy

        if self.policy is not None and not self.policy:
            raise ValueError("policy: an axis needs at least one value")
        fixed = {"policy_version"}
        known = set(SelectionPolicy.model_fields) - fixed
        limit = point_limit(info)
        for name, raw in (self.model_extra or {}).items():
            if name not in known:
                raise ValueError(f"unknown policy parameter {name!r}; known: {sorted(known)}")
            count = self.count_values(name, raw)
            if not count:
                raise ValueError(f"{name}: an axis needs at least one value")
            if count > limit:
                raise ValueError(f"{name}: {count:,} values, above the limit of {limit:,} "
                                 f"grid points")
        try:
            policies = [load_policy_by_name(p) for p in self.policies()]
        except PolicyError as exc:
            raise ValueError(str(exc)) from None
        from aiblox.contracts.problems import refuse_coercions

        for name in self.override_names():
            for v in self.axis_values(name, (self.model_extra or {})[name]):
                refuse_coercions("", {name: v}, [SelectionPolicy])  # true for 1, "2" for 2
            for v in self.axis(name):
                try:
                    policies[0].with_updates(**{name: v})
                except ValidationError as exc:
                    msg = "; ".join(e["msg"] for e in exc.errors())
                    raise ValueError(f"{name} = {v!r}: {msg}") from None
        return self

    @staticmethod
    def _axis_of(name: str, raw: Any) -> Steps | list[Any]:
        """An override axis as written: ``Steps`` (from a table) or a list."""
        if isinstance(raw, dict):
            try:
                return Steps(**raw)
            except (ValidationError, TypeError) as exc:
                raise ValueError(f"{name}: not a list or steps {{start, stop, step}}: "
                                 f"{exc}") from None
        if isinstance(raw, list):
            return raw
        raise ValueError(f"{name}: expected a list of values or steps, got {raw!r}")

    @classmethod
    def count_values(cls, name: str, raw: Any) -> int:
        """Values of one override axis, computed (a ``Steps`` axis is not built)."""
        axis = cls._axis_of(name, raw)
        return axis.count() if isinstance(axis, Steps) else len(dict.fromkeys(map(repr, axis)))

    @classmethod
    def axis_values(cls, name: str, raw: Any) -> list[Any]:
        axis = cls._axis_of(name, raw)
        return axis.values() if isinstance(axis, Steps) else list(axis)

    def policies(self) -> list[str]:
        """Policy versions swept (``R2_POLICY_V1`` when not given)."""
        from aiblox.assembly.policy import DEFAULT_POLICY_VERSION

        return list(self.policy) if self.policy is not None else [DEFAULT_POLICY_VERSION]

    def override_names(self) -> list[str]:
        """Policy parameters swept, in the order written."""
        return list(self.model_extra or {})

    def axis(self, name: str) -> list[Any]:
        """Values of one override axis, in the order written (integers stay integers)."""
        values = self.axis_values(name, (self.model_extra or {})[name])
        from aiblox.assembly import SelectionPolicy

        ann = SelectionPolicy.model_fields[name].annotation
        if ann is int:
            return [int(v) for v in values]
        return values


def load_policy_by_name(name: str) -> Any:
    """:func:`aiblox.assembly.load_policy` (a version name or a path)."""
    from aiblox.assembly import load_policy

    return load_policy(name)


SEARCH_STRATEGIES = ("grid", "random", "tpe", "cmaes", "gp")
"""``[search] strategy`` values: every point, a seeded random draw, or an Optuna sampler (TPE,
CMA-ES, a Gaussian process)."""
MODEL_STRATEGIES = frozenset({"tpe", "cmaes", "gp"})
"""Strategies that choose each trial from the scores of the trials before (Optuna)."""
NUMERIC_STRATEGIES = frozenset({"cmaes", "gp"})
"""Samplers that model numeric parameters only: the grid must vary at least one number."""
MULTI_OBJECTIVE_STRATEGIES = frozenset({"grid", "random", "tpe", "gp"})
"""Strategies that take several ``objectives`` (Optuna's CMA-ES optimises one)."""
DIRECTIONS = ("maximize", "minimize")
"""Directions of an objective."""


class SearchConfig(_Strict):
    """Which points of the full grid are scored, and what counts as better."""

    strategy: str = "grid"
    """``grid``: every point; ``random``: ``n`` points drawn with ``random.Random(seed)``;
    ``tpe``, ``cmaes``, ``gp``: ``n`` trials chosen one after another by Optuna's TPE, CMA-ES
    or Gaussian-process sampler (seeded), each a point of the grid
    (:mod:`aiblox.sweep.search`)."""
    n: int | None = Field(default=None, ge=1)
    """Points drawn by ``random``, trials of a model-based strategy (all points when the grid
    is smaller)."""
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    """Seed of the draw (logged with the spec, so the same spec draws the same points)."""
    objectives: list[str] | None = None
    """Quality against cost: the metrics (and costs, :data:`aiblox.metrics.pareto.COSTS`)
    whose Pareto front the sweep reports; the spec's ``primary`` must be one of them. A
    model-based strategy then searches all of them (Optuna multi-objective); None: ``primary``
    alone."""
    directions: list[Literal["maximize", "minimize"]] | None = None
    """One per objective; None: inferred from the names (quality maximised, cost minimised)."""

    @field_validator("strategy")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in SEARCH_STRATEGIES:
            raise ValueError(f"unknown search strategy {v!r}; known: "
                             f"{', '.join(SEARCH_STRATEGIES)}")
        return v

    @model_validator(mode="after")
    def _check(self) -> SearchConfig:
        if self.strategy != "grid" and self.n is None:
            what = "points to draw" if self.strategy == "random" else "trials to run"
            raise ValueError(f"strategy {self.strategy!r} needs n (how many {what})")
        if self.strategy == "grid" and self.n is not None:
            raise ValueError("n applies to strategies 'random', 'tpe', 'cmaes' and 'gp' only")
        if self.objectives is not None:
            if len(self.objectives) < 2 or len(set(self.objectives)) != len(self.objectives):
                raise ValueError(f"objectives: at least two distinct names (quality and cost), "
                                 f"got {self.objectives}")
            if self.strategy not in MULTI_OBJECTIVE_STRATEGIES:
                raise ValueError(f"objectives: strategy {self.strategy!r} optimises one "
                                 f"objective; for several use "
                                 f"{', '.join(sorted(MULTI_OBJECTIVE_STRATEGIES))}")
        if self.directions is not None and (
                self.objectives is None or len(self.directions) != len(self.objectives)):
            raise ValueError("directions: one per objective (and objectives must be set)")
        return self

    @property
    def model_based(self) -> bool:
        """True for an Optuna strategy (trials chosen one by one, not drawn up front)."""
        return self.strategy in MODEL_STRATEGIES

    def pick(self, count: int) -> list[int]:
        """Indexes of the points kept, ascending (grid order); a model-based search keeps every
        point (its search space) and chooses among them while it runs."""
        if self.strategy != "random" or self.n is None or self.n >= count:
            return list(range(count))
        return sorted(random.Random(self.seed).sample(range(count), self.n))


FIELD_AXES = ("title_weight", "title_b")
"""BM25 field weighting axes (:class:`FtsConfig` fields; in :data:`BM25_AXES`)."""
DEPTH_AXES = ("fts_depth", "vector_depth")
"""Per-signal candidate depths (``fts.top_k``, ``vector.top_k``), the alternative to
``depth``."""


class FusionGrid(_Strict):
    """Grid axes over fusion; each axis is a list of values (numeric axes may be ``Steps``)."""

    blend: list[Literal["rrf", "linear"]] | None = None
    """Fusion methods to sweep; None: the base config's."""
    w_text: list[float] | Steps | None = None
    """Linear blend weight of the full-text signal; ``w_vec`` is ``1 - w_text`` exactly."""
    rrf_k: list[int] | Steps | None = None
    """RRF constants k."""
    normalize: list[Literal["minmax", "zscore", "sigmoid", "none"]] | None = None
    """Score normalisations for the linear blend."""
    missing: list[Literal["zero", "list_min"]] | None = None
    """Linear blend policy for a document absent from one list."""
    depth: list[int] | Steps | None = None
    """Candidates taken from each signal (full-text and vector ``top_k``) before fusion."""
    k1: list[float] | Steps | None = None
    """BM25 ``k1`` values (``fts.k1``; each value is a retrieval stage of its own)."""
    b: list[float] | Steps | None = None
    """BM25 ``b`` values (``fts.b``), in [0, 1]."""
    method: list[Literal["lucene", "robertson", "atire", "bm25l", "bm25+"]] | None = None
    """BM25 variants (``fts.method``)."""
    title_weight: list[float] | Steps | None = None
    """Weights of a title term against a body term in BM25 (``fts.title_weight``, >= 0; 1 is
    the joined text, 0 leaves titles out); each value is a BM25 index of its own."""
    title_b: list[float] | Steps | None = None
    """BM25F: the title's own length normalisation (``fts.title_b``, in [0, 1]; ``b`` is then
    the body's); not swept: one normalisation of the weighted length."""
    fts_depth: list[int] | Steps | None = None
    """Full-text candidates before fusion (``fts.top_k``), apart from ``vector_depth``; a spec
    sets either ``depth`` (both signals) or these."""
    vector_depth: list[int] | Steps | None = None
    """Vector candidates before fusion (``vector.top_k``), apart from ``fts_depth``."""
    doc_score: list[str] | None = None
    """Dense document scores (``vector.doc_score``): ``first`` (the document's own vector),
    ``maxp``, ``mean_top<k>``; each value is a retrieval stage of its own."""
    passage_chunker: list[str] | None = None
    """Chunkers cutting passages (``vector.passage_chunker``; not for ``first``)."""
    passage_tokens: list[int] | Steps | None = None
    """Passage token budgets (``vector.passage_tokens``; not for ``first``)."""
    chunking: ChunkingGrid | None = None
    """Axes over late chunking (``[grid.chunking]``); None: no chunking stage."""
    selection: SelectionGrid | None = None
    """Axes over answer selection (``[grid.selection]``); None: no answer stages."""
    stages: dict[str, dict[str, list[Any] | Steps]] | None = None
    """Axes over the parameters of the spec's pipeline stages (``[grid.stages.NAME]``:
    ``param = [values]`` or ``{start, stop, step}``), e.g. ``[grid.stages.rm3] fb_terms = [10,
    20]``; NAME is a stage of the ``pipeline`` (its kind, or its ``[stages.NAME]`` table)."""

    @field_validator("stages")
    @classmethod
    def _stage_axes(cls, v: dict[str, dict[str, list[Any] | Steps]] | None
                    ) -> dict[str, dict[str, list[Any] | Steps]] | None:
        for name, params in (v or {}).items():
            if not params:
                raise ValueError(f"stages.{name}: no parameter axes")
        return v  # an empty axis is refused with its line (spec_checks.check_stage_tables)

    def stage_axes(self) -> list[tuple[str, str, list[Any]]]:
        """``(stage, parameter, values)`` of every stage axis, in the order written."""
        out = []
        for name, params in (self.stages or {}).items():
            for param, values in params.items():
                vals: list[Any] = (values.values() if isinstance(values, Steps)
                                   else list(values))
                if isinstance(values, Steps) and all(
                        to_decimal(x) % 1 == 0 for x in (values.start, values.step)):
                    vals = [int(x) for x in vals]  # a whole-number axis stays whole
                out.append((name, param, vals))
        return out

    @field_validator("w_text")
    @classmethod
    def _weights_in_unit_interval(cls, v: list[float] | Steps | None) -> list[float] | Steps | None:
        check_numbers(v, low=0.0, high=1.0, what="weights")
        return v

    @field_validator("rrf_k")
    @classmethod
    def _rrf_constants(cls, v: list[int] | Steps | None) -> list[int] | Steps | None:
        check_numbers(v, low=0, high=_upper_bound(ScoringConfig, "rrf_k"), whole=True,
                      what="rrf_k values")
        return v

    @field_validator("depth", "fts_depth", "vector_depth")
    @classmethod
    def _depths(cls, v: list[int] | Steps | None) -> list[int] | Steps | None:
        check_numbers(v, low=1, high=MAX_DEPTH, whole=True,
                      what="depths (candidates per signal)")
        return v

    @model_validator(mode="after")
    def _one_depth_axis(self) -> FusionGrid:
        if self.depth is not None and (self.fts_depth is not None
                                       or self.vector_depth is not None):
            raise ValueError("depth sets both signals' depth: sweep either depth or "
                             "fts_depth / vector_depth, not both")
        return self

    @field_validator("k1", "title_weight")
    @classmethod
    def _bm25_saturations(cls, v: list[float] | Steps | None,
                          info: ValidationInfo) -> list[float] | Steps | None:
        check_numbers(v, low=0.0, high=_upper_bound(FtsConfig, str(info.field_name)),
                      what=f"{info.field_name} values")
        return v

    @field_validator("b", "title_b")
    @classmethod
    def _bm25_length_norms(cls, v: list[float] | Steps | None,
                           info: ValidationInfo) -> list[float] | Steps | None:
        check_numbers(v, low=0.0, high=1.0, what=f"{info.field_name} values")
        return v

    @field_validator("doc_score")
    @classmethod
    def _doc_scores(cls, v: list[str] | None) -> list[str] | None:
        for value in v or []:
            VectorConfig(doc_score=value)  # the same check (and message) as the contract's
        return v

    @field_validator("passage_chunker")
    @classmethod
    def _passage_chunkers(cls, v: list[str] | None) -> list[str] | None:
        return ChunkingGrid._known_chunkers(v)

    @field_validator("passage_tokens")
    @classmethod
    def _passage_tokens(cls, v: list[int] | Steps | None) -> list[int] | Steps | None:
        check_numbers(v, low=1, whole=True, what="passage_tokens values")
        return v

    _not_empty = field_validator("blend", "w_text", "rrf_k", "normalize", "missing",
                                 "depth", "k1", "b", "method", *FIELD_AXES,
                                 *DEPTH_AXES, "doc_score", "passage_chunker",
                                 "passage_tokens")(nonempty_axis)

    def axis(self, name: str) -> list[Any] | None:
        """Values of one axis (None when not swept), in the order written."""
        v = getattr(self, name)
        if isinstance(v, Steps):
            vals = v.values()
            whole = ("rrf_k", "depth", *DEPTH_AXES, "passage_tokens")
            return [int(x) for x in vals] if name in whole else vals
        return list(v) if v is not None else None


BM25_AXES = ("k1", "b", "method", "title_weight", "title_b")
"""Grid axes that are :class:`FtsConfig` fields (BM25 of the index engine)."""
DENSE_AXES = ("doc_score", "passage_chunker", "passage_tokens")
"""Grid axes that are :class:`VectorConfig` fields (dense document scores from passages)."""


def policy_fields() -> set[str]:
    from aiblox.assembly import SelectionPolicy

    return set(SelectionPolicy.model_fields) - {"policy_version"}
