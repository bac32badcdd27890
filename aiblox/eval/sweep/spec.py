"""Sweep specs: a TOML file naming a dataset, its tune and report splits, a base pipeline config
and grid axes over fusion, chunking and selection. Validated by pydantic; unknown keys are
rejected, and errors name the file and the field.

BM25 axes (``k1``, ``b``, ``method``, ``title_weight``, ``title_b``: fields of ``fts``, for the
index engine) multiply every other axis; each combination is a BM25 index and a retrieval
(signals) stage of its own, reused by every fusion point over it. A title axis needs the base's
``fts.fields`` to hold ``title`` and ``text`` (checked when the spec loads).

Fusion expansion: ``blend`` picks which axes apply. Linear points take ``w_text`` (``w_vec`` is
``1 - w_text``, exactly), ``normalize`` and ``missing``; RRF points take ``rrf_k``. ``depth``
(candidates per signal before fusion) applies to both; ``fts_depth`` and ``vector_depth`` set
the two signals' depths apart (their product; a spec sweeps either ``depth`` or these). An axis
left out keeps the base value, so no two points share a configuration.

Chunking expansion (``[grid.chunking]``): every fusion point times every ``chunker_id`` times
``top_k_chunks`` times ``per_item_chunk_cap``; ``max_chunk_tokens`` and ``overlap_tokens``
multiply only the chunkers that take them (``whole`` is one point whatever the sizes), and a
size pair the chunker rejects (``overlap_tokens >= max_chunk_tokens``) is left out.

Selection expansion (``[grid.selection]``): every chunking point times every ``policy``
(a version in ``evals/policies``) times every override axis (any other key must be a field of
:class:`~aiblox.assembly.SelectionPolicy`, e.g. ``max_chunks = [4, 6]``; an unknown one is
rejected). A spec with chunking or selection axes is a *pipeline* sweep: its points go on
past fusion to the chunk stages (:mod:`aiblox.eval.sweep.pipeline`); the answer stages
(selection, prompt, reader, validation) run only when it has selection axes.

``[search]`` picks the points scored: ``strategy = "grid"`` (default) every point;
``"random"`` ``n`` points drawn from the full grid with ``random.Random(seed)``, kept in grid
order; ``"tpe"``, ``"cmaes"``, ``"gp"`` ``n`` trials among the grid's points chosen by Optuna
while the sweep runs (:mod:`aiblox.eval.sweep.search`; :meth:`SweepSpec.points` is then the
whole grid, the search space). ``objectives`` (quality against cost) adds the Pareto front
(:mod:`aiblox.eval.sweep.pareto`) and makes a model-based search multi-objective. New fields
at their defaults stay out of the spec hash, so specs written before them keep their hash.

``[cv]`` (``folds``, ``seed``) adds seeded k-fold cross-validation over the tune split's queries
(:mod:`aiblox.eval.sweep.crossval`): the choice per fold is made on the other folds and scored
on the held-out one, and ``report_split`` may then be left out (a collection with one judged
split). Refused with a model-based strategy (its trials would be steered by every tuning
query's score).

Limits, checked before any point is built: depths, chunk budgets, ``top_k_chunks`` and
``per_item_chunk_cap`` are at least 1 (``overlap_tokens`` and ``rrf_k`` at least 0), and the
full grid (:meth:`SweepSpec.grid_size`, computed from the axes' lengths, so a ``w_text`` step of
``1e-7`` is refused in microseconds) holds at most :data:`DEFAULT_MAX_POINTS` points. Raise the
limit with ``load_spec(path, max_points=N)`` (``aiblox sweep --max-points N``), or
``SweepSpec.model_validate(data, context={"max_points": N})``; a ``[search]`` random draw
samples the full grid, so the limit applies to the full grid.

The axes themselves (their fields, bounds and validation) are :mod:`aiblox.eval.sweep.axes`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import product
from pathlib import Path
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

from aiblox.contracts.problems import value_problem
from aiblox.contracts.retrieval import (
    ChunkingConfig,
    FtsConfig,
    RetrievalPrefs,
    ScoringConfig,
    VectorConfig,
)
from aiblox.embedding.cross_encoder_finetune import RerankerConfig
from aiblox.embedding.device import device_class, parse_device
from aiblox.embedding.finetune import FineTuneConfig
from aiblox.engine.algebra import Pipeline, PipelineError
from aiblox.eval.metrics import (
    ANSWER_METRICS,
    CHUNK_SCALARS,
    DEFAULT_METRICS,
    PROJECTION_PREFIX,
    STATUSES,
    DepthError,
    check_depth,
    evaluation_prefs,
    validate_metrics,
)
from aiblox.eval.metrics.depth import shallow_limit
from aiblox.eval.sweep.axes import (
    BM25_AXES,
    CHUNK_DEPTH_KEYS,
    CHUNKING_KEYS,
    DEFAULT_MAX_POINTS,
    DENSE_AXES,
    DEPTH_AXES,
    FIELD_AXES,
    NUMERIC_STRATEGIES,
    SCORING_FIELDS,
    FusionGrid,
    SearchConfig,
    axis_len,
    load_policy_by_name,
    point_limit,
    policy_fields,
)
from aiblox.eval.sweep.crossval import CVConfig
from aiblox.eval.sweep.grid import to_decimal
from aiblox.hashing import sha256_hex

__all__ = [
    "DEFAULT_MAX_POINTS",
    "PipelinePoint",
    "SweepSpec",
    "SweepSpecError",
    "backend_of",
    "load_spec",
    "pipeline_metric_names",
]

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class SweepSpecError(ValueError):
    """A sweep spec that cannot be read or validated; the message names the file and field."""


@dataclass(frozen=True)
class PipelinePoint:
    """One point of a pipeline sweep: retrieval prefs (fusion and chunking) and a selection
    policy with its overrides (None without selection axes)."""

    prefs: RetrievalPrefs
    policy: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    pipeline: Pipeline | None = None
    """The retrieval pipeline (its stage parameters resolved); None: the prefs' first stage,
    as before pipelines existed."""

    @property
    def selection(self) -> dict[str, Any] | None:
        """``{"policy", "overrides"}`` or None."""
        if self.policy is None:
            return None
        return {"policy": self.policy, "overrides": dict(self.overrides)}

    def key(self) -> str:
        """sha256 identifying the point's settings (for deduplication)."""
        key: dict[str, Any] = {
            "prefs": self.prefs.model_dump(exclude={"query_text", "query_id"}),
            "selection": self.selection}
        if self.pipeline is not None:
            key["pipeline"] = self.pipeline.as_data()
        return sha256_hex(key)


