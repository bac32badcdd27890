"""BEIR files read line by line in bounded memory: JSONL objects checked for Unicode text and
finite numbers, ids and text fields, and qrels files in BEIR's or TREC's layout with their
grades."""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from aiblox.contracts.items import ItemRecord
from aiblox.data.rules import (
    MAX_GRADE,
    DatasetError,
    Hasher,
    clean_id,
    feed_file,
    id_problem,
    qrels_lines,
)
from aiblox.inputs import InputFileError, bounded_lines

__all__ = []


def read_lines(path: Path, hasher: Hasher, hashed_name: str | None = None
                ) -> Iterator[tuple[int, str]]:
    """The lines of a text file (decompressed when ``.gz``), bounded: a file that is not a
    regular one (``/dev/zero``, a FIFO) or a line over :data:`~aiblox.inputs.MAX_LINE_BYTES`
    is a :class:`DatasetError` naming it, not a read until memory runs out. A UTF-8 byte-order
    mark opening the file (saved "UTF-8 with BOM") is not part of its first line; ``hasher``
    is fed the bytes as read."""
    hashed_name = hashed_name or path.name.removesuffix(".gz")
    hasher.update(f"\x00{hashed_name}\x00".encode())
    lineno = 0
    try:
        for lineno, raw in bounded_lines(path, gz=path.suffix == ".gz"):
            hasher.update(raw)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(path, lineno, "encoding", f"not UTF-8: {exc}") from None
            yield lineno, text.removeprefix("\ufeff") if lineno == 1 else text
    except InputFileError as exc:
        raise file_error(path, exc) from None
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, or a damaged .gz
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DatasetError(path, lineno + 1 if lineno else None, "file",
                           f"cannot read: {reason or type(exc).__name__}") from None


def file_error(path: str | Path, exc: InputFileError) -> DatasetError:
    """An input file refused by :mod:`aiblox.inputs` (not a regular file, a line too long), as
    a :class:`DatasetError` naming it."""
    return DatasetError(path, exc.line, "line" if exc.line is not None else "file",
                        f"cannot read: {exc.reason}")


_SUSPECT_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")
"""A JSON escape of a UTF-16 surrogate (``\\ud800``; paired ones are valid, lone ones not) or
of NUL (``\\u0000``)."""


def non_finite(value: str) -> float:
    raise ValueError(f"non-finite number {value}")


def finite_float(value: str) -> float:
    f = float(value)
    if not math.isfinite(f):
        raise ValueError(f"number {value} is out of range (not finite as a float)")
    return f


def read_jsonl(path: Path, hasher: Hasher, hashed_name: str | None = None
                ) -> Iterator[tuple[int, dict]]:
    for lineno, line in read_lines(path, hasher, hashed_name):
        if not line.strip():
            continue
        try:  # without its line break: an unterminated string is one, not a control character
            obj = json.loads(line.rstrip("\r\n"), parse_constant=non_finite,
                             parse_float=finite_float)
        except json.JSONDecodeError as exc:
            raise DatasetError(path, lineno, "json",
                               f"malformed JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise DatasetError(path, lineno, "json", "nested too deeply") from None
        except ValueError as exc:  # a non-finite number, an integer too long to convert
            raise DatasetError(path, lineno, "json", str(exc)) from None
        if not isinstance(obj, dict):
            raise DatasetError(path, lineno, "json", "expected a JSON object")
        if line.count('":') > len(obj):  # maybe a key twice (or nested objects): parse again
            _check_unique_keys(line, path, lineno)
        if _SUSPECT_ESCAPE.search(line):
            check_unicode(obj, path, lineno, "")
        yield lineno, obj


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)
    return dict(pairs)


def _check_unique_keys(line: str, path: Path, lineno: int) -> None:
    """Refuse an object holding one key twice (``{"_id": "a", "_id": "b"}``): JSON keeps the
    last silently, so the line would be read as something its author may not have meant. Only
    lines with more ``":`` than top-level keys are parsed again, with a hook that sees every
    pair."""
    try:
        json.loads(line.rstrip("\r\n"), object_pairs_hook=_unique_pairs)
    except _DuplicateKey as exc:
        key = str(exc)
        raise DatasetError(path, lineno, key, f"the key {key!r} appears twice in one object "
                           f"(JSON would keep the last, silently)") from None


