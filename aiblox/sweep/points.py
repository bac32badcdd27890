"""The points of a spec's grid, expanded in grid order and deduplicated, and the grid's size
counted without building them (:class:`~aiblox.sweep.spec.SweepSpec` calls these).

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
rejected).

Pipeline variants: every pipeline of the spec times the values of its stage axes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from itertools import product
from typing import Any, Literal

from aiblox.contracts.retrieval import (
    ChunkingConfig,
    FtsConfig,
    RetrievalPrefs,
    ScoringConfig,
    VectorConfig,
)
from aiblox.engine.algebra import Pipeline, PipelineError
from aiblox.engine.settings import PipelinePoint
from aiblox.hashing import canonical_plain_json, sha256_hex
from aiblox.metrics import ANSWER_METRICS, CHUNK_SCALARS, PROJECTION_PREFIX
from aiblox.sweep.axes import (
    BM25_AXES,
    CHUNK_DEPTH_KEYS,
    CHUNKING_KEYS,
    DENSE_AXES,
    DEPTH_AXES,
    FIELD_AXES,
    SCORING_FIELDS,
    ChunkingGrid,
    FusionGrid,
    SelectionGrid,
    axis_len,
    axis_value_key,
    load_policy_by_name,
    policy_fields,
)
from aiblox.sweep.grid import to_decimal

__all__ = ["Merged", "baseline_point", "baseline_point_prefs", "chunking_points",
           "fusion_points", "grid_size", "merged_grid", "merged_settings", "merged_why",
           "parse_baseline_pipeline", "parse_pipelines", "pipeline_count",
           "pipeline_metric_names", "pipeline_variants", "remembered", "repeated_values",
           "selection_points", "with_chunking"]

_REMEMBERED: dict[tuple[str, str], list[Any]] = {}


def remembered(kind: str, state: str, make: Callable[[], list[Any]]) -> list[Any]:
    """``make()``'s list for a spec whose JSON dump is ``state``, made once (the last four
    kept): a command expands its grid once, however many of its steps ask for it."""
    key = (kind, state)
    if key not in _REMEMBERED:
        if len(_REMEMBERED) >= 4:
            del _REMEMBERED[next(iter(_REMEMBERED))]
        _REMEMBERED[key] = make()
    return list(_REMEMBERED[key])


def _vector_weight(w_text: float) -> float:
    """``w_vec`` of a sweep's linear point that sets ``w_text``: ``1 - w_text`` in decimal,
    exactly (0.7 for 0.3, not 0.7000000000000001)."""
    return float(Decimal(1) - to_decimal(w_text))


def fusion_points(base: RetrievalPrefs, g: FusionGrid, repeats: bool = False
                  ) -> list[RetrievalPrefs]:
    """Every fusion grid point (no search draw), deduplicated, in grid order; with
    ``repeats``, also each point again where an axis lists a value again (``rrf_k = [60,
    60]``), for :meth:`~aiblox.sweep.spec.SweepSpec.merged_points` to count."""
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
                scoring["w_vec"] = _vector_weight(combo["w_text"])
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
            # a point's identity within the grid (not a hash anyone keeps): its JSON dump,
            # keys sorted, cheaper than hashing every point's canonical config
            key = canonical_plain_json(p.model_dump(mode="json",
                                                    exclude={"query_text", "query_id"}))
            if repeats or key not in seen:
                seen.add(key)
                out.append(p)
    return out


def chunking_points(prefs: RetrievalPrefs, g: ChunkingGrid | None) -> list[RetrievalPrefs]:
    """``prefs`` times the chunking axes ``g`` (``[prefs]`` without them)."""
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
                made = make_chunker(chunking_config(base_cfg, cfg))
            except ValueError:  # e.g. overlap_tokens >= max_chunk_tokens: left out
                continue
            if made.chunker_id == plain.chunker_id and (mx, ov) != (None, None):
                cfg = {"chunker_id": chunker}  # sizes do not apply to this chunker: once
                if cfg in kept:
                    continue
            kept.append(cfg)
        if not kept:
            raise ValueError(f"grid.chunking: no size pair is valid for chunker "
                             f"{chunker!r} (overlap_tokens must be below max_chunk_tokens)")
        for cfg, (k, cap) in product(kept, depth):
            out.append(with_chunking(prefs, cfg, {"top_k_chunks": k,
                                                   "per_item_chunk_cap": cap}))
    return out


def selection_points(chunked: Sequence[RetrievalPrefs], sel: SelectionGrid | None,
                     repeats: bool = False) -> list[PipelinePoint]:
    """Every chunking point times every policy and override combination of ``sel``,
    deduplicated, in grid order (a combination the policy model rejects raises here); with
    ``repeats``, also each point an axis lists again (:func:`fusion_points`)."""
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
            if repeats or key not in seen:
                seen.add(key)
                out.append(pt)
    return out


def chunking_config(base: ChunkingConfig, cfg: dict[str, Any]) -> ChunkingConfig:
    return ChunkingConfig(**{**base.model_dump(),
                             **{k: v for k, v in cfg.items() if v is not None}})


def with_chunking(prefs: RetrievalPrefs, chunking: dict[str, Any],
                  depth: dict[str, Any]) -> RetrievalPrefs:
    update: dict[str, Any] = {k: int(v) for k, v in depth.items() if v is not None}
    if chunking:
        update["chunking"] = chunking_config(prefs.chunking, chunking)
    return prefs.model_copy(update=update) if update else prefs


def parse_pipelines(pipeline: str | list[str] | None, stages: dict[str, dict[str, Any]]
                    ) -> list[Pipeline]:
    """The spec's pipelines, parsed and checked (``[]`` without ``pipeline``);
    ``ValueError`` naming the field otherwise."""
    from aiblox.engine.expression import parse_pipeline

    if pipeline is None:
        return []
    texts = [pipeline] if isinstance(pipeline, str) else list(pipeline)
    if not texts:
        raise ValueError("pipeline: an empty list; give one expression or several")
    out = []
    for i, text in enumerate(texts):
        where = "pipeline" if isinstance(pipeline, str) else f"pipeline[{i}]"
        try:
            out.append(parse_pipeline(text, stages, where).check())
        except PipelineError as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith(("pipeline", "stages.")) else
                             f"{where}: {msg}") from None
    return out


def pipeline_variants(pipelines: Sequence[Pipeline], axes: Sequence[tuple[str, str, list[Any]]],
                      repeats: bool = False) -> list[Pipeline | None]:
    """Every pipeline with every combination of its stage axes applied, in order, once each
    (with ``repeats``: also again where a pipeline or an axis value is listed again)."""
    out: list[Pipeline | None] = []
    for p in pipelines:
        mine = [(stage, param, values) for stage, param, values in axes
                if stage in p.names()]
        for combo in product(*[values for _, _, values in mine]):
            params: dict[str, dict[str, Any]] = {}
            for (stage, param, _), value in zip(mine, combo, strict=True):
                params.setdefault(stage, {})[param] = value
            out.append(p.with_params(params) if params else p)
    return out if repeats else list(dict.fromkeys(out))


def grid_size(g: FusionGrid, base_blend: Literal["rrf", "linear"],
              pipelines: Sequence[Pipeline] | None) -> int:
    """Points of the full grid (before the ``[search]`` draw), computed from the axes'
    lengths without building any: the product of the distinct values of every axis, blend
    by blend for fusion. An upper bound of the points built (a chunker that takes no sizes
    is one point whatever the sizes, and a size pair it refuses is left out); exact for a
    fusion grid. Validation refuses a spec above its point limit with this count."""
    blends = list(dict.fromkeys(g.blend or [base_blend]))
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
    if pipelines is not None:
        size *= pipeline_count(g, pipelines)
    return size


def pipeline_count(g: FusionGrid, pipelines: Sequence[Pipeline]) -> int:
    """Pipeline variants (each pipeline times the lengths of its stage axes), counted
    without building them."""
    axes = {(stage, param): axis_len(values)
            for stage, params in (g.stages or {}).items()
            for param, values in params.items()}
    total = 0
    for p in pipelines:
        n = 1
        for (stage, _), length in axes.items():
            if stage in p.names():
                n *= length
        total += n
    return max(total, 1)


def baseline_point_prefs(base: RetrievalPrefs, b: dict[str, Any]) -> RetrievalPrefs:
    """The baseline's prefs: ``base`` with the baseline's (``b``) scoring and dense keys; a
    ``w_text`` given alone takes ``w_vec = 1 - w_text``, as a grid point's does (it kept the
    base's 0.65: a baseline ``w_text = 0.5`` was labelled as the grid's 0.5 / 0.5 point and
    scored otherwise)."""
    own = {k: v for k, v in b.items() if k in SCORING_FIELDS}
    if "w_text" in own and "w_vec" not in own:
        own["w_vec"] = _vector_weight(own["w_text"])
    update: dict[str, Any] = {"scoring": ScoringConfig(**{**base.scoring.model_dump(), **own})}
    dense = {k: v for k, v in b.items() if k in DENSE_AXES}
    if dense:
        update["vector"] = VectorConfig(**{**dict(base.vector), **dense})
    return base.model_copy(update=update)


def baseline_point(prefs: RetrievalPrefs, b: dict[str, Any], sel: SelectionGrid | None
                   ) -> PipelinePoint:
    """The baseline point of a pipeline sweep: ``prefs`` (the base with the baseline's scoring)
    with the baseline's (``b``) chunking and selection keys."""
    prefs = with_chunking(prefs, {k: b[k] for k in CHUNKING_KEYS if k in b},
                          {k: b[k] for k in CHUNK_DEPTH_KEYS if k in b})
    if sel is None:
        return PipelinePoint(prefs)
    policy = str(b.get("policy", sel.policies()[0]))
    overrides = {k: v for k, v in b.items() if k in policy_fields()}
    load_policy_by_name(policy).with_updates(**overrides)  # validates
    return PipelinePoint(prefs, policy, overrides)


def parse_baseline_pipeline(text: str, stages: dict[str, dict[str, Any]]) -> Pipeline:
    """``[baseline] pipeline``, parsed and checked; ``ValueError`` naming the field."""
    from aiblox.engine.expression import parse_pipeline

    try:
        return parse_pipeline(text, stages, "baseline.pipeline").check()
    except PipelineError as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith("baseline") else
                         f"baseline.pipeline: {msg}") from None


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


