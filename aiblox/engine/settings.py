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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import BaseModel

from aiblox.contracts.retrieval import (
    LINEAR_SETTINGS,
    RRF_SETTINGS,
    FtsConfig,
    RetrievalPrefs,
    ScoringConfig,
)
from aiblox.engine.algebra import Cutoff, Fuse, Pipeline, Stage, Then, from_data, label
from aiblox.engine.builtin import RetrieveConfig
from aiblox.engine.plan import takes_base_weights
from aiblox.engine.registry import get_stage_kind
from aiblox.engine.result import config_hash
from aiblox.engine.stage_bases import stage_defaults
from aiblox.hashing import canonical_plain_json, sha256_hex, sha256_text

__all__ = [
    "BaseReads",
    "PipelinePoint",
    "SweepSettings",
    "base_reads",
    "candidate_depth",
    "chunk_label",
    "needs_vectors",
    "pipeline_config",
    "point_config",
    "point_label",
    "point_policy",
    "point_title",
    "ranked",
    "ranking_key",
    "ranking_order",
    "reads_label",
    "scoring_read",
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
        return sha256_text(canonical_plain_json(key))  # plain data, string keys: the same bytes


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


def point_label(prefs: RetrievalPrefs) -> str:
    """A short readable name for a fusion setting, e.g. ``linear-w0.35-minmax-zero-d100`` or
    ``bm25-lucene-k1=2.8-b=0.85-d100`` (a BM25 parameter named with ``=``, so ``k1=2.8`` does
    not read as ``k = 12.8``): :func:`reads_label` of all its first stage reads. Shown and
    logged only: never part of a hash (the config hash identifies a point; this name is not
    unique on its own)."""
    return reads_label(prefs, base_reads(Stage("retrieve"), prefs))


@dataclass
class BaseReads:
    """The settings of a spec's ``[base]`` a retrieval pipeline's stages read, those a label
    names (a stage's own parameters are in its expression, not here), and every fusion
    setting read (:attr:`scoring`): :func:`base_reads`."""

    signals: set[str] = field(default_factory=set)
    """``bm25``, ``dense``: the signals its stages retrieve by."""
    fts: set[str] = field(default_factory=set)
    """:class:`FtsConfig` fields read from the base."""
    vector: set[str] = field(default_factory=set)
    """:class:`VectorConfig` fields read from the base."""
    blends: dict[str, set[str]] = field(default_factory=dict)
    """Per blend its fusions run (``rrf``, ``linear``), the :class:`ScoringConfig` fields they
    read from the base (``blend`` where the blend itself is the base's); a fusion that reads
    none is not here."""
    scoring: set[str] = field(default_factory=set)
    """Every :class:`ScoringConfig` field its fusions read from the base, both weights too
    (what its config hash keeps of the base's ``scoring``: :func:`point_config`); empty for a
    pipeline that fuses nothing."""
    embedder: bool = False
    """Whether a stage reads the embedder (its kind's ``reads`` names it: ``retrieve``,
    ``dense``, ``rocchio``, ``dense_rescore``); ``bm25 >> rm3 >> bm25`` does not."""


_FTS = ("method", "k1", "b", "title_weight", "title_b", "top_k")
"""The :class:`FtsConfig` fields a label names (its BM25 settings and depth)."""
_PASSAGES = ("passage_chunker", "passage_tokens", "passage_overlap")
_VECTOR = ("doc_score", *_PASSAGES, "top_k")
"""The :class:`VectorConfig` fields a label names (its document scores and depth)."""
_TERMS = ("title_weight",)
"""What of the base's ``fts`` a feedback stage reads that a label names (rm3, bo1 read the
analysis' term statistics: :func:`aiblox.indexes.term_stats.term_stats_spec`)."""


def base_reads(p: Pipeline, base: RetrievalPrefs) -> BaseReads:
    """What of ``base`` the stages of ``p`` read and a label names: a ``bm25`` stage the base's
    BM25 settings and depth it does not set itself, ``dense`` its vector settings, a fusion
    its blend and the blend's settings (``w_text`` where it takes the base's weights,
    :func:`~aiblox.engine.plan.fuse_config`), ``retrieve`` all of its mode's first stage,
    feedback on the BM25 index (rm3, bo1) the analysis' title weight. ``bm25 >> cutoff(k=20)
    >> dense_rescore`` reads the BM25 settings and depth; ``fuse(bm25, dense, blend='linear',
    normalize='minmax', weights=[0.3, 0.7])`` the depths and ``missing``. Its ``scoring``
    holds every fusion setting read, both weights too."""
    out = BaseReads()
    _reads(p, base, out)
    return out


def _reads(p: Pipeline, base: RetrievalPrefs, out: BaseReads) -> None:
    if isinstance(p, Then):
        for step in p.steps:
            _reads(step, base, out)
    elif isinstance(p, Cutoff):
        _reads(p.inner, base, out)
    elif isinstance(p, Fuse):
        for m in p.members:
            _reads(m, base, out)
        own = p.stage.param_dict()
        weights = "weights" not in own and takes_base_weights(p, base)
        _fusion_reads(base, own, out, weights)
        out.scoring.update(_fusion_fields(base, own, weights))
    else:
        assert isinstance(p, Stage)
        _stage_reads(p, base, out)


def _stage_reads(s: Stage, base: RetrievalPrefs, out: BaseReads) -> None:
    own = s.param_dict()
    if "embedder" in get_stage_kind(s.kind).reads:
        out.embedder = True
    if s.kind == "bm25":
        out.signals.add("bm25")
        out.fts.update(f for f in _FTS if f not in own)
    elif s.kind == "dense":
        out.signals.add("dense")
        _vector_reads(base, own, out)
    elif s.kind == "retrieve":  # its tables over the base's, key by key
        mode = own.get("mode", base.mode)
        if mode != "dense":
            out.signals.add("bm25")
            out.fts.update(f for f in _FTS if f not in _table(own, "fts"))
        if mode != "bm25":
            out.signals.add("dense")
            _vector_reads(base, _table(own, "vector"), out)
        if mode == "hybrid":
            scoring = _table(own, "scoring")
            _fusion_reads(base, scoring, out, not {"w_text", "w_vec"} & set(scoring))
            out.scoring.update(_fusion_fields(base, scoring, weights=True))
    elif "fts" in stage_defaults(s.kind, base):
        out.fts.update(f for f in _TERMS if f not in _table(own, "fts"))
    if s.kind not in ("dense", "retrieve") and "distance" in stage_defaults(s.kind, base) \
            and "distance" not in own:  # rocchio, dense_rescore: the base's vector distance
        out.vector.add("distance")


def _table(own: dict[str, Any], key: str) -> dict[str, Any]:
    """A stage's table parameter (``fts={"k1": 0.9}``; a config given whole in Python as its
    every field), ``{}`` when it sets none."""
    value = own.get(key)
    if isinstance(value, BaseModel):
        return value.model_dump()
    return value if isinstance(value, dict) else {}


def _vector_reads(base: RetrievalPrefs, own: dict[str, Any], out: BaseReads) -> None:
    read = [f for f in _VECTOR if f not in own]
    if own.get("doc_score", base.vector.doc_score) == "first":  # no passages read
        read = [f for f in read if f not in _PASSAGES]
    out.vector.update(read)


def _fusion_reads(base: RetrievalPrefs, own: dict[str, Any], out: BaseReads,
                  weights: bool) -> None:
    blend = own.get("blend", base.scoring.blend)
    wanted = ("rrf_k",) if blend == "rrf" else ("normalize", "missing")
    read = {f for f in ("blend", *wanted) if f not in own}
    if weights and blend == "linear":
        read.add("w_text")
    if read:
        out.blends.setdefault(blend, set()).update(read)


def scoring_read(config: Mapping[str, Any]) -> frozenset[str] | None:
    """The base ``scoring`` fields a retrieval pipeline point of effective config ``config``
    reads (:attr:`BaseReads.scoring`): the fusion settings its params and tables show
    (:func:`~aiblox.engine.applies.param_applies`). None for a point without a pipeline."""
    if config.get("pipeline") is None:
        return None
    prefs = RetrievalPrefs(query_text="", **config["prefs"])
    return frozenset(base_reads(from_data(config["pipeline"]), prefs).scoring)


_WEIGHTS = frozenset({"w_text", "w_vec", "rrf_w_text", "rrf_w_vec"})


def _fusion_fields(base: RetrievalPrefs, own: dict[str, Any], weights: bool) -> set[str]:
    """The :class:`ScoringConfig` fields a fusion setting ``own`` (a fusion's parameters, a
    ``retrieve``'s ``scoring`` table) reads from the base: ``blend`` and its blend's settings
    (:meth:`ScoringConfig.canonical`) that ``own`` does not set, the weights only where it
    takes the base's (``weights``)."""
    blend = own.get("blend", base.scoring.blend)
    settings = RRF_SETTINGS if blend == "rrf" else LINEAR_SETTINGS
    return {f for f in ("blend", *settings) if f not in own
            and (weights or f not in _WEIGHTS)}


def reads_label(prefs: RetrievalPrefs, reads: BaseReads) -> str:
    """The settings of ``prefs`` that ``reads`` names, in :func:`point_label`'s words: each
    blend run with what it reads (``rrf-k60``, ``linear-w0.3-minmax-zero``; ``linear-zero``
    where a fusion sets all but ``missing`` itself), or else the one signal read (``bm25``,
    ``dense``); the BM25 settings read (named when one differs from its default), the
    passages' document scores, the depths read (``d100``, ``d100v50``: BM25's, then the
    vectors' where they differ). Empty where nothing but the signal is read."""
    s, f, v = prefs.scoring, prefs.fts, prefs.vector
    blends = []
    if "rrf" in reads.blends:
        blends.append("rrf" + (f"-k{s.rrf_k}" if "rrf_k" in reads.blends["rrf"] else ""))
    if "linear" in reads.blends:
        read = reads.blends["linear"]
        # the vector weight named where it is not 1 - w_text (a baseline's own pair), so two
        # configs never share a label (0.5 / 0.65 read as the grid's 0.5 / 0.5)
        weight = f"w{s.w_text!r}" + ("" if round(s.w_text + s.w_vec, 9) == 1 else
                                     f"v{s.w_vec!r}")
        blends.append("linear" + "".join(f"-{x}" for name, x in (
            ("w_text", weight), ("normalize", s.normalize), ("missing", s.missing))
            if name in read))
    default = FtsConfig()
    bm25_read = [(n, tag) for n, tag in (("method", str(f.method)), ("k1", f"k1={f.k1!r}"),
                                         ("b", f"b={f.b!r}")) if n in reads.fts]
    bm25 = ""
    if any(getattr(f, n) != getattr(default, n) for n, _ in bm25_read):
        bm25 = "".join(f"-{tag}" for _, tag in bm25_read)
    if "title_weight" in reads.fts and (f.title_weight != default.title_weight or (
            "title_b" in reads.fts and f.title_b is not None)):
        bm25 += f"-tw{f.title_weight!r}"
    if "title_b" in reads.fts and f.title_b is not None:
        bm25 += f"-tb{f.title_b!r}"
    dense = ""
    if "doc_score" in reads.vector and v.doc_score != "first":
        dense = f"-{v.doc_score}"
    # the chunker's passage sizes follow its name (token_window128o16), or a dash
    dense += f"-{v.passage_chunker}" if "passage_chunker" in reads.vector else "-"
    dense += "".join(f"{tag}{x}" for name, tag, x in (
        ("passage_tokens", "", v.passage_tokens), ("passage_overlap", "o", v.passage_overlap))
        if name in reads.vector and x is not None)
    dense = dense.rstrip("-")
    depths = [d for name, d in (("fts", f.top_k), ("vector", v.top_k))
              if "top_k" in getattr(reads, name)]
    depth = "" if not depths else f"-d{depths[0]}" + (
        f"v{depths[1]}" if len(depths) == 2 and depths[1] != depths[0] else "")
    rest = f"{bm25}{dense}{depth}"
    if blends:
        return "-".join(blends) + rest
    if not rest:
        return ""
    head = next(iter(reads.signals)) if len(reads.signals) == 1 else ""
    return f"{head}{rest}".lstrip("-")


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


def point_title(settings: SweepSettings, pt: PipelinePoint) -> str:
    """A point's label: the fusion setting (with a retrieval pipeline: the pipeline, every
    stage's parameters shown, ``@`` the settings of the base it reads that its expression
    does not set, :func:`base_reads`: ``bm25 >> cross_encoder(...) @ bm25-d100``, ``fuse(bm25,
    dense; blend='linear',normalize='minmax',weights=[0.3, 0.7]) @ linear-zero-d100``; no
    ``@`` where it reads none); for a pipeline point, ``|`` its chunking and ``|`` its
    selection policy with its overrides."""
    head = point_label(pt.prefs)
    if pt.pipeline is not None:
        reads = reads_label(pt.prefs, base_reads(pt.pipeline, pt.prefs))
        head = label(pt.pipeline) + (f" @ {reads}" if reads else "")
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
    # chunking and selection read the embedder (the late chunker's scores, the policy's key)
    _, config = config_hash(pt.prefs, embedder_id, backend, reads_embedder=True)
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
    stage kinds are part of it (a point without one keeps the hash it always had), and the
    base's ``scoring`` holds only what its fusions read (:attr:`BaseReads.scoring`), every
    other field at its default, as :meth:`~aiblox.contracts.retrieval.ScoringConfig.
    canonical_for` holds a mode's: ``bm25 >> rm3 >> bm25`` under ``--rrf-k 10`` is the point
    it is under the default k, as ``--mode bm25`` is, and a pipeline that reads all of its
    blend's settings (``bm25 + dense``) keeps the hash it had. A point without chunk stages
    that reads no embedder (``--mode bm25``, a pipeline none of whose stages reads one:
    ``bm25 >> rm3 >> bm25``, :attr:`BaseReads.embedder`) names the default's
    (:data:`~aiblox.engine.result.UNREAD_EMBEDDER`) in its config, whichever the store has."""
    if settings.chunk_stages:
        chash, config = pipeline_config(settings, pt, embedder_id, backend)
    else:  # a retrieval pipeline reads the embedder when one of its stages does
        chash, config = config_hash(pt.prefs, embedder_id, backend, reads_embedder=(
            None if pt.pipeline is None else base_reads(pt.pipeline, pt.prefs).embedder))
    if pt.pipeline is None:
        return chash, config
    read = base_reads(pt.pipeline, pt.prefs).scoring
    fields = ScoringConfig.model_fields
    scoring = pt.prefs.scoring.model_copy(update={k: fields[k].default for k in fields
                                                  if k not in read})
    config = {**config, "prefs": {**config["prefs"], "scoring": scoring.model_dump()},
              "pipeline": pt.pipeline.as_data()}
    if settings.stage_modules:
        config["stage_modules"] = list(settings.stage_modules)
    return sha256_hex(config), config


def ranking_order(value: float | None, config_hash: str, metric: str | None
                  ) -> tuple[float, str]:
    """The one ranking of sweep points by ``metric``'s ``value``: best first (highest; lowest
    for a cost or a failure rate, :func:`~aiblox.metrics.lower_is_better`: a sweep whose
    primary was ``evidence_tokens`` chose its most expensive point), ties by config hash
    ascending, a missing or NaN value last (a point logged to MLflow ranks the same way,
    :mod:`aiblox.sweep.report`). ``metric`` None: the value is already oriented, higher
    better (a Pareto front's objectives carry their own direction)."""
    from aiblox.metrics import lower_is_better

    if value is None or value != value:
        return math.inf, config_hash
    return (value if metric is not None and lower_is_better(metric) else -value), config_hash


def ranking_key(point: Any, split: str, metric: str) -> tuple[float, str]:
    """:func:`ranking_order` of a :class:`~aiblox.sweep.results.PointResult` (or anything
    with ``metrics`` and ``config_hash``) by ``metric`` on ``split``."""
    return ranking_order(point.metrics[split][metric], point.config_hash, metric)


def ranked(points: Sequence[Any], split: str, metric: str) -> list[Any]:
    """``points`` best first under :func:`ranking_key`."""
    return sorted(points, key=lambda p: ranking_key(p, split, metric))