def check_unicode(value: Any, path: Path, lineno: int, where: str) -> None:
    """Refuse strings that are not Unicode text (lone surrogates from ``\\udXXX`` escapes) or
    hold NUL (PostgreSQL cannot store it; DuckDB's text functions stop at it)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise DatasetError(path, lineno, where or "json",
                               f"NUL character (\\u0000) at character {value.index(chr(0))}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            ch = value[exc.start]
            raise DatasetError(path, lineno, where or "json",
                               f"lone surrogate \\u{ord(ch):04x} at character {exc.start}: "
                               f"not Unicode text (a JSON escape of half a UTF-16 pair?)"
                               ) from None
    elif isinstance(value, dict):
        for k, v in value.items():
            check_unicode(k, path, lineno, f"{where} (a key)" if where else "(a key)")
            check_unicode(v, path, lineno, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_unicode(v, path, lineno, f"{where}[{i}]")


def get_id(obj: dict, path: Path, lineno: int, key: str = "_id") -> str:
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(path, lineno, key, "missing, or not a non-empty string or a whole "
                                              "number (a number id is read as its digits)")
    try:
        return clean_id(value)
    except ValueError as exc:
        raise DatasetError(path, lineno, key, str(exc)) from None


def text_field(obj: dict, path: Path, lineno: int, key: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(path, lineno, key, f"expected a string, got {type(value).__name__}")
    return value


_QRELS_HEADER = ("query-id", "query_id", "qid")


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A grade as trec_eval reads one: ASCII digits only (``\\d`` would take fullwidth or
Arabic-Indic digits, which trec_eval reads as 0 and aiblox's run-file reader refuses)."""


_BEIR = "query-id<TAB>corpus-id<TAB>score (BEIR)"


_TREC = "query-id iteration corpus-id relevance, separated by whitespace (TREC)"


def _qrels_layout(line: str, path: Path, lineno: int) -> str:
    """``beir`` or ``trec``: the layout of a qrels file, from its first data line."""
    tabs = len(line.split("\t"))
    if tabs == 3:
        return "beir"
    words = len(line.split())
    if words == 4:
        return "trec"
    raise DatasetError(path, lineno, "row",
                       f"expected query-id, corpus-id, score separated by tabs ({_BEIR}) or "
                       f"{_TREC}; got {tabs} tab-separated and {words} whitespace-separated "
                       f"column(s)")


def parse_grade(raw: str, path: Path, lineno: int) -> int:
    """A qrels grade: a whole number in ``[-MAX_GRADE, MAX_GRADE]`` (``2`` or ``2.0``) written
    in ASCII digits (:data:`_NUMBER`)."""
    if not _NUMBER.fullmatch(raw):
        try:
            finite = math.isfinite(float(raw))
        except ValueError:
            finite = True
        raise DatasetError(path, lineno, "score", f"not {'a' if finite else 'a finite'} number: "
                                                  f"{raw!r}")
    value = Decimal(raw)
    if abs(value) > MAX_GRADE:
        raise DatasetError(path, lineno, "score",
                           f"grade {raw} is outside [-{MAX_GRADE}, {MAX_GRADE}]")
    if value != value.to_integral_value():
        raise DatasetError(path, lineno, "score",
                           f"not a whole number: {raw!r} (grades are integers; ranx would "
                           f"truncate it to {int(value)})")
    return int(value)


def check_judged(judged: dict[str, dict[str, int]], path: Path) -> None:
    """A qrels file must judge some query and hold a relevant judgment: without one every
    metric is 0."""
    if not judged:
        raise DatasetError(path, None, "qrels", "no judgments (an empty file, or a header only)")
    if not any(g >= 1 for docs in judged.values() for g in docs.values()):
        n = sum(len(docs) for docs in judged.values())
        raise DatasetError(path, None, "score", f"no relevant judgment: all {n} grades are "
                                                f"below 1, so every metric would be 0")


