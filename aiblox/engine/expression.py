"""A spec's ``pipeline`` expression, parsed into a :class:`~aiblox.engine.algebra.Pipeline`.

The expression is the Python the algebra writes, restricted to names, calls with literal
keyword arguments, ``>>``, ``+``, ``%`` and parentheses::

    pipeline = "bm25 >> rm3(fb_terms=20) >> bm25 % 100 >> ce"

A name is a ``[stages.NAME]`` table of the spec (``kind`` defaults to the name, every other key
is a parameter; or ``pipeline = "..."``, a named sub-pipeline) or a registered stage kind.
``fuse(a, b, blend="linear")`` is ``a + b`` with the fusion's parameters given, one unit that
``+`` never flattens (``fuse(a, b) + c`` fuses two runs; ``(a + b) + c`` and ``a + (b + c)``
three: ``+`` is associative); a ``[stages.NAME]`` table with ``kind = "fuse"`` names a fusion
(``NAME(a, b)``). Errors name the
spec's field (``pipeline``, ``stages.NAME``) and what is wrong: unknown stages, bad parameters,
a stage that does not fit where it is placed, and names that refer to themselves.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from aiblox.engine.algebra import (
    Cutoff,
    Fuse,
    Pipeline,
    PipelineError,
    Stage,
    plain,
    scaled_message,
)
from aiblox.engine.params import layered, set_message
from aiblox.engine.registry import StageKindError, get_stage_kind, param_path, param_problems

__all__ = ["inline_params", "parse_pipeline", "referenced_names", "split_label"]


def parse_pipeline(text: str, stages: Mapping[str, Mapping[str, Any]] | None = None,
                   where: str = "pipeline") -> Pipeline:
    """``text`` as a pipeline, its names resolved against ``stages`` (a spec's ``[stages]``
    tables) and the registry; :class:`PipelineError` naming ``where`` otherwise. The result
    is not yet checked as a whole (:meth:`Pipeline.check`)."""
    return _Parser(dict(stages or {})).parse(text, where, ())


def _too_deep(where: str, text: str) -> PipelineError:
    """The refusal of an expression Python's parser (or this one) cannot descend: nested or
    chained past the interpreter's recursion limit (3,000 terms of ``bm25 + bm25 + ...``)."""
    return PipelineError(f"{where}: the expression is nested too deeply or too long to read "
                         f"({len(text):,} characters); write it shorter, "
                         f"in parts: named sub-pipelines of a spec ([stages.NAME] pipeline "
                         f"= \"...\"; a + of them is one fusion)")


_OPERATORS = {ast.Sub: "-", ast.Div: "/", ast.FloorDiv: "//", ast.Pow: "**", ast.BitOr: "|",
              ast.BitAnd: "&", ast.BitXor: "^", ast.LShift: "<<", ast.MatMult: "@"}
"""Python's binary operators that are no pipeline operator, as written."""

_LABEL = re.compile(r"([^()\[\]{}\"',>+%=]*)=")
"""Text that starts ``LABEL=``: before its first ``=`` none of an expression's characters (a
label may hold spaces, slashes, dots; the ``=`` of ``fuse(a, b, blend="linear")`` follows a
``(``)."""


def split_label(text: str) -> tuple[str | None, str]:
    """``(label, expression)`` of ``LABEL=EXPR`` (the label's whitespace collapsed: written
    over lines, it is one line), else ``(None, text)``: how ``aiblox eval --pipeline`` and
    a refused expression's hint read a label."""
    found = _LABEL.match(text)
    if found is None or not found.group(1).strip():
        return None, text
    return " ".join(found.group(1).split()), text[found.end():]

_TRAILING = {">>": "a stage must follow", "+": "a stage must follow",
             "%": "a depth (a whole number) must follow", ",": "an argument must follow",
             "(": "its arguments and ')' must follow", "=": "a value must follow"}
"""What an expression cannot end with (an operator, a call's open parenthesis or comma, a
keyword's ``=``), and what is missing after it."""


