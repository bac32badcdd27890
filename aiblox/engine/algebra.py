"""Retrieval pipelines a researcher composes, in the spirit of PyTerrier's operators.

A pipeline is a :class:`Stage` (one registered stage kind with its parameters) or a
composition of pipelines::

    from aiblox.engine import Stage

    bm25, dense = Stage("bm25"), Stage("dense")
    rm3 = Stage("rm3", fb_docs=10, fb_terms=20)
    bm25 >> rm3 >> bm25          # then: the output of one is the input of the next
    bm25 + dense                 # fuse: rank fusion of both runs (RRF or a linear blend)
    (bm25 + dense) % 100 >> Stage("cross_encoder", model="models/ce")   # % cut-off
    fuse(bm25, dense, blend="linear", weights=[0.3, 0.7])   # a fusion with its parameters

``+`` is n-ary and associative: ``(a + b) + c``, ``a + (b + c)`` and ``a + b + c`` are one
fusion of three runs. ``fuse(...)`` (or a named fusion) is one unit, never flattened:
``fuse(a, b) + c`` fuses two runs, the first itself a fusion of two. ``+`` is rank fusion (RRF,
k 60, unless the spec's ``scoring`` or the fusion's parameters say otherwise), not PyTerrier's
sum of raw scores; weighting a pipeline by a number (``0.3 * bm25``) is refused, pointing to
``fuse(..., weights=[...])``.

The operators and their precedence are Python's (``%`` binds tighter than ``+``, which binds
tighter than ``>>``), and the same text is a spec's ``pipeline`` expression
(:mod:`aiblox.engine.expression`). Each stage is typed by what it takes and gives
(:data:`~aiblox.engine.registry.DataKind`); a stage that does not fit where it is placed (a
reranker with nothing to rerank, feedback fused with a run) is refused when the pipeline is
built, naming it. A pipeline is data: frozen, hashable, with a canonical form
(:meth:`Pipeline.as_data`) that keys its cached stages, and its stages' parameters are what a
sweep varies (:meth:`Pipeline.with_params`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from pydantic import BaseModel, ValidationError

from aiblox.engine.params import PipelineError, Table, layered, plain
from aiblox.engine.params import unplain as _unplain
from aiblox.engine.registry import (
    DataKind,
    StageKind,
    StageKindError,
    get_stage_kind,
    param_path,
    param_problems,
)

__all__ = ["Cutoff", "Fuse", "Pipeline", "PipelineError", "Stage", "Table", "Then", "from_data",
           "fuse", "label", "plain", "scaled_message", "settings", "shape"]


_WHAT = {"queries": "queries", "run": "a ranked run"}


class Pipeline:
    """Base of every pipeline: what it takes and gives, the operators, its canonical form."""

    takes: DataKind
    gives: DataKind

    # -- the algebra ----------------------------------------------------------------------
    def __rshift__(self, other: Pipeline) -> Pipeline:
        return Then.of(self, _pipeline(other, ">>"))

    def __add__(self, other: Pipeline) -> Pipeline:
        return Fuse.of(self, _pipeline(other, "+"))

    def __mod__(self, k: int) -> Pipeline:
        return Cutoff(self, k)

    def __mul__(self, other: Any) -> Pipeline:
        raise TypeError(scaled_message(f"{self.expression()} * {other!r}"))

    def __rmul__(self, other: Any) -> Pipeline:
        raise TypeError(scaled_message(f"{other!r} * {self.expression()}"))

    # -- what it is -----------------------------------------------------------------------
    def stages(self) -> Iterator[Stage]:
        """Every stage in the order data flows through them."""
        raise NotImplementedError

    def expression(self) -> str:
        """The pipeline as an expression (parameters shown), parseable by
        :func:`aiblox.engine.expression.parse_pipeline` (given, for a stage named other than
        its kind, a ``[stages]`` table naming its kind)."""
        raise NotImplementedError

    def as_data(self) -> dict[str, Any]:
        """Canonical plain form (for hashing, manifests and MLflow)."""
        raise NotImplementedError

    def with_params(self, params: Mapping[str, Mapping[str, Any]]) -> Pipeline:
        """A copy with ``{stage name: {parameter: value}}`` applied to every stage of that
        name (a sweep point's stage axes); :class:`PipelineError` for a name no stage has."""
        unknown = sorted(set(params) - set(self.names()))
        if unknown:
            raise PipelineError(f"no stage named {unknown[0]!r} in {self.expression()}; "
                                f"stages: {', '.join(self.names())}")
        return self._apply(params)

    def _apply(self, params: Mapping[str, Mapping[str, Any]]) -> Pipeline:
        raise NotImplementedError

    def names(self) -> list[str]:
        """The stage names (what axes address: ``"rm3.fb_terms"``), in order, once each."""
        out: list[str] = []
        for s in self.stages():
            if s.name not in out:
                out.append(s.name)
        return out

    def check(self) -> Pipeline:
        """This pipeline as a whole retrieval pipeline: it must take the topics and give a
        ranked run; :class:`PipelineError` otherwise."""
        if self.takes != "queries":
            first = next(self.stages())
            raise PipelineError(f"{first.name} takes {_WHAT[self.takes]} and comes first in "
                                f"{self.expression()}: nothing to {_verb(first)}; put a "
                                f"retrieval stage before it (e.g. bm25 >> {first.name})")
        if self.gives != "run":  # suggest the retrieval the feedback read (rocchio: dense)
            read = [s.name for s in self.stages() if s.takes == "queries" and s.gives == "run"]
            raise PipelineError(f"{self.expression()} ends in queries (feedback gives "
                                f"queries, not a ranking): follow it with a retrieval stage "
                                f"(e.g. >> {read[-1] if read else 'bm25'})")
        return self

    def __str__(self) -> str:
        return self.expression()

    def __repr__(self) -> str:
        return f"Pipeline({self.expression()!r})"


def scaled_message(written: str) -> str:
    """The refusal of a pipeline weighted by a number (PyTerrier's ``0.3 * bm25 + 0.7 *
    dense``), in Python and in an expression: ``+`` is rank fusion, and a fusion's weights
    are its parameter."""
    return (f"{written}: a pipeline is not weighted by a number here (+ is rank fusion, RRF "
            f"k 60 by default, not a sum of scores); weigh the runs of a fusion with its "
            f"weights: fuse(bm25, dense, blend=\"linear\", weights=[0.3, 0.7])")


def _verb(stage: Stage) -> str:
    return "rerank" if stage.gives == "run" else "take feedback from"


def _pipeline(other: Any, op: str) -> Pipeline:
    if not isinstance(other, Pipeline):
        raise PipelineError(f"{op} needs a pipeline on both sides, got {other!r}")
    return other


def _paren(p: Pipeline, binds: int) -> str:
    """``p``'s expression, parenthesised when its operator binds looser than ``binds``
    (``>>`` 1, ``+`` 2, ``%`` 3)."""
    own = {Then: 1, Fuse: 2, Cutoff: 3}.get(type(p), 4)
    text = p.expression()
    return f"({text})" if own < binds else text


@dataclass(frozen=True, repr=False, init=False)
class Stage(Pipeline):
    """One stage: a registered kind (:mod:`aiblox.engine.registry`) with its parameters.

    ``name`` is what sweep axes and a spec's ``[stages.NAME]`` table address (default: the
    kind): an axis or a table sets its parameters on every stage of that name
    (:meth:`Pipeline.with_params`), but each stage keeps the parameters written on it, and
    runs with them: in ``bm25(k1=0.5) >> rm3 >> bm25`` the first ``bm25`` retrieves with k1
    0.5 and the second with the base's (:func:`settings` tells them apart)."""

    kind: str
    params: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    def __init__(self, kind: str, name: str | None = None, **params: Any) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "name", name or kind)
        object.__setattr__(self, "params", tuple(sorted(
            (k, plain(v, f"stage {self._named()}, parameter {k}")) for k, v in params.items())))
        self._refuse_coercions()
        self.config()  # validated now: a bad parameter fails where the pipeline is built

    def _refuse_coercions(self) -> None:
        """Refuse a value its config would coerce (``fb_docs=True`` read as 1, ``"10"`` as
        10): a stage built in Python is read as strictly as one written in a spec
        (:func:`~aiblox.engine.registry.param_problems`)."""
        for path, value, wanted in param_problems(self.spec.config, self.param_dict())[:1]:
            raise PipelineError(f"stage {self._named()}, parameter {param_path(path)}: got "
                                f"{value!r}: expected {wanted}")

    def _named(self) -> str:
        return self.name if self.name == self.kind else f"{self.name} ({self.kind})"

    @property
    def spec(self) -> StageKind:
        """The registered kind."""
        try:
            return get_stage_kind(self.kind)
        except StageKindError as exc:
            raise PipelineError(str(exc)) from None

    @property
    def takes(self) -> DataKind:  # type: ignore[override]
        return self.spec.takes

    @property
    def gives(self) -> DataKind:  # type: ignore[override]
        return self.spec.gives

    def param_dict(self) -> dict[str, Any]:
        """The parameters set explicitly (plain lists, not tuples)."""
        return {k: _unplain(v) for k, v in self.params}

    def config(self, defaults: Mapping[str, Any] | None = None) -> BaseModel:
        """The kind's config from ``defaults`` (e.g. a spec's base settings) overridden by the
        stage's parameters (a table parameter key by key: ``fts={"k1": 0.9}`` over the
        default ``fts``); :class:`PipelineError` naming the stage and the field."""
        try:
            own = self.param_dict()
            return self.spec.make_config(layered(defaults or {}, own), own)
        except ValidationError as exc:
            errs = "; ".join(_field_problem(self.name, e) for e in exc.errors())
            raise PipelineError(f"stage {self.name} ({self.kind}): {errs}") from None

    def stages(self) -> Iterator[Stage]:
        yield self

    def expression(self) -> str:
        # a named stage as its name (its kind comes from its [stages] table), with its
        # parameters as an unnamed one's: two settings of one named stage read differently
        if not self.params:
            return self.name
        args = ", ".join(f"{k}={_literal(v)}" for k, v in self.params)
        return f"{self.name}({args})"

    def as_data(self) -> dict[str, Any]:
        return {"stage": self.kind, "name": self.name, "params": self.param_dict()}

    def _apply(self, params: Mapping[str, Mapping[str, Any]]) -> Pipeline:
        if self.name not in params:
            return self
        # a table over the stage's own table key by key, as inline parameters over a
        # [stages] table's (a sweep axis of rm3's fts keeps the table's other keys)
        return Stage(self.kind, self.name, **layered(self.param_dict(), params[self.name]))


