"""A sweep spec's validation errors as lines a person reads: ``spec.toml:17: field
'grid.rrf_k[0]': got 10.5: expected a whole number``.

pydantic reports a value that fits no branch of a union once per branch, each under the
branch's internal name (``grid.rrf_k.list[int].0`` and ``grid.rrf_k.function-after[_check(),
Steps]``). Here the branch whose shape the value has (a list for ``list[int]``, a table for
``Steps``) is the one reported, under the field's own path; a value of no branch's shape gets
one line saying what the field takes (``expected a list of whole numbers or steps {start, stop,
step}, got 60``). An error of the whole spec whose message starts with the key it is about
(``pipeline[0]: ...``, ``grid.stages.rm3.fb_docs = 'x': ...``) is reported under that key, and
so is an error of a table whose message names a key inside it (``reader_options.api_key:
...``, or ``objectives: ...`` of ``[search]``).

The line is the line of the TOML text where the key (or the nearest table holding it) is
written, found by :func:`key_lines`, a small reader of TOML's keys, tables, arrays and
inline tables that runs on text ``tomllib`` has already read; a key written on several lines
(a table extended by dotted keys in two places) gets no line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

from aiblox.contracts.problems import value_problem

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["error_lines", "key_lines", "located", "stage_error_line"]

Path = tuple[str | int, ...]

_KEY_FIRST = re.compile(
    r"(?P<key>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\d+\])*)(?: = (?P<value>.+?))?: (?P<msg>.*)",
    re.S)
"""An error of the whole spec that starts with the key it is about: ``grid.depth: ...``,
``pipeline[0]: ...``, ``grid.stages.rm3.fb_docs = 'x': ...``."""
_TYPE_WORDS = {
    "int_type": "a whole number", "int_parsing": "a whole number",
    "int_from_float": "a whole number", "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false", "string_type": "a string",
    "list_type": "a list", "dict_type": "a table", "model_type": "a table",
}
"""What a field takes, by the type of pydantic's error."""


def error_lines(path: str, text: str, data: Any, errors: Iterable[Mapping[str, Any]],
                model: Any) -> list[str]:
    """One line per error of validating ``data`` (read from ``text``, the file ``path``) as
    ``model`` (its union branches merged as the module says)."""
    lines_of = key_lines(text)
    out: list[str] = []
    for key, msg in _merged(data, list(errors), model):
        found = _KEY_FIRST.fullmatch(msg)
        named = _parse_key(found.group("key")) if found else ()
        if key and named and named[:len(key)] != key \
                and _value_at(data, key + named, _ABSENT) is not _ABSENT:
            named = key + named  # a table's error naming a key inside it: ``objectives: ...``
        if found and (not key and str(named[0]) in model.model_fields
                      or key and len(named) > len(key) and named[:len(key)] == key):
            # a message of the whole spec (or of a table) that starts with the key it is about
            key = named
            value = found.group("value")
            msg = f"got {value}: {found.group('msg')}" if value else found.group("msg")
            key = _element(data, key, value)
        line = _line(lines_of, key)
        where = f"{path}:{line}" if line is not None else path
        out.append(f"{where}: field {_shown(key)!r}: {_lines_named(msg, lines_of, line)}")
    return list(dict.fromkeys(out))


_TABLE_NAMED = re.compile(r"\[((?:grid\.)?stages\.[A-Za-z_][\w-]*)\]")
"""A ``[stages.NAME]`` or ``[grid.stages.NAME]`` table named in a message (``fb is
[stages.fb]``)."""


def _lines_named(msg: str, lines_of: Mapping[Path, int | None], line: int | None) -> str:
    """``msg`` with the line of each ``[stages.NAME]`` (or ``[grid.stages.NAME]``) table it
    names, but the error's own line: an error about how a named sub-pipeline is used is the
    using field's, and names both lines (``pipeline`` at line 7: ``fb is [stages.fb] (line
    9)``)."""
    def named(m: re.Match[str]) -> str:
        at = lines_of.get(tuple(m.group(1).split(".")))
        return m.group(0) if at is None or at == line else f"{m.group(0)} (line {at})"

    return _TABLE_NAMED.sub(named, msg)