def _syntax_problem(text: str, exc: SyntaxError) -> str:
    """Where Python's parser stopped in ``text``, in the expression's words: a column of the
    text as given (1-based), or its end, with what is missing when it ends with an operator
    (the parser reports column 0 for an expression cut short)."""
    body = text.rstrip()
    end = next((op for op in _TRAILING if body.endswith(op)), None)
    if end is not None:
        return f"it ends with {end!r}: {_TRAILING[end]}"
    lead = len(text) - len(text.lstrip())
    label = split_label(text)[0]
    hint = (f": {label!r}= labels a pipeline outside its expression "
            f"(--pipeline LABEL=EXPR, run_experiment's names=)" if label else "")
    if not exc.offset or exc.offset > len(text.strip()):
        return f"{exc.msg} at the end{hint}"
    return f"{exc.msg} at column {exc.offset + lead}{hint}"


class _Parser:
    def __init__(self, tables: dict[str, Mapping[str, Any]]) -> None:
        self.tables = tables
        self.where = "pipeline"
        """The field whose text is being read (a named sub-pipeline's: ``stages.NAME``)."""
        self.text = ""
        """The expression being read (for its parts as written)."""
        self.subs: list[tuple[Pipeline, str]] = []
        """Each named sub-pipeline read, with its name (to say where an operand comes from)."""

    def parse(self, text: str, where: str, chain: tuple[str, ...]) -> Pipeline:
        if not isinstance(text, str) or not text.strip():
            raise PipelineError(f"{where}: an expression such as \"bm25 >> rm3 >> bm25\" "
                                f"is needed, got {text!r}")
        flat = " ".join(text.splitlines())  # an expression written over lines reads as one
        try:
            tree = ast.parse(flat.strip(), mode="eval")
        except SyntaxError as exc:
            raise PipelineError(f"{where}: {text!r} is not a pipeline expression "
                                f"({_syntax_problem(flat, exc)})") from None
        except (RecursionError, MemoryError):  # the parser's own limit
            raise _too_deep(where, flat.strip()) from None
        outer, self.where = self.where, where
        outer_text, self.text = self.text, flat.strip()
        try:
            return self.node(tree.body, chain)
        except PipelineError as exc:
            msg = str(exc)
            raise PipelineError(msg if msg.startswith(("pipeline", "stages.", f"{where}: "))
                                else f"{where}: {msg}") from None
        except (RecursionError, MemoryError):  # parsed, but deeper than node() descends
            raise _too_deep(where, self.text) from None
        finally:
            self.where, self.text = outer, outer_text

    def src(self, n: ast.AST) -> str:
        """``n`` as written in the expression being read (``1e2``, not ``100.0``)."""
        return ast.get_source_segment(self.text, n) or ast.unparse(n)

    def takes(self, name: str) -> str:
        """``name``'s parameters, as an error's hint (``rm3 takes fb_docs, fb_terms, ...``)."""
        kind = str(self.tables.get(name, {}).get("kind", name))
        try:
            fields = list(get_stage_kind(kind).config.model_fields)
        except StageKindError:
            self.named(name, {}, [], ())  # an unknown stage: its own error
            return f"{name}(param=value)"
        return (f"{name} takes {', '.join(fields)}" if fields
                else f"{name} takes no parameters")

    def node(self, n: ast.AST, chain: tuple[str, ...]) -> Pipeline:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):  # 0.3 * bm25
            raise PipelineError(scaled_message(ast.unparse(n)))
        if isinstance(n, ast.BinOp):
            if isinstance(n.op, ast.Mod):
                k = n.right
                if not (isinstance(k, ast.Constant) and isinstance(k.value, int)
                        and not isinstance(k.value, bool)):
                    raise PipelineError(f"% takes a whole number of documents >= 1, got "
                                        f"{self.src(k)!r}")
                inner, depth = self.node(n.left, chain), k.value
                return self.used(lambda: Cutoff(inner, depth), inner)
            left, right = self.node(n.left, chain), self.node(n.right, chain)
            if isinstance(n.op, ast.RShift):
                return self.used(lambda: left >> right, left, right)
            if isinstance(n.op, ast.Add):
                return self.used(lambda: left + right, left, right)
            op = _OPERATORS.get(type(n.op), type(n.op).__name__)
            raise PipelineError(f"operator {op!r} is not a pipeline operator "
                                f"(>> then, + fuse, % cut-off)")
        if isinstance(n, ast.Name):
            return self.named(n.id, {}, [], chain)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            name = n.func.id
            params = {}
            for kw in n.keywords:
                if kw.arg is None:
                    raise PipelineError(f"{name}(**...) is not allowed")
                if kw.arg in params:  # Python's compiler refuses it; its parser does not
                    raise PipelineError(f"{name}(...): parameter {kw.arg} is given twice")
                params[kw.arg] = _literal(kw.value, f"{name}({kw.arg}=...)", self.src(kw.value))
            for a in n.args:
                if isinstance(a, ast.Constant) or (isinstance(a, ast.UnaryOp)
                                                   and isinstance(a.operand, ast.Constant)):
                    raise PipelineError(f"{self.src(n)}: a stage's parameters are named, "
                                        f"{self.takes(name)}; a call's unnamed arguments "
                                        f"are pipelines, as in fuse(bm25, dense)")
            members = [self.node(a, chain) for a in n.args]
            return self.named(name, params, members, chain)
        if (isinstance(n, ast.Compare) and isinstance(n.left, ast.Name)
                and len(n.ops) == 1 and isinstance(n.ops[0], ast.Eq)):  # rm3(fb_docs==5)
            raise PipelineError(f"{self.src(n)!r}: a parameter is set with one '=' "
                                f"({n.left.id}={self.src(n.comparators[0])})")
        raise PipelineError(f"{self.src(n)!r} is not a stage, a call or an operator")

    def named(self, name: str, params: dict[str, Any], members: list[Pipeline],
              chain: tuple[str, ...]) -> Pipeline:
        table = dict(self.tables.get(name, {}))
        if name in chain:
            loop = " -> ".join((*chain[chain.index(name):], name))
            raise PipelineError(f"stages.{name}: refers to itself ({loop})")
        if "pipeline" in table:  # a named sub-pipeline
            extra = sorted(set(table) - {"pipeline"})
            if extra:
                raise PipelineError(f"stages.{name}: a named pipeline takes no parameters "
                                    f"(set them on its stages); got {extra}")
            if params or members:  # how it is used: the using field's error, naming both
                given = [*(["..."] if members else []),
                         *(f"{k}={v!r}" for k, v in sorted(params.items()))]
                raise PipelineError(f"{self.where}: {name}({', '.join(given)}): {name} is the "
                                    f"named pipeline of [stages.{name}], which takes no "
                                    f"parameters or pipelines: set them on its stages")
            sub = self.parse(table["pipeline"], f"stages.{name}", (*chain, name))
            self.subs.append((sub, name))
            return sub
        kind = str(table.pop("kind", name))
        if kind in self.tables and kind != name:
            raise PipelineError(f"stages.{name}: kind {kind!r} is another [stages] table; "
                                f"kind names a registered stage")
        _refuse_coercions(kind, name, table, params)
        merged = layered(table, params)  # a table parameter over the table's key by key
        if kind == "fuse":
            if len(members) < 2:
                raise PipelineError(f"{name}(...) fuses two or more pipelines, e.g. "
                                    f"{name}(bm25, dense)")
            own = tuple(sorted((k, plain(v, f"{name}, parameter {k}"))
                               for k, v in merged.items()))
            return self.used(lambda: Fuse(tuple(members), own, name, unit=True),  # a unit:
                             *members)  # never flattened, nor its members
        if members:
            raise PipelineError(f"{name}(...) takes keyword parameters only (pipelines go "
                                f"in fuse(a, b))")
        if kind == "identity" and merged:
            raise PipelineError(f"{name}: identity takes no parameters")
        try:
            return Stage(kind, name, **merged)
        except PipelineError as exc:  # a table's stage by its table; else by the field parsed
            if name not in self.tables:
                raise
            if params and _valid(kind, name, table):  # the table is fine, its use is not
                raise PipelineError(f"{self.where}: {exc}; in the parameters written here, "
                                    f"over those of [stages.{name}]") from None
            raise PipelineError(f"stages.{name}: {exc}") from None

    def used(self, build: Callable[[], Pipeline], *operands: Pipeline) -> Pipeline:
        """``build()``, its error naming the ``[stages]`` table of each named sub-pipeline
        among ``operands``: the error is about how it is used here, and its stages are
        written there."""
        try:
            return build()
        except PipelineError as exc:
            names = [n for p, n in self.subs if any(p is o for o in operands)]
            if not names:
                raise
            where = ", ".join(f"{n} is [stages.{n}]" for n in dict.fromkeys(names))
            raise PipelineError(f"{exc}; {where}") from None