def _literal(v: Any) -> str:
    if isinstance(v, Table):
        return "{" + ", ".join(f"{k!r}: {_literal(x)}" for k, x in v) + "}"
    if isinstance(v, tuple):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    if isinstance(v, bool):
        return "True" if v else "False"
    return repr(v)


@dataclass(frozen=True, repr=False)
class Then(Pipeline):
    """``a >> b >> ...``: each step's output is the next one's input."""

    steps: tuple[Pipeline, ...]

    @classmethod
    def of(cls, a: Pipeline, b: Pipeline) -> Then:
        steps = (*(a.steps if isinstance(a, Then) else (a,)),
                 *(b.steps if isinstance(b, Then) else (b,)))
        return cls(steps)

    def __post_init__(self) -> None:
        for left, right in zip(self.steps, self.steps[1:], strict=False):
            if left.gives != right.takes:
                nxt = next(right.stages())
                raise PipelineError(
                    f"{nxt.name} takes {_WHAT[right.takes]} but follows "
                    f"{left.expression()}, which gives {_WHAT[left.gives]}"
                    + (": feedback must be followed by a retrieval stage"
                       if left.gives == "queries" else
                       ": a retrieval stage after a run needs feedback in between "
                       "(e.g. >> rm3 >>)"))
            if left.gives == "queries":
                feedback = list(left.stages())[-1]
                for entry in entry_stages(right):
                    _check_feedback_read(feedback, entry)

    @property
    def takes(self) -> DataKind:  # type: ignore[override]
        return self.steps[0].takes

    @property
    def gives(self) -> DataKind:  # type: ignore[override]
        return self.steps[-1].gives

    def stages(self) -> Iterator[Stage]:
        for s in self.steps:
            yield from s.stages()

    def expression(self) -> str:
        return " >> ".join(_paren(s, 2) for s in self.steps)

    def as_data(self) -> dict[str, Any]:
        return {"then": [s.as_data() for s in self.steps]}

    def _apply(self, params: Mapping[str, Mapping[str, Any]]) -> Pipeline:
        return Then(tuple(s._apply(params) for s in self.steps))