def pipeline_grid(base: Sequence[PipelinePoint], variants: Sequence[Pipeline | None],
                  chunk_stages: bool = False) -> list[PipelinePoint]:
    """Every point of ``base`` with every pipeline variant, in grid order, deduplicated by
    what it computes: a point whose run (:func:`~aiblox.engine.plan.run_form`: its stages'
    effective configs) and whose other settings are an earlier point's is left out (``dense``
    under two ``k1`` axis values, ``retrieve`` beside ``bm25 + dense``), so no result is
    scored and tested twice. ``chunk_stages``: the points go on to chunk stages, which read
    the prefs (the prefs then count whole). :func:`merged_grid` also says which were left
    out."""
    return merged_grid(base, variants, chunk_stages)[0]


Merged = list[tuple[PipelinePoint, PipelinePoint]]
"""``(point left out, the earlier point that computes its run)``, in grid order."""


def merged_grid(base: Sequence[PipelinePoint], variants: Sequence[Pipeline | None],
                chunk_stages: bool = False) -> tuple[list[PipelinePoint], Merged]:
    """:func:`pipeline_grid`'s points, and each point it left out with the point kept in its
    place."""
    out: dict[str, PipelinePoint] = {}
    merged: Merged = []
    for pt in base:
        for variant in variants:
            point = PipelinePoint(pt.prefs, pt.policy, pt.overrides, variant)
            kept = out.setdefault(_effective_key(point, chunk_stages), point)
            if kept is not point:
                merged.append((point, kept))
    return list(out.values()), merged


