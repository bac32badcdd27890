"""What a sweep spec is checked for when it loads, beyond each field's own bounds (the
:class:`~aiblox.sweep.spec.SweepSpec` validator calls these): the tune and report splits
(their queries apart), depths against metric cutoffs, passage settings, the baseline's keys,
the pipelines' stage tables, the fine-tuning split and a numeric search space; and the errors
of its ``base`` and ``baseline`` sections, one per key.

Limits, checked before any point is built: depths, chunk budgets, ``top_k_chunks`` and
``per_item_chunk_cap`` are at least 1 (``overlap_tokens`` and ``rrf_k`` at least 0), and the
full grid (:meth:`SweepSpec.grid_size <aiblox.sweep.spec.SweepSpec.grid_size>`, computed from
the axes' lengths, so a ``w_text`` step of ``1e-7`` is refused in microseconds) holds at most
:data:`~aiblox.sweep.axes.DEFAULT_MAX_POINTS` points. Raise the limit with
``load_spec(path, max_points=N)`` (``aiblox sweep --max-points N``), or
``SweepSpec.model_validate(data, context={"max_points": N})``; a ``[search]`` random draw
samples the full grid, so the limit applies to the full grid.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Mapping, Sequence
from itertools import product
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from aiblox.contracts.problems import value_problem
from aiblox.contracts.retrieval import (
    LINEAR_SETTINGS,
    RRF_SETTINGS,
    ChunkingConfig,
    FtsConfig,
    RetrievalPrefs,
    ScoringConfig,
    VectorConfig,
)
from aiblox.engine.algebra import Pipeline, PipelineError
from aiblox.engine.settings import PipelinePoint
from aiblox.metrics import DepthError, canonical_metrics, check_depth
from aiblox.metrics.depth import grid_depths_note, run_depth, shallow_limit
from aiblox.stores import StoreError, mask_password, store_backend
from aiblox.sweep.axes import (
    BM25_AXES,
    CHUNK_DEPTH_KEYS,
    CHUNKING_KEYS,
    DENSE_AXES,
    DEPTH_AXES,
    SCORING_FIELDS,
    FusionGrid,
    SelectionGrid,
    policy_fields,
)
from aiblox.sweep.space import SearchSpace

__all__ = ["UNHASHED", "backend_of", "check_baseline_keys", "check_blend_axes",
           "check_chunk_depths", "check_db", "check_chunk_k", "check_depths", "check_finetune",
           "check_numeric_space", "check_passages", "check_pipeline_depths",
           "check_stage_tables", "check_swept_once", "import_stage_modules", "problems"]



def backend_of(db: str | None, default: str) -> str:
    """``postgres`` for a PostgreSQL URL, ``duckdb`` for a file path (or ``duckdb:///PATH``),
    ``default`` for None; any other ``scheme://`` is a
    :class:`~aiblox.stores.StoreError` (:func:`~aiblox.stores.store_backend`)."""
    return default if db is None else store_backend(db)


def check_db(db: str | None, backend: str, key: str) -> None:
    """The spec's ``db`` names a store (:func:`backend_of`: a ``mysql://`` URL, a misspelt
    ``postgress://`` refused as ``--db`` is) of its ``backend`` (``key``: the field to blame
    for a mismatch, ``backend`` when the spec sets it). Errors start with the field, so the
    spec's line is named, and show the URL with its password masked."""
    shown = None if db is None else mask_password(db)
    try:
        found = backend_of(db, "duckdb")
    except StoreError as exc:
        raise ValueError(f"db = {shown!r}: {exc}") from None
    if (backend == "postgres") != (found == "postgres"):
        raise ValueError(f"{key}: backend {backend!r} does not match db {shown!r}: "
                         f"postgres needs a postgresql+psycopg:// URL, duckdb a file path")