_FEEDBACK = {"terms": ("weighted terms", "bm25"), "vector": ("query vectors", "dense")}


def entry_stages(p: Pipeline) -> list[Stage]:
    """The stages that receive ``p``'s input: its first stage, every member's in a fusion,
    the inner pipeline's in a cut-off (``(bm25 >> ce) % 10`` receives its input at ``bm25``)."""
    if isinstance(p, Then):
        return entry_stages(p.steps[0])
    if isinstance(p, Fuse):
        return [s for m in p.members for s in entry_stages(m)]
    if isinstance(p, Cutoff):
        return entry_stages(p.inner)
    assert isinstance(p, Stage), p
    return [p]


def _check_feedback_read(feedback: Stage, retrieval: Stage) -> None:
    """Refuse a retrieval stage that would ignore what the feedback before it gives (``bm25 >>
    rm3 >> dense`` would retrieve by the original text: the run of plain ``dense``, whatever
    rm3's parameters)."""
    carries = feedback.spec.carries
    if carries is None and not retrieval.spec.reads_queries:
        # a researcher's own kind that gives queries without declaring what it adds (text
        # rewritten, say): a stage that reads the topics (retrieve) would ignore it whole
        raise PipelineError(f"{retrieval.name} reads the topics themselves, not the queries "
                            f"{feedback.name} gives: follow {feedback.name} with bm25 or dense")
    if carries is None or carries in retrieval.spec.reads_queries:
        return
    what, reader = _FEEDBACK[carries]
    raise PipelineError(f"{retrieval.name} cannot read the {what} {feedback.name} gives (it "
                        f"would retrieve by the original query text, ignoring the feedback): "
                        f"follow {feedback.name} with {reader}")