def pipeline_metric_names(metrics: list[str], chunk_k: list[int],
                          answers: bool) -> list[str]:
    """Metric names a pipeline point reports: the ranx metrics of the fused run, chunk metrics
    (``answer_recall@k``, ``evidence_tokens``, ``max_passage:<m>``) and, with selection,
    :data:`ANSWER_METRICS`."""
    out = list(metrics)
    out += [f"answer_recall@{k}" for k in chunk_k] + list(CHUNK_SCALARS)
    out += [f"{PROJECTION_PREFIX}{m}" for m in metrics]
    if answers:
        out += list(ANSWER_METRICS)
    return out


class FineTuneSpec(FineTuneConfig):
    """``[finetune]`` of a sweep spec: the recipe and the split whose queries are trained on."""

    split: str
    """The split trained on (a file split such as ``train`` or a derived one such as
    ``train:1/2``), less every query of the sweep's tune and report splits."""

    def recipe(self) -> FineTuneConfig:
        """The recipe alone (no split)."""
        return FineTuneConfig(**self.model_dump(exclude={"split"}))


class RerankerFineTuneSpec(RerankerConfig):
    """``[finetune_reranker]`` of a sweep spec: a cross-encoder trained on the judged queries of
    a split the sweep does not score (:mod:`aiblox.eval.sweep.finetune_reranker`), used by a
    ``cross_encoder`` stage with ``model = "finetune"``."""

    split: str
    """The split trained on, less every query of the sweep's tune and report splits."""

    def recipe(self) -> RerankerConfig:
        """The recipe alone (no split)."""
        return RerankerConfig(**self.model_dump(exclude={"split"}))