def check_baseline_keys(baseline: dict[str, Any] | None, pipeline_sweep: bool,
                        selection: SelectionGrid | None) -> None:
    """The baseline's keys: known ones, chunking and selection keys only in a pipeline sweep,
    selection keys only with ``[grid.selection]``."""
    bad = sorted(set(baseline or {}) - SCORING_FIELDS - set(CHUNKING_KEYS)
                 - set(CHUNK_DEPTH_KEYS) - {"policy", "pipeline"} - policy_fields()
                 - set(DENSE_AXES))
    if bad:
        raise ValueError(f"baseline.{bad[0]}: unknown key(s) {bad}")
    chunking = [k for k in baseline or {} if k not in {*SCORING_FIELDS, *DENSE_AXES, "pipeline"}]
    if not pipeline_sweep and chunking:
        raise ValueError(f"baseline.{chunking[0]}: chunking and selection keys need a pipeline "
                         f"sweep")
    sel_keys = [k for k in baseline or {} if k in {"policy"} | policy_fields()]
    if selection is None and sel_keys:
        raise ValueError(f"baseline.{sel_keys[0]}: selection key(s) {sorted(sel_keys)} need "
                         f"[grid.selection]")


def check_chunk_k(chunk_k: Sequence[int]) -> None:
    """``chunk_k``: one or more ``k`` of ``answer_recall@k``, each at least 1."""
    if not chunk_k:
        raise ValueError("chunk_k: needs at least one k (answer_recall@k)")
    for i, k in enumerate(chunk_k):
        if k < 1:
            raise ValueError(f"chunk_k[{i}] = {k}: out of range; valid: a whole number >= 1")


def check_chunk_depths(base: RetrievalPrefs, baseline: dict[str, Any] | None,
                       pipeline_sweep: bool) -> None:
    """A pipeline sweep returns chunks (``base.top_k_chunks`` >= 1); the baseline's chunk
    depths are whole numbers >= 1."""
    if pipeline_sweep and base.top_k_chunks < 1:
        raise ValueError(f"base.top_k_chunks = {base.top_k_chunks}: must be >= 1 in a "
                         f"pipeline sweep (no chunk is returned otherwise)")
    for key in CHUNK_DEPTH_KEYS:
        value = (baseline or {}).get(key)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"baseline.{key} = {value!r}: out of range; valid: a whole "
                             f"number >= 1")


