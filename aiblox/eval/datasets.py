"""Datasets: loading (BEIR folders, CSV/TSV/parquet files, manifests, DataFrames), validation
with precise errors, and a content hash.

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

Ids, one rule in every layout (corpus, queries, qrels and answers; BEIR and TREC files, CSV,
TSV, parquet, JSONL, DataFrames) and in TREC run files (:mod:`aiblox.eval.trec`): an id is its
text without surrounding whitespace (``" d1 "`` is ``d1``, as a whitespace-separated TREC line
gives it), so a corpus, its qrels and a run written from it name a document alike. An empty id,
or one holding whitespace inside (which no TREC run or qrels line can carry: trec_eval splits
lines on whitespace), is an error naming the file, line and field; two ids equal under the rule
are duplicates (an error naming both). Integer ids are their decimal text. A BEIR file's hash
is its bytes and a table's hash its rows' BEIR lines (ids as the rule gives them), so the rule
moves no hash of a dataset whose ids have no surrounding whitespace.

Bad input raises :class:`DatasetError` naming the file, the line and the field: malformed JSON
or UTF-8, lone surrogates (``"\\ud800"`` escapes, which are not Unicode text), NUL characters
and non-finite numbers in any JSON field, an empty corpus, a qrels file with no judgment or no
relevant one, two different grades for one (query, document) pair (naming both lines), a file
that is not a regular file (a device such as ``/dev/zero``, a FIFO: refused before any read) or
a line longer than :data:`aiblox.inputs.MAX_LINE_BYTES` (files are read line by line, in
bounded memory).
Tolerated, counted and warned about, not fatal: a qrels row naming a document absent from the
corpus (``Dataset.missing_qrels_docs``; a defect of public collections), a repeated identical
judgment (``Dataset.duplicate_qrels``) and a derived split part that holds no query.
Your own data, in three forms that load alike (same checks, same dataset hash):

- a folder holding ``corpus.{jsonl,jsonl.gz,csv,tsv,parquet}``, ``queries.{jsonl,csv,tsv,
  parquet}`` and ``qrels/<split>.{tsv,csv,parquet}`` (one of each; a folder of BEIR files
  alone loads as BEIR, above);
- a manifest, ``dataset.toml`` in a folder (or any ``*.toml`` file passed by path), naming the
  files relative to itself and, where they differ from the defaults, their column names::

      name = "support"                    # optional; default: the folder's name
      corpus = "docs.csv"
      queries = "questions.parquet"
      qrels = {test = "judged.csv", train = "train.csv"}  # or "all.csv", with a split column
      split = "test"                      # the split of rows without one (default "test")
      [columns.corpus]                    # keys: id, text, title, metadata
      id = "doc_id"
      [columns.qrels]                     # keys: query_id, doc_id, score, split
      score = "rel"

- :meth:`Dataset.from_frames` with pandas DataFrames.

Columns found without a mapping: corpus ``_id`` (or ``id``, ``doc_id``, ``docid``), ``text``,
optional ``title`` and ``metadata`` (an object; JSON text in CSV); queries ``_id`` (or
``id``, ``query_id``, ``qid``) and ``text`` (or ``query``); qrels ``query_id`` (or
``query-id``, ``qid``), ``doc_id`` (or ``corpus_id``, ``corpus-id``, ``docid``), ``score``
(or ``relevance``, ``grade``) and optional ``split``. Other columns are ignored. CSV and TSV
files have a header row and are read as text (an id ``007`` stays ``007``); ids are strings
or integers, under the id rule above. Errors name the file (or frame), the line (CSV,
TSV, JSONL), row (parquet, 1-based) or index label (DataFrame), and the column: a missing
column (with the columns present), a missing, empty or duplicate id, a grade that is not a
whole number, a qrels row naming an unknown query, conflicting grades. As for BEIR files, a
qrels row naming a document absent from the corpus is a warning, not an error (counted in
``Dataset.missing_qrels_docs``: public collections have them, and BEIR's and ranx's tools
keep them). The hash: a JSONL file's bytes, as in a BEIR folder; a CSV, TSV or parquet file
or a DataFrame, the bytes of its rows written as BEIR lines, in their order
(:func:`content_hash`): the same rows give the same hash as a BEIR folder, a CSV, TSV or
parquet file, a manifest or a DataFrame.

Documents and judged queries whose text the DuckDB store's BM25 cannot index (CJK, emoji, ...:
:mod:`aiblox.text.lexical_gaps`) are warned about once, with counts and an example
(``Dataset.lexical_gaps``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from aiblox.contracts.items import ItemRecord
from aiblox.inputs import InputFileError, bounded_lines, check_regular_file, read_bounded
from aiblox.text.lexical_gaps import LexicalGaps, lexical_gaps

__all__ = [
    "ID_RULE",
    "Dataset",
    "DatasetError",
    "GoldAnswer",
    "available_splits",
    "content_hash",
    "corpus_file",
    "corpus_hash",
    "dataset_name",
    "find_dataset",
    "iter_corpus",
    "load_dataset",
    "parse_split",
    "read_queries",
    "split_part",
]

CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz")

ID_RULE = "ids: surrounding whitespace dropped, none inside"
"""The id rule every loader applies (see the module doc), named in what a store's sync record
covers (:mod:`aiblox.eval.workspace`): a store synced under another rule syncs again."""

MAX_GRADE = 1000
"""Qrels grades must lie in ``[-MAX_GRADE, MAX_GRADE]``."""

LEXICAL_ANALYZER = "bm25s"
"""The analyser whose blind spots :func:`load_dataset` warns about: the default BM25 engine's
(the index's bm25s tokens; ``fts.engine = "native"`` on DuckDB sees less: ``duckdb-fts``)."""


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


@dataclass(frozen=True)
class GoldAnswer:
    """SQuAD-style gold answers for one query: strings and their offsets in the gold document."""

    corpus_id: str
    answers: tuple[str, ...]
    answer_starts: tuple[int, ...]


@dataclass
class Dataset:
    """A loaded dataset. ``corpus`` and ``queries`` keep file order.

    Made by :func:`load_dataset` (a BEIR folder, a folder of CSV/TSV/parquet files, or a
    ``dataset.toml`` manifest) or by :meth:`from_frames` (pandas DataFrames). :attr:`hash` and
    :attr:`corpus_hash` are computed, never given: a dataset built by hand (or by
    ``dataclasses.replace``) hashes its own content (:func:`content_hash`).
    """

    name: str
    path: Path
    corpus: dict[str, ItemRecord]
    queries: dict[str, str]
    qrels: dict[str, dict[str, dict[str, int]]]
    """``{split: {query_id: {doc_id: grade}}}``."""
    duplicate_qrels: dict[str, int] = field(default_factory=dict)
    """Per qrels file read (base split): repeated identical judgments (kept once, counted)."""
    lexical_gaps: dict[str, LexicalGaps] = field(default_factory=dict)
    """``documents`` and ``queries`` (the judged ones of the splits loaded) that
    :data:`LEXICAL_ANALYZER` gives no token although they hold text (empty when none)."""
    answers: dict[str, GoldAnswer] = field(default_factory=dict)
    missing_qrels_docs: dict[str, int] = field(default_factory=dict)
    """Per split: qrels rows naming a document absent from the corpus (kept, counted)."""
    _hash: str = field(default="", init=False, repr=False, compare=False)
    _corpus_hash: str = field(default="", init=False, repr=False, compare=False)
    _source: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def source(self) -> str | None:
        """Where :func:`load_dataset` read it from, resolved: the folder, or the ``*.toml``
        manifest file passed by path (what a sweep point's manifest records, so that
        ``aiblox eval verify`` re-reads the very files); None for a dataset built otherwise
        (:meth:`from_frames`, by hand)."""
        return self._source

    @property
    def hash(self) -> str:
        """sha256 over the (decompressed) bytes of every BEIR file read, in a fixed order
        (corpus, queries, the qrels of the splits loaded in name order, answers). Tabular files
        and DataFrames hash the BEIR bytes of their rows (:func:`content_hash`), so the same
        rows give the same hash whichever form they came in."""
        if not self._hash:
            self._hash = content_hash(self)
        return self._hash

    @property
    def corpus_hash(self) -> str:
        """sha256 over the corpus file's (decompressed) bytes alone, the BEIR bytes of a
        tabular corpus: what a store holds."""
        if not self._corpus_hash:
            self._corpus_hash = content_hash(self, corpus_only=True)
        return self._corpus_hash

    def split_queries(self, split: str) -> list[tuple[str, str]]:
        """``(query_id, text)`` of the queries judged in ``split``, sorted by id."""
        if split not in self.qrels:
            raise DatasetError(self.path / "qrels" / f"{split}.tsv", None, "split",
                               f"split not loaded; loaded: {sorted(self.qrels)}")
        return [(q, self.queries[q]) for q in sorted(self.qrels[split])]

    @classmethod
    def from_frames(cls, corpus: Any, queries: Any, qrels: Any, name: str = "frames",
                    split: str = "test", columns: dict[str, dict[str, str]] | None = None
                    ) -> Dataset:
        """A dataset from pandas DataFrames, validated like files are.

        - ``corpus``: ``_id`` (or ``id``, ``doc_id``, ``docid``), ``text``, optional ``title``;
        - ``queries``: ``_id`` (or ``id``, ``query_id``, ``qid``), ``text`` (or ``query``);
        - ``qrels``: ``query_id`` (or ``query-id``, ``qid``), ``doc_id`` (or ``corpus_id``,
          ``corpus-id``, ``docid``), ``score`` (or ``relevance``, ``grade``), optional
          ``split`` (rows without one are in ``split``); or ``{split: frame}``.

        ``columns`` maps other names: ``{"corpus": {"id": "doc"}, "qrels": {"score": "rel"}}``
        (keys: corpus ``id``, ``text``, ``title``; queries ``id``, ``text``; qrels
        ``query_id``, ``doc_id``, ``score``, ``split``). Other columns are ignored. Ids are
        strings or integers. A bad frame raises :class:`DatasetError` naming the frame, the row
        (its index label) and the column. :attr:`hash` is that of the same rows written as a
        BEIR folder (:func:`content_hash`)."""
        tables = _TabularSource(
            corpus=_frame_table(corpus, "corpus frame"),
            queries=_frame_table(queries, "queries frame"),
            qrels=({str(k): _frame_table(v, f"qrels frame {k!r}") for k, v in qrels.items()}
                   if isinstance(qrels, dict) else {None: _frame_table(qrels, "qrels frame")}),
            columns=_check_columns(columns or {}, "columns"), default_split=split)
        return _load_tabular(tables, Path(name), name, None)


def content_hash(dataset: Dataset, corpus_only: bool = False) -> str:
    """The hash of ``dataset`` as the BEIR folder holding its content: ``corpus.jsonl`` with
    ``json.dumps({"_id", "title", "text"})`` lines (``"metadata"`` after them when not empty),
    ``queries.jsonl`` with ``{"_id", "text"}`` lines, ``qrels/<split>.tsv`` with the header
    ``query-id<TAB>corpus-id<TAB>score`` and one row per judgment, ``answers.jsonl``; each file
    fed as :func:`load_dataset` reads it (its name, then its bytes)."""
    h = hashlib.sha256()
    _feed_file(h, "corpus.jsonl", (_doc_line(d) for d in dataset.corpus.values()))
    if corpus_only:
        return h.hexdigest()
    _feed_file(h, "queries.jsonl", (_query_line(q, t) for q, t in dataset.queries.items()))
    for split in sorted(dataset.qrels):
        _feed_file(h, f"{split}.tsv", _qrels_lines(
            (q, d, g) for q, docs in dataset.qrels[split].items() for d, g in docs.items()))
    if dataset.answers:
        _feed_file(h, "answers.jsonl", _answer_lines(dataset.answers))
    return h.hexdigest()


def _answer_lines(answers: dict[str, GoldAnswer]) -> Iterator[str]:
    for q, a in answers.items():
        yield json.dumps({"_id": q, "corpus-id": a.corpus_id, "answers": list(a.answers),
                          "answer_starts": list(a.answer_starts)}) + "\n"


def _doc_line(doc: ItemRecord) -> str:
    obj: dict[str, Any] = {"_id": doc.id, "title": doc.title, "text": doc.text}
    if doc.metadata:
        obj["metadata"] = doc.metadata
    return json.dumps(obj) + "\n"


def _query_line(qid: str, text: str) -> str:
    return json.dumps({"_id": qid, "text": text}) + "\n"


def _qrels_lines(rows: Iterator[tuple[str, str, int]]) -> Iterator[str]:
    yield "query-id\tcorpus-id\tscore\n"
    for q, d, g in rows:
        yield f"{q}\t{d}\t{g}\n"


def _feed_file(h: _Hasher, name: str, lines: Iterator[str]) -> None:
    h.update(f"\x00{name}\x00".encode())
    for line in lines:
        h.update(line.encode("utf-8"))


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
    """Split names that have a ``qrels/<split>.{tsv,csv,parquet}`` file, or that a manifest
    names (a qrels file with a ``split`` column is read to list its splits)."""
    p = Path(path)
    manifest = _manifest_path(p)
    if manifest is None:
        qdir = p / "qrels"
        return sorted({q.stem for q in qdir.glob("*") if q.suffix in TABLE_SUFFIXES}) \
            if qdir.is_dir() else []
    src = _read_manifest(manifest)[0]
    names = {s for s in src.qrels if s is not None}
    mixed = src.qrels.get(None)
    if mixed is not None:
        column = _resolve(mixed, "qrels", src.columns.get("qrels", {}))["split"]
        names |= {_row_split(row.get(column) if column else None, src.default_split)
                  for _, row in mixed.read(_NoHash())}
    return sorted(str(n) for n in names)


def find_dataset(name_or_path: str | Path) -> Path:
    """Resolve a dataset name or path.

    A dataset is a folder holding ``queries.jsonl`` (BEIR), ``queries.{csv,tsv,parquet}``
    or a ``dataset.toml`` manifest, or a ``*.toml`` manifest file (``<folder>/dataset.toml``
    resolves to its folder). Looks at the path itself, then ``<root>/<name>`` for each root
    in ``$AIBLOX_DATASETS`` (``os.pathsep``-separated), ``./datasets``,
    ``../shared/datasets``, and the same two folders relative to the source checkout aiblox
    was installed from.
    """
    p = Path(name_or_path)
    if p.name == MANIFEST and p.is_file():
        return p.parent
    if _is_dataset(p):
        return p
    roots = [r for r in os.environ.get("AIBLOX_DATASETS", "").split(os.pathsep) if r]
    repo = Path(__file__).resolve().parents[2]  # a source checkout: <repo>/aiblox/eval
    roots += ["datasets", "../shared/datasets", str(repo / "datasets"),
              str(repo.parent / "shared" / "datasets")]
    for root in roots:
        candidate = Path(root) / str(name_or_path)
        if _is_dataset(candidate):
            return candidate
    raise DatasetError(name_or_path, None, "path",
                       f"no BEIR dataset here or under {roots} (need queries.jsonl, "
                       f"queries.csv/.tsv/.parquet or {MANIFEST}; or a *.toml manifest)")


def _is_dataset(p: Path) -> bool:
    if p.is_file():
        return p.suffix == ".toml"
    return (p / MANIFEST).exists() or any((p / f"queries{s}").exists() for s in QUERY_SUFFIXES)


def _read_lines(path: Path, hasher: _Hasher, hashed_name: str | None = None
                ) -> Iterator[tuple[int, str]]:
    """The lines of a text file (decompressed when ``.gz``), bounded: a file that is not a
    regular one (``/dev/zero``, a FIFO) or a line over :data:`~aiblox.inputs.MAX_LINE_BYTES`
    is a :class:`DatasetError` naming it, not a read until memory runs out."""
    hashed_name = hashed_name or path.name.removesuffix(".gz")
    hasher.update(f"\x00{hashed_name}\x00".encode())
    lineno = 0
    try:
        for lineno, raw in bounded_lines(path, gz=path.suffix == ".gz"):
            hasher.update(raw)
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(path, lineno, "encoding", f"not UTF-8: {exc}") from None
    except InputFileError as exc:
        raise _file_error(path, exc) from None
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, or a damaged .gz
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DatasetError(path, lineno + 1 if lineno else None, "file",
                           f"cannot read: {reason or type(exc).__name__}") from None


def _file_error(path: str | Path, exc: InputFileError) -> DatasetError:
    """An input file refused by :mod:`aiblox.inputs` (not a regular file, a line too long), as
    a :class:`DatasetError` naming it."""
    return DatasetError(path, exc.line, "line" if exc.line is not None else "file",
                        f"cannot read: {exc.reason}")


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


def _read_jsonl(path: Path, hasher: _Hasher, hashed_name: str | None = None
                ) -> Iterator[tuple[int, dict]]:
    for lineno, line in _read_lines(path, hasher, hashed_name):
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


def _id_problem(value: str) -> str | None:
    """Why ``value`` (already stripped) breaks the id rule (:func:`_clean_id`), or None."""
    if not value:
        return "missing id (empty)"
    if value.split() != [value]:
        i = next(i for i, c in enumerate(value) if c.isspace())
        return (f"id {value!r} holds whitespace ({value[i]!r} at character {i}), which a TREC "
                f"run or qrels line cannot carry (trec_eval splits its lines on whitespace): "
                f"rename it")
    return None


def _clean_id(value: str) -> str:
    """The one id rule of corpus, queries, qrels, answers (every layout) and run files: an id
    is its text without surrounding whitespace (``" d1 "`` is ``d1``, as a TREC line gives
    it); an empty one, or one holding whitespace inside, is refused (``ValueError``)."""
    value = value.strip()
    problem = _id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _same_id_note(at: Any, raw: Any, first_raw: Any) -> str:
    """``(first at line 3)``, saying why when the two were written differently."""
    if str(raw) == str(first_raw):
        return f"(first at {at})"
    return (f"(first at {at}, written {str(first_raw)!r} there and {str(raw)!r} here: ids are "
            f"compared without surrounding whitespace)")


def _get_id(obj: dict, path: Path, lineno: int, key: str = "_id") -> str:
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(path, lineno, key, "missing or not a non-empty string")
    try:
        return _clean_id(value)
    except ValueError as exc:
        raise DatasetError(path, lineno, key, str(exc)) from None


def _text_field(obj: dict, path: Path, lineno: int, key: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(path, lineno, key, f"expected a string, got {type(value).__name__}")
    return value


def corpus_file(path: str | Path) -> Path:
    """The file the corpus of the dataset at ``path`` (as :func:`find_dataset` gives it) is
    read from: ``corpus.jsonl`` or ``corpus.jsonl.gz`` of a BEIR folder, the
    ``corpus.{csv,tsv,parquet}`` of a tabular folder, or the manifest naming it (with its
    column names). :func:`iter_corpus` and :func:`corpus_hash` take any of them."""
    manifest = _manifest_path(Path(path))
    if manifest is not None:
        return manifest
    return _one_file(Path(path), "corpus", CORPUS_SUFFIXES)


def iter_corpus(corpus_path: Path, name: str, hasher: _Hasher | None = None
                ) -> Iterator[ItemRecord]:
    """The documents of a corpus file, one at a time in file order, each validated like
    :func:`load_dataset` does (errors name the file, line and field); only the ids seen are
    kept, so a corpus of any size streams in bounded memory. ``hasher`` is fed every byte
    (of a CSV, TSV or parquet corpus: the BEIR bytes of its rows; of a manifest: its corpus
    file's)."""
    hasher = hasher if hasher is not None else _NoHash()
    if not corpus_path.name.endswith((".jsonl", ".jsonl.gz")):
        if corpus_path.suffix == ".toml":
            src = _read_manifest(corpus_path)[0]
            table, mapping = src.corpus, src.columns.get("corpus", {})
        else:
            table, mapping = _file_table(corpus_path, "corpus"), {}
        yield from _tab_corpus(table, mapping, name, hasher)
        return
    first_line: dict[str, tuple[int, Any]] = {}
    for lineno, obj in _read_jsonl(corpus_path, hasher, "corpus.jsonl"):
        doc_id = _get_id(obj, corpus_path, lineno)
        if doc_id in first_line:
            n, raw = first_line[doc_id]
            raise DatasetError(corpus_path, lineno, "_id", f"duplicate id {doc_id!r} "
                               f"{_same_id_note(f'line {n}', obj['_id'], raw)}")
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DatasetError(corpus_path, lineno, "metadata", "expected a JSON object")
        first_line[doc_id] = lineno, obj["_id"]
        yield ItemRecord(
            id=doc_id, kind="doc", source=name, source_ref=f"{corpus_path.name}:{lineno}",
            title=_text_field(obj, corpus_path, lineno, "title"),
            text=_text_field(obj, corpus_path, lineno, "text"), metadata=meta)
    if not first_line:
        raise DatasetError(corpus_path, None, "corpus",
                           "no documents (the file holds no JSON object line)")


def corpus_hash(corpus_path: Path) -> str:
    """:attr:`Dataset.corpus_hash` of a corpus file (as :func:`corpus_file` gives it): a JSONL
    one read (and decompressed) without parsing, another parsed."""
    h = hashlib.sha256()
    if corpus_path.name.endswith((".jsonl", ".jsonl.gz")):
        for _ in _read_lines(corpus_path, h, "corpus.jsonl"):
            pass
    else:
        for _ in iter_corpus(corpus_path, "", h):
            pass
    return h.hexdigest()


def read_queries(name_or_path: str | Path) -> dict[str, str]:
    """The queries of a dataset (``{id: text}``, file order, validated as :func:`load_dataset`
    does), without reading its corpus or judgments."""
    path = find_dataset(name_or_path)
    src = _tabular_source(path)
    if src is not None:
        return _tab_queries(src.queries, src.columns.get("queries", {}), _NoHash())
    queries: dict[str, str] = {}
    qfirst: dict[str, int] = {}
    qpath = path / "queries.jsonl"
    for lineno, obj in _read_jsonl(qpath, _NoHash()):
        qid = _get_id(obj, qpath, lineno)
        if qid in queries:
            raise DatasetError(qpath, lineno, "_id",
                               f"duplicate id {qid!r} (first at line {qfirst[qid]})")
        if "text" not in obj:
            raise DatasetError(qpath, lineno, "text", "missing")
        qfirst[qid] = lineno
        queries[qid] = _text_field(obj, qpath, lineno, "text")
    return queries


def load_dataset(name_or_path: str | Path, splits: list[str] | None = None,
                 name: str | None = None) -> Dataset:
    """Load a dataset (all splits when ``splits`` is None): a BEIR folder, a folder of
    CSV/TSV/parquet files, or a ``dataset.toml`` manifest (see the module docstring)."""
    path = find_dataset(name_or_path)
    ds = _load_files(path, name or dataset_name(path), splits)
    ds._source = path.resolve().as_posix()
    return ds


def _load_files(path: Path, name: str, splits: list[str] | None) -> Dataset:
    src = _tabular_source(path)
    if src is not None:
        return _load_tabular(src, path, name, splits)
    hasher = hashlib.sha256()
    corpus_path = corpus_file(path)

    corpus_hasher = hashlib.sha256()
    corpus = {it.id: it for it in iter_corpus(corpus_path, name,
                                              _Both(hasher, corpus_hasher))}

    queries: dict[str, str] = {}
    qfirst: dict[str, tuple[int, Any]] = {}
    qpath = path / "queries.jsonl"
    for lineno, obj in _read_jsonl(qpath, hasher):
        qid = _get_id(obj, qpath, lineno)
        if qid in queries:
            n, raw = qfirst[qid]
            raise DatasetError(qpath, lineno, "_id", f"duplicate id {qid!r} "
                               f"{_same_id_note(f'line {n}', obj['_id'], raw)}")
        if "text" not in obj:
            raise DatasetError(qpath, lineno, "text", "missing")
        qfirst[qid] = lineno, obj["_id"]
        queries[qid] = _text_field(obj, qpath, lineno, "text")

    def read(base: str) -> tuple[dict[str, dict[str, int]], int, int, str]:
        split_path = path / "qrels" / f"{base}.tsv"
        return (*_read_qrels(split_path, hasher, queries, corpus), str(split_path))

    apath = path / "answers.jsonl"
    return _assemble(name, path, path, corpus, queries, splits, available_splits(path), read,
                     hasher, corpus_hasher, apath if apath.exists() else None,
                     queries_label=str(qpath))


_ReadSplit = Callable[[str], tuple[dict[str, dict[str, int]], int, int, str]]


def _assemble(name: str, path: Path, where: Path, corpus: dict[str, ItemRecord],
              queries: dict[str, str], splits: list[str] | None, known: list[str],
              read_split: _ReadSplit, hasher: Any, corpus_hasher: Any,
              apath: Path | None, canonical_answers: bool = False,
              queries_label: str = "queries") -> Dataset:
    """The qrels of the splits asked for (derived ones cut from their base split), the
    answers, the warnings, and the :class:`Dataset`: the part every layout shares.
    ``read_split(base)`` reads (and hashes) one base split: ``(judged, rows naming documents
    absent from the corpus, repeated identical rows, the file it came from)``."""
    wanted = known if splits is None else list(splits)
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    missing_docs: dict[str, int] = {}
    read: dict[str, tuple[dict[str, dict[str, int]], int]] = {}
    parsed: dict[str, tuple[str, int, int] | None] = {}
    files: dict[str, str] = {}
    for split in wanted:
        try:
            parsed[split] = parse_split(split)
        except ValueError as exc:
            raise DatasetError(where / "qrels", None, "split", str(exc)) from None
        base = parsed[split][0] if parsed[split] is not None else split  # type: ignore[index]
        if base not in known:
            raise DatasetError(where / "qrels" / f"{base}.tsv", None, "split",
                               f"no split {split!r}; available: {known}")
        read[base] = ({}, 0)
    # each file is read (and hashed) once, in name order: the dataset hash does not depend on
    # the order in which the splits were asked for
    duplicates: dict[str, int] = {}
    for base in sorted(read):
        judged, missing, duplicates[base], files[base] = read_split(base)
        read[base] = judged, missing
        if missing:
            warnings.warn(f"{files[base]}: {missing} qrels rows name documents absent "
                          f"from the corpus (kept; they count as unretrievable)", stacklevel=3)
        if duplicates[base]:
            warnings.warn(f"{files[base]}: {duplicates[base]} qrels rows repeat an identical "
                          f"judgment (kept once)", stacklevel=3)
    for split in wanted:
        derived = parsed[split]
        judged, missing = read[derived[0] if derived is not None else split]
        if derived is not None:
            base, i, n = derived
            judged = {q: docs for q, docs in judged.items() if split_part(q, n) == i}
            missing = sum(1 for docs in judged.values() for d in docs if d not in corpus)
            if not judged:
                warnings.warn(f"{files[base]}: derived split {split!r} "
                              f"holds no judged query (every metric on it is 0)", stacklevel=3)
        qrels[split], missing_docs[split] = judged, missing

    answers: dict[str, GoldAnswer] = {}
    if apath is not None:
        answers = _read_answers(apath, _NoHash() if canonical_answers else hasher, queries)
        if canonical_answers and answers:
            _feed_file(hasher, "answers.jsonl", _answer_lines(answers))

    _warn_empty_queries(queries, qrels, queries_label)
    gaps = _lexical_gaps(corpus, queries, qrels)
    for what, gap in gaps.items():
        warnings.warn(f"{where}: {gap.describe(what, 'doc' if what == 'documents' else 'query')}",
                      stacklevel=3)
    ds = Dataset(name=name, path=path, corpus=corpus, queries=queries, qrels=qrels,
                 answers=answers, missing_qrels_docs=missing_docs, duplicate_qrels=duplicates,
                 lexical_gaps=gaps)
    ds._hash, ds._corpus_hash = hasher.hexdigest(), corpus_hasher.hexdigest()
    return ds


def _warn_empty_queries(queries: dict[str, str], qrels: dict[str, dict[str, dict[str, int]]],
                       label: str) -> None:
    """One warning naming the judged queries of the loaded splits whose text is empty or
    blanks only: kept (dropping them would raise every mean), they retrieve nothing and score 0
    in every metric, as trec_eval scores a judged topic with no run lines."""
    empty = sorted({q for docs in qrels.values() for q in docs if not queries[q].strip()})
    if empty:
        shown = ", ".join(empty[:10]) + (f" and {len(empty) - 10} more" if len(empty) > 10
                                         else "")
        have = "query has" if len(empty) == 1 else "queries have"
        warnings.warn(f"{label}: {len(empty)} judged {have} empty text ({shown}): kept, "
                      f"they retrieve nothing and score 0 in "
                      f"every metric (as trec_eval scores a judged query with no run lines)",
                      stacklevel=4)


def _read_answers(apath: Path, hasher: _Hasher, queries: dict[str, str]
                  ) -> dict[str, GoldAnswer]:
    answers: dict[str, GoldAnswer] = {}
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
    return answers


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
            for value, column in ((qid, "query-id"), (doc_id, "corpus-id")):
                problem = _id_problem(value) if value else None  # empty: named below
                if problem is not None:
                    raise DatasetError(path, lineno, column, problem)
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


# --- your own data: CSV, TSV, parquet and JSONL files, manifests, DataFrames -----------------

MANIFEST = "dataset.toml"
"""The manifest file a dataset folder may hold (or any ``*.toml`` passed by path)."""

TABLE_SUFFIXES = (".csv", ".tsv", ".parquet")
CORPUS_SUFFIXES = (".jsonl", ".jsonl.gz", *TABLE_SUFFIXES)
QUERY_SUFFIXES = (".jsonl", *TABLE_SUFFIXES)

_ROLES: dict[str, dict[str, tuple[str, ...]]] = {
    "corpus": {"id": ("_id", "id", "doc_id", "docid"), "text": ("text",),
               "title": ("title",), "metadata": ("metadata",)},
    "queries": {"id": ("_id", "id", "query_id", "qid"), "text": ("text", "query")},
    "qrels": {"query_id": ("query_id", "query-id", "qid"),
              "doc_id": ("doc_id", "corpus_id", "corpus-id", "docid"),
              "score": ("score", "relevance", "grade"), "split": ("split",)},
}
"""Per file role: the columns it reads, each with the names found without a mapping."""
_OPTIONAL = {("corpus", "title"), ("corpus", "metadata"), ("qrels", "split")}
_MANIFEST_KEYS = ("name", "corpus", "queries", "qrels", "split", "answers", "columns")
_ABSENT = object()


@dataclass
class _Table:
    """Rows of one file or DataFrame: ``label`` names it in errors, ``unit`` says what its
    numbers are (``line`` of a text file, ``row`` of a parquet file or a frame's index)."""

    label: str
    unit: str
    columns: list[str] | None
    """Column names; None for JSONL (each object names its own keys)."""
    read: Any
    """``read(hasher)``: yields ``(line or row, {column: value})``; a JSONL file feeds its
    bytes to ``hasher`` (they are its hash), other tables feed nothing."""
    raw: bool = False
    """True when ``read`` hashes the file's bytes (JSONL)."""

    def error(self, at: Any, field: str, message: str) -> DatasetError:
        return DatasetError(self.label, at, field, message, unit=self.unit)


@dataclass
class _TabularSource:
    corpus: _Table
    queries: _Table
    qrels: dict[str | None, _Table]
    """``{split: table}``; the key None: a table whose ``split`` column (else
    ``default_split``) names each row's split."""
    columns: dict[str, dict[str, str]]
    default_split: str = "test"
    answers: Path | None = None
    where: Path | None = None
    """The manifest, or the folder, the files were found by (for errors)."""


def _check_columns(columns: Any, where: str | Path) -> dict[str, dict[str, str]]:
    """A column mapping ``{role: {key: column}}``, checked."""
    if not isinstance(columns, dict):
        raise DatasetError(where, None, "columns", "expected a table {corpus, queries, qrels}")
    for role, mapping in columns.items():
        if role not in _ROLES:
            raise DatasetError(where, None, f"columns.{role}",
                               f"unknown file; valid: {sorted(_ROLES)}")
        if not isinstance(mapping, dict):
            raise DatasetError(where, None, f"columns.{role}",
                               f"expected a table of column names (keys {list(_ROLES[role])})")
        for key, column in mapping.items():
            if key not in _ROLES[role]:
                raise DatasetError(where, None, f"columns.{role}.{key}",
                                   f"unknown key; valid: {list(_ROLES[role])}")
            if not isinstance(column, str) or not column:
                raise DatasetError(where, None, f"columns.{role}.{key}",
                                   "expected a column name (a non-empty string)")
    return columns


def _resolve(table: _Table, role: str, mapping: dict[str, str]) -> dict[str, str | None]:
    """The column each key of ``role`` reads in ``table`` (None: an optional one absent)."""
    out: dict[str, str | None] = {}
    for key, names in _ROLES[role].items():
        if key in mapping:
            column = mapping[key]
            if table.columns is not None and column not in table.columns:
                raise table.error(None, column, f"no column {column!r} (columns.{role}.{key}); "
                                                f"columns present: {table.columns}")
            out[key] = column
            continue
        if table.columns is None:  # JSONL: the BEIR names
            out[key] = names[0]
            continue
        found = [n for n in names if n in table.columns]
        if len(found) > 1:
            raise table.error(None, key, f"ambiguous: columns {found} all name the {key}; "
                                         f"map one with columns.{role}.{key}")
        if not found and (role, key) not in _OPTIONAL:
            raise table.error(None, key, f"missing column: expected one of {list(names)} (or "
                                         f"map one with columns.{role}.{key}); columns "
                                         f"present: {table.columns} (a CSV or TSV file's first "
                                         f"line names its columns)")
        out[key] = found[0] if found else None
    return out


def _missing(value: Any) -> bool:
    return value is None or value is _ABSENT or (isinstance(value, float) and math.isnan(value)) \
        or type(value).__name__ in ("NAType", "NaTType")


def _cell_id(value: Any, table: _Table, at: Any, column: str) -> str:
    """An id: a string or an integer, under the id rule (:func:`_clean_id`)."""
    if _missing(value):
        raise table.error(at, column, "missing id")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    elif isinstance(value, float):
        raise table.error(at, column, f"a float id ({value!r}): ids are strings or integers "
                                      f"(did a missing value make the column float?)")
    if not isinstance(value, str):
        raise table.error(at, column, f"expected a string or an integer id, got "
                                      f"{type(value).__name__}")
    try:
        value = _clean_id(value)
    except ValueError as exc:
        raise table.error(at, column, str(exc)) from None
    _cell_unicode(value, table, at, column)
    return value


def _cell_text(value: Any, table: _Table, at: Any, column: str | None) -> str:
    if column is None or _missing(value):
        return ""
    if not isinstance(value, str):
        raise table.error(at, column, f"expected a string, got {type(value).__name__}")
    _cell_unicode(value, table, at, column)
    return value


def _cell_unicode(value: Any, table: _Table, at: Any, column: str) -> None:
    try:
        _check_unicode(value, Path(table.label), at, column)
    except DatasetError as exc:
        raise table.error(at, exc.field, exc.message) from None


def _cell_metadata(value: Any, table: _Table, at: Any, column: str | None) -> dict:
    if column is None or _missing(value) or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_constant=_non_finite, parse_float=_finite_float)
        except (ValueError, RecursionError) as exc:
            raise table.error(at, column, f"not a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise table.error(at, column, f"expected an object (JSON text in CSV), got "
                                      f"{type(value).__name__}")
    _cell_unicode(value, table, at, column)
    return value


def _csv_table(path: Path) -> _Table:
    """A CSV (``,``) or TSV (tab) file with a header row; numbers are the line a row starts on.
    Fields are read as written (ids stay strings: ``007`` is not ``7``)."""
    delimiter = "\t" if path.suffix == ".tsv" else ","

    def lines() -> Iterator[str]:
        try:
            for lineno, raw in bounded_lines(path):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(path, lineno, "encoding", f"not UTF-8: {exc}") from None
                yield text.removeprefix("\ufeff") if lineno == 1 else text
        except InputFileError as exc:
            raise _file_error(path, exc) from None
        except OSError as exc:
            raise DatasetError(path, None, "file", f"cannot read: {exc.strerror or exc}"
                               ) from None

    def records() -> Iterator[tuple[int, list[str]]]:
        csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))  # long documents
        reader = csv.reader(lines(), delimiter=delimiter)
        done = 0
        try:
            for record in reader:
                start, done = done + 1, reader.line_num
                if record:
                    yield start, record
        except csv.Error as exc:
            raise DatasetError(path, done + 1, "row", f"malformed {path.suffix[1:].upper()}: "
                                                      f"{exc}") from None

    first = next(records(), None)
    if first is None:
        raise DatasetError(path, None, "header", "no header row (an empty file)")
    header_line, header = first[0], [c.strip() for c in first[1]]
    for i, column in enumerate(header):
        if not column or column in header[:i]:
            raise DatasetError(path, header_line, "header",
                               f"column {i + 1} is {'empty' if not column else 'repeated'}: "
                               f"{header} (the first line names the columns)")

    def read(_hasher: _Hasher) -> Iterator[tuple[int, dict[str, Any]]]:
        rows = records()
        next(rows)
        for lineno, record in rows:
            if len(record) != len(header):
                raise DatasetError(path, lineno, "row",
                                   f"{len(record)} field(s); the header (line {header_line}) "
                                   f"has {len(header)}: {header}")
            yield lineno, dict(zip(header, record, strict=True))

    return _Table(str(path), "line", header, read)


