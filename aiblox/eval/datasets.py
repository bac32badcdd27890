"""BEIR-layout datasets: loading, validation with precise errors, and a content hash.

Layout: ``corpus.jsonl`` (or ``corpus.jsonl.gz``) with ``{"_id", "title", "text"}`` per line,
``queries.jsonl`` with ``{"_id", "text"}``, ``qrels/<split>.tsv`` with a
``query-id<TAB>corpus-id<TAB>score`` header (or TREC qrels, below), and optionally
``answers.jsonl`` (SQuAD-style gold answer spans: ``{"_id", "corpus-id", "answers",
"answer_starts"}``).

Derived splits: ``<split>:<i>/<n>`` (e.g. ``test:0/2`` and ``test:1/2``) is the part ``i`` of a
deterministic hash partition of ``<split>`` into ``n`` parts: the queries whose
``int(sha256(query_id), 16) % n == i``, with their qrels. Parts are disjoint and cover the split,
so a dataset with one judged split (``squad-v1.1-dev``) can be tuned on one part and reported on
another. ``available_splits`` lists files only; any ``<file split>:<i>/<n>`` with
``0 <= i < n`` and ``n >= 2`` loads.

Qrels layouts, detected per file from its first line: BEIR's three tab-separated columns
``query-id<TAB>corpus-id<TAB>score`` with or without that header, or TREC's four
whitespace-separated columns ``query-id iteration corpus-id relevance`` (no header; the
iteration column is ignored). Every line of a file must have the file's layout; a line that
does not (or a first line that is neither) is an error naming it.

Grades are integers (``2`` or ``2.0``) in ``[-1000, 1000]``; a non-integer (``1.9``), a
non-finite (``inf``, ``nan``) or a larger one is an error. Grades below 1 are judged
non-relevant, as in ranx and trec_eval (ranx counts a document relevant when its grade is at
least 1), so TREC's negative grades (``-1``, ``-2`` for junk and spam in the Web tracks) load
and count as non-relevant; bpref's judged non-relevant documents are the grade-0 ones. Every
ranx metric stays finite up to the bound (``ndcg_burges``'s gain is ``2^grade - 1``).

Bad input raises :class:`DatasetError` naming the file, the line and the field: malformed JSON
or UTF-8, lone surrogates (``"\\ud800"`` escapes, which are not Unicode text), NUL characters
and non-finite numbers in any JSON field, an empty corpus, a qrels file with no judgment or no
relevant one, two different grades for one (query, document) pair (naming both lines).
Tolerated, counted and warned about, not fatal: a qrels row naming a document absent from the
corpus (``Dataset.missing_qrels_docs``; a defect of public collections), a repeated identical
judgment (``Dataset.duplicate_qrels``) and a derived split part that holds no query.
Documents and judged queries whose text the DuckDB store's BM25 cannot index (CJK, emoji, ...:
:mod:`aiblox.text.lexical_gaps`) are warned about once, with counts and an example
(``Dataset.lexical_gaps``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from aiblox.contracts.items import ItemRecord
from aiblox.text.lexical_gaps import LexicalGaps, lexical_gaps

__all__ = [
    "Dataset",
    "DatasetError",
    "GoldAnswer",
    "available_splits",
    "corpus_file",
    "corpus_hash",
    "find_dataset",
    "iter_corpus",
    "load_dataset",
    "parse_split",
    "split_part",
]

CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz")

MAX_GRADE = 1000
"""Qrels grades must lie in ``[-MAX_GRADE, MAX_GRADE]``."""

LEXICAL_ANALYZER = "bm25s"
"""The analyser whose blind spots :func:`load_dataset` warns about: the default BM25 engine's
(the index's bm25s tokens; ``fts.engine = "native"`` on DuckDB sees less: ``duckdb-fts``)."""


class DatasetError(ValueError):
    """Bad dataset input, with the file, line (1-based, None for whole-file problems) and field."""

    def __init__(self, file: str | Path, line: int | None, field: str, message: str) -> None:
        where = f"{file}:{line}" if line is not None else f"{file}"
        super().__init__(f"{where}: field {field!r}: {message}")
        self.file, self.line, self.field, self.message = str(file), line, field, message


@dataclass(frozen=True)
class GoldAnswer:
    """SQuAD-style gold answers for one query: strings and their offsets in the gold document."""

    corpus_id: str
    answers: tuple[str, ...]
    answer_starts: tuple[int, ...]


@dataclass
class Dataset:
    """A loaded BEIR dataset. ``corpus`` and ``queries`` keep file order."""

    name: str
    path: Path
    corpus: dict[str, ItemRecord]
    queries: dict[str, str]
    qrels: dict[str, dict[str, dict[str, int]]]
    """``{split: {query_id: {doc_id: grade}}}``."""
    hash: str
    """sha256 over the (decompressed) bytes of every file read, in a fixed order."""
    duplicate_qrels: dict[str, int] = field(default_factory=dict)
    """Per qrels file read (base split): repeated identical judgments (kept once, counted)."""
    lexical_gaps: dict[str, LexicalGaps] = field(default_factory=dict)
    """``documents`` and ``queries`` (the judged ones of the splits loaded) that
    :data:`LEXICAL_ANALYZER` gives no token although they hold text (empty when none)."""
    answers: dict[str, GoldAnswer] = field(default_factory=dict)
    missing_qrels_docs: dict[str, int] = field(default_factory=dict)
    """Per split: qrels rows naming a document absent from the corpus (kept, counted)."""
    corpus_hash: str = ""
    """sha256 over the (decompressed) bytes of the corpus file alone: what a store holds."""

    def split_queries(self, split: str) -> list[tuple[str, str]]:
        """``(query_id, text)`` of the queries judged in ``split``, sorted by id."""
        if split not in self.qrels:
            raise DatasetError(self.path / "qrels" / f"{split}.tsv", None, "split",
                               f"split not loaded; loaded: {sorted(self.qrels)}")
        return [(q, self.queries[q]) for q in sorted(self.qrels[split])]


class _Hasher(Protocol):
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


def available_splits(path: str | Path) -> list[str]:
    """Split names that have a ``qrels/<split>.tsv`` file."""
    qdir = Path(path) / "qrels"
    return sorted(p.stem for p in qdir.glob("*.tsv")) if qdir.is_dir() else []


def find_dataset(name_or_path: str | Path) -> Path:
    """Resolve a dataset name or path.

    Looks at the path itself, then ``<root>/<name>`` for each root in ``$AIBLOX_DATASETS``
    (``os.pathsep``-separated), ``./datasets``, ``../shared/datasets``, and the same two
    folders relative to the source checkout aiblox was installed from.
    """
    p = Path(name_or_path)
    if (p / "queries.jsonl").exists():
        return p
    roots = [r for r in os.environ.get("AIBLOX_DATASETS", "").split(os.pathsep) if r]
    repo = Path(__file__).resolve().parents[2]  # a source checkout: <repo>/aiblox/eval
    roots += ["datasets", "../shared/datasets", str(repo / "datasets"),
              str(repo.parent / "shared" / "datasets")]
    for root in roots:
        candidate = Path(root) / str(name_or_path)
        if (candidate / "queries.jsonl").exists():
            return candidate
    raise DatasetError(name_or_path, None, "path",
                       f"no BEIR dataset here or under {roots} (need queries.jsonl)")


def _read_lines(path: Path, hasher: _Hasher) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    hasher.update(f"\x00{path.name.removesuffix('.gz')}\x00".encode())
    lineno = 0
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                hasher.update(raw)
                try:
                    yield lineno, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(path, lineno, "encoding", f"not UTF-8: {exc}") from None
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, or a damaged .gz
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DatasetError(path, lineno + 1 if lineno else None, "file",
                           f"cannot read: {reason or type(exc).__name__}") from None


_SUSPECT_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")
"""A JSON escape of a UTF-16 surrogate (``\\ud800``; paired ones are valid, lone ones not) or
of NUL (``\\u0000``)."""


def _non_finite(value: str) -> float:
    raise ValueError(f"non-finite number {value}")


def _finite_float(value: str) -> float:
    f = float(value)
    if not math.isfinite(f):
        raise ValueError(f"number {value} is out of range (not finite as a float)")
    return f


def _read_jsonl(path: Path, hasher: _Hasher) -> Iterator[tuple[int, dict]]:
    for lineno, line in _read_lines(path, hasher):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=_non_finite, parse_float=_finite_float)
        except json.JSONDecodeError as exc:
            raise DatasetError(path, lineno, "json", f"malformed JSON: {exc.msg}") from None
        except RecursionError:
            raise DatasetError(path, lineno, "json", "nested too deeply") from None
        except ValueError as exc:  # a non-finite number, an integer too long to convert
            raise DatasetError(path, lineno, "json", str(exc)) from None
        if not isinstance(obj, dict):
            raise DatasetError(path, lineno, "json", "expected a JSON object")
        if _SUSPECT_ESCAPE.search(line):
            _check_unicode(obj, path, lineno, "")
        yield lineno, obj


