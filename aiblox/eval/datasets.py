"""BEIR-layout datasets: loading, validation with precise errors, and a content hash.

Layout: ``corpus.jsonl`` (or ``corpus.jsonl.gz``) with ``{"_id", "title", "text"}`` per line,
``queries.jsonl`` with ``{"_id", "text"}``, ``qrels/<split>.tsv`` with a
``query-id<TAB>corpus-id<TAB>score`` header, and optionally ``answers.jsonl`` (SQuAD-style gold
answer spans: ``{"_id", "corpus-id", "answers", "answer_starts"}``).

Derived splits: ``<split>:<i>/<n>`` (e.g. ``test:0/2`` and ``test:1/2``) is the part ``i`` of a
deterministic hash partition of ``<split>`` into ``n`` parts: the queries whose
``int(sha256(query_id), 16) % n == i``, with their qrels. Parts are disjoint and cover the split,
so a dataset with one judged split (``squad-v1.1-dev``) can be tuned on one part and reported on
another. ``available_splits`` lists files only; any ``<file split>:<i>/<n>`` with
``0 <= i < n`` and ``n >= 2`` loads.

Bad input raises :class:`DatasetError` naming the file, the line and the field. One known
defect of public collections is tolerated: a qrels row naming a document absent from the corpus
is counted (``Dataset.missing_qrels_docs``) and warned about, not fatal.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aiblox.contracts.items import ItemRecord

__all__ = [
    "Dataset",
    "DatasetError",
    "GoldAnswer",
    "available_splits",
    "find_dataset",
    "load_dataset",
    "parse_split",
    "split_part",
]

CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz")


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
    with opener(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            hasher.update(raw)
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(path, lineno, "encoding", f"not UTF-8: {exc}") from None


def _read_jsonl(path: Path, hasher: _Hasher) -> Iterator[tuple[int, dict]]:
    for lineno, line in _read_lines(path, hasher):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(path, lineno, "json", f"malformed JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise DatasetError(path, lineno, "json", "expected a JSON object")
        yield lineno, obj


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


def load_dataset(name_or_path: str | Path, splits: list[str] | None = None,
                 name: str | None = None) -> Dataset:
    """Load a BEIR dataset (all splits when ``splits`` is None)."""
    path = find_dataset(name_or_path)
    name = name or path.name
    hasher = hashlib.sha256()
    corpus_path = next((path / f for f in CORPUS_FILES if (path / f).exists()), None)
    if corpus_path is None:
        raise DatasetError(path / "corpus.jsonl", None, "file", "no corpus.jsonl(.gz)")

    corpus: dict[str, ItemRecord] = {}
    first_line: dict[str, int] = {}
    corpus_hasher = hashlib.sha256()
    for lineno, obj in _read_jsonl(corpus_path, _Both(hasher, corpus_hasher)):
        doc_id = _get_id(obj, corpus_path, lineno)
        if doc_id in corpus:
            raise DatasetError(corpus_path, lineno, "_id",
                               f"duplicate id {doc_id!r} (first at line {first_line[doc_id]})")
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DatasetError(corpus_path, lineno, "metadata", "expected a JSON object")
        first_line[doc_id] = lineno
        corpus[doc_id] = ItemRecord(
            id=doc_id, kind="doc", source=name, source_ref=f"{corpus_path.name}:{lineno}",
            title=_text_field(obj, corpus_path, lineno, "title"),
            text=_text_field(obj, corpus_path, lineno, "text"), metadata=meta)

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
    for base in sorted(read):
        split_path = path / "qrels" / f"{base}.tsv"
        read[base] = _read_qrels(split_path, hasher, queries, corpus)
        if read[base][1]:
            warnings.warn(f"{split_path}: {read[base][1]} qrels rows name documents absent "
                          f"from the corpus (kept; they count as unretrievable)", stacklevel=2)
    for split in wanted:
        derived = parsed[split]
        judged, missing = read[derived[0] if derived is not None else split]
        if derived is not None:
            _, i, n = derived
            judged = {q: docs for q, docs in judged.items() if split_part(q, n) == i}
            missing = sum(1 for docs in judged.values() for d in docs if d not in corpus)
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

    return Dataset(name=name, path=path, corpus=corpus, queries=queries, qrels=qrels,
                   hash=hasher.hexdigest(), answers=answers, missing_qrels_docs=missing_docs,
                   corpus_hash=corpus_hasher.hexdigest())


class _Both:
    """Feeds the bytes read to two hashers (the dataset's and the corpus's own)."""

    def __init__(self, *hashers: hashlib._Hash) -> None:
        self.hashers = hashers

    def update(self, data: bytes) -> None:
        for h in self.hashers:
            h.update(data)


def _read_qrels(path: Path, hasher: hashlib._Hash, queries: dict[str, str],
                corpus: dict[str, ItemRecord]) -> tuple[dict[str, dict[str, int]], int]:
    judged: dict[str, dict[str, int]] = {}
    missing = 0
    for lineno, line in _read_lines(path, hasher):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        cols = line.split("\t")
        if lineno == 1 and cols[0] in ("query-id", "query_id", "qid"):
            continue
        if len(cols) < 3:
            raise DatasetError(path, lineno, "row",
                               f"expected query-id, corpus-id, score separated by tabs; "
                               f"got {len(cols)} column(s)")
        qid, doc_id, raw = cols[0].strip(), cols[1].strip(), cols[-1].strip()
        try:
            grade = int(float(raw))
        except ValueError:
            raise DatasetError(path, lineno, "score", f"not a number: {raw!r}") from None
        if qid not in queries:
            raise DatasetError(path, lineno, "query-id", f"unknown query {qid!r}")
        if doc_id not in corpus:
            missing += 1
        judged.setdefault(qid, {})[doc_id] = grade
    return judged, missing