class SweepSpec(_Strict):
    """A sweep: what to score, on which splits, over which grid."""

    name: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$", max_length=200)
    """Sweep name: letters, digits, ``_``, ``.``, ``-``, not starting with a dot or a hyphen
    (so never ``.`` or ``..``: it names folders, e.g. ``reports/<name>``, and MLflow tags
    searched by value); also the MLflow experiment name unless ``experiment`` is set."""
    description: str = ""
    """Free text for people."""
    experiment: str | None = None
    """MLflow experiment name; None: ``aiblox-sweep/<name>``."""
    dataset: str
    """Dataset name (looked up like ``aiblox eval``) or BEIR folder."""
    tune_split: str
    """Split the best configuration is chosen on."""
    report_split: str | None = None
    """Split the chosen configuration is reported on (never used for choosing). Required
    unless ``[cv]`` is set: a cross-validated spec may name the tuning split alone."""
    backend: Literal["duckdb", "postgres"] = "duckdb"
    """Store backend; ``postgres`` needs ``db`` to be a ``postgresql+psycopg://`` URL."""
    db: str | None = None
    """Store path or PostgreSQL URL; None: the dataset's default store
    (:func:`aiblox.eval.workspace.default_store_path`, the one `aiblox ingest` builds)."""
    embedder: str = "minilm"
    """Embedder: a registered name (``minilm``, ``hashing``), a folder holding a
    sentence-transformers model, or an installed package that ships one (its model id, which
    keys the caches, is the sha256 of its files). One per spec: a sweep's points share it."""
    device: str = "auto"
    """Where the embedder runs (and a ``[finetune]`` model trains): ``auto`` (the first GPU
    torch sees, else the CPU), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``; ``aiblox sweep
    --device`` overrides it. Off the CPU the embedder's model id carries the device class, so
    the points' results are keyed apart from the CPU's (another device may give other last
    bits)."""
    vectors: list[str] = Field(default_factory=list)
    """Precomputed vector files to import (default: found beside the dataset)."""
    metrics: list[str] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    """ranx metric names scored at every point."""
    primary: str = "ndcg@10"
    """The metric the best configuration is chosen by (on the tune split)."""
    base: dict[str, Any] = Field(default_factory=dict)
    """Overrides of :class:`RetrievalPrefs` (without ``query_text``) shared by every point."""
    grid: FusionGrid = Field(default_factory=FusionGrid)
    """Axes swept over fusion."""
    baseline: dict[str, Any] | None = None
    """Scoring overrides of the named baseline point (e.g. ``{blend = "rrf", rrf_k = 60}``)."""
    significance_top: int = Field(default=3, ge=1)
    """How many of the top points (ranked on the tune split) are tested against the baseline on
    the report split; Holm's correction runs across them."""
    stat_test: Literal["student", "fisher"] = "student"
    """Paired test from ranx: two-sided paired t-test or Fisher's randomisation test."""
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Significance level for Holm-adjusted p-values."""
    query_limit: int | None = Field(default=None, ge=1)
    """Pipeline sweeps: score only the first ``query_limit`` queries of each split (sorted by
    id, so the same queries every time); None: every judged query."""
    chunk_k: list[int] = Field(default_factory=lambda: [1, 5, 10])
    """Pipeline sweeps: the ``k`` of ``answer_recall@k`` over the returned chunks."""
    reader: str = "extractive"
    """Pipeline sweeps with selection: the reader (an ``aiblox.assembly.get_llm`` name)."""
    reader_options: dict[str, Any] = Field(default_factory=dict)
    """Options of the reader (e.g. ``{max_sentences = 1}``); part of the reader stage's key.
    No secrets: they are logged to MLflow and hashed into manifests (an ``api_key`` is
    refused; the ``openai`` reader reads ``AIBLOX_LLM_API_KEY``)."""

    @field_validator("reader_options")
    @classmethod
    def _no_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        secret = sorted(k for k in v if k.lower().endswith(("key", "secret", "password")))
        if secret:
            raise ValueError(f"reader_options.{secret[0]}: a secret does not belong in a spec "
                             f"(specs are logged to MLflow and hashed into manifests); set "
                             f"AIBLOX_LLM_API_KEY in the environment instead")
        return v
    search: SearchConfig = Field(default_factory=SearchConfig)
    """Which points of the grid are scored (``[search]``: grid, or seeded random)."""
    cv: CVConfig | None = None
    """``[cv]``: seeded k-fold cross-validation over the tuning split's queries
    (:mod:`aiblox.eval.sweep.crossval`); None: none."""
    pipeline: str | list[str] | None = None
    """The retrieval pipeline every point runs, as an expression such as
    ``"bm25 >> rm3 >> bm25"`` or ``"(bm25 + dense) % 100 >> cross_encoder"``
    (:mod:`aiblox.engine.expression`: ``>>`` then, ``+`` fuse, ``%`` cut-off), or a list of
    them (an axis: every pipeline is scored). Retrieval stages take their defaults from
    ``[base]`` (``bm25`` its ``fts``, ``dense`` its ``vector``, a fusion its ``scoring``), so the
    fusion and BM25 axes apply to them. None: the base's own retrieval (``retrieve``)."""
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """``[stages.NAME]``: the parameters of a pipeline stage called NAME (``kind`` names its
    registered kind, default NAME; ``kind = "fuse"`` names a fusion, ``NAME(a, b)``), or a
    named sub-pipeline (``pipeline = "..."``). Swept by ``[grid.stages.NAME]``."""
    stage_modules: list[str] = Field(default_factory=list)
    """Python modules imported before the pipeline is read: where your own stage kinds are
    registered (:func:`aiblox.engine.register_stage`). Recorded with every point, so
    ``aiblox eval verify`` imports them too."""
    finetune: FineTuneSpec | None = None
    """``[finetune]``: fine-tune the embedder on the judged queries of a split the sweep does
    not score, before any point (:mod:`aiblox.eval.sweep.finetune`); None: the embedder as
    it is."""
    finetune_reranker: RerankerFineTuneSpec | None = None
    """``[finetune_reranker]``: train a cross-encoder on the judged queries of a split the
    sweep does not score, before any point; a ``cross_encoder`` stage names it with
    ``model = "finetune"`` (:mod:`aiblox.eval.sweep.finetune_reranker`)."""

    @field_validator("metrics")
    @classmethod
    def _ranx_metrics(cls, v: list[str]) -> list[str]:
        return validate_metrics(v)

    @field_validator("device")
    @classmethod
    def _device_form(cls, v: str) -> str:
        return parse_device(v, "device")

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, v: str) -> str:
        from aiblox.embedding import registry
        from aiblox.embedding.sentence_transformers import find_model

        if v not in registry.names() and find_model(v) is None:
            raise ValueError(f"unknown embedder {v!r}; known: {', '.join(registry.names())}, "
                             f"or a folder holding a sentence-transformers model, or an "
                             f"installed package that ships one")
        return v

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> SweepSpec:
        if self.report_split is None and self.cv is None:
            raise ValueError("report_split is required (or set [cv] folds = k to choose by "
                             "k-fold cross-validation on tune_split alone)")
        if self.tune_split == self.report_split:
            raise ValueError("tune_split and report_split must differ: choose on one split, "
                             "report on another")
        if self.cv is not None and self.search.model_based:
            raise ValueError(f"cv: k-fold cross-validation needs its points fixed before any is "
                             f"scored (search strategy 'grid' or 'random'); "
                             f"{self.search.strategy!r} chooses its trials from the scores on "
                             f"every tuning query, so held-out queries would steer the search")
        if self.finetune is not None:
            self._check_finetune()
        if (self.backend == "postgres") != backend_of(self.db, "duckdb").startswith("postgres"):
            raise ValueError(f"backend {self.backend!r} does not match db {self.db!r}: "
                             f"postgres needs a postgresql+psycopg:// URL, duckdb a file path")
        known = (pipeline_metric_names(self.metrics, self.chunk_k,
                                       self.grid.selection is not None)
                 if self.has_pipeline_axes else self.metrics)
        if self.primary not in known:
            raise ValueError(f"primary metric {self.primary!r} is not in metrics {known}")
        if not self.has_pipeline_axes:
            data = self.model_dump(mode="json", include=set(_NEW_FIELDS))
            for name in ("query_limit", "chunk_k", "reader", "reader_options"):
                if data[name] != _DEFAULTS[name]:
                    raise ValueError(f"{name} applies to pipeline sweeps only (a spec with "
                                     f"[grid.chunking] or [grid.selection])")
        if any(k < 1 for k in self.chunk_k) or not self.chunk_k:
            raise ValueError(f"chunk_k must be positive ints, got {self.chunk_k}")
        bad = sorted(set(self.baseline or {}) - SCORING_FIELDS - set(CHUNKING_KEYS)
                     - set(CHUNK_DEPTH_KEYS) - {"policy", "pipeline"} - policy_fields()
                     - set(DENSE_AXES))
        if bad:
            raise ValueError(f"baseline: unknown key(s) {bad}")
        if not self.has_pipeline_axes and set(self.baseline or {}) - SCORING_FIELDS \
                - set(DENSE_AXES) - {"pipeline"}:
            raise ValueError("baseline: chunking and selection keys need a pipeline sweep")
        sel_keys = sorted(set(self.baseline or {}) & ({"policy"} | policy_fields()))
        if self.grid.selection is None and sel_keys:
            raise ValueError(f"baseline: selection key(s) {sel_keys} need [grid.selection]")
        if "query_text" in self.base or "query_id" in self.base:
            raise ValueError("base may not set query_text or query_id")
        try:  # validates the overrides (unknown keys rejected)
            base = self.base_prefs()
        except ValidationError as exc:
            raise ValueError(_problems("base", exc)) from None
        self._check_passages(base)
        self._check_depths(base)
        if self.has_pipeline_axes and base.top_k_chunks < 1:
            raise ValueError(f"base.top_k_chunks must be >= 1 in a pipeline sweep (no chunk "
                             f"is returned otherwise), got {base.top_k_chunks}")
        for key in CHUNK_DEPTH_KEYS:
            value = (self.baseline or {}).get(key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"baseline.{key} must be a whole number >= 1, got {value!r}")
        if self.search.model_based and not any(
                getattr(self.grid, f) is not None for f in type(self.grid).model_fields):
            raise ValueError(f"search: strategy {self.search.strategy!r} needs a search space, "
                             f"and the spec has no grid axes")
        if self.search.objectives is not None:
            self.objective_directions()  # unknown names, undecidable directions: refused here
        for name in FIELD_AXES:  # title weighting needs the index engine and both fields
            for value in self.grid.axis(name) or []:
                try:
                    FtsConfig(**{**base.fts.model_dump(), name: value})
                except ValidationError as exc:
                    raise ValueError(f"grid.{name} = {value!r}: " + "; ".join(
                        e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
        if self.pipeline is not None or self.stages or self.grid.stages:
            self._check_pipelines()
        self._check_finetune_reranker()
        size, limit = self.grid_size(), point_limit(info)
        if size > limit:
            raise ValueError(f"grid: {size:,} points, above the limit of {limit:,}: "
                             f"narrow an axis (or use a coarser step), or raise the limit "
                             f"(aiblox sweep --max-points N; load_spec(path, max_points=N))")
        try:
            self.baseline_prefs()
            self.baseline_point()
        except ValidationError as exc:
            raise ValueError(_problems("baseline", exc)) from None
        try:
            self.pipeline_points()
        except ValidationError as exc:  # a policy combination the policy model rejects
            raise ValueError("grid.selection: " + "; ".join(
                f"{_loc(e)}: {e['msg']}" for e in exc.errors())) from None
        if self.search.strategy in NUMERIC_STRATEGIES:
            self._check_numeric_space()
        return self

    def _check_pipelines(self) -> None:
        """Every pipeline parses and fits (each stage where it is placed), every ``[stages]``
        table is used, every stage axis names a stage of a pipeline and each of its values is
        a valid parameter; the baseline's pipeline too. Refused here, before any work."""
        import importlib

        from aiblox.engine.expression import referenced_names

        for module in self.stage_modules:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ValueError(f"stage_modules: cannot import {module!r}: {exc}") from None
        if self.pipeline is None:
            raise ValueError("stages and grid.stages configure the stages of a pipeline: set "
                             "pipeline = \"...\" (e.g. \"bm25 >> rm3 >> bm25\")")
        pipelines = self.pipelines()
        used: set[str] = set()
        for text in self._pipeline_texts():
            used |= referenced_names(text, self.stages)
        unused = sorted(set(self.stages) - used)
        if unused:
            raise ValueError(f"stages.{unused[0]}: no pipeline uses it (pipelines: "
                             f"{'; '.join(self._pipeline_texts())})")
        names = {n for p in pipelines for n in p.names()}
        for stage, param, values in self.grid.stage_axes():
            if stage not in names:
                raise ValueError(f"grid.stages.{stage}: no stage of that name in the pipeline "
                                 f"(stages: {', '.join(sorted(names))})")
            for p in pipelines:
                if stage in p.names():
                    for value in values:
                        try:
                            p.with_params({stage: {param: value}})
                        except PipelineError as exc:
                            raise ValueError(f"grid.stages.{stage}.{param} = {value!r}: "
                                             f"{exc}") from None
        self._baseline_pipeline()

    def _pipeline_texts(self) -> list[str]:
        texts = [self.pipeline] if isinstance(self.pipeline, str) else list(self.pipeline or [])
        if self.baseline and isinstance(self.baseline.get("pipeline"), str):
            texts.append(self.baseline["pipeline"])
        return texts

    def pipelines(self) -> list[Pipeline]:
        """The spec's pipelines, parsed and checked (``[]`` without ``pipeline``);
        ``ValueError`` naming the field otherwise."""
        from aiblox.engine.expression import parse_pipeline

        if self.pipeline is None:
            return []
        texts = [self.pipeline] if isinstance(self.pipeline, str) else list(self.pipeline)
        if not texts:
            raise ValueError("pipeline: an empty list; give one expression or several")
        out = []
        for i, text in enumerate(texts):
            where = "pipeline" if isinstance(self.pipeline, str) else f"pipeline[{i}]"
            try:
                out.append(parse_pipeline(text, self.stages, where).check())
            except PipelineError as exc:
                msg = str(exc)
                raise ValueError(msg if msg.startswith(("pipeline", "stages.")) else
                                 f"{where}: {msg}") from None
        return out

    def pipeline_variants(self) -> list[Pipeline | None]:
        """Every pipeline with every combination of its stage axes applied, in order
        (``[None]`` without ``pipeline``: the base's own retrieval)."""
        if self.pipeline is None:
            return [None]
        axes = self.grid.stage_axes()
        out: list[Pipeline | None] = []
        for p in self.pipelines():
            mine = [(stage, param, values) for stage, param, values in axes
                    if stage in p.names()]
            for combo in product(*[values for _, _, values in mine]):
                params: dict[str, dict[str, Any]] = {}
                for (stage, param, _), value in zip(mine, combo, strict=True):
                    params.setdefault(stage, {})[param] = value
                out.append(p.with_params(params) if params else p)
        return list(dict.fromkeys(out))

    def _baseline_pipeline(self) -> Pipeline | None:
        """The baseline's pipeline: ``[baseline] pipeline`` when set, else the spec's first
        pipeline with no stage axis applied (None without pipelines)."""
        from aiblox.engine.expression import parse_pipeline

        text = (self.baseline or {}).get("pipeline")
        if text is None:
            ps = self.pipelines()
            return ps[0] if ps else None
        try:
            return parse_pipeline(str(text), self.stages, "baseline.pipeline").check()
        except PipelineError as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith("baseline") else
                             f"baseline.pipeline: {msg}") from None

    def grid_points(self) -> list[PipelinePoint]:
        """Every point the sweep may score, in grid order, the ``[search]`` draw applied: the
        retrieval settings (and chunking and selection) times every pipeline variant."""
        if self.pipeline is None:
            if self.has_pipeline_axes:
                return self.pipeline_points()
            return [PipelinePoint(p) for p in self.points()]
        base = (self.pipeline_points(draw=False) if self.has_pipeline_axes
                else [PipelinePoint(p) for p in self.fusion_points()])
        out: dict[str, PipelinePoint] = {}
        for pt in base:
            for variant in self.pipeline_variants():
                point = PipelinePoint(pt.prefs, pt.policy, pt.overrides, variant)
                out.setdefault(point.key(), point)
        points = list(out.values())
        return [points[i] for i in self.search.pick(len(points))]

    def grid_baseline(self) -> PipelinePoint | None:
        """The named baseline as a point (None without ``[baseline]``)."""
        if self.has_pipeline_axes:
            pt = self.baseline_point()
        else:
            prefs = self.baseline_prefs()
            pt = None if prefs is None else PipelinePoint(prefs)
        if pt is None or self.pipeline is None:
            return pt
        return PipelinePoint(pt.prefs, pt.policy, pt.overrides, self._baseline_pipeline())

    def _check_finetune(self) -> None:
        from aiblox.embedding.sentence_transformers import model_folder
        from aiblox.eval.datasets import parse_split

        assert self.finetune is not None
        split = self.finetune.split
        try:
            parse_split(split)
        except ValueError as exc:
            raise ValueError(f"finetune.split: {exc}") from None
        if split in self.splits:
            raise ValueError(f"finetune.split {split!r} is a split the sweep scores: train on "
                             f"another split (its queries in tune_split or report_split are "
                             f"held out of training)")
        if model_folder(self.embedder) is None:
            raise ValueError(f"finetune: the embedder {self.embedder!r} is not a "
                             f"sentence-transformers model (minilm, a model folder or an "
                             f"installed model package)")

    def _check_finetune_reranker(self) -> None:
        """``[finetune_reranker]`` trains on a split the sweep does not score, from a model
        there is, and is used by a ``cross_encoder`` stage (``model = "finetune"``), which
        needs it."""
        pipes: list[Pipeline | None] = list(self.pipeline_variants())
        if self.pipeline is not None:
            pipes.append(self._baseline_pipeline())
        uses = any(s.kind == "cross_encoder" and s.param_dict().get("model") == "finetune"
                   for p in pipes if p is not None for s in p.stages())
        ft = self.finetune_reranker
        if ft is None:
            if uses:
                raise ValueError("a cross_encoder stage has model = \"finetune\": add "
                                 "[finetune_reranker] (split = \"train\", ...) to train it")
            return
        from aiblox.embedding.sentence_transformers import model_folder
        from aiblox.eval.datasets import parse_split

        try:
            parse_split(ft.split)
        except ValueError as exc:
            raise ValueError(f"finetune_reranker.split: {exc}") from None
        if ft.split in self.splits:
            raise ValueError(f"finetune_reranker.split {ft.split!r} is a split the sweep scores: "
                             f"train on another split (its queries in tune_split or "
                             f"report_split are held out of training)")
        if model_folder(ft.base) is None:
            raise ValueError(f"finetune_reranker.base: {ft.base!r} is not a model folder or an "
                             f"installed model package (minilm, a folder, a package)")
        if not uses:
            raise ValueError("finetune_reranker: no cross_encoder stage uses it (set "
                             "model = \"finetune\" in [stages.cross_encoder])")

    @property
    def splits(self) -> list[str]:
        """The splits every point is scored on: the tune split, then the report split if any."""
        return [self.tune_split] + ([self.report_split] if self.report_split else [])
    def objective_directions(self) -> dict[str, str]:
        """``{objective: direction}`` of ``[search] objectives`` in their order
        (:func:`~aiblox.eval.sweep.pareto.resolve_objectives`); ``{primary: "maximize"}`` when
        the spec sets none."""
        from aiblox.eval.sweep.pareto import resolve_objectives

        if self.search.objectives is None:
            return {self.primary: "maximize"}
        known = (pipeline_metric_names(self.metrics, self.chunk_k,
                                       self.grid.selection is not None)
                 if self.has_pipeline_axes else list(self.metrics))
        if self.grid.selection is not None:
            known += [f"status:{s}" for s in STATUSES]
        return resolve_objectives(self.search.objectives, self.search.directions, known,
                                  self.primary)

    def _check_numeric_space(self) -> None:
        """CMA-ES and the GP sampler are for numeric settings: the grid must vary at least one
        (categorical ones are modelled too: GP as categoricals, CMA-ES as indexes in grid order;
        :mod:`aiblox.eval.sweep.search`), and CMA-ES at least two settings."""
        from aiblox.eval.sweep.search import SearchSpace

        space = SearchSpace(self.grid_points())
        strategy = self.search.strategy
        if not space.numeric_dimensions:
            other = ", ".join(space.dimensions) or "nothing"
            raise ValueError(f"search: strategy {strategy!r} needs a numeric axis with two or "
                             f"more values, and the grid varies {other} (not numbers); use "
                             f"'tpe' for categorical settings")
        if strategy == "cmaes" and len(space.dimensions) < 2:
            raise ValueError(f"search: strategy 'cmaes' needs two or more varying settings "
                             f"(CMA-ES does not search one dimension), and the grid varies "
                             f"only {', '.join(space.dimensions)}; use 'gp' or 'tpe'")

    def _check_depths(self, base: RetrievalPrefs) -> None:
        """Every point's run is at least as deep as the deepest metric cutoff
        (:mod:`aiblox.eval.metrics.depth`): ``base.top_k_items``, and each depth the grid
        sweeps (``depth``, or ``fts_depth`` x ``vector_depth``; the base's when none), refused
        here, naming the metric and the key; in a pipeline sweep ``chunk_k`` against every
        ``top_k_chunks`` (base, grid, baseline) too."""
        g = self.grid
        if g.depth is not None:
            pairs = [(d, d) for d in g.axis("depth") or []]
            keys = {"fts.top_k": "grid.depth", "vector.top_k": "grid.depth"}
        else:
            pairs = list(product(g.axis("fts_depth") or [base.fts.top_k],
                                 g.axis("vector_depth") or [base.vector.top_k]))
            keys = {"fts.top_k": "grid.fts_depth" if g.fts_depth is not None
                    else "base.fts.top_k",
                    "vector.top_k": "grid.vector_depth" if g.vector_depth is not None
                    else "base.vector.top_k"}
        keys["top_k_items"] = "base.top_k_items"
        keys["vector.ef_search"] = "base.vector.ef_search"
        for fts_depth, vec_depth in pairs:
            prefs = base.model_copy(update={
                "fts": base.fts.model_copy(update={"top_k": int(fts_depth)}),
                "vector": base.vector.model_copy(update={"top_k": int(vec_depth)})})
            limit = shallow_limit(prefs, self.metrics)
            if limit is None:
                continue
            key = keys[limit.fields[0]]
            if key.startswith("base."):
                fix = ("set it to {cut} or more (or leave it out: a sweep retrieves as deep as "
                       "its metrics read), or use cutoffs of at most {depth}")
            elif len({keys[f] for f in limit.fields}) > 1:
                fix = ("every pair needs one depth of at least {cut}, or use cutoffs of at "
                       "most {depth}")
            else:
                fix = (f"drop the values below {{cut}} from {key}, or use cutoffs of at most "
                       f"{{depth}}")
            try:
                check_depth(prefs, self.metrics, keys, fix=fix)
            except DepthError as exc:
                raise ValueError(f"{key}: {exc}") from None
        if not self.has_pipeline_axes:
            return
        chunk_k = max(self.chunk_k)
        tops = [("base.top_k_chunks", base.top_k_chunks)]
        if g.chunking is not None and g.chunking.top_k_chunks is not None:
            tops = [("grid.chunking.top_k_chunks", int(v))
                    for v in g.chunking.axis("top_k_chunks") or []]
        if (self.baseline or {}).get("top_k_chunks") is not None:
            tops.append(("baseline.top_k_chunks", self.baseline["top_k_chunks"]))  # type: ignore
        for key, top in tops:
            if isinstance(top, int) and 1 <= top < chunk_k:
                raise ValueError(f"{key}: answer_recall@{chunk_k} (chunk_k) reads {chunk_k} "
                                 f"chunks per query, but {key.rsplit('.', 1)[-1]} = {top} "
                                 f"returns at most {top}: it would be computed over {top} "
                                 f"chunks under the name @{chunk_k}; return at least "
                                 f"{chunk_k} chunks, or use chunk_k values of at most {top}")

    def _check_passages(self, base: RetrievalPrefs) -> None:
        """Every passage setting the spec can reach (base, grid, baseline) makes a chunker:
        an unknown chunker or a size pair it refuses fails when the spec loads."""
        from aiblox.indexes import passage_chunker_id

        g = self.grid
        combos = [dict(zip(DENSE_AXES, values, strict=True)) for values in product(
            *[g.axis(a) or [getattr(base.vector, a)] for a in DENSE_AXES])]
        combos.append({k: v for k, v in (self.baseline or {}).items() if k in DENSE_AXES})
        for combo in combos:
            where = "baseline" if combo is combos[-1] else "grid"
            try:
                cfg = VectorConfig(**{**dict(base.vector), **combo})
                passage_chunker_id(cfg)
            except ValidationError as exc:
                raise ValueError(f"{where}: " + "; ".join(e["msg"] for e in exc.errors())) \
                    from None
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{where}: passages {combo or 'of base.vector'}: "
                                 f"{exc}") from None

    def grid_size(self) -> int:
        """Points of the full grid (before the ``[search]`` draw), computed from the axes'
        lengths without building any: the product of the distinct values of every axis, blend
        by blend for fusion. An upper bound of the points built (a chunker that takes no sizes
        is one point whatever the sizes, and a size pair it refuses is left out); exact for a
        fusion grid. Validation refuses a spec above its point limit with this count."""
        g = self.grid
        blends = list(dict.fromkeys(g.blend or [self.base_prefs().scoring.blend]))
        fusion = 0
        for blend in blends:
            if blend == "linear":
                fusion += axis_len(g.w_text) * axis_len(g.normalize) * axis_len(g.missing)
            else:
                fusion += axis_len(g.rrf_k)
        size = fusion * axis_len(g.depth) * axis_len(g.k1) * axis_len(g.b) \
            * axis_len(g.method)
        for name in (*FIELD_AXES, *DEPTH_AXES, *DENSE_AXES):
            size *= axis_len(getattr(g, name))
        if g.chunking is not None:
            c = g.chunking
            size *= (axis_len(c.chunker_id) * axis_len(c.max_chunk_tokens)
                     * axis_len(c.overlap_tokens) * axis_len(c.top_k_chunks)
                     * axis_len(c.per_item_chunk_cap))
        if g.selection is not None:
            sel = g.selection
            size *= len(dict.fromkeys(sel.policies()))
            for name, raw in (sel.model_extra or {}).items():
                size *= sel.count_values(name, raw)
        if self.pipeline is not None:
            size *= self._pipeline_count()
        return size

    def _pipeline_count(self) -> int:
        """Pipeline variants (each pipeline times the lengths of its stage axes), counted
        without building them."""
        axes = {(stage, param): axis_len(values)
                for stage, params in (self.grid.stages or {}).items()
                for param, values in params.items()}
        total = 0
        for p in self.pipelines():
            n = 1
            for (stage, _), length in axes.items():
                if stage in p.names():
                    n *= length
            total += n
        return max(total, 1)

    @property
    def has_pipeline_axes(self) -> bool:
        """True when points go past fusion (chunking or selection axes): such a sweep is run by
        :func:`aiblox.eval.sweep.pipeline.run_pipeline_sweep`."""
        return self.grid.chunking is not None or self.grid.selection is not None

    def base_prefs(self) -> RetrievalPrefs:
        """The base :class:`RetrievalPrefs` every point starts from: ``base``, with the depths
        it leaves out (``top_k_items``, ``fts.top_k``, ``vector.top_k``) at the evaluation
        depth of ``metrics`` (:func:`~aiblox.eval.metrics.evaluation_prefs`: 100, or the
        deepest cutoff; 1,000 with a metric without one)."""
        return evaluation_prefs(RetrievalPrefs(query_text="", **self.base), self.metrics)

    def baseline_prefs(self) -> RetrievalPrefs | None:
        """The baseline point's prefs, or None."""
        if self.baseline is None:
            return None
        base = self.base_prefs()
        own = {k: v for k, v in self.baseline.items() if k in SCORING_FIELDS}
        scoring = ScoringConfig(**{**base.scoring.model_dump(), **own})
        update: dict[str, Any] = {"scoring": scoring}
        dense = {k: v for k, v in self.baseline.items() if k in DENSE_AXES}
        if dense:
            update["vector"] = VectorConfig(**{**dict(base.vector), **dense})
        return base.model_copy(update=update)

    def baseline_point(self) -> PipelinePoint | None:
        """The baseline of a pipeline sweep: the base with the baseline's scoring, chunking
        (``chunker_id``, sizes, ``top_k_chunks``, ``per_item_chunk_cap``) and selection
        (``policy`` and policy parameters) keys; None without a baseline or pipeline axes."""
        prefs = self.baseline_prefs()
        if prefs is None or not self.has_pipeline_axes:
            return None
        b = self.baseline or {}
        prefs = _with_chunking(prefs, {k: b[k] for k in CHUNKING_KEYS if k in b},
                               {k: b[k] for k in CHUNK_DEPTH_KEYS if k in b})
        if self.grid.selection is None:
            return PipelinePoint(prefs)
        policy = str(b.get("policy", self.grid.selection.policies()[0]))
        overrides = {k: v for k, v in b.items() if k in policy_fields()}
        load_policy_by_name(policy).with_updates(**overrides)  # validates
        return PipelinePoint(prefs, policy, overrides)

    @property
    def hash(self) -> str:
        """sha256 of the spec's canonical JSON: identifies the sweep (parent MLflow run).
        Fields added for pipeline sweeps and search are left out while at their defaults, so
        a fusion spec keeps the hash it had before they existed. ``device`` counts by its class
        and only off the CPU (``aiblox sweep`` resolves ``auto`` before it hashes: a sweep on a
        GPU is another parent run than the same spec on the CPU)."""
        data = self.model_dump(mode="json")
        for name in _NEW_FIELDS:
            if data[name] == _DEFAULTS[name]:
                data.pop(name)
        if "device" in data:
            cls = device_class(data["device"])
            if cls == "cpu":
                data.pop("device")
            else:
                data["device"] = cls
        search = data.get("search") or {}
        for name in SEARCH_OPTIONAL:  # added after tpe specs were logged: out while unset
            if search.get(name) is None:
                search.pop(name, None)
        for name in ("chunking", "selection", "stages", *BM25_AXES, *DEPTH_AXES, *DENSE_AXES):
            if data["grid"].get(name) is None:
                data["grid"].pop(name, None)
        return sha256_hex(data)

    def points(self) -> list[RetrievalPrefs]:
        """Every grid point as full :class:`RetrievalPrefs`, deduplicated, in grid order (the
        ``[search]`` draw applied). A pipeline sweep's distinct retrieval prefs (fusion and
        chunking; selection lives in :meth:`pipeline_points`)."""
        if self.has_pipeline_axes:
            out: list[RetrievalPrefs] = []
            seen: set[str] = set()
            for pt in self.pipeline_points():
                key = sha256_hex(pt.prefs.model_dump(exclude={"query_text", "query_id"}))
                if key not in seen:
                    seen.add(key)
                    out.append(pt.prefs)
            return out
        full = self.fusion_points()
        return [full[i] for i in self.search.pick(len(full))]

    def pipeline_points(self, draw: bool = True) -> list[PipelinePoint]:
        """Every point of a pipeline sweep (fusion x chunking x selection), deduplicated, in
        grid order, with the ``[search]`` draw applied (unless ``draw`` is False); ``[]``
        without pipeline axes."""
        if not self.has_pipeline_axes:
            return []
        chunked = [p for f in self.fusion_points() for p in self._chunking_points(f)]
        sel = self.grid.selection
        out: list[PipelinePoint] = []
        seen: set[str] = set()
        for prefs in chunked:
            if sel is None:
                candidates = [PipelinePoint(prefs)]
            else:
                names = sel.override_names()
                candidates = []
                for policy in sel.policies():
                    loaded = load_policy_by_name(policy)
                    for combo in product(*[sel.axis(n) for n in names]):
                        overrides = dict(zip(names, combo, strict=True))
                        loaded.with_updates(**overrides)  # a bad combination raises here
                        candidates.append(PipelinePoint(prefs, policy, overrides))
            for pt in candidates:
                key = pt.key()
                if key not in seen:
                    seen.add(key)
                    out.append(pt)
        if not draw:
            return out
        return [out[i] for i in self.search.pick(len(out))]

    def _chunking_points(self, prefs: RetrievalPrefs) -> list[RetrievalPrefs]:
        g = self.grid.chunking
        if g is None:
            return [prefs]
        from aiblox.chunking import make_chunker

        out = []
        chunkers = g.axis("chunker_id") or [prefs.chunking.chunker_id]
        sizes = list(product(g.axis("max_chunk_tokens") or [None],
                             g.axis("overlap_tokens") or [None]))
        depth = list(product(g.axis("top_k_chunks") or [None],
                             g.axis("per_item_chunk_cap") or [None]))
        for chunker in chunkers:
            plain = make_chunker(prefs.chunking.model_copy(update={"chunker_id": chunker}))
            kept = []
            for mx, ov in sizes:
                cfg = {"chunker_id": chunker, "max_chunk_tokens": mx, "overlap_tokens": ov}
                base_cfg = prefs.chunking.model_copy(update={"chunker_id": chunker})
                try:
                    made = make_chunker(_chunking_config(base_cfg, cfg))
                except ValueError:  # e.g. overlap_tokens >= max_chunk_tokens: left out
                    continue
                if made.chunker_id == plain.chunker_id and (mx, ov) != (None, None):
                    cfg = {"chunker_id": chunker}  # sizes do not apply to this chunker
                kept.append(cfg)
            if not kept:
                raise ValueError(f"grid.chunking: no size pair is valid for chunker "
                                 f"{chunker!r} (overlap_tokens must be below max_chunk_tokens)")
            for cfg, (k, cap) in product(kept, depth):
                out.append(_with_chunking(prefs, cfg, {"top_k_chunks": k,
                                                       "per_item_chunk_cap": cap}))
        return out

    def fusion_points(self) -> list[RetrievalPrefs]:
        """Every fusion grid point (no search draw), deduplicated, in grid order."""
        base = self.base_prefs()
        g = self.grid
        blends = g.axis("blend") or [base.scoring.blend]
        depths: list[tuple[int | None, int | None]] = [  # (full-text, vector)
            (d, d) for d in g.axis("depth") or [None]]
        if g.fts_depth is not None or g.vector_depth is not None:
            depths = list(product(g.axis("fts_depth") or [None],
                                  g.axis("vector_depth") or [None]))
        out: list[RetrievalPrefs] = []
        seen: set[str] = set()
        bm25 = [dict(zip(BM25_AXES, values, strict=True)) for values in product(
            *[g.axis(a) or [getattr(base.fts, a)] for a in BM25_AXES])]
        dense = [dict(zip(DENSE_AXES, values, strict=True)) for values in product(
            *[g.axis(a) or [getattr(base.vector, a)] for a in DENSE_AXES])]
        for lexical, vector, blend in product(bm25, dense, blends):
            if blend == "linear":
                axes = [g.axis("w_text") or [None], g.axis("normalize") or [None],
                        g.axis("missing") or [None]]
                combos = [{"w_text": w, "normalize": n, "missing": m}
                          for w, n, m in product(*axes)]
            else:
                combos = [{"rrf_k": k} for k in (g.axis("rrf_k") or [None])]
            for (fts_depth, vec_depth), combo in product(depths, combos):
                scoring = {**base.scoring.model_dump(), "blend": blend,
                           **{k: v for k, v in combo.items() if v is not None}}
                if blend == "linear" and combo.get("w_text") is not None:
                    scoring["w_vec"] = float(Decimal(1) - to_decimal(combo["w_text"]))
                update: dict[str, Any] = {"scoring": ScoringConfig(**scoring)}
                fts = FtsConfig(**{**base.fts.model_dump(), **lexical})
                vec = VectorConfig(**{**dict(base.vector), **vector})
                if fts_depth is not None:
                    fts = fts.model_copy(update={"top_k": int(fts_depth)})
                if vec_depth is not None:
                    vec = vec.model_copy(update={"top_k": int(vec_depth)})
                update["vector"] = vec
                update["fts"] = fts
                p = base.model_copy(update=update)
                key = sha256_hex(p.model_dump(exclude={"query_text", "query_id"}))
                if key not in seen:
                    seen.add(key)
                    out.append(p)
        return out