@dataclass(frozen=True, repr=False)
class Fuse(Pipeline):
    """``a + b + ...``: rank fusion of the members' runs, each given the same input. Its
    parameters (the ``fuse`` kind's config: RRF or a linear blend, weights, normalisation)
    are addressed by its ``name``."""

    members: tuple[Pipeline, ...]
    params: tuple[tuple[str, Any], ...] = ()
    name: str = "fuse"

    unit: bool = field(default=False, compare=False)
    """Written ``fuse(...)`` (or built by :func:`fuse`): one unit, never flattened by ``+``.
    Not part of the pipeline's identity (``fuse(a, b)`` and ``a + b`` are one pipeline)."""

    @classmethod
    def of(cls, a: Pipeline, b: Pipeline) -> Fuse:
        """``a + b``: one fusion of the operands' runs, an operand that is itself a ``+``
        fusion contributing its members, on either side (``+`` is associative)."""
        return cls((*_operands(a), *_operands(b)))

    def __post_init__(self) -> None:
        if len(self.members) < 2:
            raise PipelineError("fuse needs two or more pipelines")
        for m in self.members:
            if m.gives != "run":
                raise PipelineError(f"fuse: {m.expression()} gives queries, not a ranked "
                                    f"run; fusion merges rankings")
        takes = {m.takes for m in self.members}
        if len(takes) > 1:
            raise PipelineError(f"fuse: {' + '.join(_paren(m, 3) for m in self.members)} "
                                f"mixes pipelines that take queries with pipelines that "
                                f"take a ranked run")
        weights = dict(self.params).get("weights")
        if weights is not None and len(weights) != len(self.members):
            runs = ", ".join(m.expression() for m in self.members)
            raise PipelineError(f"{self.name}: weights needs one weight per fused run, in "
                                f"order ({len(self.members)}: {runs}), got "
                                f"{_literal(weights)}")
        self.stage.config()  # the fusion's own parameters, validated now

    @property
    def stage(self) -> Stage:
        """The fusion step itself, as a stage of kind ``fuse``."""
        return Stage("fuse", self.name, **{k: _unplain(v) for k, v in self.params})

    @property
    def takes(self) -> DataKind:  # type: ignore[override]
        return self.members[0].takes

    @property
    def gives(self) -> DataKind:  # type: ignore[override]
        return "run"

    def stages(self) -> Iterator[Stage]:
        for m in self.members:
            yield from m.stages()
        yield self.stage

    def expression(self) -> str:
        if self.name != "fuse" or self.params:  # the call form, its parameters shown
            args = "".join(f", {k}={_literal(v)}" for k, v in self.params)
            return f"{self.name}({', '.join(m.expression() for m in self.members)}{args})"
        # a nested fusion without parameters as a call: "(a + b) + c" would read as a + b + c
        return " + ".join(f"fuse({', '.join(x.expression() for x in m.members)})"
                          if _bare_fuse(m) else _paren(m, 3) for m in self.members)

    def as_data(self) -> dict[str, Any]:
        return {"fuse": [m.as_data() for m in self.members], "name": self.name,
                "params": self.stage.param_dict()}

    def _apply(self, params: Mapping[str, Mapping[str, Any]]) -> Pipeline:
        own = dict(self.params)
        if self.name in params:
            own = {**own, **{k: plain(v, f"{self.name}, parameter {k}")
                             for k, v in params[self.name].items()}}
        return Fuse(tuple(m._apply(params) for m in self.members),
                    tuple(sorted(own.items())), self.name, self.unit)


