"""What a point is: its settings (:class:`PipelinePoint`), what its stages read from its spec
(:class:`SweepSettings`), its effective config and config hash (:func:`point_config`), its
readable label, and the one ranking of scored points (:func:`ranking_order`).

A fusion point's config is what decides its ranking (:func:`aiblox.engine.evaluate.config_hash`:
prefs without the query, embedder, backend), the same hash ``aiblox eval`` reports. A pipeline
point's (:func:`pipeline_config`) adds ``query_limit``, ``chunk_k`` and, with selection, the
policy (id, sha256 of the effective policy, the effective value of each swept parameter) and
the reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs
from aiblox.engine.algebra import Pipeline, from_data, label
from aiblox.engine.builtin import RetrieveConfig
from aiblox.engine.result import config_hash
from aiblox.hashing import sha256_hex

__all__ = [
    "PipelinePoint",
    "SweepSettings",
    "candidate_depth",
    "chunk_label",
    "needs_vectors",
    "pipeline_signals",
    "pipeline_config",
    "point_config",
    "point_label",
    "point_policy",
    "point_title",
    "ranked",
    "ranking_key",
    "ranking_order",
]


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


@dataclass(frozen=True)
class SweepSettings:
    """What the stages of a sweep's points read from its spec (``SweepSpec.settings()``), or
    from a logged point's manifest when it is verified."""

    name: str
    """Sweep name."""
    embedder: str
    """Embedder registry name (a ``[finetune]`` model's reference, ``finetune:ft-<hex>@<hex>``:
    :mod:`aiblox.embedding.sentence_transformers`)."""
    metrics: tuple[str, ...]
    """ranx metric names scored at every point."""
    chunk_stages: bool = False
    """True for a pipeline sweep: points go on past ``metrics`` to chunks (and answers)."""
    query_limit: int | None = None
    """Only the first ``query_limit`` queries of each split are scored (None: all)."""
    chunk_k: tuple[int, ...] = (1, 5, 10)
    """The ``k`` of ``answer_recall@k``."""
    reader: str = "extractive"
    """The reader of the answer stages."""
    reader_options: dict[str, Any] = field(default_factory=dict)
    """Its options."""
    swept_selection: tuple[str, ...] = ()
    """Policy parameters swept by the grid (their effective values enter the config)."""
    vectors: tuple[str, ...] = ()
    """Precomputed vector files to import into the store's embedding cache."""
    needs_vectors: bool = True
    """Whether retrieval needs vectors (any mode but ``bm25``; a pipeline with a dense stage
    or a stage that reads vectors)."""
    stage_modules: tuple[str, ...] = ()
    """Modules registering the spec's own stage kinds (imported before a point is planned)."""
    device: str = "auto"
    """Where the embedder runs (:func:`aiblox.embedding.device.resolve_device`; a sweep
    resolves it before any point, so its workers embed where the driver's keys say)."""
    trained: tuple[tuple[str, str], ...] = ()
    """The folders of the models the sweep trained that its embedder and its points' stages
    name by reference (``(finetune:<name>@<hex>, folder)``,
    :func:`aiblox.embedding.sentence_transformers.trained_ref`):
    made known to every process that plans a point (:class:`~aiblox.engine.context.RunContext`),
    never part of a key or a config hash."""


def needs_vectors(base: RetrievalPrefs, pipelines: Sequence[Pipeline]) -> bool:
    """Whether retrieval reads the store's vectors: the base's mode but ``bm25`` without a
    pipeline; with pipelines, any ``dense`` stage, a ``retrieve`` whose mode is not ``bm25``,
    or a stage kind that reads vectors."""
    if not pipelines:
        return base.mode != "bm25"
    for p in pipelines:
        for s in p.stages():
            if s.kind == "dense" or "vectors" in s.spec.reads and s.kind != "retrieve":
                return True
            if s.kind == "retrieve":
                cfg = cast(RetrieveConfig, s.config({"mode": base.mode}))
                if cfg.mode != "bm25":
                    return True
    return False


