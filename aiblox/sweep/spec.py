"""Sweep specs: a TOML file naming a dataset, its tune and report splits, a base pipeline config
and grid axes over fusion, chunking and selection. Validated by pydantic in strict mode (a
number is never read from ``true`` or ``"10"``); unknown keys are rejected, and each error is
one line naming the file, the line and the field (:mod:`aiblox.sweep.spec_errors`).

BM25 axes (``k1``, ``b``, ``method``, ``title_weight``, ``title_b``: fields of ``fts``, for the
index engine) multiply every other axis; each combination is a BM25 index and a retrieval
(signals) stage of its own, reused by every fusion point over it. A title axis needs the base's
``fts.fields`` to hold ``title`` and ``text`` (checked when the spec loads).

Points: fusion axes (``blend`` picks which apply), chunking axes (``[grid.chunking]``) and
selection axes (``[grid.selection]``: a ``policy`` version in ``evals/policies`` and overrides of
its fields) multiply, expanded in grid order by :mod:`aiblox.sweep.points`. A spec with chunking
or selection axes is a *pipeline* sweep: its points go on past fusion to the chunk stages
(:mod:`aiblox.engine.point`); the answer stages (selection, prompt, reader, validation) run only
when it has selection axes.

``[search]`` picks the points scored: ``strategy = "grid"`` (default) every point;
``"random"`` ``n`` points drawn from the full grid with ``random.Random(seed)``, kept in grid
order; ``"tpe"``, ``"cmaes"``, ``"gp"`` ``n`` trials among the grid's points chosen by Optuna
while the sweep runs (:mod:`aiblox.sweep.search`; :meth:`SweepSpec.points` is then the
whole grid, the search space). ``objectives`` (quality against cost) adds the Pareto front
(:mod:`aiblox.metrics.pareto`) and makes a model-based search multi-objective. New fields
at their defaults stay out of the spec hash, so specs written before them keep their hash.

``[cv]`` (``folds``, ``seed``) adds seeded k-fold cross-validation over the tune split's queries
(:mod:`aiblox.sweep.crossval`): the choice per fold is made on the other folds and scored
on the held-out one, and ``report_split`` may then be left out (a collection with one judged
split). Refused with a model-based strategy (its trials would be steered by every tuning
query's score).

Limits and cross-field checks (depths against metric cutoffs, the grid's size against
:data:`DEFAULT_MAX_POINTS`, ...) are checked before any point is built
(:mod:`aiblox.sweep.spec_checks`).

The axes themselves (their fields, bounds and validation) are :mod:`aiblox.sweep.axes`.
"""

from __future__ import annotations

import tomllib
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

from aiblox.contracts.problems import refuse_coercions
from aiblox.contracts.retrieval import (
    ChunkingConfig,
    FtsConfig,
    RetrievalPrefs,
    ScoringConfig,
    VectorConfig,
)
from aiblox.embedding.device import parse_device
from aiblox.engine.algebra import Pipeline
from aiblox.engine.settings import PipelinePoint, SweepSettings, needs_vectors
from aiblox.hashing import sha256_hex
from aiblox.metrics import (
    DEFAULT_METRICS,
    STATUSES,
    evaluation_prefs,
    validate_metrics,
)
from aiblox.sweep.axes import (
    DEFAULT_MAX_POINTS,
    FIELD_AXES,
    NUMERIC_STRATEGIES,
    FusionGrid,
    SearchConfig,
    point_limit,
)
from aiblox.sweep.crossval import CVConfig
from aiblox.sweep.points import (
    Merged,
    baseline_point,
    baseline_point_prefs,
    chunking_points,
    fusion_points,
    grid_size,
    merged_grid,
    parse_baseline_pipeline,
    parse_pipelines,
    pipeline_metric_names,
    pipeline_variants,
    remembered,
    selection_points,
)
from aiblox.sweep.spec_checks import (
    backend_of,
    check_baseline_keys,
    check_blend_axes,
    check_chunk_depths,
    check_chunk_k,
    check_db,
    check_depths,
    check_finetune,
    check_numeric_space,
    check_passages,
    check_pipeline_depths,
    check_splits,
    check_stage_tables,
    check_swept_once,
    hashed_form,
    import_stage_modules,
    loc,
    problems,
)
from aiblox.sweep.spec_errors import error_lines
from aiblox.sweep.training import FineTuneSpec, RerankerFineTuneSpec, check_finetune_reranker

__all__ = [
    "DEFAULT_MAX_POINTS",
    "SweepSpec",
    "SweepSpecError",
    "backend_of",
    "load_spec",
]

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True,
                              strict=True)  # no true for 1, no "10" for 10