def _operands(p: Pipeline) -> tuple[Pipeline, ...]:
    """What ``p`` contributes to a ``+``: its members when it is itself a ``+`` fusion (no
    name, no parameters, not written ``fuse(...)``), else itself."""
    if isinstance(p, Fuse) and p.name == "fuse" and not p.params and not p.unit:
        return p.members
    return (p,)


def fuse(*pipelines: Pipeline, name: str = "fuse", **params: Any) -> Fuse:
    """Rank fusion of ``pipelines`` as one unit, with the fusion's parameters (the ``fuse``
    kind's config: ``blend``, ``weights`` one per pipeline in order, ``rrf_k``,
    ``normalize``, ``missing``, ``top_k``): ``fuse(bm25, dense, blend="linear", weights=[0.3,
    0.7])``, PyTerrier's ``0.3 * bm25 + 0.7 * dense`` over normalised scores. The expression's
    ``fuse(...)``; never flattened into a ``+`` around it."""
    members = tuple(_pipeline(p, "fuse(...)") for p in pipelines)
    if len(members) < 2:
        raise PipelineError("fuse needs two or more pipelines")
    return Fuse(members, tuple(sorted((k, plain(v, f"{name}, parameter {k}"))
                                      for k, v in params.items())), name, unit=True)


@dataclass(frozen=True, repr=False)
class Cutoff(Pipeline):
    """``p % k``: the first ``k`` documents of each query of ``p``'s run."""

    inner: Pipeline
    k: int

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise PipelineError(f"% needs a whole number of documents >= 1, got {self.k!r} "
                                f"in {_paren(self.inner, 4)} % {self.k!r}")
        if self.inner.gives != "run":
            raise PipelineError(f"% {self.k}: {self.inner.expression()} gives queries; a "
                                f"cut-off keeps the top of a ranked run")

    @property
    def takes(self) -> DataKind:  # type: ignore[override]
        return self.inner.takes

    @property
    def gives(self) -> DataKind:  # type: ignore[override]
        return "run"

    def stages(self) -> Iterator[Stage]:
        yield from self.inner.stages()

    def expression(self) -> str:
        return f"{_paren(self.inner, 4)} % {self.k}"

    def as_data(self) -> dict[str, Any]:
        return {"cutoff": self.inner.as_data(), "k": self.k}

    def _apply(self, params: Mapping[str, Mapping[str, Any]]) -> Pipeline:
        return Cutoff(self.inner._apply(params), self.k)


def from_data(data: Mapping[str, Any]) -> Pipeline:
    """The pipeline of :meth:`Pipeline.as_data`'s form (a logged point's, for verification)."""
    if "stage" in data:
        return Stage(data["stage"], data.get("name") or data["stage"], **data.get("params", {}))
    if "then" in data:
        return Then(tuple(from_data(d) for d in data["then"]))
    if "fuse" in data:
        return Fuse(tuple(from_data(d) for d in data["fuse"]),
                    tuple(sorted((k, plain(v)) for k, v in data.get("params", {}).items())),
                    data.get("name", "fuse"))
    if "cutoff" in data:
        return Cutoff(from_data(data["cutoff"]), int(data["k"]))
    raise PipelineError(f"not a pipeline: {dict(data)!r}")


def _field_problem(name: str, error: Any) -> str:
    """One pydantic error of a stage's config in the expression's words: a parameter that
    must be given says how (``model is required: cross_encoder(model=...)``), not pydantic's
    ``Field required``."""
    field = ".".join(str(p) for p in error["loc"])
    if error["type"] == "missing":
        return f"{field} is required: {name}({field}=...)"
    said = error["msg"].removeprefix("Value error, ")
    return f"{field}: {said}" if field else said  # a check of several fields names them