def merged_settings(merged: Merged) -> list[str]:
    """What the points left out differ in from the points kept in their place, as the spec
    names it: settings of ``[base]`` and ``[grid]`` (``scoring.rrf_k``, ``fts.k1``), and
    ``pipeline`` where two expressions are one run (``retrieve`` and ``bm25 + dense``)."""
    from aiblox.engine.algebra import shape

    found: dict[str, None] = {}
    for left, kept in merged:
        a = _flat(left.prefs.model_dump(mode="json", exclude={"query_text", "query_id"}))
        b = _flat(kept.prefs.model_dump(mode="json", exclude={"query_text", "query_id"}))
        found.update(dict.fromkeys(k for k in a if a[k] != b.get(k)))
        if left.pipeline is not None and kept.pipeline is not None:
            if shape(left.pipeline) != shape(kept.pipeline):
                found["pipeline"] = None
            elif left.pipeline != kept.pipeline:
                found["stage parameters"] = None
    return list(found)


def merged_why(merged: Merged, repeated: Sequence[str] = ()) -> str:
    """Why the points of ``merged`` were merged, in a clause: ``they differ only in
    scoring.rrf_k, fts.k1, which their stages do not read``, ``... or in how the pipeline is
    written (retrieve is bm25 + dense)``; a point listed again (an axis's value listed twice,
    ``repeated``: :func:`repeated_values`) as ``1 is a point listed again (grid.rrf_k lists 60
    twice)``."""
    from aiblox.engine.algebra import shape

    again = sum(1 for left, kept in merged if left == kept)
    found = merged_settings(merged)
    settings = [s for s in found if s not in ("pipeline", "stage parameters")]
    parts = [f"{', '.join(settings)}, which their stages do not read"] if settings else []
    if "pipeline" in found:
        left, kept = next((a, b) for a, b in merged if a.pipeline is not None
                          and b.pipeline is not None and shape(a.pipeline) != shape(b.pipeline))
        assert left.pipeline is not None and kept.pipeline is not None
        parts.append(f"how the pipeline is written ({shape(left.pipeline)} is "
                     f"{shape(kept.pipeline)})")
    if "stage parameters" in found:
        parts.append("stage parameters at the values their defaults give")
    why = ["they differ only in " + ", or in ".join(parts)] if parts else []
    if again:
        why.append(f"{again:,} {'is a point' if again == 1 else 'are points'} listed again"
                   + (f" ({', '.join(repeated)})" if repeated else ""))
    return "; ".join(why)