def _valid(kind: str, name: str, params: Mapping[str, Any]) -> bool:
    try:
        Stage(kind, name, **params)
    except PipelineError:
        return False
    return True


def _refuse_coercions(kind: str, name: str, table: Mapping[str, Any],
                      params: Mapping[str, Any]) -> None:
    """Refuse a parameter written as text that its config would coerce (``fb_docs = true``
    or ``"10"`` read as 1 or 10; :func:`~aiblox.engine.registry.param_problems`): a
    ``[stages.NAME]`` table's by its key (``stages.fb.fb_docs: got True: expected a whole
    number``), an inline one by the stage and the parameter (``stage rm3, parameter fb_docs:
    ...``; the caller puts the field or option before it). An unknown kind is left to
    :class:`Stage`."""
    try:
        config = get_stage_kind(kind).config
    except StageKindError:
        return
    for own, where in ((table, f"stages.{name}."), (params, f"stage {name}, parameter ")):
        for path, value, wanted in param_problems(config, own)[:1]:
            raise PipelineError(f"{where}{param_path(path)}: got {value!r}: expected {wanted}")


def _literal(n: ast.AST, where: str, written: str) -> Any:
    """``n``'s value; ``written``: its text as written, for the error (``-(-5)``, which
    ``ast.unparse`` gives as ``--5``). A set (``weights={0.7, 0.3}``) is refused: it has no
    order (:func:`~aiblox.engine.algebra.plain`)."""
    found = next((x for x in ast.walk(n) if isinstance(x, ast.Set)), None)
    if found is not None:
        what = written if found is n else ast.unparse(found)
        raise PipelineError(f"{where}: {set_message(what)}")
    try:
        return ast.literal_eval(n)
    except ValueError:
        raise PipelineError(f"{where}: parameters are literals (numbers, strings, lists), "
                            f"got {written!r}") from None