class SweepSpecError(ValueError):
    """A sweep spec that cannot be read or validated; the message names the file and field."""


class SweepSpec(_Strict):
    """A sweep: what to score, on which splits, over which grid."""

    name: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$", max_length=200)
    """Sweep name: letters, digits, ``_``, ``.``, ``-``, not starting with a dot or a hyphen
    (so never ``.`` or ``..``: it names folders, e.g. ``reports/<name>``, and MLflow tags
    searched by value); also the MLflow experiment name unless ``experiment`` is set."""
    description: str = ""
    """Free text for people (not part of the spec's hash)."""
    experiment: str | None = None
    """MLflow experiment name; None: ``aiblox-sweep/<name>``."""
    dataset: str
    """Dataset name (looked up like ``aiblox eval``) or BEIR folder (relative: to the folder
    the sweep runs in). Not hashed: the data is named by its content hash (:attr:`hash`)."""
    tune_split: str
    """Split the best configuration is chosen on."""
    report_split: str | None = None
    """Split the chosen configuration is reported on (never used for choosing). Required
    unless ``[cv]`` is set: a cross-validated spec may name the tuning split alone."""
    backend: Literal["duckdb", "postgres"] = "duckdb"
    """Store backend; ``postgres`` needs ``db`` to be a ``postgresql+psycopg://`` URL."""
    db: str | None = None
    """Store path or PostgreSQL URL; None: the dataset's default store
    (:func:`aiblox.engine.workspace.default_store_path`, the one `aiblox ingest` builds); a
    relative path from the folder the sweep runs in. Not hashed, as ``--db`` is not."""
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
    """Paired test: ranx's two-sided paired t-test, or Fisher's two-sided randomisation test
    (:func:`aiblox.metrics.significance.fisher_p_value`: exact up to 16 queries, else 1,000
    sign flips drawn with :attr:`seed`)."""
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Significance level for Holm-adjusted p-values."""
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    """Seed of the significance table's random draws (Fisher's sign flips); None: the tests'
    own default, 42. Out of the spec's hash while unset."""
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
    (:mod:`aiblox.sweep.crossval`); None: none."""
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
    not score, before any point (:mod:`aiblox.sweep.finetune`); None: the embedder as
    it is."""
    finetune_reranker: RerankerFineTuneSpec | None = None
    """``[finetune_reranker]``: train a cross-encoder on the judged queries of a split the
    sweep does not score, before any point; a ``cross_encoder`` stage names it with
    ``model = "finetune"`` (:mod:`aiblox.sweep.finetune_reranker`)."""

    @field_validator("metrics")
    @classmethod
    def _ranx_metrics(cls, v: list[str]) -> list[str]:
        return validate_metrics(v, distinct=True)

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
            raise ValueError("report_split: required (or set [cv] folds = k to choose by "
                             "k-fold cross-validation on tune_split alone)")
        check_splits(self.tune_split, self.report_split)
        if self.cv is not None and self.search.model_based:
            raise ValueError(f"cv: k-fold cross-validation needs its points fixed before any is "
                             f"scored (search strategy 'grid' or 'random'); "
                             f"{self.search.strategy!r} chooses its trials from the scores on "
                             f"every tuning query, so held-out queries would steer the search")
        if self.finetune is not None:
            check_finetune(self.finetune.split, self.splits, self.embedder)
        check_db(self.db, self.backend, "backend" if "backend" in self.model_fields_set else "db")
        known = (pipeline_metric_names(self.metrics, self.chunk_k,
                                       self.grid.selection is not None)
                 if self.has_pipeline_axes else self.metrics)
        if self.primary not in known:
            raise ValueError(f"primary = {self.primary!r}: not in metrics {known}")
        if not self.has_pipeline_axes:
            data = self.model_dump(mode="json", include=set(_NEW_FIELDS))
            for name in ("query_limit", "chunk_k", "reader", "reader_options"):
                if data[name] != _DEFAULTS[name]:
                    raise ValueError(f"{name}: applies to pipeline sweeps only (a spec with "
                                     f"[grid.chunking] or [grid.selection])")
        check_chunk_k(self.chunk_k)
        check_baseline_keys(self.baseline, self.has_pipeline_axes, self.grid.selection)
        for key in ("query_text", "query_id"):
            if key in self.base:
                raise ValueError(f"base.{key}: a query's own, not a setting of the base")
        try:  # validates the overrides (unknown keys rejected)
            base = self.base_prefs()
        except ValidationError as exc:
            raise ValueError(problems("base", exc)) from None
        from aiblox.assembly import SelectionPolicy

        refuse_coercions("base", self.base, [RetrievalPrefs])  # true for 1, "10" for 10
        refuse_coercions("baseline", self.baseline or {}, [*_BASELINE_MODELS, SelectionPolicy])
        check_blend_axes(base, self.grid, self.pipeline is not None)
        check_passages(base, self.grid, self.baseline)
        check_depths(base, self.grid, self.metrics, self.chunk_k, self.baseline,
                     self.has_pipeline_axes)
        check_chunk_depths(base, self.baseline, self.has_pipeline_axes)
        if self.search.model_based and not any(
                getattr(self.grid, f) is not None for f in type(self.grid).model_fields):
            raise ValueError(f"search: strategy {self.search.strategy!r} needs a search space, "
                             f"and the spec has no grid axes")
        if self.search.objectives is not None:  # unknown names, undecidable directions
            try:
                self.objective_directions()
            except ValueError as exc:
                raise ValueError(f"search.{exc}") from None
        for name in FIELD_AXES:  # title weighting needs the index engine and both fields
            for value in self.grid.axis(name) or []:
                try:
                    FtsConfig(**{**base.fts.model_dump(), name: value})
                except ValidationError as exc:
                    raise ValueError(f"grid.{name} = {value!r}: " + "; ".join(
                        e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
        if self.pipeline is not None or self.stages or self.grid.stages:
            ctx = info.context if info is not None and isinstance(info.context, dict) else {}
            self._check_pipelines(ctx.get("spec_dir"))
        check_finetune_reranker(self.finetune_reranker, self.splits, [
            *self.pipeline_variants(),
            *([self._baseline_pipeline()] if self.pipeline is not None else [])])
        size, limit = self.grid_size(), point_limit(info)
        if size > limit:
            raise ValueError(f"grid: {size:,} points, above the limit of {limit:,}: "
                             f"narrow an axis (or use a coarser step), or raise the limit "
                             f"(aiblox sweep --max-points N; load_spec(path, max_points=N))")
        try:
            self.baseline_prefs()
            self.baseline_point()
        except ValidationError as exc:
            raise ValueError(problems("baseline", exc)) from None
        try:
            self.pipeline_points()
        except ValidationError as exc:  # a policy combination the policy model rejects
            raise ValueError("grid.selection: " + "; ".join(
                f"{loc(e)}: {e['msg']}" for e in exc.errors())) from None
        if self.search.strategy in NUMERIC_STRATEGIES:
            check_numeric_space(self.grid_points(), self.search.strategy)
        return self

    def _check_pipelines(self, spec_dir: Path | None = None) -> None:
        """Every pipeline parses and fits (each stage where it is placed), every ``[stages]``
        table is used, every stage axis names a stage of a pipeline and each of its values is
        a valid parameter; the baseline's pipeline too. Refused here, before any work."""
        import_stage_modules(self.stage_modules, spec_dir)
        if self.pipeline is None:
            table = [f"stages.{n}" for n in self.stages] + [
                f"grid.stages.{n}" for n in self.grid.stages or {}]
            raise ValueError(f"{table[0]}: configures a stage of a pipeline: set pipeline = "
                             f"\"...\" (e.g. \"bm25 >> rm3 >> bm25\")")
        check_stage_tables(self.pipelines(), self._pipeline_texts(), self.stages, self.grid)
        where = (["pipeline"] if isinstance(self.pipeline, str)
                 else [f"pipeline[{i}]" for i in range(len(self.pipeline))])
        texts = [self.pipeline] if isinstance(self.pipeline, str) else list(self.pipeline)
        check_swept_once(list(zip(where, texts, strict=True)), self.stages, self.grid)
        check_pipeline_depths(list(zip(where, self.pipelines(), strict=True)),
                              self.grid.stage_axes(), self.fusion_points(),
                              self._baseline_pipeline(), self.metrics, self.stages)

    def _pipeline_texts(self) -> list[str]:
        texts = [self.pipeline] if isinstance(self.pipeline, str) else list(self.pipeline or [])
        if self.baseline and isinstance(self.baseline.get("pipeline"), str):
            texts.append(self.baseline["pipeline"])
        return texts

    def pipelines(self) -> list[Pipeline]:
        """The spec's pipelines, parsed and checked (``[]`` without ``pipeline``);
        ``ValueError`` naming the field otherwise."""
        return parse_pipelines(self.pipeline, self.stages)

    def pipeline_variants(self) -> list[Pipeline | None]:
        """Every pipeline with every combination of its stage axes applied, in order
        (``[None]`` without ``pipeline``: the base's own retrieval)."""
        if self.pipeline is None:
            return [None]
        return pipeline_variants(self.pipelines(), self.grid.stage_axes())

    def _baseline_pipeline(self) -> Pipeline | None:
        """The baseline's pipeline: ``[baseline] pipeline`` when set, else the spec's first
        pipeline with no stage axis applied (None without pipelines)."""
        text = (self.baseline or {}).get("pipeline")
        if text is None:
            ps = self.pipelines()
            return ps[0] if ps else None
        return parse_baseline_pipeline(str(text), self.stages)

    def grid_points(self) -> list[PipelinePoint]:
        """Every point the sweep may score, in grid order, the ``[search]`` draw applied: the
        retrieval settings (and chunking and selection) times every pipeline variant."""
        return remembered("grid", self.model_dump_json(), self._grid_points)

    def _grid_points(self) -> list[PipelinePoint]:
        if self.pipeline is None:
            if self.has_pipeline_axes:
                return self.pipeline_points()
            return [PipelinePoint(p) for p in self.points()]
        points = self._pipeline_grid()[0]
        return [points[i] for i in self.search.pick(len(points))]

    def merged_points(self) -> Merged:
        """The points of the full grid left out because an earlier point computes the same
        run (:func:`~aiblox.sweep.points.merged_grid`), each with the point kept; a point an
        axis lists again (``rrf_k = [60, 60]``) with itself."""
        return self._pipeline_grid(repeats=True)[1]

    def _pipeline_grid(self, repeats: bool = False) -> tuple[list[PipelinePoint], Merged]:
        base = (self.pipeline_points(draw=False, repeats=repeats) if self.has_pipeline_axes
                else [PipelinePoint(p) for p in fusion_points(self.base_prefs(), self.grid,
                                                              repeats)])
        variants = ([None] if self.pipeline is None else
                    pipeline_variants(self.pipelines(), self.grid.stage_axes(), repeats))
        return merged_grid(base, variants, self.has_pipeline_axes)

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

    @property
    def splits(self) -> list[str]:
        """The splits every point is scored on: the tune split, then the report split if any."""
        return [self.tune_split] + ([self.report_split] if self.report_split else [])
    def objective_directions(self) -> dict[str, str]:
        """``{objective: direction}`` of ``[search] objectives`` in their order
        (:func:`~aiblox.metrics.pareto.resolve_objectives`); ``{primary: "maximize"}`` when
        the spec sets none."""
        from aiblox.metrics.pareto import resolve_objectives

        if self.search.objectives is None:
            return {self.primary: "maximize"}
        known = (pipeline_metric_names(self.metrics, self.chunk_k,
                                       self.grid.selection is not None)
                 if self.has_pipeline_axes else list(self.metrics))
        if self.grid.selection is not None:
            known += [f"status:{s}" for s in STATUSES]
        return resolve_objectives(self.search.objectives, self.search.directions, known,
                                  self.primary)

    def grid_size(self) -> int:
        """Points of the full grid (before the ``[search]`` draw), computed from the axes'
        lengths without building any (:func:`~aiblox.sweep.points.grid_size`): an upper bound
        of the points built, exact for a fusion grid. Validation refuses a spec above its point
        limit with this count."""
        return grid_size(self.grid, self.base_prefs().scoring.blend,
                         None if self.pipeline is None else self.pipelines())

    @property
    def has_pipeline_axes(self) -> bool:
        """True when points go past fusion (chunking or selection axes): such a sweep is run by
        :func:`~aiblox.sweep.runner.run_sweep` through the chunk stages of
        :mod:`aiblox.engine.point`."""
        return self.grid.chunking is not None or self.grid.selection is not None

    def base_prefs(self) -> RetrievalPrefs:
        """The base :class:`RetrievalPrefs` every point starts from: ``base``, with the depths
        it leaves out (``top_k_items``, ``fts.top_k``, ``vector.top_k``) at the evaluation
        depth of ``metrics`` (:func:`~aiblox.metrics.evaluation_prefs`: 100, or the
        deepest cutoff; 1,000 with a metric without one)."""
        return evaluation_prefs(RetrievalPrefs(query_text="", **self.base), self.metrics)

    def settings(self) -> SweepSettings:
        """What the stages of its points read from it (:class:`~aiblox.engine.settings.
        SweepSettings`)."""
        sel = self.grid.selection
        return SweepSettings(
            name=self.name, embedder=self.embedder, metrics=tuple(self.metrics),
            chunk_stages=self.has_pipeline_axes, query_limit=self.query_limit,
            chunk_k=tuple(self.chunk_k), reader=self.reader,
            reader_options=dict(self.reader_options),
            swept_selection=tuple(sel.override_names()) if sel is not None else (),
            vectors=tuple(self.vectors),
            needs_vectors=needs_vectors(self.base_prefs(), self.pipelines()),
            stage_modules=tuple(self.stage_modules), device=self.device)

    def baseline_prefs(self) -> RetrievalPrefs | None:
        """The baseline point's prefs, or None
        (:func:`~aiblox.sweep.points.baseline_point_prefs`)."""
        return None if self.baseline is None else baseline_point_prefs(self.base_prefs(),
                                                                       self.baseline)

    def baseline_point(self) -> PipelinePoint | None:
        """The baseline of a pipeline sweep: the base with the baseline's scoring, chunking
        (``chunker_id``, sizes, ``top_k_chunks``, ``per_item_chunk_cap``) and selection
        (``policy`` and policy parameters) keys; None without a baseline or pipeline axes."""
        prefs = self.baseline_prefs()
        if prefs is None or not self.has_pipeline_axes:
            return None
        return baseline_point(prefs, self.baseline or {}, self.grid.selection)

    @property
    def hash(self) -> str:
        """sha256 of the spec's JSON as :func:`~aiblox.sweep.spec_checks.hashed_form` reads it
        (``device`` by its class, off the CPU only): its settings, not where its data and store
        lie (its data's hash, with this one, finds its parent MLflow run; hashes from before
        2026-11-29 differ), nor the fields added for pipeline sweeps and search while at their
        defaults (a fusion spec keeps the hash it had before they existed)."""
        data = self.model_dump(mode="json")
        for name in _NEW_FIELDS:
            if data[name] == _DEFAULTS[name]:
                data.pop(name)
        return sha256_hex(hashed_form(data))

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

    def pipeline_points(self, draw: bool = True, repeats: bool = False) -> list[PipelinePoint]:
        """Every point of a pipeline sweep (fusion x chunking x selection), deduplicated, in
        grid order, with the ``[search]`` draw applied (unless ``draw`` is False; ``repeats``:
        :func:`~aiblox.sweep.points.fusion_points`); ``[]`` without pipeline axes."""
        if not self.has_pipeline_axes:
            return []
        out = selection_points([p for f in fusion_points(self.base_prefs(), self.grid, repeats)
                                for p in chunking_points(f, self.grid.chunking)],
                               self.grid.selection, repeats)
        if not draw:
            return out
        return [out[i] for i in self.search.pick(len(out))]

    def fusion_points(self) -> list[RetrievalPrefs]:
        """Every fusion grid point (no search draw), deduplicated, in grid order."""
        return fusion_points(self.base_prefs(), self.grid)


_BASELINE_MODELS = (ScoringConfig, VectorConfig, ChunkingConfig, RetrievalPrefs)
"""Where the baseline's keys are fields (and the selection policy's)."""

_NEW_FIELDS = ("query_limit", "chunk_k", "reader", "reader_options", "search", "cv",
               "finetune", "pipeline", "stages", "stage_modules", "device",
               "finetune_reranker", "seed")
"""SweepSpec fields added after the first fusion specs: left out of the hash at defaults."""


def _defaults() -> dict[str, Any]:
    """The new fields' defaults."""
    fields = SweepSpec.model_fields
    return {n: fields[n].get_default(call_default_factory=True) for n in _NEW_FIELDS}


def load_spec(path: str | Path, max_points: int | None = None) -> SweepSpec:
    """Read and validate a sweep spec; :class:`SweepSpecError` names the file and the field.
    ``max_points`` raises (or lowers) the grid's point limit, :data:`DEFAULT_MAX_POINTS`."""
    p = Path(path)
    if max_points is not None and max_points < 1:
        raise SweepSpecError(f"{p}: max_points must be >= 1, got {max_points}")
    try:
        text = p.read_text(encoding="utf-8")
        data = tomllib.loads(text)
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
        return SweepSpec.model_validate(data, context={"max_points": max_points,
                                                       "spec_dir": p.resolve().parent})
    except ValidationError as exc:
        lines = error_lines(str(p), text, data, exc.errors(), SweepSpec)
        raise SweepSpecError("\n".join(lines)) from exc


_DEFAULTS = {k: (v.model_dump(mode="json") if isinstance(v, BaseModel) else v)
             for k, v in _defaults().items()}
