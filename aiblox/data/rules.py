"""What every dataset layout shares: :class:`DatasetError` (naming the file, the line and the
field), the id rule, the bound on grades, derived splits (:func:`parse_split`,
:func:`split_part`) and the BEIR lines a dataset's hash is made of."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from aiblox.contracts.items import ItemRecord

__all__ = ["CORPUS_FILES", "DatasetError", "ID_RULE", "MAX_GRADE", "parse_split", "split_part"]


CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz")


ID_RULE = "ids: surrounding whitespace dropped, none inside"
"""The id rule every loader applies (see the module doc), named in what a store's sync record
covers (:mod:`aiblox.engine.workspace`): a store synced under another rule syncs again."""


MAX_GRADE = 1000
"""Qrels grades must lie in ``[-MAX_GRADE, MAX_GRADE]``."""


class DatasetError(ValueError):
    """Bad dataset input, with the file, line (1-based, None for whole-file problems) and field."""

    def __init__(self, file: str | Path, line: int | None, field: str, message: str,
                 unit: str = "line") -> None:
        """``unit``: ``line`` (``file:12``) or ``row`` (``file, row 12``: a parquet row, 1-based,
        or a DataFrame's index label)."""
        if line is None:
            where = f"{file}"
        else:
            where = f"{file}:{line}" if unit == "line" else f"{file}, row {line}"
        super().__init__(f"{where}: field {field!r}: {message}")
        self.file, self.line, self.field, self.message = str(file), line, field, message
        self.unit = unit


def doc_line(doc: ItemRecord) -> str:
    obj: dict[str, Any] = {"_id": doc.id, "title": doc.title, "text": doc.text}
    if doc.metadata:
        obj["metadata"] = doc.metadata
    return json.dumps(obj) + "\n"


def query_line(qid: str, text: str) -> str:
    return json.dumps({"_id": qid, "text": text}) + "\n"


def qrels_lines(rows: Iterator[tuple[str, str, int]]) -> Iterator[str]:
    yield "query-id\tcorpus-id\tscore\n"
    for q, d, g in rows:
        yield f"{q}\t{d}\t{g}\n"


def feed_file(h: Hasher, name: str, lines: Iterator[str]) -> None:
    h.update(f"\x00{name}\x00".encode())
    for line in lines:
        h.update(line.encode("utf-8"))


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...


_DERIVED = re.compile(r"^(?P<base>[^:]+):(?P<i>\d+)/(?P<n>\d+)$")


def parse_split(split: str) -> tuple[str, int, int] | None:
    """``("test", 0, 2)`` for the derived split ``test:0/2``; None for a plain split name.
    Raises ``ValueError`` for a ``:`` name that is not ``<split>:<i>/<n>`` with
    ``0 <= i < n`` and ``n >= 2``."""
    if ":" not in split:
        return None
    m = _DERIVED.match(split)
    if m is None:
        raise ValueError(f"derived split {split!r} is not <split>:<i>/<n> (e.g. 'test:0/2')")
    base, i, n = m["base"], int(m["i"]), int(m["n"])
    if n < 2 or i >= n:
        raise ValueError(f"derived split {split!r}: need n >= 2 and 0 <= i < n")
    return base, i, n


def split_part(query_id: str, n: int) -> int:
    """The part (``0 .. n-1``) of a hash partition into ``n`` parts that ``query_id`` falls in:
    ``int(sha256(query_id), 16) % n``."""
    return int(hashlib.sha256(query_id.encode("utf-8")).hexdigest(), 16) % n


def id_problem(value: str) -> str | None:
    """Why ``value`` (already stripped) breaks the id rule (:func:`clean_id`), or None."""
    if not value:
        return "missing id (empty)"
    if value.split() != [value]:
        i = next(i for i, c in enumerate(value) if c.isspace())
        return (f"id {value!r} holds whitespace ({value[i]!r} at character {i}), which a TREC "
                f"run or qrels line cannot carry (trec_eval splits its lines on whitespace): "
                f"rename it")
    return None


def clean_id(value: str) -> str:
    """The one id rule of corpus, queries, qrels, answers (every layout) and run files: an id
    is its text without surrounding whitespace (``" d1 "`` is ``d1``, as a TREC line gives
    it); an empty one, or one holding whitespace inside, is refused (``ValueError``)."""
    value = value.strip()
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def same_id_note(at: Any, raw: Any, first_raw: Any) -> str:
    """``(first at line 3)``, saying why when the two were written differently."""
    if str(raw) == str(first_raw):
        return f"(first at {at})"
    return (f"(first at {at}, written {str(first_raw)!r} there and {str(raw)!r} here: ids are "
            f"compared without surrounding whitespace)")


class NoHash:
    def update(self, data: bytes, /) -> None:
        pass


class Both:
    """Feeds the bytes read to two hashers (the dataset's and the corpus's own)."""

    def __init__(self, *hashers: Hasher) -> None:
        self.hashers = hashers

    def update(self, data: bytes) -> None:
        for h in self.hashers:
            h.update(data)