def _chunking_config(base: ChunkingConfig, cfg: dict[str, Any]) -> ChunkingConfig:
    return ChunkingConfig(**{**base.model_dump(),
                             **{k: v for k, v in cfg.items() if v is not None}})


def _with_chunking(prefs: RetrievalPrefs, chunking: dict[str, Any],
                   depth: dict[str, Any]) -> RetrievalPrefs:
    update: dict[str, Any] = {k: int(v) for k, v in depth.items() if v is not None}
    if chunking:
        update["chunking"] = _chunking_config(prefs.chunking, chunking)
    return prefs.model_copy(update=update) if update else prefs


SEARCH_OPTIONAL = ("objectives", "directions")
"""``[search]`` fields left out of the hashes while unset (a spec keeps its hash)."""

_NEW_FIELDS = ("query_limit", "chunk_k", "reader", "reader_options", "search", "cv",
               "finetune", "pipeline", "stages", "stage_modules", "device",
               "finetune_reranker")
"""SweepSpec fields added after the first fusion specs: left out of the hash at defaults."""


def _loc(err: Mapping[str, Any]) -> str:
    return ".".join(str(x) for x in err["loc"]) or "(spec)"


_MODELS: dict[str, type[BaseModel]] = {m.__name__: m for m in (
    RetrievalPrefs, FtsConfig, VectorConfig, ScoringConfig, ChunkingConfig)}