class _LayoutHash:
    """The bytes :func:`read_lines` feeds, held until a qrels file's layout is known: a BEIR
    file with its header is hashed as its bytes (every BEIR dataset keeps its hash); a file in
    another layout (no header, TREC's four columns) is hashed as its rows written as a BEIR file
    one way (:func:`~aiblox.data.rules.qrels_lines`: ids trimmed, whole-number grades, LF line
    ends, as a CSV table's rows are). The same judgments hash alike in every layout only when
    the file with the header is written that way (``2.0``, CRLF, padded ids or a byte-order
    mark are in its bytes)."""

    def __init__(self, hasher: Hasher) -> None:
        self.hasher = hasher
        self.held: list[bytes] | None = []  # None: passed on (a BEIR file with its header)
        self.rows = False  # its rows are fed, not its bytes

    def update(self, data: bytes, /) -> None:
        if self.held is None:
            self.hasher.update(data)
        elif not self.rows:
            self.held.append(data)

    def as_bytes(self) -> None:
        for data in self.held or ():
            self.hasher.update(data)
        self.held = None

    def as_rows(self, name: str) -> None:
        self.held, self.rows = [], True
        feed_file(self.hasher, name, qrels_lines(iter(())))  # the name and BEIR's header

    def row(self, qid: str, doc_id: str, grade: int) -> None:
        if self.rows:
            self.hasher.update(f"{qid}\t{doc_id}\t{grade}\n".encode())


def read_qrels(path: Path, hasher: Hasher, queries: dict[str, str],
                corpus: Mapping[str, ItemRecord]) -> tuple[dict[str, dict[str, int]], int, int]:
    """``(judged, rows naming a document absent from the corpus, repeated identical rows)``.
    ``hasher`` is fed the file's bytes when it is a BEIR file with its header, else its rows in
    that form (:class:`_LayoutHash`)."""
    judged: dict[str, dict[str, int]] = {}
    at: dict[tuple[str, str], int] = {}
    missing = duplicates = 0
    layout, first = "", 0
    fed = _LayoutHash(hasher)
    for lineno, line in read_lines(path, fed):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        tabs = line.split("\t")
        if not layout:
            if tabs[0].strip() in _QRELS_HEADER or line.split()[0] in _QRELS_HEADER:
                if len(tabs) != 3:
                    raise DatasetError(path, lineno, "header",
                                       f"expected the header query-id<TAB>corpus-id<TAB>score; "
                                       f"got {len(tabs)} tab-separated column(s)")
                layout, first = "beir", lineno
                fed.as_bytes()
                continue
            layout, first = _qrels_layout(line, path, lineno), lineno
            fed.as_rows(path.name.removesuffix(".gz"))
        if layout == "beir":
            if len(tabs) != 3:
                words = len(line.split())
                hint = " (a TREC row in a BEIR file?)" if words == 4 else ""
                raise DatasetError(path, lineno, "row",
                                   f"expected query-id, corpus-id, score separated by tabs, "
                                   f"as from line {first}; got {len(tabs)} column(s){hint}")
            qid, doc_id, raw = (c.strip() for c in tabs)
            for value, column in ((qid, "query-id"), (doc_id, "corpus-id")):
                problem = id_problem(value) if value else None  # empty: named below
                if problem is not None:
                    raise DatasetError(path, lineno, column, problem)
        else:
            cols = line.split()
            if len(cols) != 4:
                raise DatasetError(path, lineno, "row",
                                   f"expected {_TREC}, as from line {first}; got "
                                   f"{len(cols)} column(s)")
            qid, _iteration, doc_id, raw = cols
        grade = parse_grade(raw, path, lineno)
        fed.row(qid, doc_id, grade)
        if qid not in queries:
            raise DatasetError(path, lineno, "query-id", f"unknown query {qid!r}"
                               + ("" if queries else " (the queries file holds no query)"))
        if not doc_id:
            raise DatasetError(path, lineno, "corpus-id", "empty")
        docs = judged.setdefault(qid, {})
        if doc_id in docs:
            before = at[qid, doc_id]
            if docs[doc_id] != grade:
                raise DatasetError(path, lineno, "score",
                                   f"conflicting judgments of query {qid!r}, document "
                                   f"{doc_id!r}: grade {grade} here, {docs[doc_id]} at line "
                                   f"{before}")
            duplicates += 1
            continue
        if doc_id not in corpus:
            missing += 1
        docs[doc_id] = grade
        at[qid, doc_id] = lineno
    check_judged(judged, path)
    return judged, missing, duplicates