def _shown(key: Path) -> str:
    """``grid.rrf_k[0]``; ``(spec)`` for the whole spec."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in key).lstrip(".")
    return text or "(spec)"


def _parse_key(text: str) -> Path:
    return tuple(int(p[1:-1]) if p.startswith("[") else p
                 for p in re.findall(r"\[\d+\]|[^.\[\]]+", text))


def _is_branch(part: Any) -> bool:
    """A ``loc`` part that names a union branch (``list[int]``, ``str``,
    ``function-after[_check(), Steps]``), never a key of the spec (keys are lower case)."""
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float", "bool")
                                      or part[:1].isupper())


def _split(data: Any, loc: Sequence[Any]) -> tuple[Path, list[tuple[int, str]]]:
    """The key path of ``loc`` without its branch names, and each branch name with the
    length of the path before it."""
    path: list[str | int] = []
    branches: list[tuple[int, str]] = []
    current, present = data, True
    for part in loc:
        found = present and (
            (isinstance(current, Mapping) and part in current)
            or (isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)))
        if found:
            current = current[part]
        elif _is_branch(part):
            branches.append((len(path), str(part)))
            continue
        else:
            present = False
        path.append(part)
    return tuple(path), branches


_ABSENT = object()


def _value_at(data: Any, path: Path, absent: Any = None) -> Any:
    """The value at ``path`` in the spec's data, ``absent`` where there is none."""
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return absent
    return data


def _shape(branch: str) -> str:
    """The shape of value a union branch takes: ``list``, ``str``, ``number``, ``bool`` or
    ``table`` (a model such as ``Steps``)."""
    if branch.startswith("list"):
        return "list"
    if branch in ("str", "bool"):
        return branch
    return "number" if branch in ("int", "float") else "table"


def _shape_of(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, bool):
        return "bool"
    return "str" if isinstance(value, str) else "number"


def _words(branch: str) -> str:
    """What a union branch takes, in words."""
    inner = branch[5:-1] if branch.startswith("list[") else ""
    if inner:
        return "a list of " + {"int": "whole numbers", "float": "numbers",
                               "str": "strings"}.get(inner, "values")
    if branch.startswith("list"):
        return "a list"
    if "Steps" in branch:
        return "steps {start, stop, step}"
    return {"str": "a string", "int": "a whole number", "float": "a number",
            "bool": "true or false"}.get(branch, "a table")


def _merged(data: Any, errors: list[Mapping[str, Any]], model: Any) -> list[tuple[Path, str]]:
    """``(key path, message)`` of each error, the branches of each union merged: the errors of
    the branch the value's shape picks, else one line naming what every branch takes."""
    items = [(*_split(data, e["loc"]), e) for e in errors]
    while any(branches for _, branches, _ in items):
        groups: dict[Path, list[int]] = {}
        for i, (path, branches, _) in enumerate(items):
            if branches:
                groups.setdefault(path[:branches[0][0]], []).append(i)
        drop: set[int] = set()
        merged: dict[int, tuple[Path, list[tuple[int, str]], Mapping[str, Any]]] = {}
        for where, members in groups.items():
            value = _value_at(data, where)
            picked = [i for i in members if _shape(items[i][1][0][1]) == _shape_of(value)]
            if picked:
                drop.update(set(members) - set(picked))
                for i in picked:
                    merged[i] = (items[i][0], items[i][1][1:], items[i][2])
            else:
                names = list(dict.fromkeys(items[i][1][0][1] for i in members))
                drop.update(members[1:])
                merged[members[0]] = (where, [], {
                    "loc": where, "type": "union", "input": value,
                    "msg": f"expected {' or '.join(_words(n) for n in names)}, got {value!r}"})
        items = [merged.get(i, item) for i, item in enumerate(items) if i not in drop]
    return [(path, _message(model, path, e)) for path, _, e in items]


