"""What every dataset layout shares: :class:`DatasetError` (naming the file, the line and the
field), the id rule, the bound on grades, derived splits (:func:`parse_split`,
:func:`split_part`, and which queries two split names can share: :func:`held_out_by`,
:func:`splits_overlap`) and the BEIR lines a dataset's hash is made of."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from math import gcd, lcm
from pathlib import Path
from typing import Any, Protocol

from aiblox.contracts.items import ItemRecord

__all__ = ["CORPUS_FILES", "DatasetError", "ID_RULE", "MAX_GRADE", "held_out_by", "parse_split",
           "split_part", "splits_overlap"]


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


_DERIVED = re.compile(r"(?P<base>[^:]+):(?P<i>0|[1-9][0-9]*)/(?P<n>0|[1-9][0-9]*)")
"""A derived split as written one way only: ASCII digits without a leading zero, nothing
after (``test:00/2``, ``test:0/02``, Arabic-Indic digits or a trailing line break would be
other names for the queries of ``test:0/2``: a check that two splits differ would be passed by
a spelling)."""


def parse_split(split: str) -> tuple[str, int, int] | None:
    """``("test", 0, 2)`` for the derived split ``test:0/2``; None for a plain split name.
    Raises ``ValueError`` for a ``:`` name that is not ``<split>:<i>/<n>`` with
    ``0 <= i < n`` and ``n >= 2``, ``i`` and ``n`` written in the digits 0-9 without a leading
    zero (each part has one name)."""
    if ":" not in split:
        return None
    m = _DERIVED.fullmatch(split)
    if m is None:
        raise ValueError(f"derived split {split!r} is not <split>:<i>/<n> with i and n in the "
                         f"digits 0-9, no leading zero (e.g. 'test:0/2')")
    base, i, n = m["base"], int(m["i"]), int(m["n"])
    if n < 2 or i >= n:
        raise ValueError(f"derived split {split!r}: need n >= 2 and 0 <= i < n")
    return base, i, n


def _residues(split: str) -> tuple[str, int, int]:
    """``(base, n, i)``: the queries of ``split`` are those of ``base`` whose id's hash is
    ``i`` modulo ``n`` (a plain split: every residue modulo 1)."""
    parsed = parse_split(split)
    return (split, 1, 0) if parsed is None else (parsed[0], parsed[2], parsed[1])


def held_out_by(split: str, splits: Sequence[str]) -> list[str]:
    """The splits of ``splits`` that together hold every query ``split`` can hold, whatever
    the data ([] when they do not): a derived split ``base:i/n`` holds the queries of ``base``
    whose id's hash is ``i`` modulo ``n`` (:func:`split_part`), so ``split`` is covered when
    every residue it takes modulo the least common multiple of the moduli is one a split of
    ``splits`` takes."""
    try:
        base, m, i = _residues(split)
        scored = [(s, *_residues(s)[1:]) for s in splits if _residues(s)[0] == base]
    except ValueError:  # a malformed split: refused on its own
        return []
    modulus = lcm(m, *(n for _, n, _ in scored)) if scored else 0
    if not scored or modulus > 100_000:
        return []
    if all(any(r % n == j for _, n, j in scored) for r in range(i, modulus, m)):
        return [s for s, _, _ in scored]
    return []


def splits_overlap(a: str, b: str) -> bool:
    """Whether the splits named ``a`` and ``b`` can share a query, whatever the data: both
    are ``base`` or parts of it (``test``, ``test:0/2``, ``test:0/3``) and some residue is
    taken by both, ``i`` modulo ``m`` and ``j`` modulo ``n`` meeting when ``i - j`` is a
    multiple of ``gcd(m, n)`` (``test:0/2`` and ``test:1/2`` never meet; ``test:0/2`` and
    ``test:0/3`` meet at 0 modulo 6). A malformed name shares nothing (refused on its own)."""
    try:
        (base_a, m, i), (base_b, n, j) = _residues(a), _residues(b)
    except ValueError:
        return False
    return base_a == base_b and (i - j) % gcd(m, n) == 0


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