def point_label(prefs: RetrievalPrefs, fused: bool = True) -> str:
    """A short readable name for a fusion setting, e.g. ``linear-w0.35-minmax-zero-d100`` or
    ``bm25-lucene-k1=2.8-b=0.85-d100`` (a BM25 parameter named with ``=``, so ``k1=2.8`` does
    not read as ``k = 12.8``). ``fused=False``: a hybrid setting without its fusion (``d100``;
    a retrieval pipeline that reads both signals and fuses neither). Shown and logged only:
    never part of a hash (the config hash identifies a point; this name is not unique on its
    own)."""
    s = prefs.scoring
    head: str
    if prefs.mode != "hybrid":
        head = prefs.mode
    elif not fused:
        head = ""
    elif s.blend == "rrf":
        head = f"rrf-k{s.rrf_k}"
    else:
        head = f"linear-w{s.w_text!r}-{s.normalize}-{s.missing}"
    f, default = prefs.fts, FtsConfig()
    bm25 = ""
    if prefs.mode != "dense" and (f.k1, f.b, f.method) != (default.k1, default.b, default.method):
        bm25 = f"-{f.method}-k1={f.k1!r}-b={f.b!r}"
    if prefs.mode != "dense" and f.fielded:
        bm25 += f"-tw{f.title_weight!r}" + ("" if f.title_b is None else f"-tb{f.title_b!r}")
    v = prefs.vector
    dense = "" if prefs.mode == "bm25" or v.doc_score == "first" else (
        f"-{v.doc_score}-{v.passage_chunker}"
        + "".join(f"{tag}{x}" for tag, x in (("", v.passage_tokens), ("o", v.passage_overlap))
                  if x is not None))
    depth = f"-d{prefs.vector.top_k if prefs.mode == 'dense' else prefs.fts.top_k}"
    if prefs.mode == "hybrid" and prefs.vector.top_k != prefs.fts.top_k:
        depth += f"v{prefs.vector.top_k}"
    return f"{head}{bm25}{dense}{depth}".lstrip("-")


def chunk_label(prefs: RetrievalPrefs) -> str:
    """``sentences-m128-o16-k10-c3``: chunker, sizes (when set), top_k_chunks, per-item cap."""
    c = prefs.chunking
    sizes = "".join(f"-{tag}{v}" for tag, v in (("m", c.max_chunk_tokens),
                                                  ("o", c.overlap_tokens)) if v is not None)
    return f"{c.chunker_id}{sizes}-k{prefs.top_k_chunks}-c{prefs.per_item_chunk_cap}"


def candidate_depth(config: dict[str, Any]) -> int:
    """Documents retrieved per query by a point of effective config ``config`` (the
    ``candidates`` cost of a quality-against-cost search): its full-text depth, its vector
    depth, or both for a hybrid point; for a retrieval pipeline, the depth of every list its
    retrieval stages fetch (``bm25 >> rm3 >> bm25`` fetches two). Reranking, feedback and
    cut-offs fetch nothing new."""
    prefs = config.get("prefs") or {}
    fts, vec = int(prefs["fts"]["top_k"]), int(prefs["vector"]["top_k"])

    def lists(mode: str, f: int, v: int) -> int:
        return {"bm25": f, "dense": v}.get(mode, f + v)

    pipeline = config.get("pipeline")
    if pipeline is None:
        return lists(str(prefs.get("mode", "hybrid")), fts, vec)
    total = 0
    for stage in from_data(pipeline).stages():
        p = stage.param_dict()
        if stage.kind == "bm25":
            total += int(p.get("top_k", fts))
        elif stage.kind == "dense":
            total += int(p.get("top_k", vec))
        elif stage.kind == "retrieve":
            total += lists(str(p.get("mode", prefs.get("mode", "hybrid"))),
                           int((p.get("fts") or {}).get("top_k", fts)),
                           int((p.get("vector") or {}).get("top_k", vec)))
    return total


def pipeline_signals(p: Pipeline, base: RetrievalPrefs) -> tuple[str, bool]:
    """The signals ``p``'s retrieval stages read from the base (``bm25``, ``dense``, or
    ``hybrid`` for both or neither known) and whether it fuses runs with the base's fusion
    settings (a ``+``, a ``retrieve`` of both): ``bm25 >> cross_encoder`` is ``("bm25",
    False)``, ``bm25 + dense`` ``("hybrid", True)``."""
    kinds = [s.kind for s in p.stages()]
    modes: set[str] = set()
    for s in p.stages():
        if s.kind in ("bm25", "dense"):
            modes.add(s.kind)
        elif s.kind == "retrieve":
            modes.add(str(cast(RetrieveConfig, s.config({"mode": base.mode})).mode))
    fused = "fuse" in kinds or "hybrid" in modes
    return (modes.pop() if len(modes) == 1 else "hybrid"), fused