def import_stage_modules(modules: Sequence[str], near: Path | None = None) -> None:
    """Import the modules registering a spec's own stage kinds (``stage_modules``). They are
    imported by name, as every process of a sweep (a Ray worker, ``aiblox eval verify``)
    imports them: a module must be installed or on ``PYTHONPATH``. When one is not, and its
    file lies in ``near`` (the spec's folder) or the working folder, the error says which
    ``PYTHONPATH`` finds it."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            top = module.split(".")[0]
            found = next((d for d in (near, Path.cwd()) if d is not None and (
                (d / f"{top}.py").is_file() or (d / top / "__init__.py").is_file())), None)
            hint = (f" ({top} is in {found}, which is not on Python's path: run with "
                    f"PYTHONPATH={found}, or install the module)" if found is not None else
                    " (a module of stages must be installed or on PYTHONPATH)")
            raise ValueError(f"stage_modules: cannot import {module!r}: {exc}{hint}") from None


def check_stage_tables(pipelines: Sequence[Pipeline], texts: Sequence[str],
                       stages: dict[str, dict[str, Any]], g: FusionGrid) -> None:
    """Every ``[stages]`` table is used by a pipeline (``texts``: every pipeline expression,
    the baseline's too), every stage axis (of ``g``) names a stage of a pipeline and each of its
    values is a valid parameter, read as strictly as the rest of the spec (``k1 = [0.9,
    true]``: ``grid.stages.bm25.k1[1]: got True: expected a number``)."""
    from aiblox.engine.expression import referenced_names
    from aiblox.engine.registry import get_stage_kind, param_path, param_problems

    used: set[str] = set()
    for text in texts:
        used |= referenced_names(text, stages)
    unused = sorted(set(stages) - used)
    if unused:
        raise ValueError(f"stages.{unused[0]}: no pipeline uses it (pipelines: "
                         f"{'; '.join(texts)})")
    names = {n for p in pipelines for n in p.names()}
    for stage, param, values in g.stage_axes():
        if not values:
            raise ValueError(f"grid.stages.{stage}.{param}: an axis needs at least one value")
        if stage not in names:
            raise ValueError(f"grid.stages.{stage}: no stage of that name in the pipeline "
                             f"(stages: {', '.join(sorted(names))})")
        listed = isinstance((g.stages or {})[stage][param], list)
        kinds = dict.fromkeys(s.kind for p in pipelines for s in p.stages() if s.name == stage)
        for i, value in enumerate(values):
            for kind in kinds:
                for path, got, wanted in param_problems(get_stage_kind(kind).config,
                                                        {param: value})[:1]:
                    at = param_path((param, *([i] if listed else []), *path[1:]))
                    raise ValueError(f"grid.stages.{stage}.{at}: got {got!r}: expected "
                                     f"{wanted}")
        for p in pipelines:
            if stage in p.names():
                for value in values:
                    try:
                        p.with_params({stage: {param: value}})
                    except PipelineError as exc:
                        raise ValueError(f"grid.stages.{stage}.{param} = {value!r}: "
                                         f"{exc}") from None


_GRID_DEFAULTS = {
    "bm25": {"k1": "k1", "b": "b", "method": "method", "title_weight": "title_weight",
             "title_b": "title_b", "depth": "top_k", "fts_depth": "top_k"},
    "dense": {"doc_score": "doc_score", "passage_chunker": "passage_chunker",
              "passage_tokens": "passage_tokens", "depth": "top_k", "vector_depth": "top_k"},
    "fuse": {"blend": "blend", "rrf_k": "rrf_k", "normalize": "normalize",
             "missing": "missing", "w_text": "weights"},
}
"""``[grid]`` axes that sweep a stage parameter's default (the base's ``fts``, ``vector`` and
``scoring``), by stage kind: ``{axis: parameter}``."""
_TABLE_AXES: dict[str, dict[str, tuple[str, ...]]] = {
    "fts": {axis: (key,) for axis, key in _GRID_DEFAULTS["bm25"].items()},
    "vector": {axis: (key,) for axis, key in _GRID_DEFAULTS["dense"].items()},
    "scoring": {"blend": ("blend",), "rrf_k": ("rrf_k",), "normalize": ("normalize",),
                "missing": ("missing",), "w_text": ("w_text", "w_vec")},
}
"""The same for a table parameter that defaults to the base's table of that name
(``retrieve``'s ``fts``, ``vector`` and ``scoring``, ``rm3``'s ``fts``), read over it key by
key: ``{table: {axis: keys}}``."""


def _swept_defaults(kind: str) -> dict[str, list[tuple[str, ...]]]:
    """``[grid]`` axes that sweep a default of ``kind``'s parameters: ``{axis: [path]}``,
    ``("k1",)`` for ``bm25``'s own, ``("fts", "k1")`` for a key of a table parameter that
    defaults to the base's table (:func:`~aiblox.engine.stage_bases.stage_defaults`)."""
    from aiblox.engine.registry import StageKindError
    from aiblox.engine.stage_bases import stage_defaults

    if kind in _GRID_DEFAULTS:
        return {axis: [(param,)] for axis, param in _GRID_DEFAULTS[kind].items()}
    try:
        tables = set(stage_defaults(kind, RetrievalPrefs(query_text=""))) & set(_TABLE_AXES)
    except StageKindError:
        return {}
    out: dict[str, list[tuple[str, ...]]] = {}
    for table in sorted(tables):
        for axis, keys in _TABLE_AXES[table].items():
            out.setdefault(axis, []).extend((table, key) for key in keys)
    return out