def label(p: Pipeline) -> str:
    """A readable name: the expression with every stage's parameters shown, named stages as
    ``name[kind](...)``; parameter values as ``k=v``."""
    if isinstance(p, Stage):
        head = p.kind if p.name == p.kind else f"{p.name}[{p.kind}]"
        args = ",".join(f"{k}={_literal(v)}" for k, v in p.params)
        return f"{head}({args})" if args else head
    if isinstance(p, Then):
        return " >> ".join(f"({label(s)})" if isinstance(s, Then) else label(s)
                           for s in p.steps)
    if isinstance(p, Fuse):
        args = ",".join(f"{k}={_literal(v)}" for k, v in p.params)
        if p.name != "fuse" or args:  # the call form: binds like a stage
            members = ", ".join(label(m) for m in p.members)
            return f"{p.name}({members}{'; ' + args if args else ''})"
        return " + ".join(f"({label(m)})" if isinstance(m, Then) else
                          f"fuse({', '.join(label(x) for x in m.members)})"
                          if _bare_fuse(m) else label(m) for m in p.members)
    assert isinstance(p, Cutoff)
    inner = label(p.inner)
    bare = isinstance(p.inner, Then) or _bare_fuse(p.inner)
    return f"({inner}) % {p.k}" if bare else f"{inner} % {p.k}"


def _bare_fuse(p: Pipeline) -> TypeGuard[Fuse]:
    """``p`` is a fusion without name or parameters (``a + b``): inside another fusion it is
    written ``fuse(a, b)`` (``bm25 + fuse(dense, x)`` is not ``bm25 + dense + x``), under a
    cut-off in parentheses."""
    return isinstance(p, Fuse) and p.name == "fuse" and not p.params


def shape(p: Pipeline) -> str:
    """The pipeline's form without its parameters (``bm25 >> rm3 >> bm25``, ``bm25 + dense``):
    what its points share whatever their stage settings, a report's and a leaderboard's
    ``pipeline`` column."""
    if isinstance(p, Stage):
        return p.name
    if isinstance(p, Then):
        return " >> ".join(f"({shape(s)})" if isinstance(s, Then) else shape(s)
                           for s in p.steps)
    if isinstance(p, Fuse):
        if p.name != "fuse":
            return f"{p.name}({', '.join(shape(m) for m in p.members)})"
        return " + ".join(f"({shape(m)})" if isinstance(m, Then) else
                          f"fuse({', '.join(shape(x) for x in m.members)})"
                          if _bare_fuse(m) else shape(m) for m in p.members)
    assert isinstance(p, Cutoff)
    inner = shape(p.inner)
    return f"({inner}) % {p.k}" if isinstance(p.inner, Then | Fuse) else f"{inner} % {p.k}"


def settings(p: Pipeline) -> dict[str, Any]:
    """The pipeline as settings a table can group by: ``pipeline`` (its :func:`shape`), then
    each parameter a stage sets, in stage order: ``<stage name>.<parameter>`` where every stage
    of that name sets it to one value (what a sweep's stage axes address: ``with_params`` sets
    every stage of the name), else ``<stage name>.<n>.<parameter>`` for each stage that sets
    it, ``n`` its place among the stages of its name (from 1). ``bm25(k1=0.5) >> rm3 >>
    bm25(k1=2.0)`` is ``bm25.1.k1`` 0.5 and ``bm25.2.k1`` 2.0; ``bm25 >> rm3 >> bm25(k1=0.5)``
    ``bm25.2.k1`` alone (the first bm25 reads the base's k1), not the ``bm25.k1`` of
    ``bm25(k1=0.5) >> rm3 >> bm25(k1=0.5)``. A number is no stage name or parameter (names in
    an expression), so the keys never collide; and they are MLflow param names (no ``#``)."""
    stages = list(p.stages())
    count: dict[str, int] = {}
    values: dict[tuple[str, str], list[Any]] = {}
    for s in stages:
        count[s.name] = count.get(s.name, 0) + 1
        for k, v in s.params:
            values.setdefault((s.name, k), []).append(v)
    out: dict[str, Any] = {"pipeline": shape(p)}
    seen: dict[str, int] = {}
    for s in stages:
        n = seen[s.name] = seen.get(s.name, 0) + 1
        for k, v in s.params:
            vs = values[(s.name, k)]
            one = len(vs) == count[s.name] and all(x == vs[0] for x in vs)
            out.setdefault(f"{s.name}.{k}" if one else f"{s.name}.{n}.{k}", _unplain(v))
    return out