def _problems(prefix: str, exc: ValidationError) -> str:
    """The errors of validating the spec's ``prefix`` section (``base``, ``baseline``) as
    ``base.fts.top_k: got 0: out of range; valid: a whole number >= 1``, one per key."""
    model = _MODELS.get(exc.title)
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        key = f"{prefix}.{loc}" if loc else prefix
        msg = str(e["msg"]).removeprefix("Value error, ")
        problem = value_problem(model, e) if model is not None else msg
        parts.append(f"{key}: got {e['input']!r}: {problem}" if problem != msg
                     else f"{key}: {msg}")
    return "; ".join(parts)


_KEY_FIRST = re.compile(r"([A-Za-z_]\w*(?:\.\w+)+): (.*)", re.S)
"""A spec-level error that starts with the dotted key it is about (``grid.depth: ...``)."""


def _field_and_message(err: Mapping[str, Any]) -> tuple[str, str]:
    """The key an error of the spec is about and its message: pydantic's ``loc``, or for an
    error of the whole spec (``loc`` empty) the dotted key its message starts with."""
    msg = str(err["msg"]).removeprefix("Value error, ")
    if not err["loc"]:
        found = _KEY_FIRST.fullmatch(msg)
        if found:
            return found.group(1), found.group(2)
    problem = value_problem(SweepSpec, err)  # a number out of range: the valid values
    return _loc(err), (f"got {err['input']!r}: {problem}" if problem != msg else msg)