def point_title(settings: SweepSettings, pt: PipelinePoint) -> str:
    """A point's label: the fusion setting (with a retrieval pipeline: the pipeline, every
    stage's parameters shown, ``@`` the base's settings its retrieval stages default to, the
    fusion only where it fuses: ``bm25 >> cross_encoder(...) @ bm25-d100``); for a pipeline
    point, ``|`` its chunking and ``|`` its selection policy with its overrides."""
    head = point_label(pt.prefs)
    if pt.pipeline is not None:
        mode, fused = pipeline_signals(pt.pipeline, pt.prefs)
        if not fused:  # a single signal (or none fused): no fusion to name
            head = point_label(pt.prefs.model_copy(update={"mode": mode}), fused=False)
        head = f"{label(pt.pipeline)} @ {head}"
    if not settings.chunk_stages:
        return head
    selection = "" if pt.policy is None else "|" + pt.policy + "".join(
        f"-{k}={v!r}" for k, v in pt.overrides.items())
    return head + "|" + chunk_label(pt.prefs) + selection


def point_policy(pt: PipelinePoint) -> Any:
    """The effective selection policy of a point (its policy with its overrides)."""
    from aiblox.assembly import load_policy

    return load_policy(str(pt.policy)).with_updates(**pt.overrides)


def pipeline_config(settings: SweepSettings, pt: PipelinePoint, embedder_id: str | None,
                    backend: str) -> tuple[str, dict[str, Any]]:
    """A pipeline point's effective config and its hash: retrieval prefs (fusion and chunking),
    embedder, backend, ``query_limit``, ``chunk_k``, and with selection the policy (id, sha256
    of the effective policy, the effective value of each swept parameter) and the reader."""
    _, config = config_hash(pt.prefs, embedder_id, backend)
    config = {**config, "query_limit": settings.query_limit, "chunk_k": list(settings.chunk_k)}
    if pt.policy is not None:
        policy = point_policy(pt)
        swept = set(settings.swept_selection)
        config["selection"] = {
            "policy": pt.policy, "policy_sha256": policy.sha256(),
            # the effective value of every swept parameter (an override equal to the policy's
            # own value is the same point as no override)
            "params": {k: getattr(policy, k) for k in sorted(swept | set(pt.overrides))}}
        config["reader"] = {"name": settings.reader, "options": dict(settings.reader_options)}
    return sha256_hex(config), config


def point_config(settings: SweepSettings, pt: PipelinePoint, embedder_id: str | None,
                 backend: str) -> tuple[str, dict[str, Any]]:
    """A point's config hash and config: :func:`aiblox.engine.evaluate.config_hash` for a fusion
    point, :func:`pipeline_config` for a pipeline point; with a retrieval pipeline, the
    pipeline (:meth:`~aiblox.engine.Pipeline.as_data`) and the modules registering its own
    stage kinds are part of it (a point without one keeps the hash it always had)."""
    if settings.chunk_stages:
        chash, config = pipeline_config(settings, pt, embedder_id, backend)
    else:
        chash, config = config_hash(pt.prefs, embedder_id, backend)
    if pt.pipeline is None:
        return chash, config
    config = {**config, "pipeline": pt.pipeline.as_data()}
    if settings.stage_modules:
        config["stage_modules"] = list(settings.stage_modules)
    return sha256_hex(config), config


def ranking_order(value: float, config_hash: str) -> tuple[float, str]:
    """The one ranking of sweep points: by value descending, ties by config hash ascending (a
    point logged to MLflow ranks the same way, :mod:`aiblox.sweep.report`)."""
    return -value, config_hash


def ranking_key(point: Any, split: str, metric: str) -> tuple[float, str]:
    """:func:`ranking_order` of a :class:`~aiblox.sweep.results.PointResult` (or anything
    with ``metrics`` and ``config_hash``) by ``metric`` on ``split``."""
    return ranking_order(point.metrics[split][metric], point.config_hash)


def ranked(points: Sequence[Any], split: str, metric: str) -> list[Any]:
    """``points`` best first under :func:`ranking_key`."""
    return sorted(points, key=lambda p: ranking_key(p, split, metric))