def _nodes(text: str, stages: Mapping[str, Mapping[str, Any]] | None = None
           ) -> Iterator[ast.AST]:
    """Every syntax node of ``text`` and of each named sub-pipeline of ``stages`` it reaches
    (each followed once, at the first use of its name); an unparseable text has none."""
    tables = dict(stages or {})
    todo, seen = [text], set()
    while todo:
        try:
            tree = ast.parse(str(todo.pop()).strip(), mode="eval")
        except (SyntaxError, RecursionError, MemoryError):  # parse_pipeline says why
            continue
        for n in ast.walk(tree):
            yield n
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                sub = tables.get(n.id, {})
                if "pipeline" in sub:
                    todo.append(sub["pipeline"])


def referenced_names(text: str, stages: Mapping[str, Mapping[str, Any]] | None = None
                     ) -> set[str]:
    """The names ``text`` uses (stage names, calls), following named sub-pipelines of
    ``stages`` (for "is every ``[stages]`` table used"); an unparseable text uses none."""
    return {n.id for n in _nodes(text, stages) if isinstance(n, ast.Name)}


def inline_params(text: str, stages: Mapping[str, Mapping[str, Any]] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """The parameters ``text`` writes inline, by stage name (``bm25(k1=0.9) >> rm3 >> bm25``:
    ``{"bm25": {"k1": 0.9}}``), following named sub-pipelines of ``stages``; not a
    ``[stages]`` table's own parameters. An unparseable text writes none."""
    out: dict[str, dict[str, Any]] = {}
    for n in _nodes(text, stages):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            for kw in n.keywords:
                if kw.arg is not None:
                    try:
                        value = ast.literal_eval(kw.value)
                    except ValueError:
                        continue
                    out.setdefault(n.func.id, {}).setdefault(kw.arg, value)
    return out