def _message(model: Any, path: Path, err: Mapping[str, Any]) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "union":
        return msg
    problem = value_problem(model, {**err, "loc": path})  # a number out of range: the range
    if problem != msg:
        return f"got {err['input']!r}: {problem}"
    wanted = _TYPE_WORDS.get(str(err["type"]))
    return f"got {err['input']!r}: expected {wanted}" if wanted and "input" in err else msg


_STAGE_PARAM = re.compile(r"stage (?P<name>[A-Za-z_][\w-]*): (?P<param>\w+) = (?P<value>\S+)")
"""A stage's refusal of one of its parameters' values: ``stage rm3: fb_terms = 200000 but
the index's vocabulary holds 1042 terms``."""


def _element(data: Any, key: Path, value: str | None) -> Path:
    """``key`` with the index of the element ``value`` names when ``key`` holds a list of
    several values, one of them ``value`` (an axis: ``grid.stages.rm3.fb_terms = 0`` is
    ``grid.stages.rm3.fb_terms[1]`` of ``[10, 0]``); ``key`` otherwise."""
    written = _value_at(data, key, _ABSENT)
    if value is None or not isinstance(written, list) or len(written) < 2:
        return key  # one value: the field says it
    at = [i for i, v in enumerate(written) if repr(v) == value or str(v) == value]
    return (*key, at[0]) if len(at) == 1 else key


def stage_error_line(path: str, text: str, data: Any, message: str) -> str:
    """``message``, a stage's refusal of a parameter found when the sweep starts (against
    the store: feedback terms beyond the vocabulary), where the spec ``path`` (its ``text``,
    read as ``data``) writes that value: ``spec.toml:9: field 'grid.stages.rm3.fb_terms[1]':
    stage rm3: ...``, as a refusal when the spec loads reads; ``path: message`` when the
    spec does not write it (a default) or the message names no parameter."""
    found = _STAGE_PARAM.match(message)
    if found is None:
        return f"{path}: {message}"
    name, param, value = found.group("name", "param", "value")
    keys: list[Path] = [("grid", "stages", name, param), ("stages", name, param)]
    for written_at in keys:
        if _value_at(data, written_at, _ABSENT) is _ABSENT:
            continue
        key = _element(data, written_at, value)  # an axis: the value refused
        line = _line(key_lines(text), key)
        where = f"{path}:{line}" if line is not None else path
        return f"{where}: field {_shown(key)!r}: {message}"
    return f"{path}: {message}"


def _line(lines_of: Mapping[Path, int | None], key: Path) -> int | None:
    """The line of ``key``, or of the nearest key or table above it that has one."""
    for n in range(len(key), 0, -1):
        line = lines_of.get(key[:n])
        if line is not None:
            return line
        if key[:n] in lines_of:  # written on several lines: no line is the one
            return None
    return None


def _unquoted(raw: str) -> str:
    """A basic string's text (its escapes read as JSON's, close to TOML's)."""
    import json

    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:
        return raw


