"""A pipeline applied to a split's topics, stage by stage, each stage memoised by its key.

:func:`apply_pipeline` walks a checked :class:`~aiblox.engine.algebra.Pipeline` and gives the
:class:`Value` at its end: its key, the records of every stage that led to it, and its output
(read on demand). What it asks of the caller is a :class:`PlanContext`: the split's topics, the
first stage of a :class:`RetrievalPrefs` (the signals and fusion stages every sweep already
has), a memoised stage runner and the fingerprints that stage keys include.

Retrieval on the topics is planned as that first stage, so ``bm25``, ``dense``,
``bm25 + dense`` (RRF or a linear blend) and ``(bm25 + dense) % 100`` have the same stage keys
as the equivalent :class:`RetrievalPrefs`, and a spec without a pipeline (``retrieve``) keeps
its keys. Every other stage is a generic stage: its key is the sha256 of its kind, version,
config (with what it ``reads``: the store's digests, the embedder) and its input's key; its
output is computed by its kind's function (:func:`~aiblox.engine.registry.register_stage`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from aiblox.contracts.filter_rule import FILTER_RULE_VERSION
from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs, VectorConfig
from aiblox.engine.algebra import Cutoff, Fuse, Pipeline, PipelineError, Stage, Then
from aiblox.engine.builtin import FuseConfig, RetrieveConfig
from aiblox.engine.data import Queries, Run
from aiblox.engine.registry import DataKind, StageFacts, StageKind, get_stage_kind
from aiblox.engine.stage_bases import stage_defaults, step_bases
from aiblox.indexes import filtered_search_key
from aiblox.metrics import DepthError, check_depth
from aiblox.metrics.depth import deepest_cutoff, shallow_metrics

__all__ = ["PlanContext", "StageInputs", "Value", "apply_pipeline", "check_pipeline",
           "check_pipeline_depth", "first_stage_prefs", "fuse_config", "pipeline_depths",
           "run_form", "takes_base_weights"]


@dataclass
class Value:
    """What a pipeline step gives: queries or a run, with its key and the stage records that
    led to it. :meth:`get` reads (or computes) the output once."""

    kind: DataKind
    key: str
    records: tuple[Any, ...]
    load: Callable[[], Any]
    prefs: RetrievalPrefs | None = None
    """For a run of the first stage: its prefs (the sweep's fast paths read it)."""
    topics: bool = False
    """True for the split's topics themselves."""
    queries: Value | None = None
    """For a run: the queries it answers (the topics, or a feedback stage's queries)."""
    filters: dict[str, Any] | None = None
    """The metadata filters of the first stage it comes from (a ``bm25`` or ``dense`` after
    feedback searches under them too); None: of no first stage (the base's apply)."""
    mixed_filters: bool = False
    """True when it comes from runs fused under different filters (none to choose)."""
    _out: Any = field(default=None, repr=False)

    def get(self) -> Any:
        """The output (:class:`Queries` or :class:`Run`), read once."""
        if self._out is None:
            self._out = self.load()
        return self._out


@dataclass(frozen=True)
class StageInputs:
    """What a stage's function receives: the split's topics, and for a stage that takes a run,
    the run (and the queries it answers: after feedback, the expanded ones)."""

    topics: Queries
    queries: Queries
    run: Run | None = None
    runs: tuple[Run, ...] = ()
    """A fusion's runs, in order."""


class PlanContext(Protocol):
    """What the engine needs from the sweep (or one-point evaluation) it plans for."""

    def topics(self, split: str) -> Value:
        """The split's topics (a :class:`Queries` value keyed by dataset, split and limit)."""

    def first_stage(self, prefs: RetrievalPrefs, split: str) -> Value:
        """The run of ``prefs``' first stage (signals, fusion) on the split's topics."""

    def run_stage(self, name: str, version: str, config: Any, inputs: Sequence[str],
                  compute: Callable[[], Any]) -> tuple[Any, Any]:
        """A memoised ``arrays`` stage: ``(record, output arrays)``."""

    def fingerprints(self, reads: frozenset[str]) -> dict[str, Any]:
        """What the stage reads besides its inputs, for its key (store digests, embedder)."""

    def stage_context(self) -> Any:
        """The context a stage function receives (workspace, embedder, progress)."""


def first_stage_prefs(p: Pipeline, base: RetrievalPrefs) -> RetrievalPrefs | None:
    """The :class:`RetrievalPrefs` whose first stage is ``p`` on the topics (``retrieve``,
    ``bm25``, ``dense``, ``bm25 + dense`` with the fusion's parameters, each optionally cut
    with ``%``), or None when ``p`` is not a first stage."""
    if isinstance(p, Cutoff):
        inner = first_stage_prefs(p.inner, base)
        if inner is None:
            return None
        return inner.model_copy(update={"top_k_items": min(p.k, inner.top_k_items)})
    if isinstance(p, Stage):
        if p.kind == "retrieve":
            cfg = p.config(stage_defaults("retrieve", base))
            return base.model_copy(update=dict(cfg))
        if p.kind == "bm25":
            fts = cast(FtsConfig, p.config(stage_defaults("bm25", base)))
            return base.model_copy(update={"mode": "bm25", "fts": fts, "top_k_items": fts.top_k})
        if p.kind == "dense":
            vec = cast(VectorConfig, p.config(stage_defaults("dense", base)))
            return base.model_copy(update={"mode": "dense", "vector": vec,
                                           "top_k_items": vec.top_k})
        return None
    if isinstance(p, Fuse) and len(p.members) == 2:
        kinds = [m.kind if isinstance(m, Stage) else None for m in p.members]
        if sorted(k or "" for k in kinds) != ["bm25", "dense"]:
            return None
        text, dense = p.members[kinds.index("bm25")], p.members[kinds.index("dense")]
        assert isinstance(text, Stage) and isinstance(dense, Stage)
        fts_cfg = text.config(stage_defaults("bm25", base))
        vcfg = dense.config(stage_defaults("dense", base))
        fuse = p.stage.param_dict()
        scoring = base.scoring.model_dump()
        for f in ("blend", "rrf_k", "normalize", "missing"):
            if f in fuse:
                scoring[f] = fuse[f]
        if fuse.get("weights") is not None:  # one per input: checked when p was built
            w = list(fuse["weights"])
            wt, wv = (w[0], w[1]) if kinds[0] == "bm25" else (w[1], w[0])
            keys = ("w_text", "w_vec") if scoring["blend"] == "linear" else ("rrf_w_text",
                                                                             "rrf_w_vec")
            scoring[keys[0]], scoring[keys[1]] = wt, wv
        top = fuse.get("top_k") or base.top_k_items
        return base.model_copy(update={"mode": "hybrid", "fts": fts_cfg, "vector": vcfg,
                                       "scoring": type(base.scoring)(**scoring),
                                       "top_k_items": top})
    return None


def check_pipeline(p: Pipeline, base: RetrievalPrefs, n_docs: int | None = None,
                   context: Any = None) -> int:
    """Refuse, before anything is computed, a pipeline whose stages cannot work here: each
    kind's ``check`` (:attr:`~aiblox.engine.registry.StageKind.check`) sees the depth of the
    run it receives and the store's size. Returns the depth of the pipeline's run (the most
    documents per query it can hold). ``PipelineError`` naming the stage."""
    return pipeline_depths(p, base, n_docs, context)[0]


def pipeline_depths(p: Pipeline, base: RetrievalPrefs, n_docs: int | None = None,
                    context: Any = None, depths_only: bool = False) -> tuple[int, int]:
    """:func:`check_pipeline`, returning the most documents per query the pipeline's run can
    hold and the fewest it holds for sure where the store has them: a fusion holds at most the
    sum of its runs' depths and at least the deepest one's (the rule for a hybrid first stage,
    :mod:`aiblox.metrics.depth`); a cut-off or a stage's ``top_k`` bounds both.
    ``depths_only`` (a sweep spec when it loads, before the store is open or a model trained):
    a kind's check that fails without the depth of its input too (a model not there yet) is
    left to the run; one that fails for the depth (``bm25 >> cutoff(k=20) >>
    dense_rescore(top_n=50)``) is refused."""
    p.check()
    return _depth(p, None, base, n_docs, context, depths_only) or (0, 0)


_PIPELINE_NAMES = {"top_k_items": "its depth (a % cut-off, or its last stage's top_k)",
                   "fts.top_k": "bm25's top_k", "vector.top_k": "dense's top_k",
                   "vector.ef_search": "dense's ef_search"}
"""A pipeline's first stage's settings, in the pipeline's words (not RetrievalPrefs' fields)."""
_PIPELINE_FIX = "make the pipeline {cut} deep or more, or use cutoffs of at most {depth}"


def check_pipeline_depth(p: Pipeline, base: RetrievalPrefs, metrics: Sequence[str],
                         n_docs: int | None = None, context: Any = None,
                         depths_only: bool = False) -> None:
    """Refuse, before anything is computed, a pipeline whose run is shallower than a cutoff of
    ``metrics`` (``bm25 % 5`` scored by ndcg@10 would be computed over 5 documents under the
    name @10): :class:`~aiblox.metrics.DepthError` naming the metrics and the depth, in the
    pipeline's words (``aiblox eval``, ``evaluate_retrieval`` and a sweep spec when it loads).
    A pipeline that is a first stage (``bm25 % 5``, ``(bm25 + dense) % 5``) by its prefs'
    depths; any other by :func:`pipeline_depths` (its stages' checks run too: ``n_docs`` and
    ``context`` are the store's, where known; ``depths_only``: :func:`pipeline_depths`')."""
    first = first_stage_prefs(p.check(), base)
    if first is not None:
        check_depth(first, metrics, _PIPELINE_NAMES, fix=_PIPELINE_FIX)
        return
    most, least = pipeline_depths(p, base, n_docs, context, depths_only)
    shallow = shallow_metrics(metrics, least)
    if shallow:
        fused = f" (at most {most}: a fusion is as deep as its deepest run)" if most > least \
            else ""
        read = "reads" if len(shallow) == 1 else "read"
        raise DepthError(f"{', '.join(shallow)} {read} {deepest_cutoff(shallow)} documents per "
                         f"query, but the pipeline {p.expression()} gives {least}{fused}: "
                         f"deepen its retrieval stages (top_k) or cut-offs, or use cutoffs of "
                         f"at most {least}")


_Depth = tuple[int, int]
"""(most, least) documents per query of a run."""


def _depth(p: Pipeline, depth: _Depth | None, base: RetrievalPrefs, n_docs: int | None,
           context: Any, depths_only: bool = False) -> _Depth | None:
    if depth is None and not isinstance(p, Then):  # on the topics
        prefs = first_stage_prefs(p, base)
        if prefs is not None:
            return _first_stage_depths(prefs)
    if isinstance(p, Then):
        for step, step_base in zip(p.steps, step_bases(p, base), strict=True):
            depth = _depth(step, depth, step_base, n_docs, context, depths_only)
        return depth
    if isinstance(p, Cutoff):
        inner = _depth(p.inner, depth, base, n_docs, context, depths_only)
        return (p.k, p.k) if inner is None else (min(inner[0], p.k), min(inner[1], p.k))
    if isinstance(p, Fuse):
        depths = [d for d in (_depth(m, depth, base, n_docs, context, depths_only)
                              for m in p.members) if d is not None]
        most = sum(d[0] for d in depths)
        least = max((d[1] for d in depths), default=0)
        fcfg = fuse_config(p, base)
        return (min(most, fcfg.top_k), min(least, fcfg.top_k)) if fcfg.top_k else (most, least)
    assert isinstance(p, Stage)
    kind = p.spec
    cfg = p.config(stage_defaults(p.kind, base))
    if p.kind == "identity":
        return depth
    if p.kind in ("bm25", "dense"):
        top = int(cast(FtsConfig | VectorConfig, cfg).top_k)
        return top, top
    out = depth if kind.gives == "run" else None
    if kind.check is not None:
        try:
            given = kind.check(cfg, StageFacts(None if depth is None else depth[0], n_docs,
                                               context))
        except ValueError as exc:
            if depths_only and _fails(kind, cfg, StageFacts(None, n_docs, context)):
                return out  # not for the depth (a model not there yet): left to the run
            raise PipelineError(f"stage {p.name}: {exc}") from None
        if given is not None and kind.gives == "run":
            out = (int(given), min(int(given), depth[1]) if depth is not None else int(given))
    return out


def _fails(kind: StageKind, cfg: Any, facts: StageFacts) -> bool:
    """Whether ``kind``'s check refuses ``cfg`` given ``facts``."""
    assert kind.check is not None
    try:
        kind.check(cfg, facts)
    except ValueError:
        return True
    return False


def _first_stage_depths(prefs: RetrievalPrefs) -> _Depth:
    """The most and the fewest documents per query the first stage of ``prefs`` gives (the
    fewest where the store has them): its list's depth; for a hybrid one, at most both lists'
    and at least the deeper one's."""
    f, v = prefs.fts.top_k, prefs.vector.top_k
    if prefs.mode != "hybrid":
        one = min(prefs.top_k_items, f if prefs.mode == "bm25" else v)
        return one, one
    return min(prefs.top_k_items, f + v), min(prefs.top_k_items, max(f, v))


def apply_pipeline(p: Pipeline, base: RetrievalPrefs, ctx: PlanContext, split: str) -> Value:
    """The run ``p`` gives on ``split``'s topics (``p`` checked: it takes the topics and gives
    a run)."""
    p.check()
    return _apply(p, ctx.topics(split), base, ctx, split)


def _apply(p: Pipeline, v: Value, base: RetrievalPrefs, ctx: PlanContext, split: str) -> Value:
    if v.topics:
        prefs = first_stage_prefs(p, base)
        if prefs is not None:
            first = ctx.first_stage(prefs, split)
            first.filters = dict(prefs.filters)
            return first
    if isinstance(p, Then):
        for step, step_base in zip(p.steps, step_bases(p, base), strict=True):
            v = _apply(step, v, step_base, ctx, split)
        return v
    if isinstance(p, Cutoff):
        inner = _apply(p.inner, v, base, ctx, split)
        out = _generic(ctx, "cutoff", "1", {"k": p.k}, [inner], "run",
                       lambda: inner.get().cut(p.k).to_arrays())
        out.queries, out.filters, out.mixed_filters = (inner.queries, inner.filters,
                                                       inner.mixed_filters)
        return out
    if isinstance(p, Fuse):
        members = [_apply(m, v, base, ctx, split) for m in p.members]
        fcfg = fuse_config(p, base)
        out = _generic(ctx, "fuse", get_stage_kind("fuse").version,  # what its blend reads
                       {"params": fcfg.canonical().model_dump(mode="json")}, members, "run",
                       lambda: fuse_runs([m.get() for m in members], fcfg).to_arrays())
        out.queries = v if v.kind == "queries" else v.queries
        kept = [m.filters for m in members]
        out.mixed_filters = any(m.mixed_filters for m in members) or \
            any(f != kept[0] for f in kept)
        out.filters = None if out.mixed_filters else kept[0]
        return out
    assert isinstance(p, Stage)
    kind = p.spec
    cfg = p.config(stage_defaults(p.kind, base))
    if p.kind == "identity":
        return v
    if p.kind in ("bm25", "dense"):
        from aiblox.engine.retrieval import retrieve

        filters = _feedback_filters(p, v, base)
        key_cfg = _config(ctx, cfg, kind.reads)
        if base.ignore_identical_ids:  # in the key only when set: no other key moves
            key_cfg["ignore_identical_ids"] = "refilled"
        if filters:  # with the version of what a filter matches
            key_cfg["filters"], key_cfg["filter_rule"] = filters, FILTER_RULE_VERSION
        searched = (filtered_search_key(cfg, bool(filters)) if isinstance(cfg, VectorConfig)
                    else None)
        if searched is not None:  # a filtered search that may walk HNSW: its version
            key_cfg["filtered_knn"] = searched
        out = _generic(ctx, p.kind, kind.version, key_cfg, [v], "run",
                       lambda: retrieve(p.kind, cast(FtsConfig | VectorConfig, cfg), v.get(),
                                        ctx.stage_context(), base.ignore_identical_ids,
                                        filters).to_arrays())
        out.queries, out.filters = v, filters
        return out
    if kind.compute is None:
        raise PipelineError(f"{p.name} ({p.kind}) reads the topics themselves; after feedback "
                            f"use bm25 or dense")
    fn = kind.compute
    topics = ctx.topics(split)

    def compute() -> dict[str, Any]:
        if v.kind == "run":
            inputs = StageInputs(topics.get(), (v.queries or topics).get(), v.get())
        else:
            inputs = StageInputs(topics.get(), v.get())
        out = fn(cfg, inputs, ctx.stage_context())
        if not isinstance(out, Queries | Run):
            raise TypeError(f"stage {p.kind} returned {type(out).__name__}, not Queries or "
                            f"Run")
        if (out.__class__ is Run) != (kind.gives == "run"):
            raise TypeError(f"stage {p.kind} gives {kind.gives} but returned "
                            f"{type(out).__name__}")
        arrays = _answering(p.kind, out, inputs.run or inputs.queries).to_arrays()
        if "scores" in arrays and not np.isfinite(arrays["scores"]).all():
            at = int(np.flatnonzero(~np.isfinite(arrays["scores"]))[0])
            qi = int(np.searchsorted(np.cumsum(arrays["counts"]), at, side="right"))
            raise PipelineError(f"stage {p.kind}: query {str(arrays['qids'][qi])!r}, document "
                                f"{str(arrays['docs'][at])!r}: score "
                                f"{float(arrays['scores'][at])!r} is not a finite number")
        return arrays

    val = _generic(ctx, p.kind, kind.version, _config(ctx, cfg, kind.reads), [v], kind.gives,
                   compute)
    if kind.gives == "run":
        val.queries = v if v.kind == "queries" else v.queries
    val.filters, val.mixed_filters = v.filters, v.mixed_filters
    return val


def _answering(kind: str, out: Queries | Run, given: Queries | Run) -> Queries | Run:
    """A stage's output over the queries it was given, in their order: a run that leaves out
    a query it found nothing for keeps it, with no document (fused, it was dropped from every
    member after it: ``(bm25 >> mine) + dense`` scored it 0, ``dense + (bm25 >> mine)`` did
    not); queries it was not given, or feedback that loses one, are a :class:`PipelineError`."""
    if out.qids == given.qids:
        return out
    extra = sorted(set(out.qids) - set(given.qids))
    if extra:
        shown = ", ".join(map(repr, extra[:3])) + (", ..." if len(extra) > 3 else "")
        raise PipelineError(f"stage {kind} returned {len(extra)} "
                            f"quer{'y' if len(extra) == 1 else 'ies'} it was not given ({shown})")
    if len(set(out.qids)) != len(out.qids):
        raise PipelineError(f"stage {kind} returned a query twice")
    if isinstance(out, Queries):
        raise PipelineError(f"stage {kind} returned queries for {len(set(out.qids))} of the "
                            f"{len(given.qids)} it was given: feedback gives every query back")
    return Run.from_dict(out.as_dict(), given.qids)


def _feedback_filters(p: Stage, v: Value, base: RetrievalPrefs) -> dict[str, Any]:
    """The filters a ``bm25`` or ``dense`` stage after feedback searches under: those of the
    first stage the feedback read (the base's where no first stage is known). Fused runs
    filtered differently give none to choose: a :class:`PipelineError`."""
    if not v.mixed_filters:
        return dict(base.filters) if v.filters is None else v.filters
    raise PipelineError(f"stage {p.name}: the runs fused before the feedback it reads were "
                        f"filtered differently; fuse runs of one filter before feedback")


_TOPICS = ("topics",)


def run_form(p: Pipeline, base: RetrievalPrefs) -> Any:
    """What decides the run ``p`` gives on a split's topics, as :func:`apply_pipeline` keys
    it, in plain form and without reading anything: the first stage's signals and fusion
    configs, then each stage's kind, version and config (a model by its path, not its files'
    hash) over its inputs' forms. Two pipelines of one form give one run (a sweep scores one
    of them: ``bm25 + dense``, ``retrieve`` and ``(bm25 + dense) % 100`` over the same base;
    ``dense`` under two BM25 settings). Only what is read counts: a first stage of one signal
    (``bm25``, ``dense``) without the base's scoring (its one list is cut, never fused), a
    fusion with the settings its blend ignores at their defaults (RRF ``normalize`` and
    ``missing``, the linear blend ``rrf_k``), so ``bm25`` under two ``rrf_k`` values is one
    run. Stage keys are not made from this form: a fusion's key too holds the settings its
    blend does not read at their defaults (:meth:`~aiblox.engine.builtin.FuseConfig.
    canonical`, as the first stage's fusion's does), but other keys may hold a setting their
    run does not depend on."""
    return _form(p.check(), _TOPICS, base)


def _form(p: Pipeline, inp: Any, base: RetrievalPrefs) -> Any:
    from aiblox.engine.configs import fusion_config, signals_config

    if inp is _TOPICS:
        prefs = first_stage_prefs(p, base)
        if prefs is not None:
            fusion = fusion_config(prefs)
            if prefs.mode != "hybrid":  # one list cut to top_k_items: no scoring read
                fusion["scoring"] = None
            return ("first", signals_config(prefs, "", "", "", "embedder"), fusion)
    if isinstance(p, Then):
        for step, step_base in zip(p.steps, step_bases(p, base), strict=True):
            inp = _form(step, inp, step_base)
        return inp
    if isinstance(p, Cutoff):
        return ("cutoff", p.k, _form(p.inner, inp, base))
    if isinstance(p, Fuse):  # what fuse_runs does not read under the blend at its defaults
        cfg = fuse_config(p, base).canonical().model_dump()
        return ("fuse", cfg, [_form(m, inp, base) for m in p.members])
    assert isinstance(p, Stage)
    if p.kind == "identity":
        return inp
    return (p.kind, p.spec.version, p.config(stage_defaults(p.kind, base)).model_dump(), inp)


def _config(ctx: PlanContext, cfg: BaseModel, reads: frozenset[str]) -> dict[str, Any]:
    try:
        params = cfg.model_dump(mode="json")
    except PydanticSerializationError as exc:  # a key form's own error (a model not there)
        raise ValueError(_WRAPPED.sub("", str(exc))) from None
    out: dict[str, Any] = {"params": params}
    if reads:
        out["reads"] = ctx.fingerprints(reads)
    return out


_WRAPPED = re.compile(r"^Error calling function `[^`]*`: \w+: ")
"""The words pydantic puts before the error a serializer raised."""


def _fuse_defaults(base: RetrievalPrefs) -> dict[str, Any]:
    s = base.scoring
    return {"blend": s.blend, "rrf_k": s.rrf_k, "normalize": s.normalize, "missing": s.missing,
            "top_k": base.top_k_items}


def takes_base_weights(p: Fuse, base: RetrievalPrefs) -> bool:
    """True when a fusion without ``weights`` of its own takes the base's weights
    (:func:`fuse_config`): it fuses two runs, one lexical and one dense by their first stage."""
    if len(p.members) != 2:
        return False
    return sorted(str(_signal(m, base)) for m in p.members) == ["text", "vector"]


def fuse_config(p: Fuse, base: RetrievalPrefs) -> FuseConfig:
    """The config a fusion runs with: its own parameters over the base's ``scoring`` and
    ``top_k_items``. Without ``weights``, a fusion of two runs, one lexical and one dense by
    their first stage (``bm25``, ``dense``, a ``retrieve`` of one mode: ``(bm25 % 100) +
    (dense % 100)``, ``(bm25 >> rm3 >> bm25) + dense``), takes the base's weights of the two
    signals in member order: ``w_text``/``w_vec`` in a linear blend, ``rrf_w_text``/
    ``rrf_w_vec`` under RRF, as ``bm25 + dense`` (the first stage of the base's prefs) does;
    any other fusion without weights weighs its runs equally."""
    cfg = cast(FuseConfig, p.stage.config(_fuse_defaults(base)))
    if cfg.weights is not None or not takes_base_weights(p, base):
        return cfg
    signals = [_signal(m, base) for m in p.members]
    s = base.scoring
    pair = (s.w_text, s.w_vec) if cfg.blend == "linear" else (s.rrf_w_text, s.rrf_w_vec)
    weights = pair if signals[0] == "text" else pair[::-1]
    if weights == ((0.5, 0.5) if cfg.blend == "linear" else (1.0, 1.0)):
        return cfg  # what no weights means: the same stage, the same key
    return cfg.model_copy(update={"weights": tuple(float(w) for w in weights)})


def _signal(p: Pipeline, base: RetrievalPrefs) -> str | None:
    """``text`` or ``vector``: the signal ``p``'s first stage retrieves by (``bm25``,
    ``dense``, a ``retrieve`` of one mode), None for any other (a fusion, a hybrid
    ``retrieve``, a stage that takes a run)."""
    if isinstance(p, Then):
        return _signal(p.steps[0], base)
    if isinstance(p, Cutoff):
        return _signal(p.inner, base)
    if not isinstance(p, Stage):
        return None
    mode = p.kind
    if p.kind == "retrieve":
        mode = cast(RetrieveConfig, p.config(stage_defaults("retrieve", base))).mode
    return {"bm25": "text", "dense": "vector"}.get(mode)


def _generic(ctx: PlanContext, name: str, version: str, config: dict[str, Any],
             inputs: list[Value], gives: DataKind, compute: Callable[[], Any]) -> Value:
    rec, out = ctx.run_stage(name, version, config, [i.key for i in inputs], compute)
    records = tuple(r for i in inputs for r in i.records) + (rec,)
    cls = Run if gives == "run" else Queries
    first = out

    def load() -> Any:
        nonlocal first
        if first is not None:
            data, first = first, None
            return cls.from_arrays(data)
        return cls.from_arrays(ctx.run_stage(name, version, config, [i.key for i in inputs],
                                             compute)[1])

    return Value(gives, rec.key, _unique(records), load)


def _unique(records: tuple[Any, ...]) -> tuple[Any, ...]:
    seen: set[str] = set()
    out = []
    for r in records:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return tuple(out)


def fuse_runs(runs: Sequence[Run], cfg: FuseConfig) -> Run:
    """Rank fusion of ``runs`` (the same queries) under ``cfg``: RRF or a normalised linear
    blend (:mod:`aiblox.fusion`), best first with ties by document id, cut to ``top_k``."""
    from aiblox.fusion.linear import linear
    from aiblox.fusion.rrf import rrf

    n = len(runs)
    weights = list(cfg.weights) if cfg.weights is not None else None
    if weights is not None and len(weights) != n:
        raise PipelineError(f"fuse: weights needs one weight per fused run ({n}), got {weights}")
    dicts = [r.as_dict() for r in runs]
    qids = runs[0].qids
    lists = []
    for q in qids:
        members = [d.get(q, []) for d in dicts]
        if cfg.blend == "rrf":
            fused = rrf(members, k=cfg.rrf_k, weights=weights or [1.0] * n)
        else:
            fused = linear(members, weights=weights or [1.0 / n] * n, normalize=cfg.normalize,
                           missing=cfg.missing)
        lists.append(fused[:cfg.top_k] if cfg.top_k else fused)
    return Run.from_lists(qids, lists)