def _defaults() -> dict[str, Any]:
    """The new fields' defaults."""
    fields = SweepSpec.model_fields
    return {n: fields[n].get_default(call_default_factory=True) for n in _NEW_FIELDS}


def backend_of(db: str | None, default: str) -> str:
    """``postgres`` for a PostgreSQL URL, ``duckdb`` for a file path, ``default`` for None."""
    if db is None:
        return default
    return "postgres" if str(db).startswith(("postgresql", "postgres://")) else "duckdb"


def load_spec(path: str | Path, max_points: int | None = None) -> SweepSpec:
    """Read and validate a sweep spec; :class:`SweepSpecError` names the file and the field.
    ``max_points`` raises (or lowers) the grid's point limit, :data:`DEFAULT_MAX_POINTS`."""
    p = Path(path)
    if max_points is not None and max_points < 1:
        raise SweepSpecError(f"{p}: max_points must be >= 1, got {max_points}")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SweepSpecError(f"{p}: no such sweep spec") from exc
    except IsADirectoryError as exc:
        raise SweepSpecError(f"{p}: a folder, not a sweep spec file") from exc
    except OSError as exc:
        raise SweepSpecError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SweepSpecError(f"{p}: not UTF-8 text: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SweepSpecError(f"{p}: not valid TOML: {exc}") from exc
    try:
        return SweepSpec.model_validate(data, context={"max_points": max_points})
    except ValidationError as exc:
        lines = [f"{p}: field {key!r}: {msg}"
                 for key, msg in map(_field_and_message, exc.errors())]
        raise SweepSpecError("\n".join(lines)) from exc


_DEFAULTS = {k: (v.model_dump(mode="json") if isinstance(v, BaseModel) else v)
             for k, v in _defaults().items()}
