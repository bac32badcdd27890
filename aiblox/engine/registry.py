"""Stage kinds by name: what a stage takes and gives, its typed config, its version and the
function that computes it.

A *stage kind* is registered once (:func:`register_stage`) and then used by name in a pipeline
expression (``"bm25 >> rm3 >> bm25"``), in Python (``Stage("rm3", fb_terms=20)``) and as sweep
axes (``"rm3.fb_terms" = [10, 20]``). Built-in kinds go through the same registry as a
researcher's own: their modules are imported on first lookup (:data:`BUILTIN_MODULES`), so
naming a kind costs nothing until it is used.

A kind's types are one of two shapes of data, as in PyTerrier:

- ``"queries"``: the topics (a query id and its text; after feedback also weighted terms or a
  vector);
- ``"run"``: a ranked list of documents per query (with the queries it answers).

so a retrieval stage takes queries and gives a run, a feedback stage (RM3, Rocchio) takes a run
and gives queries, a reranker takes a run and gives a run. A stage is refused where its input
does not fit (:mod:`aiblox.engine.algebra`).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = [
    "BUILTIN_MODULES",
    "DataKind",
    "READS",
    "StageKind",
    "StageFacts",
    "StageKindError",
    "get_stage_kind",
    "param_path",
    "param_problems",
    "register_stage",
    "stage_kinds",
]

DataKind = Literal["queries", "run"]
"""What flows between stages: topics, or a ranked run (with the topics it answers)."""

READS = frozenset({"items", "vectors", "embedder"})
"""What a stage may read besides its inputs; the engine adds the matching fingerprint (the
store's item digest, the embedder's vectors digest, the embedder's model id) to the stage's
key, so a changed corpus or model recomputes it."""

BUILTIN_MODULES: dict[str, str] = {
    # first-stage retrieval and its operators (planned by the engine, see aiblox.engine.plan)
    "retrieve": "aiblox.engine.builtin",
    "bm25": "aiblox.engine.builtin",
    "dense": "aiblox.engine.builtin",
    "fuse": "aiblox.engine.builtin",
    "identity": "aiblox.engine.builtin",
    # pseudo-relevance feedback on the BM25 index's statistics (takes a run, gives queries)
    "rm3": "aiblox.engine.stages.rm3",
    "bo1": "aiblox.engine.stages.bo1",
    # dense feedback and the dense model as a rescorer
    "rocchio": "aiblox.engine.stages.rocchio",
    "dense_rescore": "aiblox.engine.stages.dense_rescore",
    # rerankers and cut-offs as stages
    "cross_encoder": "aiblox.engine.stages.cross_encoder",
    "cutoff": "aiblox.engine.stages.cutoff",
}
"""Built-in stage kind -> the module that registers it (imported on first lookup). A kind
registered by other code is found without an entry here."""


class StageKindError(ValueError):
    """An unknown stage kind, or a registration that contradicts itself."""


@dataclass(frozen=True)
class StageKind:
    """A registered stage kind."""

    name: str
    """The name pipelines use (``bm25``, ``rm3``, ``cross_encoder``)."""
    version: str
    """Bumped whenever the kind's output changes for the same config and inputs (its keys, and
    every key downstream, change with it)."""
    takes: DataKind
    """What it reads: ``queries`` or a ``run`` (a run stage also receives its queries)."""
    gives: DataKind
    """What it returns."""
    config: type[BaseModel]
    """Its typed config (unknown keys rejected); every field is a sweepable parameter."""
    compute: Callable[..., Any] | None = None
    """``compute(config, inputs, context) -> output``; None for the kinds the engine plans
    itself (retrieval on the topics, fusion, cut-offs)."""
    reads: frozenset[str] = field(default_factory=frozenset)
    """What it reads besides its inputs (:data:`READS`)."""
    doc: str = ""
    """One line for ``aiblox stages`` and error messages."""
    check: Callable[[Any, StageFacts], int | None] | None = None
    """``check(config, facts)``, run for every point before any stage computes: raises
    ``ValueError`` (one line, naming the stage and the parameter) for a setting that cannot
    work here (a reranker asked for more documents than its input run holds, feedback from
    more documents than the store has); may return the depth of the run it gives."""
    carries: Literal["terms", "vector"] | None = None
    """A kind that gives queries: what it adds to them (RM3's weighted terms, Rocchio's
    vectors), read only by a retrieval stage whose :attr:`reads_queries` names it."""
    reads_queries: frozenset[str] = frozenset({"terms", "vector"})
    """A kind that takes queries: what it reads of them besides their text (``bm25`` reads
    weighted terms, ``dense`` vectors); a pipeline feeding it queries whose feedback it would
    ignore is refused (:class:`~aiblox.engine.algebra.Then`)."""

    def make_config(self, params: dict[str, Any], own: Mapping[str, Any] | None = None
                    ) -> BaseModel:
        """The config from ``params`` (validated: unknown keys and bad values refused).
        ``own``: the parameters the stage sets itself, ``params`` less the defaults under them
        (a spec's base), given to the config's validators as the validation context
        ``{"own": own}`` (feedback refuses an ``fts`` key it does not read only where the
        stage sets it, not where the base's ``fts`` brings it)."""
        if own is None:
            return self.config(**params)
        return self.config.model_validate(params, context={"own": own})


@dataclass(frozen=True)
class StageFacts:
    """What is known of a stage's input before anything is computed (for a kind's ``check``)."""

    depth: int | None
    """The most documents per query of the run it receives (None: it receives queries)."""
    n_docs: int | None
    """Documents in the store (None when not known)."""
    context: Any = None
    """The stage context (:class:`~aiblox.engine.retrieval.StageContext`), for checks that
    read the store or the index (e.g. its vocabulary)."""


_REGISTRY: dict[str, StageKind] = {}


def register_stage(name: str, *, version: str, takes: DataKind, gives: DataKind,
                   config: type[BaseModel], reads: Iterable[str] = (), doc: str = "",
                   check: Callable[[Any, StageFacts], int | None] | None = None,
                   carries: Literal["terms", "vector"] | None = None
                   ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as stage kind ``name``::

        @register_stage("title_boost", version="1", takes="run", gives="run",
                        config=TitleBoost, reads=["items"])
        def title_boost(cfg: TitleBoost, inputs: StageInputs, ctx: StageContext) -> Run: ...

    ``check(config, facts)`` (:class:`StageFacts`) runs for every point before any stage
    computes, to refuse a setting that cannot work (see :attr:`StageKind.check`); ``carries``:
    what a feedback kind adds to the queries it gives (:attr:`StageKind.carries`). Registering
    a name again replaces it (a notebook re-running its cell)."""
    reads = frozenset(reads)
    if reads - READS:
        raise StageKindError(f"stage {name!r}: reads {sorted(reads - READS)} unknown; "
                             f"known: {sorted(READS)}")
    if takes not in ("queries", "run") or gives not in ("queries", "run"):
        raise StageKindError(f"stage {name!r}: takes and gives are 'queries' or 'run', got "
                             f"{takes!r} -> {gives!r}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        _REGISTRY[name] = StageKind(name, str(version), takes, gives, config, fn, reads,
                                    doc or (fn.__doc__ or "").strip().split("\n")[0], check,
                                    carries if gives == "queries" else None)
        return fn

    return wrap


def add_kind(kind: StageKind) -> StageKind:
    """Register a kind directly (the engine's own planned kinds)."""
    _REGISTRY[kind.name] = kind
    return kind


def get_stage_kind(name: str) -> StageKind:
    """The kind registered as ``name`` (a built-in's module imported on first use);
    :class:`StageKindError` naming the known kinds otherwise."""
    kind = _REGISTRY.get(name)
    if kind is None and name in BUILTIN_MODULES:
        importlib.import_module(BUILTIN_MODULES[name])
        kind = _REGISTRY.get(name)
    if kind is None:
        raise StageKindError(f"unknown stage {name!r}; known: {', '.join(stage_kinds())}")
    return kind


def stage_kinds() -> list[str]:
    """Every known kind's name, sorted (built-ins included, not imported)."""
    return sorted(set(_REGISTRY) | set(BUILTIN_MODULES))


Problem = tuple[tuple[str | int, ...], Any, str]
"""``(path, value, what the field takes)``: ``(("weights", 1), True, "a number")``."""


def param_problems(config: type[BaseModel], params: Mapping[str, Any]) -> list[Problem]:
    """The values of ``params`` that pydantic would coerce into a number or a flag of
    ``config`` (read leniently, ``fb_docs = true`` is 1 and ``"10"`` is 10): a flag or a
    string where a number is expected, a number with a fraction part (``10.0``, ``10.5``)
    where a whole number is, anything but ``True``/``False`` where a flag is; lists and
    tuples (a TOML array for a ``tuple[float, ...]`` field) element by element, tables of a
    nested config key by key. A whole number stands for a decimal. Other values (strings,
    choices) are left to the config's own validation. Every stage is read this strictly: one
    written as text (a sweep spec's ``[stages]`` tables and axes, a pipeline expression) and a
    :class:`~aiblox.engine.algebra.Stage` built in Python alike."""
    out: list[Problem] = []
    for key, value in params.items():
        info = config.model_fields.get(key)
        if info is not None:
            out += _problems(info.annotation, value, (key,))
    return out


def param_path(path: Iterable[str | int]) -> str:
    """A :func:`param_problems` path as written: ``fts.k1``, ``weights[1]``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


_NUMBERS = {bool: "true or false", int: "a whole number", float: "a number"}


def _problems(annotation: Any, value: Any, path: tuple[str | int, ...]) -> list[Problem]:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _problems(get_args(annotation)[0], value, path)
    if origin is Union or origin is types.UnionType:
        branches = [a for a in get_args(annotation) if a is not type(None)]
        if value is None and len(branches) < len(get_args(annotation)):
            return []
        found = [_problems(a, value, path) for a in branches]
        return [] if any(not f for f in found) else found[0]
    if annotation in _NUMBERS:
        ok = (isinstance(value, bool) if annotation is bool
              else isinstance(value, int) and not isinstance(value, bool) if annotation is int
              else isinstance(value, int | float) and not isinstance(value, bool))
        return [] if ok else [(path, value, _NUMBERS[annotation])]
    if origin in (list, tuple, set, frozenset) and isinstance(value, list | tuple):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        if not args:
            return []
        fixed = origin is tuple and Ellipsis not in get_args(annotation)
        return [p for i, v in enumerate(value)
                for p in _problems(args[min(i, len(args) - 1)] if fixed else args[0], v,
                                   (*path, i))]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) \
            and isinstance(value, Mapping):
        return [(path + p, v, w) for p, v, w in param_problems(annotation, value)]
    return []
