"""A loaded :class:`Dataset` (corpus, queries, qrels, gold answers), its content hash, and the
loaders: :func:`load_dataset` (a BEIR folder, a folder of tables, a manifest),
:meth:`Dataset.from_frames`, and the corpus or queries read alone (:func:`iter_corpus`,
:func:`corpus_hash`, :func:`read_queries`)."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from aiblox.contracts.items import ItemRecord
from aiblox.data.beir import get_id, read_jsonl, read_lines, read_qrels, text_field
from aiblox.data.facts import (
    LazyCorpus,
    corpus_facts,
    rehash_corpus,
    remember_dataset_hash,
    trusted_facts,
    trusts,
)
from aiblox.data.find import available_splits, corpus_file, dataset_name, find_dataset
from aiblox.data.rules import (
    Both,
    DatasetError,
    Hasher,
    NoHash,
    doc_line,
    feed_file,
    parse_split,
    qrels_lines,
    query_line,
    same_id_note,
    split_part,
)
from aiblox.data.tables import (
    TabularSource,
    check_columns,
    file_table,
    frame_table,
    read_manifest,
    split_column_hint,
    tab_corpus,
    tab_judged,
    tab_qrels_splits,
    tab_queries,
    tabular_source,
)
from aiblox.text.lexical_gaps import LexicalGaps, lexical_gaps

__all__ = [
    "Dataset",
    "GoldAnswer",
    "LEXICAL_ANALYZER",
    "content_hash",
    "corpus_hash",
    "document_gaps",
    "iter_corpus",
    "load_dataset",
    "read_answers",
    "read_queries",
    "warn_lexical_gaps",
]


LEXICAL_ANALYZER = "bm25s"
"""The analyser whose blind spots :func:`load_dataset` warns about: the default BM25 engine's
(the index's bm25s tokens; ``fts.engine = "native"`` on DuckDB sees less: ``duckdb-fts``)."""


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
    :attr:`corpus_hash` are computed, never given: a loaded dataset hashes what was read; one
    built by hand, or copied by ``dataclasses.replace`` (even unchanged), hashes its content
    (:func:`content_hash`: the BEIR files of its records written one way). So a copy hashes
    otherwise than its original when that was read from other bytes: BEIR files written
    another way (their bytes are hashed), qrels repeating an identical row (read, every row is
    hashed; ``qrels`` holds it once, :attr:`duplicate_qrels` counts it) or a query's rows apart
    (read, in file order; ``qrels`` holds them together), or a derived split (read, its base
    split's file; ``qrels`` holds the part).
    """

    name: str
    path: Path
    corpus: Mapping[str, ItemRecord]
    """``{doc_id: record}``. A large JSONL corpus whose facts are recorded
    (:mod:`aiblox.data.facts`) is a :class:`~aiblox.data.facts.LazyCorpus`: its ids and size
    known, its documents read from the file only when one is asked for."""
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
        and DataFrames hash their rows written as BEIR lines (:func:`content_hash`'s lines, in
        file order, a repeated row each time), so the same rows give the same hash whichever
        form they came in (a copy's hash: see the class doc)."""
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
        return [(q, self.queries[q]) for q in sorted(self.split_qrels(split))]

    def split_qrels(self, split: str) -> dict[str, dict[str, int]]:
        """``{query_id: {doc_id: grade}}`` of ``split``: a split loaded, or a part
        ``<base>:<i>/<n>`` of a base split loaded (a dataset loaded with every split), cut from
        it as :func:`load_dataset` cuts it. A split neither is a :class:`DatasetError`."""
        if split in self.qrels:
            return self.qrels[split]
        try:
            derived = parse_split(split)
        except ValueError as exc:
            raise DatasetError(self.path / "qrels", None, "split", str(exc)) from None
        base = derived[0] if derived is not None else split
        if derived is None or base not in self.qrels:
            raise DatasetError(self.path / "qrels" / f"{base}.tsv", None, "split",
                               f"split {split!r} not loaded; loaded: {sorted(self.qrels)} "
                               f"(load_dataset(..., splits=[{split!r}]) loads it)")
        return _part(self.qrels[base], derived[1], derived[2])

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
        tables = TabularSource(
            corpus=frame_table(corpus, "corpus frame"),
            queries=frame_table(queries, "queries frame"),
            qrels=({str(k): frame_table(v, f"qrels frame {k!r}") for k, v in qrels.items()}
                   if isinstance(qrels, dict) else {None: frame_table(qrels, "qrels frame")}),
            columns=check_columns(columns or {}, "columns"), default_split=split)
        return _load_tabular(tables, Path(name), name, None)


def content_hash(dataset: Dataset, corpus_only: bool = False) -> str:
    """The hash of ``dataset`` as the BEIR folder holding its content: ``corpus.jsonl`` with
    ``json.dumps({"_id", "title", "text"})`` lines (``"metadata"`` after them when not empty),
    ``queries.jsonl`` with ``{"_id", "text"}`` lines, ``qrels/<split>.tsv`` with the header
    ``query-id<TAB>corpus-id<TAB>score`` and one row per judgment, ``answers.jsonl``; each file
    fed as :func:`load_dataset` reads it (its name, then its bytes)."""
    h = hashlib.sha256()
    feed_file(h, "corpus.jsonl", (doc_line(d) for d in dataset.corpus.values()))
    if corpus_only:
        return h.hexdigest()
    feed_file(h, "queries.jsonl", (query_line(q, t) for q, t in dataset.queries.items()))
    for split in sorted(dataset.qrels):
        feed_file(h, f"{split}.tsv", qrels_lines(
            (q, d, g) for q, docs in dataset.qrels[split].items() for d, g in docs.items()))
    if dataset.answers:
        feed_file(h, "answers.jsonl", _answer_lines(dataset.answers))
    return h.hexdigest()


def _answer_lines(answers: dict[str, GoldAnswer]) -> Iterator[str]:
    for q, a in answers.items():
        yield json.dumps({"_id": q, "corpus-id": a.corpus_id, "answers": list(a.answers),
                          "answer_starts": list(a.answer_starts)}) + "\n"


def iter_corpus(corpus_path: Path, name: str, hasher: Hasher | None = None
                ) -> Iterator[ItemRecord]:
    """The documents of a corpus file, one at a time in file order, each validated like
    :func:`load_dataset` does (errors name the file, line and field); only the ids seen are
    kept, so a corpus of any size streams in bounded memory. ``hasher`` is fed every byte
    (of a CSV, TSV or parquet corpus: the BEIR bytes of its rows; of a manifest: its corpus
    file's)."""
    hasher = hasher if hasher is not None else NoHash()
    if not corpus_path.name.endswith((".jsonl", ".jsonl.gz")):
        if corpus_path.suffix == ".toml":
            src = read_manifest(corpus_path)[0]
            table, mapping = src.corpus, src.columns.get("corpus", {})
        else:
            table, mapping = file_table(corpus_path, "corpus"), {}
        yield from tab_corpus(table, mapping, name, hasher)
        return
    first_line: dict[str, tuple[int, Any]] = {}
    for lineno, obj in read_jsonl(corpus_path, hasher, "corpus.jsonl"):
        doc_id = get_id(obj, corpus_path, lineno)
        if doc_id in first_line:
            n, raw = first_line[doc_id]
            raise DatasetError(corpus_path, lineno, "_id", f"duplicate id {doc_id!r} "
                               f"{same_id_note(f'line {n}', obj['_id'], raw)}")
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DatasetError(corpus_path, lineno, "metadata", "expected a JSON object")
        if obj.get("text") is None:  # a misspelt key stored an empty document, unsearchable
            raise DatasetError(corpus_path, lineno, "text",
                               f"{'null' if 'text' in obj else 'missing'} (a document "
                               f"without text has \"text\": \"\")")
        first_line[doc_id] = lineno, obj["_id"]
        yield ItemRecord(
            id=doc_id, kind="doc", source=name, source_ref=f"{corpus_path.name}:{lineno}",
            title=text_field(obj, corpus_path, lineno, "title"),
            text=text_field(obj, corpus_path, lineno, "text"), metadata=meta)
    if not first_line:
        raise DatasetError(corpus_path, None, "corpus",
                           "no documents (the file holds no JSON object line)")


def corpus_hash(corpus_path: Path) -> str:
    """:attr:`Dataset.corpus_hash` of a corpus file (as :func:`corpus_file` gives it): a JSONL
    one read (and decompressed) without parsing, another parsed; a large JSONL one whose facts
    are recorded and whose file is unchanged not read at all (:mod:`aiblox.data.facts`)."""
    if trusts(corpus_path):
        facts = trusted_facts(corpus_path, LEXICAL_ANALYZER)
        if facts is not None:  # recorded, the file unchanged
            return facts.corpus_hash
    h = hashlib.sha256()
    if corpus_path.name.endswith((".jsonl", ".jsonl.gz")):
        for _ in read_lines(corpus_path, h, "corpus.jsonl"):
            pass
    else:
        for _ in iter_corpus(corpus_path, "", h):
            pass
    return h.hexdigest()


def read_queries(name_or_path: str | Path) -> dict[str, str]:
    """The queries of a dataset (``{id: text}``, file order, validated as :func:`load_dataset`
    does), without reading its corpus or judgments."""
    path = find_dataset(name_or_path)
    src = tabular_source(path)
    if src is not None:
        return tab_queries(src.queries, src.columns.get("queries", {}), NoHash())
    queries: dict[str, str] = {}
    qfirst: dict[str, int] = {}
    qpath = path / "queries.jsonl"
    for lineno, obj in read_jsonl(qpath, NoHash()):
        qid = get_id(obj, qpath, lineno)
        if qid in queries:
            raise DatasetError(qpath, lineno, "_id",
                               f"duplicate id {qid!r} (first at line {qfirst[qid]})")
        if "text" not in obj:
            raise DatasetError(qpath, lineno, "text", "missing")
        qfirst[qid] = lineno
        queries[qid] = text_field(obj, qpath, lineno, "text")
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
    src = tabular_source(path)
    if src is not None:
        return _load_tabular(src, path, name, splits)
    hasher = hashlib.sha256()
    corpus_path = corpus_file(path)

    corpus: Mapping[str, ItemRecord]
    corpus_hasher = hashlib.sha256()
    facts = None
    if trusts(corpus_path):  # large: its facts recorded once, trusted while it is unchanged
        reader = partial(iter_corpus, corpus_path, name)
        facts, was_read = corpus_facts(corpus_path, reader, LEXICAL_ANALYZER, feed=hasher)
        corpus = LazyCorpus(corpus_path, reader, facts)
        tail = _Tail()  # what is hashed after the corpus
        after: Any = tail
    else:
        corpus = {it.id: it for it in iter_corpus(corpus_path, name,
                                                  Both(hasher, corpus_hasher))}
        after = hasher

    queries: dict[str, str] = {}
    qfirst: dict[str, tuple[int, Any]] = {}
    qpath = path / "queries.jsonl"
    for lineno, obj in read_jsonl(qpath, after) if qpath.exists() else ():  # a corpus alone
        qid = get_id(obj, qpath, lineno)
        if qid in queries:
            n, raw = qfirst[qid]
            raise DatasetError(qpath, lineno, "_id", f"duplicate id {qid!r} "
                               f"{same_id_note(f'line {n}', obj['_id'], raw)}")
        if "text" not in obj:
            raise DatasetError(qpath, lineno, "text", "missing")
        qfirst[qid] = lineno, obj["_id"]
        queries[qid] = text_field(obj, qpath, lineno, "text")

    def read(base: str) -> tuple[dict[str, dict[str, int]], int, int, str]:
        split_path = path / "qrels" / f"{base}.tsv"
        return (*read_qrels(split_path, after, queries, corpus), str(split_path))

    apath = path / "answers.jsonl"
    ds = _assemble(name, path, path, corpus, queries, splits, available_splits(path), read,
                   after, corpus_hasher, apath if apath.exists() else None,
                   queries_label=str(qpath),
                   doc_gaps=facts.doc_gaps if facts is not None else None)
    if facts is not None:
        key = tail.key()
        known = facts.dataset_hashes.get(key)
        if known is None:
            if not was_read:  # the corpus was trusted: its bytes hashed again, not parsed
                rehash_corpus(corpus_path, hasher)
            tail.feed(hasher)
            known = hasher.hexdigest()
            remember_dataset_hash(facts, key, known)
        ds._hash, ds._corpus_hash = known, facts.corpus_hash
    return ds


class _Tail:
    """The bytes a load hashes after a trusted corpus (queries, qrels, answers), kept to be
    fed after the corpus's, and their own sha256 (the key of the dataset hash they give)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def update(self, data: bytes, /) -> None:
        self.chunks.append(bytes(data))

    def key(self) -> str:
        h = hashlib.sha256()
        for c in self.chunks:
            h.update(c)
        return h.hexdigest()

    hexdigest = key

    def feed(self, hasher: Any) -> None:
        for c in self.chunks:
            hasher.update(c)


_ReadSplit = Callable[[str], tuple[dict[str, dict[str, int]], int, int, str]]


def _assemble(name: str, path: Path, where: Path, corpus: Mapping[str, ItemRecord],
              queries: dict[str, str], splits: list[str] | None, known: list[str],
              read_split: _ReadSplit, hasher: Any, corpus_hasher: Any,
              apath: Path | None, canonical_answers: bool = False,
              queries_label: str = "queries", doc_gaps: LexicalGaps | None = None) -> Dataset:
    """The qrels of the splits asked for (derived ones cut from their base split), the
    answers, the warnings, and the :class:`Dataset`: the part every layout shares.
    ``read_split(base)`` reads (and hashes) one base split: ``(judged, rows naming documents
    absent from the corpus, repeated identical rows, the file it came from)``. ``doc_gaps``:
    the documents' lexical gaps when already known (a trusted corpus's recorded facts)."""
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
            raise DatasetError(where / "qrels", None, "split",
                               f"no split {split!r}; available: {known}" if known or queries
                               else f"no split {split!r}: {name} holds documents alone (no "
                                    f"queries or judgements), to ingest, search and answer "
                                    f"over; evaluating needs queries and qrels beside them")
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
            judged = _part(judged, i, n)
            missing = sum(1 for docs in judged.values() for d in docs if d not in corpus)
            if not judged:
                warnings.warn(f"{files[base]}: derived split {split!r} "
                              f"holds no judged query (every metric on it is 0)", stacklevel=3)
        qrels[split], missing_docs[split] = judged, missing

    answers: dict[str, GoldAnswer] = {}
    if apath is not None:
        answers = read_answers(apath, NoHash() if canonical_answers else hasher, queries,
                                corpus)
        if canonical_answers and answers:
            feed_file(hasher, "answers.jsonl", _answer_lines(answers))

    _warn_empty_queries(queries, qrels, queries_label)
    gaps = _lexical_gaps(corpus, queries, qrels, doc_gaps)
    warn_lexical_gaps(where, gaps)
    ds = Dataset(name=name, path=path, corpus=corpus, queries=queries, qrels=qrels,
                 answers=answers, missing_qrels_docs=missing_docs, duplicate_qrels=duplicates,
                 lexical_gaps=gaps)
    ds._hash, ds._corpus_hash = hasher.hexdigest(), corpus_hasher.hexdigest()
    return ds


def _part(judged: dict[str, dict[str, int]], i: int, n: int) -> dict[str, dict[str, int]]:
    """The judgments of the queries in part ``i`` of ``n`` (:func:`split_part`)."""
    return {q: docs for q, docs in judged.items() if split_part(q, n) == i}


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


def read_answers(apath: Path, hasher: Hasher, queries: dict[str, str],
                  corpus: Mapping[str, ItemRecord]) -> dict[str, GoldAnswer]:
    """The gold answers: each names a known query, and each answer is the text at its offset
    of its document (checked where the corpus was parsed: a trusted corpus,
    :class:`~aiblox.data.facts.LazyCorpus`, is not read for it); answers in documents the
    corpus lacks are kept with one warning, as qrels rows of absent documents are."""
    answers: dict[str, GoldAnswer] = {}
    absent: list[str] = []
    for lineno, obj in read_jsonl(apath, hasher):
        qid = get_id(obj, apath, lineno)
        if qid not in queries:
            raise DatasetError(apath, lineno, "_id", f"unknown query {qid!r}")
        doc_id = get_id(obj, apath, lineno, "corpus-id")
        texts, starts = obj.get("answers"), obj.get("answer_starts")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise DatasetError(apath, lineno, "answers", "expected a list of strings")
        if not isinstance(starts, list) or len(starts) != len(texts) \
                or not all(isinstance(s, int) for s in starts):
            raise DatasetError(apath, lineno, "answer_starts",
                               "expected one integer offset per answer")
        if doc_id not in corpus:  # never found: said once, as qrels rows of absent documents
            absent.append(qid)
        doc = None if isinstance(corpus, LazyCorpus) or doc_id not in corpus \
            else corpus[doc_id]
        for i, (text, start) in enumerate(zip(texts, starts, strict=True)):
            found = doc.text[start:start + len(text)] if doc is not None and start >= 0 else text
            if start < 0 or found != text:
                raise DatasetError(apath, lineno, "answer_starts",
                                   f"answer {i + 1}, {text!r}, is not at offset {start} of "
                                   f"document {doc_id!r} (the text there: {found!r})")
        answers[qid] = GoldAnswer(doc_id, tuple(texts), tuple(starts))
    if absent:
        warnings.warn(f"{apath}: {len(absent)} gold answers name documents absent from the "
                      f"corpus (kept; they are never found, and lower answer recall), e.g. "
                      f"query {absent[0]!r}", stacklevel=4)
    return answers


def document_gaps(docs: Iterable[ItemRecord]) -> LexicalGaps:
    """The documents whose text as indexed (title and text) :data:`LEXICAL_ANALYZER` cannot
    index."""
    return lexical_gaps(((d.id, f"{d.title} {d.text}") for d in docs), LEXICAL_ANALYZER)


def warn_lexical_gaps(where: str | Path, gaps: Mapping[str, LexicalGaps]) -> None:
    """One warning per kind of text in ``gaps`` (``documents``, ``queries``) that holds texts
    BM25 cannot index: ``<where>: 2 of 43 documents (e.g. doc 'em1') have text BM25 cannot
    index ...``, as :func:`load_dataset` and ``aiblox ingest`` say it."""
    for what, gap in gaps.items():
        if gap:
            one = "doc" if what == "documents" else "query"
            warnings.warn(f"{where}: {gap.describe(what, one)}", stacklevel=4)


def _lexical_gaps(corpus: Mapping[str, ItemRecord], queries: dict[str, str],
                  qrels: dict[str, dict[str, dict[str, int]]],
                  doc_gaps: LexicalGaps | None = None) -> dict[str, LexicalGaps]:
    """Documents (title and text, as indexed; ``doc_gaps`` when already known) and judged
    queries of the loaded splits that :data:`LEXICAL_ANALYZER` cannot index."""
    judged = sorted({q for docs in qrels.values() for q in docs})
    found = {
        "documents": doc_gaps if doc_gaps is not None else document_gaps(corpus.values()),
        "queries": lexical_gaps(((q, queries[q]) for q in judged), LEXICAL_ANALYZER),
    }
    return {what: gap for what, gap in found.items() if gap}


def _load_tabular(src: TabularSource, path: Path, name: str, splits: list[str] | None
                  ) -> Dataset:
    hasher, corpus_hasher = hashlib.sha256(), hashlib.sha256()
    corpus = {it.id: it for it in tab_corpus(src.corpus, src.columns.get("corpus", {}), name,
                                              Both(hasher, corpus_hasher))}
    queries = tab_queries(src.queries, src.columns.get("queries", {}), hasher)
    mixed = src.qrels.get(None)
    known, split_rows = tab_qrels_splits(src, queries, read_mixed=splits != [])
    where = src.where or path

    def read(base: str) -> tuple[dict[str, dict[str, int]], int, int, str]:
        table = src.qrels.get(base)
        label = table.label if table is not None else (mixed.label if mixed else base)
        return (*tab_judged(base, split_rows(base), corpus, hasher), label)

    try:
        return _assemble(name, path, where, corpus, queries, splits, known, read, hasher,
                         corpus_hasher, src.answers, canonical_answers=True,
                         queries_label=src.queries.label)
    except DatasetError as exc:
        hint = split_column_hint(src, path if path.is_dir() else path.parent) \
            if exc.field == "split" and exc.message.startswith("no split ") else ""
        if not hint:
            raise
        raise DatasetError(exc.file, exc.line, exc.field, exc.message + hint) from None