def _check_unicode(value: Any, path: Path, lineno: int, where: str) -> None:
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
            _check_unicode(k, path, lineno, f"{where} (a key)" if where else "(a key)")
            _check_unicode(v, path, lineno, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_unicode(v, path, lineno, f"{where}[{i}]")


def _get_id(obj: dict, path: Path, lineno: int, key: str = "_id") -> str:
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise DatasetError(path, lineno, key, "missing or not a non-empty string")
    return value


def _text_field(obj: dict, path: Path, lineno: int, key: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(path, lineno, key, f"expected a string, got {type(value).__name__}")
    return value


def corpus_file(path: str | Path) -> Path:
    """The corpus file of the BEIR folder ``path`` (``corpus.jsonl`` or ``corpus.jsonl.gz``)."""
    found = next((Path(path) / f for f in CORPUS_FILES if (Path(path) / f).exists()), None)
    if found is None:
        raise DatasetError(Path(path) / "corpus.jsonl", None, "file", "no corpus.jsonl(.gz)")
    return found


def iter_corpus(corpus_path: Path, name: str, hasher: _Hasher | None = None
                ) -> Iterator[ItemRecord]:
    """The documents of a corpus file, one at a time in file order, each validated like
    :func:`load_dataset` does (errors name the file, line and field); only the ids seen are
    kept, so a corpus of any size streams in bounded memory. ``hasher`` is fed every byte."""
    first_line: dict[str, int] = {}
    for lineno, obj in _read_jsonl(corpus_path, hasher if hasher is not None else _NoHash()):
        doc_id = _get_id(obj, corpus_path, lineno)
        if doc_id in first_line:
            raise DatasetError(corpus_path, lineno, "_id",
                               f"duplicate id {doc_id!r} (first at line {first_line[doc_id]})")
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DatasetError(corpus_path, lineno, "metadata", "expected a JSON object")
        first_line[doc_id] = lineno
        yield ItemRecord(
            id=doc_id, kind="doc", source=name, source_ref=f"{corpus_path.name}:{lineno}",
            title=_text_field(obj, corpus_path, lineno, "title"),
            text=_text_field(obj, corpus_path, lineno, "text"), metadata=meta)
    if not first_line:
        raise DatasetError(corpus_path, None, "corpus",
                           "no documents (the file holds no JSON object line)")


def corpus_hash(corpus_path: Path) -> str:
    """:attr:`Dataset.corpus_hash` of a corpus file, read (and decompressed) without parsing."""
    h = hashlib.sha256()
    for _ in _read_lines(corpus_path, h):
        pass
    return h.hexdigest()


def load_dataset(name_or_path: str | Path, splits: list[str] | None = None,
                 name: str | None = None) -> Dataset:
    """Load a BEIR dataset (all splits when ``splits`` is None)."""
    path = find_dataset(name_or_path)
    name = name or path.name
    hasher = hashlib.sha256()
    corpus_path = corpus_file(path)

    corpus_hasher = hashlib.sha256()
    corpus = {it.id: it for it in iter_corpus(corpus_path, name,
                                              _Both(hasher, corpus_hasher))}

    queries: dict[str, str] = {}
    qfirst: dict[str, int] = {}
    qpath = path / "queries.jsonl"
    for lineno, obj in _read_jsonl(qpath, hasher):
        qid = _get_id(obj, qpath, lineno)
        if qid in queries:
            raise DatasetError(qpath, lineno, "_id",
                               f"duplicate id {qid!r} (first at line {qfirst[qid]})")
        if "text" not in obj:
            raise DatasetError(qpath, lineno, "text", "missing")
        qfirst[qid] = lineno
        queries[qid] = _text_field(obj, qpath, lineno, "text")

    known = available_splits(path)
    wanted = known if splits is None else list(splits)
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    missing_docs: dict[str, int] = {}
    read: dict[str, tuple[dict[str, dict[str, int]], int]] = {}
    parsed: dict[str, tuple[str, int, int] | None] = {}
    for split in wanted:
        try:
            parsed[split] = parse_split(split)
        except ValueError as exc:
            raise DatasetError(path / "qrels", None, "split", str(exc)) from None
        base = parsed[split][0] if parsed[split] is not None else split  # type: ignore[index]
        if base not in known:
            raise DatasetError(path / "qrels" / f"{base}.tsv", None, "split",
                               f"no split {split!r}; available: {known}")
        read[base] = ({}, 0)
    # each file is read (and hashed) once, in name order: the dataset hash does not depend on
    # the order in which the splits were asked for
    duplicates: dict[str, int] = {}
    for base in sorted(read):
        split_path = path / "qrels" / f"{base}.tsv"
        judged, missing, duplicates[base] = _read_qrels(split_path, hasher, queries, corpus)
        read[base] = judged, missing
        if missing:
            warnings.warn(f"{split_path}: {missing} qrels rows name documents absent "
                          f"from the corpus (kept; they count as unretrievable)", stacklevel=2)
        if duplicates[base]:
            warnings.warn(f"{split_path}: {duplicates[base]} qrels rows repeat an identical "
                          f"judgment (kept once)", stacklevel=2)
    for split in wanted:
        derived = parsed[split]
        judged, missing = read[derived[0] if derived is not None else split]
        if derived is not None:
            base, i, n = derived
            judged = {q: docs for q, docs in judged.items() if split_part(q, n) == i}
            missing = sum(1 for docs in judged.values() for d in docs if d not in corpus)
            if not judged:
                warnings.warn(f"{path / 'qrels' / f'{base}.tsv'}: derived split {split!r} "
                              f"holds no judged query (every metric on it is 0)", stacklevel=2)
        qrels[split], missing_docs[split] = judged, missing

    answers: dict[str, GoldAnswer] = {}
    apath = path / "answers.jsonl"
    if apath.exists():
        for lineno, obj in _read_jsonl(apath, hasher):
            qid = _get_id(obj, apath, lineno)
            if qid not in queries:
                raise DatasetError(apath, lineno, "_id", f"unknown query {qid!r}")
            doc_id = _get_id(obj, apath, lineno, "corpus-id")
            texts, starts = obj.get("answers"), obj.get("answer_starts")
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise DatasetError(apath, lineno, "answers", "expected a list of strings")
            if not isinstance(starts, list) or len(starts) != len(texts) \
                    or not all(isinstance(s, int) for s in starts):
                raise DatasetError(apath, lineno, "answer_starts",
                                   "expected one integer offset per answer")
            answers[qid] = GoldAnswer(doc_id, tuple(texts), tuple(starts))

    gaps = _lexical_gaps(corpus, queries, qrels)
    for what, gap in gaps.items():
        warnings.warn(f"{path}: {gap.describe(what, 'doc' if what == 'documents' else 'query')}",
                      stacklevel=2)
    return Dataset(name=name, path=path, corpus=corpus, queries=queries, qrels=qrels,
                   hash=hasher.hexdigest(), answers=answers, missing_qrels_docs=missing_docs,
                   duplicate_qrels=duplicates, lexical_gaps=gaps,
                   corpus_hash=corpus_hasher.hexdigest())


class _NoHash:
    def update(self, data: bytes, /) -> None:
        pass


class _Both:
    """Feeds the bytes read to two hashers (the dataset's and the corpus's own)."""

    def __init__(self, *hashers: _Hasher) -> None:
        self.hashers = hashers

    def update(self, data: bytes) -> None:
        for h in self.hashers:
            h.update(data)


def _lexical_gaps(corpus: dict[str, ItemRecord], queries: dict[str, str],
                  qrels: dict[str, dict[str, dict[str, int]]]) -> dict[str, LexicalGaps]:
    """Documents (title and text, as indexed) and judged queries of the loaded splits that
    :data:`LEXICAL_ANALYZER` cannot index."""
    judged = sorted({q for docs in qrels.values() for q in docs})
    found = {
        "documents": lexical_gaps(((d.id, f"{d.title} {d.text}") for d in corpus.values()),
                                  LEXICAL_ANALYZER),
        "queries": lexical_gaps(((q, queries[q]) for q in judged), LEXICAL_ANALYZER),
    }
    return {what: gap for what, gap in found.items() if gap}


_QRELS_HEADER = ("query-id", "query_id", "qid")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
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


def _grade(raw: str, path: Path, lineno: int) -> int:
    """A qrels grade: a whole number in ``[-MAX_GRADE, MAX_GRADE]`` (``2`` or ``2.0``)."""
    if not _NUMBER.fullmatch(raw):
        try:
            float(raw)
        except ValueError:
            raise DatasetError(path, lineno, "score", f"not a number: {raw!r}") from None
        raise DatasetError(path, lineno, "score", f"not a finite number: {raw!r}")
    value = Decimal(raw)
    if abs(value) > MAX_GRADE:
        raise DatasetError(path, lineno, "score",
                           f"grade {raw} is outside [-{MAX_GRADE}, {MAX_GRADE}]")
    if value != value.to_integral_value():
        raise DatasetError(path, lineno, "score",
                           f"not a whole number: {raw!r} (grades are integers; ranx would "
                           f"truncate it to {int(value)})")
    return int(value)


def _check_judged(judged: dict[str, dict[str, int]], path: Path) -> None:
    """A qrels file must judge some query and hold a relevant judgment: without one every
    metric is 0."""
    if not judged:
        raise DatasetError(path, None, "qrels", "no judgments (an empty file, or a header only)")
    if not any(g >= 1 for docs in judged.values() for g in docs.values()):
        n = sum(len(docs) for docs in judged.values())
        raise DatasetError(path, None, "score", f"no relevant judgment: all {n} grades are "
                                                f"below 1, so every metric would be 0")


def _read_qrels(path: Path, hasher: _Hasher, queries: dict[str, str],
                corpus: dict[str, ItemRecord]) -> tuple[dict[str, dict[str, int]], int, int]:
    """``(judged, rows naming a document absent from the corpus, repeated identical rows)``."""
    judged: dict[str, dict[str, int]] = {}
    at: dict[tuple[str, str], int] = {}
    missing = duplicates = 0
    layout, first = "", 0
    for lineno, line in _read_lines(path, hasher):
        line = line.rstrip("\r\n")
        if lineno == 1:
            line = line.removeprefix("\ufeff")
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
                continue
            layout, first = _qrels_layout(line, path, lineno), lineno
        if layout == "beir":
            if len(tabs) != 3:
                words = len(line.split())
                hint = " (a TREC row in a BEIR file?)" if words == 4 else ""
                raise DatasetError(path, lineno, "row",
                                   f"expected query-id, corpus-id, score separated by tabs, "
                                   f"as from line {first}; got {len(tabs)} column(s){hint}")
            qid, doc_id, raw = (c.strip() for c in tabs)
        else:
            cols = line.split()
            if len(cols) != 4:
                raise DatasetError(path, lineno, "row",
                                   f"expected {_TREC}, as from line {first}; got "
                                   f"{len(cols)} column(s)")
            qid, _iteration, doc_id, raw = cols
        grade = _grade(raw, path, lineno)
        if qid not in queries:
            raise DatasetError(path, lineno, "query-id", f"unknown query {qid!r}")
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
    _check_judged(judged, path)
    return judged, missing, duplicates