def repeated_values(g: FusionGrid, pipelines: Sequence[Pipeline] = ()) -> list[str]:
    """Each value an axis lists more than once (its points are the first's again, scored
    once), as ``grid.rrf_k lists 60 twice``, in the spec's order; ``pipelines``: the spec's
    list of them, an axis too (``pipeline lists 'bm25' twice``)."""
    axes: list[tuple[str, list[Any]]] = [("pipeline", [p.expression() for p in pipelines])]
    axes += [(f"grid.{name}", getattr(g, name)) for name in type(g).model_fields]
    for sub in (g.chunking, g.selection):
        if sub is not None:
            where = "grid.chunking" if sub is g.chunking else "grid.selection"
            axes += [(f"{where}.{name}", getattr(sub, name)) for name in type(sub).model_fields]
            axes += [(f"{where}.{name}", raw) for name, raw in (sub.model_extra or {}).items()]
    axes += [(f"grid.stages.{stage}.{param}", values) for stage, param, values in g.stage_axes()]
    out = []
    for where, values in axes:
        if not isinstance(values, list):
            continue  # not swept, a table of axes, or steps (never twice)
        counts: dict[Any, list[Any]] = {}
        for v in values:
            counts.setdefault(axis_value_key(v), []).append(v)
        out += [f"{where} lists {same[0]!r} {_times(len(same))}" for same in counts.values()
                if len(same) > 1]
    return out


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _effective_key(pt: PipelinePoint, chunk_stages: bool) -> str:
    """:func:`pipeline_grid`'s identity of a point (its settings' key without a pipeline, or
    when its pipeline cannot be planned without the store)."""
    if pt.pipeline is None:
        return pt.key()
    from aiblox.engine.plan import run_form

    try:
        form = run_form(pt.pipeline, pt.prefs)
    except ValueError:  # a stage that cannot work here: refused when the sweep starts
        return pt.key()
    key = {"run": form, "selection": pt.selection,
           "prefs": pt.prefs.model_dump(exclude={"query_text", "query_id"})
           if chunk_stages else None}
    return sha256_hex(key)