def _parquet_table(path: Path) -> _Table:
    """A parquet file; numbers are rows, 1-based."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        check_regular_file(path)
    except InputFileError as exc:
        raise _file_error(path, exc) from None
    try:
        pfile = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(path, None, "file", f"cannot read as parquet: {exc}") from None
    columns = list(pfile.schema_arrow.names)

    def read(_hasher: _Hasher) -> Iterator[tuple[int, dict[str, Any]]]:
        n = 0
        for batch in pfile.iter_batches(batch_size=8192):
            for row in batch.to_pylist():
                n += 1
                yield n, row

    return _Table(str(path), "row", columns, read)


def _jsonl_table(path: Path, hashed_name: str) -> _Table:
    """A JSONL file, validated like a BEIR one; its bytes are its hash, as in a BEIR folder."""
    def read(hasher: _Hasher) -> Iterator[tuple[int, dict[str, Any]]]:
        yield from _read_jsonl(path, hasher, hashed_name)

    return _Table(str(path), "line", None, read, raw=True)


def _file_table(path: Path, role: str) -> _Table:
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")) and role != "qrels":
        return _jsonl_table(path, "corpus.jsonl" if role == "corpus" else "queries.jsonl")
    if name.endswith((".csv", ".tsv")):
        return _csv_table(path)
    if name.endswith(".parquet"):
        return _parquet_table(path)
    valid = CORPUS_SUFFIXES if role != "qrels" else TABLE_SUFFIXES
    raise DatasetError(path, None, "file", f"unknown file type for the {role}; valid: {valid}")


def _frame_table(frame: Any, label: str) -> _Table:
    """A pandas DataFrame; numbers are its index labels."""
    if not (hasattr(frame, "columns") and hasattr(frame, "index") and hasattr(frame, "iloc")):
        raise DatasetError(label, None, "frame",
                           f"expected a pandas DataFrame, got {type(frame).__name__}")
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise DatasetError(label, None, "columns", f"repeated column names: {columns}")

    def read(_hasher: _Hasher) -> Iterator[tuple[Any, dict[str, Any]]]:
        values = [frame.iloc[:, i].tolist() for i in range(len(columns))]
        for at, row in zip(frame.index.tolist(), zip(*values, strict=True), strict=True):
            yield at, dict(zip(columns, row, strict=True))

    return _Table(label, "row", columns, read)


def _one_file(folder: Path, stem: str, suffixes: tuple[str, ...]) -> Path:
    found = [folder / f"{stem}{s}" for s in suffixes if (folder / f"{stem}{s}").exists()]
    if not found:
        raise DatasetError(folder / f"{stem}.*", None, "file",
                           f"no {stem} file; expected one of {[stem + s for s in suffixes]}")
    if len(found) > 1:
        raise DatasetError(folder, None, "file",
                           f"several {stem} files: {[p.name for p in found]}; keep one")
    return found[0]


def _qrels_files(folder: Path) -> dict[str, Path]:
    """``{split: file}`` of ``folder/qrels/<split>.{tsv,csv,parquet}``."""
    out: dict[str, Path] = {}
    qdir = folder / "qrels"
    for p in sorted(qdir.iterdir()) if qdir.is_dir() else []:
        if p.suffix not in TABLE_SUFFIXES or p.is_dir():  # a device: refused by name when read
            continue
        if p.stem in out:
            raise DatasetError(qdir, None, "file", f"two qrels files for split {p.stem!r}: "
                                                   f"{out[p.stem].name} and {p.name}; keep one")
        out[p.stem] = p
    return out


def _manifest_path(path: Path) -> Path | None:
    if path.is_file() and path.suffix == ".toml":
        return path
    return path / MANIFEST if (path / MANIFEST).exists() else None


def _is_beir(path: Path) -> bool:
    """A plain BEIR folder: corpus.jsonl(.gz), queries.jsonl, qrels/*.tsv only."""
    return (path.is_dir() and _manifest_path(path) is None
            and any((path / f).exists() for f in CORPUS_FILES)
            and (path / "queries.jsonl").exists()
            and not any((path / f"{stem}{s}").exists() for stem in ("corpus", "queries")
                        for s in TABLE_SUFFIXES)
            and not any(p.suffix in (".csv", ".parquet") for p in (path / "qrels").glob("*")))


def _read_manifest(mpath: Path) -> tuple[_TabularSource, dict[str, Any]]:
    import tomllib

    try:
        data = tomllib.loads(read_bounded(mpath).decode("utf-8"))
    except InputFileError as exc:
        raise _file_error(mpath, exc) from None
    except OSError as exc:
        raise DatasetError(mpath, None, "file", f"cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DatasetError(mpath, None, "toml", f"not valid TOML: {exc}") from None
    for key in data:
        if key not in _MANIFEST_KEYS:
            raise DatasetError(mpath, None, key, f"unknown key; valid: {list(_MANIFEST_KEYS)}")
    for key in ("name", "split", "answers", "corpus", "queries"):
        if key in data and not (isinstance(data[key], str) and data[key]):
            raise DatasetError(mpath, None, key, "expected a non-empty string")

    def file(key: str, value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise DatasetError(mpath, None, key, "expected a file name (a non-empty string)")
        p = mpath.parent / value
        if not p.exists():
            raise DatasetError(mpath, None, key, f"file not found: {p}")
        try:
            check_regular_file(p)
        except InputFileError as exc:
            raise DatasetError(mpath, None, key, f"{p}: {exc.reason}") from None
        return p

    for key in ("corpus", "queries", "qrels"):
        if key not in data:
            raise DatasetError(mpath, None, key, "missing (the manifest names the corpus, "
                                                 "queries and qrels files)")
    qrels = data["qrels"]
    if isinstance(qrels, dict):
        if not qrels:
            raise DatasetError(mpath, None, "qrels", "no split: expected {split = \"file\"}")
        tables: dict[str | None, _Table] = {
            str(s): _file_table(file(f"qrels.{s}", f), "qrels") for s, f in qrels.items()}
    else:
        tables = {None: _file_table(file("qrels", qrels), "qrels")}
    src = _TabularSource(
        corpus=_file_table(file("corpus", data["corpus"]), "corpus"),
        queries=_file_table(file("queries", data["queries"]), "queries"),
        qrels=tables, columns=_check_columns(data.get("columns", {}), mpath),
        default_split=data.get("split", "test"),
        answers=file("answers", data["answers"]) if "answers" in data else None, where=mpath)
    return src, data


def _tabular_source(path: Path) -> _TabularSource | None:
    """The files of a manifest or a folder of tabular files; None for a plain BEIR folder."""
    manifest = _manifest_path(path)
    if manifest is not None:
        return _read_manifest(manifest)[0]
    if _is_beir(path):
        return None
    answers = path / "answers.jsonl"
    return _TabularSource(
        corpus=_file_table(_one_file(path, "corpus", CORPUS_SUFFIXES), "corpus"),
        queries=_file_table(_one_file(path, "queries", QUERY_SUFFIXES), "queries"),
        qrels={s: _file_table(p, "qrels") for s, p in _qrels_files(path).items()},
        columns={}, answers=answers if answers.is_file() else None, where=path)


def dataset_name(path: str | Path) -> str:
    """The default name of the dataset at ``path`` (as :func:`find_dataset` gives it): a
    manifest's ``name``, else its folder's name (or the file's stem when it is not
    ``dataset.toml``)."""
    p = Path(path)
    manifest = _manifest_path(p)
    if manifest is not None:
        data = _read_manifest(manifest)[1]
        if "name" in data:
            return str(data["name"])
        return manifest.parent.name if manifest.name == MANIFEST else manifest.stem
    return p.name


def _tab_corpus(table: _Table, mapping: dict[str, str], name: str, hasher: _Hasher
                ) -> Iterator[ItemRecord]:
    cols = _resolve(table, "corpus", mapping)
    id_col, text_col = cols["id"], cols["text"]
    assert id_col is not None and text_col is not None
    first: dict[str, Any] = {}
    if not table.raw:
        hasher.update(b"\x00corpus.jsonl\x00")
    source = Path(table.label).name
    for at, row in table.read(hasher):
        doc_id = _cell_id(row.get(id_col, _ABSENT), table, at, id_col)
        if doc_id in first:
            n, raw = first[doc_id]
            raise table.error(at, id_col, f"duplicate id {doc_id!r} "
                                          f"{_same_id_note(f'{table.unit} {n}', row[id_col], raw)}")
        first[doc_id] = at, row[id_col]
        item = ItemRecord(
            id=doc_id, kind="doc", source=name, source_ref=f"{source}:{at}",
            title=_cell_text(row.get(cols["title"] or "", None), table, at, cols["title"]),
            text=_cell_text(row.get(text_col, None), table, at, text_col),
            metadata=_cell_metadata(row.get(cols["metadata"] or "", None), table, at,
                                    cols["metadata"]))
        if not table.raw:
            hasher.update(_doc_line(item).encode("utf-8"))
        yield item
    if not first:
        raise table.error(None, "corpus", "no documents")


def _tab_queries(table: _Table, mapping: dict[str, str], hasher: _Hasher) -> dict[str, str]:
    cols = _resolve(table, "queries", mapping)
    id_col, text_col = cols["id"], cols["text"]
    assert id_col is not None and text_col is not None
    queries: dict[str, str] = {}
    first: dict[str, Any] = {}
    if not table.raw:
        hasher.update(b"\x00queries.jsonl\x00")
    for at, row in table.read(hasher):
        qid = _cell_id(row.get(id_col, _ABSENT), table, at, id_col)
        if qid in first:
            n, raw = first[qid]
            raise table.error(at, id_col, f"duplicate id {qid!r} "
                                          f"{_same_id_note(f'{table.unit} {n}', row[id_col], raw)}")
        if row.get(text_col, _ABSENT) is _ABSENT:
            raise table.error(at, text_col, "missing")
        first[qid] = at, row[id_col]
        queries[qid] = _cell_text(row[text_col], table, at, text_col)
        if not table.raw:
            hasher.update(_query_line(qid, queries[qid]).encode("utf-8"))
    return queries


_QrelsRow = tuple[_Table, Any, str, str, int]


def _row_split(value: Any, default: str) -> str:
    """A qrels row's split: its ``split`` cell, else (none, or empty) ``default``."""
    return default if _missing(value) or not str(value).strip() else str(value).strip()


def _tab_qrels_rows(table: _Table, mapping: dict[str, str], split: str | None,
                    default_split: str, queries: dict[str, str]
                    ) -> dict[str, list[_QrelsRow]]:
    """``{split: rows}`` of one qrels table, each row checked alone."""
    cols = _resolve(table, "qrels", mapping)
    q_col, d_col, s_col = cols["query_id"], cols["doc_id"], cols["score"]
    assert q_col is not None and d_col is not None and s_col is not None
    out: dict[str, list[_QrelsRow]] = {}
    for at, row in table.read(_NoHash()):
        qid = _cell_id(row.get(q_col), table, at, q_col)
        doc_id = _cell_id(row.get(d_col), table, at, d_col)
        raw = row.get(s_col)
        if _missing(raw):
            raise table.error(at, s_col, "missing grade")
        try:
            grade = _grade(str(raw).strip(), Path(table.label), at)
        except DatasetError as exc:
            raise table.error(at, s_col, exc.message) from None
        if qid not in queries:
            raise table.error(at, q_col, f"unknown query {qid!r}")
        name = split
        if name is None:
            name = _row_split(row.get(cols["split"]) if cols["split"] else None, default_split)
        if not name or ":" in name or "/" in name or "\t" in name:
            raise table.error(at, cols["split"] or "split",
                              f"bad split name {name!r} (no ':', '/' or tab)")
        out.setdefault(name, []).append((table, at, qid, doc_id, grade))
    return out


def _tab_judged(split: str, rows: list[_QrelsRow], corpus: dict[str, ItemRecord],
                hasher: _Hasher) -> tuple[dict[str, dict[str, int]], int, int]:
    """``(judged, rows naming a document absent from the corpus, repeated identical rows)`` of
    one split, its rows fed to ``hasher`` as a BEIR qrels file."""
    judged: dict[str, dict[str, int]] = {}
    at: dict[tuple[str, str], tuple[_Table, Any]] = {}
    missing = duplicates = 0
    _feed_file(hasher, f"{split}.tsv", _qrels_lines(iter([(q, d, g) for _, _, q, d, g in rows])))
    for table, n, qid, doc_id, grade in rows:
        docs = judged.setdefault(qid, {})
        if doc_id in docs:
            if docs[doc_id] != grade:
                t0, n0 = at[qid, doc_id]
                before = f"{t0.unit} {n0}" if t0 is table else f"{t0.label}, {t0.unit} {n0}"
                raise table.error(n, "score", f"conflicting judgments of query {qid!r}, "
                                              f"document {doc_id!r}: grade {grade} here, "
                                              f"{docs[doc_id]} at {before}")
            duplicates += 1
            continue
        if doc_id not in corpus:
            missing += 1
        docs[doc_id] = grade
        at[qid, doc_id] = (table, n)
    label = rows[0][0].label if rows else split
    _check_judged(judged, Path(label))
    return judged, missing, duplicates


def _load_tabular(src: _TabularSource, path: Path, name: str, splits: list[str] | None
                  ) -> Dataset:
    hasher, corpus_hasher = hashlib.sha256(), hashlib.sha256()
    corpus = {it.id: it for it in _tab_corpus(src.corpus, src.columns.get("corpus", {}), name,
                                              _Both(hasher, corpus_hasher))}
    queries = _tab_queries(src.queries, src.columns.get("queries", {}), hasher)
    mapping = src.columns.get("qrels", {})
    rows: dict[str, list[_QrelsRow]] = {}
    mixed = src.qrels.get(None)
    if mixed is not None and splits != []:
        rows = _tab_qrels_rows(mixed, mapping, None, src.default_split, queries)
    known = sorted({*rows, *(s for s in src.qrels if s is not None)})
    where = src.where or path

    def read(base: str) -> tuple[dict[str, dict[str, int]], int, int, str]:
        table = src.qrels.get(base)
        got = rows.get(base, []) if table is None else \
            _tab_qrels_rows(table, mapping, base, src.default_split, queries)[base]
        label = table.label if table is not None else (mixed.label if mixed else base)
        return (*_tab_judged(base, got, corpus, hasher), label)

    return _assemble(name, path, where, corpus, queries, splits, known, read, hasher,
                     corpus_hasher, src.answers, canonical_answers=True,
                     queries_label=src.queries.label)