class _Reader:
    """Reads the keys of valid TOML text: ``lines[path]`` is the 1-based line where the key,
    table header or array element at ``path`` is written (None when written more than
    once)."""

    def __init__(self, text: str) -> None:
        self.text, self.i, self.line = text, 0, 1
        self.lines: dict[Path, int | None] = {}

    def mark(self, path: Path, line: int) -> None:
        self.lines[path] = None if path in self.lines else line

    def peek(self, k: int = 1) -> str:
        return self.text[self.i:self.i + k]

    def advance(self, k: int = 1) -> None:
        self.line += self.text.count("\n", self.i, self.i + k)
        self.i += k

    def blank(self, newlines: bool) -> None:
        """Skip spaces (and newlines and comments when ``newlines``)."""
        while self.i < len(self.text):
            c = self.peek()
            if c in " \t" or (newlines and c in "\r\n"):
                self.advance()
            elif c == "#" and newlines:
                end = self.text.find("\n", self.i)
                self.advance((len(self.text) if end < 0 else end) - self.i)
            else:
                return

    def key(self) -> Path:
        """A dotted key (bare or quoted parts)."""
        parts: list[str | int] = []
        while True:
            self.blank(False)
            c = self.peek()
            if c in "\"'":
                start = self.i
                self.string()
                raw = self.text[start + 1:self.i - 1]
                parts.append(_unquoted(raw) if c == '"' else raw)
            else:
                m = re.compile(r"[A-Za-z0-9_-]+").match(self.text, self.i)
                if m is None:
                    return tuple(parts)
                parts.append(m.group(0))
                self.advance(len(m.group(0)))
            self.blank(False)
            if self.peek() != ".":
                return tuple(parts)
            self.advance()

    def string(self) -> None:
        quote = self.peek(3) if self.peek(3) in ('"""', "'''") else self.peek()
        self.advance(len(quote))
        while self.i < len(self.text) and self.peek(len(quote)) != quote:
            self.advance(2 if quote[0] == '"' and self.peek() == "\\" else 1)
        self.advance(len(quote))
        while quote in ('"""', "'''") and self.peek() == quote[0]:  # up to two more quotes
            self.advance()

    def value(self, path: Path) -> None:
        c = self.peek()
        if c in "\"'":
            self.string()
        elif c == "[":
            self.advance()
            n = 0
            while True:
                self.blank(True)
                if self.peek() in ("]", ""):
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                self.mark((*path, n), self.line)
                self.value((*path, n))
                n += 1
        elif c == "{":
            self.advance()
            while True:
                self.blank(False)
                if self.peek() in ("}", ""):
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                self.assignment(path)
        else:
            m = re.compile(r"[^\s,\]}#]+").match(self.text, self.i)
            self.advance(len(m.group(0)) if m else 1)

    def assignment(self, table: Path) -> None:
        line = self.line
        key = self.key()
        for n in range(1, len(key)):  # a dotted key's tables, defined where it is written
            self.mark((*table, *key[:n]), line)
        self.mark((*table, *key), line)
        self.blank(False)
        self.advance()  # "="
        self.blank(False)
        self.value((*table, *key))

    def read(self) -> dict[Path, int | None]:
        table: Path = ()
        while True:
            self.blank(True)
            if self.i >= len(self.text):
                return self.lines
            if self.peek() == "[":
                double = self.peek(2) == "[["
                self.advance(2 if double else 1)
                table = self.key()
                self.mark(table, self.line)
                self.advance(2 if double else 1)
            else:
                self.assignment(table)


def key_lines(text: str) -> dict[Path, int | None]:
    """The 1-based line of every key, table and array element of the TOML ``text`` (already
    read by ``tomllib``: this reader does not check it), by its path (``("grid", "rrf_k",
    0)``); None for a path written more than once."""
    try:
        return _Reader(text).read()
    except (IndexError, ValueError, UnicodeDecodeError):  # not expected of valid TOML
        return {}


def located(path: str | PathLike[str], message: str, model: type[BaseModel]) -> str:
    """A refusal found once the spec has loaded (against the dataset, or when a model is about
    to train) whose message starts with the spec key it is about (``finetune.negative_depth =
    1: ...``), as a refusal when the spec loads reads: ``spec.toml:16: field
    'finetune.negative_depth': got 1: ...``; the message as it is when it names no key of the
    spec, or the file no longer reads. ``model``: the spec's model
    (:class:`~aiblox.sweep.spec.SweepSpec`, given: this module is what it imports)."""
    import tomllib

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return message
    (line,) = error_lines(str(path), text, data, [
        {"loc": (), "msg": message, "type": "value_error", "input": data}], model)
    return message if "field '(spec)'" in line else line