def _inline_at(params: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The inline value at ``path`` (a parameter, or a key of a table parameter), or
    ``_UNSET``."""
    value: Any = params
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return _UNSET
        value = value[part]
    return value


_UNSET = object()


def check_swept_once(pipelines: Sequence[tuple[str, str]], stages: dict[str, dict[str, Any]],
                     g: FusionGrid) -> None:
    """Refuse a stage parameter written inline in a pipeline (``bm25(k1=0.9)``) and swept: by
    ``[grid.stages.bm25] k1`` (the axis would override the expression) or by a ``[grid]`` axis
    of its default (``[grid] k1``, ``depth``, ``w_text``: the inline value would win, the points
    be labelled with values the stage never ran with, and points that differ in name only be
    scored and tested twice); a key of a table parameter too (``rm3(fts={"title_weight": 2})``
    against ``[grid] title_weight``, ``retrieve(scoring={"rrf_k": 10})`` against ``rrf_k``:
    the table is read over the base's key by key). A ``[stages.NAME]`` table's value is a named
    stage's own: the default its ``[grid.stages.NAME]`` axis sweeps, kept apart from ``[grid]``
    axes (the way to hold one ``bm25`` fixed while the axis varies the others).
    ``pipelines``: ``(field, expression)``."""
    from aiblox.engine.expression import inline_params

    swept = {(stage, param) for stage, param, _ in g.stage_axes()}
    axes = [a for a in ("blend", "rrf_k", "normalize", "missing", "w_text", *BM25_AXES,
                        "depth", *DEPTH_AXES, *DENSE_AXES) if getattr(g, a) is not None]
    for where, text in pipelines:
        for name, params in inline_params(text, stages).items():
            kind = str(stages.get(name, {}).get("kind", name))
            for param, value in params.items():
                if (name, param) in swept:
                    raise ValueError(f"grid.stages.{name}.{param}: {where} sets {name}'s "
                                     f"{param} = {value!r} inline, and the axis would "
                                     f"override it: set {param} in one place (leave it out "
                                     f"of the expression to sweep it)")
            defaults = _swept_defaults(kind)
            for axis in axes:
                for path in defaults.get(axis, []):
                    value = _inline_at(params, path)
                    if value is _UNSET:
                        continue
                    at = ".".join(path)
                    raise ValueError(f"grid.{axis}: {where} sets {name}'s {at} = {value!r} "
                                     f"inline, and the axis sweeps the default it overrides "
                                     f"(points would be labelled with values {name} never ran "
                                     f"with): set {at} in one place: leave it out of the "
                                     f"expression, or hold it in a [stages] table of a stage "
                                     f"named apart ([stages.NAME] kind = \"{kind}\", {at} = "
                                     f"{value!r})")


def check_pipeline_depths(pipelines: Sequence[tuple[str, Pipeline]],
                          stage_axes: Sequence[tuple[str, str, list[Any]]],
                          points: Sequence[RetrievalPrefs], baseline: Pipeline | None,
                          metrics: Sequence[str], stages: Mapping[str, Any] | None = None
                          ) -> None:
    """Every pipeline's run, with every combination of its stage axes and at every depth the
    grid gives its retrieval stages (``points``: the fusion points), at least as deep as the
    deepest metric cutoff; the baseline's pipeline (``baseline``, over the first point) too.
    ``aiblox eval``'s check and words (:func:`aiblox.engine.plan.check_pipeline_depth`),
    refused here naming the pipeline (``pipelines``: ``(field, pipeline)``). So is a stage
    asked for more documents than the run before it holds (``bm25 >> cutoff(k=20) >>
    dense_rescore(top_n=50)``: the stage's own check, on the depths alone); what needs the
    store or a model (feedback from more documents than the store has, a model not there) is
    left to the sweep's own check when it starts. A stage set in a ``[stages.NAME]`` table
    or swept by ``[grid.stages.NAME]`` (of ``stages``, ``stage_axes``) is named with them."""
    from aiblox.engine.plan import check_pipeline_depth
    from aiblox.sweep.points import pipeline_variants

    depths: dict[tuple[int, int, int], RetrievalPrefs] = {}
    for p in points:
        depths.setdefault((p.fts.top_k, p.vector.top_k, p.top_k_items), p)
    checks = [(where, v, prefs) for where, pipe in pipelines
              for v in pipeline_variants([pipe], stage_axes) for prefs in depths.values()]
    if baseline is not None and points:
        checks.append(("baseline.pipeline", baseline, points[0]))
    for where, pipe, prefs in checks:
        assert pipe is not None
        try:
            check_pipeline_depth(pipe, prefs, metrics, depths_only=True)
        except (DepthError, PipelineError) as exc:
            named = "" if pipe.expression() in str(exc) else f"{pipe.expression()}: "
            raise ValueError(f"{where}: {named}{exc}"
                             f"{_written_in(str(exc), stages or {}, stage_axes)}") from None


def _written_in(message: str, stages: Mapping[str, Any],
                stage_axes: Sequence[tuple[str, str, list[Any]]]) -> str:
    """Where the parameter a stage's refusal names (``stage rm3: fb_docs = 10 but ...``) is
    written: ``; rm3's fb_docs is written in [grid.stages.rm3]`` (its table, its axis), or
    ``; fb_docs is rm3's default`` when neither sets it; "" for a message naming none."""
    found = re.match(r"stage (\S+): (\w+) = ", message)
    if found is None:
        return ""
    name, param = found.groups()
    tables = [t for t, there in (
        ("stages", param in (stages.get(name) or {})),
        ("grid.stages", any(a[0] == name and a[1] == param for a in stage_axes))) if there]
    if not tables:
        return f"; {param} is {name}'s default" if name in stages or any(
            a[0] == name for a in stage_axes) else ""
    return (f"; {name}'s {param} is written in "
            + " and ".join(f"[{t}.{name}]" for t in tables))


def check_depths(base: RetrievalPrefs, g: FusionGrid, metrics: Sequence[str],
                 chunk_ks: Sequence[int], baseline: dict[str, Any] | None,
                 pipeline_sweep: bool) -> None:
    """Every point's run is at least as deep as the deepest metric cutoff
    (:mod:`aiblox.metrics.depth`): ``base.top_k_items``, and each depth the grid
    sweeps (``depth``, or ``fts_depth`` x ``vector_depth``; the base's when none), refused
    here, naming the metric and the key; in a pipeline sweep ``chunk_k`` against every
    ``top_k_chunks`` (base, grid, baseline) too."""
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
    cut_at: set[int] = set()
    for fts_depth, vec_depth in pairs:
        prefs = base.model_copy(update={
            "fts": base.fts.model_copy(update={"top_k": int(fts_depth)}),
            "vector": base.vector.model_copy(update={"top_k": int(vec_depth)})})
        cut_at.add(run_depth(prefs))
        limit = shallow_limit(prefs, metrics)
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
            check_depth(prefs, metrics, keys, fix=fix)
        except DepthError as exc:
            raise ValueError(f"{key}: {exc}") from None
    note = grid_depths_note(metrics, cut_at)  # the board compares points of other depths
    if note is not None:
        warnings.warn(note, stacklevel=2)
    if not pipeline_sweep:
        return
    chunk_k = max(chunk_ks)
    tops = [("base.top_k_chunks", base.top_k_chunks)]
    if g.chunking is not None and g.chunking.top_k_chunks is not None:
        tops = [("grid.chunking.top_k_chunks", int(v))
                for v in g.chunking.axis("top_k_chunks") or []]
    if (baseline or {}).get("top_k_chunks") is not None:
        tops.append(("baseline.top_k_chunks", baseline["top_k_chunks"]))  # type: ignore
    for key, top in tops:
        if isinstance(top, int) and 1 <= top < chunk_k:
            raise ValueError(f"{key}: answer_recall@{chunk_k} (chunk_k) reads {chunk_k} "
                             f"chunks per query, but {key.rsplit('.', 1)[-1]} = {top} "
                             f"returns at most {top}: it would be computed over {top} "
                             f"chunks under the name @{chunk_k}; return at least "
                             f"{chunk_k} chunks, or use chunk_k values of at most {top}")


_FUSION_AXES = tuple(a for a in FusionGrid.model_fields
                     if a == "blend" or a in LINEAR_SETTINGS | RRF_SETTINGS)
"""The grid's fusion axes: the blend, and the settings only a blend reads."""
_UNREAD_IN = {"bm25": (*_FUSION_AXES, "vector_depth", *DENSE_AXES),
              "dense": (*_FUSION_AXES, "fts_depth", *BM25_AXES)}
"""Per single-signal mode: the grid axes none of its points reads."""


def check_blend_axes(base: RetrievalPrefs, g: FusionGrid, pipeline: bool = False) -> None:
    """Refuse a fusion axis that no point's blend reads: ``w_text`` under an RRF base with no
    ``blend`` axis gave one RRF point and no linear one, silently (and a linear ``fuse(...)``
    written in a pipeline stayed at the base's weight); and, without a ``pipeline``, an axis
    the base's single-signal mode never reads (``blend`` or ``rrf_k`` in ``bm25`` mode, ``k1``
    in ``dense``): its points scored one run under several config hashes, each listed as a
    point of its own under one label."""
    if not pipeline and base.mode in _UNREAD_IN:
        unread = [a for a in _UNREAD_IN[base.mode] if getattr(g, a) is not None]
        if unread:
            raise ValueError(
                f"grid.{unread[0]}: the base's mode is {base.mode!r}, which reads no "
                f"{'BM25' if base.mode == 'dense' else 'dense or fusion'} setting: every value "
                f"would score the same {base.mode} run; leave the axis out, or sweep it with "
                f"[base] mode = \"hybrid\"")
    blends = g.axis("blend") or [base.scoring.blend]
    for blend, settings in (("linear", LINEAR_SETTINGS), ("rrf", RRF_SETTINGS)):
        if blend in blends:
            continue
        for axis in (a for a in type(g).model_fields if a in settings and getattr(g, a)
                     is not None):  # the grid's axes of the settings only that blend reads
            where = ("grid.blend = " + repr(list(blends)) if g.blend is not None else
                     f"the base's blend, {base.scoring.blend!r}")
            raise ValueError(
                f"grid.{axis}: only the {blend} blend reads it, and every point fuses by "
                f"{where}: add {blend!r} to a grid.blend axis or set [base] scoring = "
                f"{{ blend = {blend!r} }}, or leave the axis out (a fusion written in a "
                f"pipeline is swept by name: [grid.stages.NAME])")


def check_passages(base: RetrievalPrefs, g: FusionGrid, baseline: dict[str, Any] | None
                   ) -> None:
    """Every passage setting the spec can reach (base, grid, baseline) makes a chunker:
    an unknown chunker or a size pair it refuses fails when the spec loads."""
    from aiblox.indexes import passage_chunker_id

    combos = [dict(zip(DENSE_AXES, values, strict=True)) for values in product(
        *[g.axis(a) or [getattr(base.vector, a)] for a in DENSE_AXES])]
    combos.append({k: v for k, v in (baseline or {}).items() if k in DENSE_AXES})
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


def check_numeric_space(points: Sequence[PipelinePoint], strategy: str) -> None:
    """CMA-ES and the GP sampler are for numeric settings: the grid must vary at least one
    (categorical ones are modelled too: GP as categoricals, CMA-ES as indexes in grid order;
    :mod:`aiblox.sweep.search`), and CMA-ES at least two settings."""
    space = SearchSpace(points)
    if not space.numeric_dimensions:
        other = ", ".join(space.dimensions) or "nothing"
        raise ValueError(f"search: strategy {strategy!r} needs a numeric axis with two or "
                         f"more values, and the grid varies {other} (not numbers); use "
                         f"'tpe' for categorical settings")
    if strategy == "cmaes" and len(space.dimensions) < 2:
        raise ValueError(f"search: strategy 'cmaes' needs two or more varying settings "
                         f"(CMA-ES does not search one dimension), and the grid varies "
                         f"only {', '.join(space.dimensions)}; use 'gp' or 'tpe'")


def check_splits(tune: str, report: str | None) -> None:
    """``tune_split`` and ``report_split``: split names (a derived part written the one way
    :func:`~aiblox.data.parse_split` reads it), and no query the choice is made on can be
    reported on: ``report_split`` is neither ``tune_split`` nor a split over the same base
    whose queries can meet it, whatever the data (``test`` and ``test:0/2``, ``test:0/2`` and
    ``test:0/4``; :func:`~aiblox.data.splits_overlap`). Parts of one split that never meet
    (``test:0/2`` and ``test:1/2``) and other splits (``train`` and ``test``) pass."""
    from aiblox.data import parse_split, splits_overlap

    for key, split in (("tune_split", tune), ("report_split", report)):
        try:
            parse_split(split or "")
        except ValueError as exc:
            raise ValueError(f"{key} = {split!r}: {exc}") from None
    if report is None:
        return
    if tune == report:
        raise ValueError(f"report_split = {report!r}: must differ from tune_split: choose on "
                         f"one split, report on another")
    if splits_overlap(tune, report):
        raise ValueError(f"report_split = {report!r}: can hold queries of tune_split = "
                         f"{tune!r} (the same split's queries, in parts that meet), which "
                         f"would be reported on as held out: report on another split, or on a "
                         f"part disjoint from the tuning one (tune_split = \"test:0/2\", "
                         f"report_split = \"test:1/2\")")


def check_finetune(split: str, splits: Sequence[str], embedder: str) -> None:
    """``[finetune] split``: a split name, not one the sweep scores, nor one whose every query
    it scores (:func:`check_training_split`); the embedder a sentence-transformers model."""
    from aiblox.embedding.sentence_transformers import model_folder
    from aiblox.sweep.training import check_training_split

    check_training_split("finetune", split, splits)
    if model_folder(embedder) is None:
        raise ValueError(f"finetune: the embedder {embedder!r} is not a "
                         f"sentence-transformers model (minilm, a model folder or an "
                         f"installed model package)")


def loc(err: Mapping[str, Any]) -> str:
    """The dotted key of a validation error (``(spec)`` for the whole spec)."""
    return ".".join(str(x) for x in err["loc"]) or "(spec)"


_MODELS: dict[str, type[BaseModel]] = {m.__name__: m for m in (
    RetrievalPrefs, FtsConfig, VectorConfig, ScoringConfig, ChunkingConfig)}


def problems(prefix: str, exc: ValidationError) -> str:
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


SEARCH_OPTIONAL = ("objectives", "directions")
"""``[search]`` fields left out of the hashes while unset (a spec keeps its hash)."""

UNHASHED = ("dataset", "db", "description")
"""Spec fields no hash of the spec reads: ``dataset`` says where the data lies on this machine
(``/data/adi``, ``/data/adi/``, ``adi`` and a symlink to it name one folder), and the data is
identified by its content hash instead (tag ``aiblox.dataset_hash`` of the parent run, which
with the spec's hash finds the parent, and every point's manifest); ``db`` says where its store
lies (``aiblox sweep --db`` overrides it without a new sweep, and the store's content is in
every signals key); ``description`` is text for people."""


def hashed_form(data: dict[str, Any]) -> dict[str, Any]:
    """A spec's JSON as its hash reads it (the caller has dropped the fields added later that
    sit at their defaults): without :data:`UNHASHED` (where the data and the store lie, and
    free text); ``metrics`` in canonical order (:func:`~aiblox.metrics.canonical_metrics`:
    the order they are listed in decides only how they are shown); ``device`` by its class
    and only off the CPU (``aiblox sweep`` resolves ``auto`` before it hashes: a sweep on a
    GPU is another parent run than the same spec on the CPU); unset ``[search]`` options and
    grid axes added later left out."""
    from aiblox.embedding.device import device_class

    for name in UNHASHED:
        data.pop(name, None)
    data["metrics"] = canonical_metrics(data["metrics"])
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
    return data
