"""Your own data: CSV, TSV, parquet and JSONL tables, ``dataset.toml`` manifests and pandas
DataFrames, their columns found or mapped, every cell checked like a BEIR field."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiblox.contracts.items import ItemRecord
from aiblox.data.beir import (
    check_judged,
    check_unicode,
    file_error,
    finite_float,
    non_finite,
    parse_grade,
    read_jsonl,
)
from aiblox.data.delimited import delimited_rows
from aiblox.data.rules import (
    CORPUS_FILES,
    DatasetError,
    Hasher,
    NoHash,
    clean_id,
    doc_line,
    feed_file,
    qrels_lines,
    query_line,
    same_id_note,
)
from aiblox.inputs import InputFileError, check_regular_file, read_bounded

__all__ = ["CORPUS_SUFFIXES", "MANIFEST", "QUERY_SUFFIXES", "TABLE_SUFFIXES"]


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
class TabularSource:
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


def check_columns(columns: Any, where: str | Path) -> dict[str, dict[str, str]]:
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


def resolve(table: _Table, role: str, mapping: dict[str, str]) -> dict[str, str | None]:
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
    """An id: a string or an integer, under the id rule (:func:`clean_id`)."""
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
        value = clean_id(value)
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


def _text_cell(value: Any, table: _Table, at: Any, column: str) -> Any:
    """A document's text cell, refused when null (parquet, DataFrames) as JSONL's ``"text":
    null`` is; an empty document is written ``""`` (a CSV or TSV cell: never null)."""
    if _missing(value):
        raise table.error(at, column, "null (a document without text has an empty text, \"\")")
    return value


def _cell_unicode(value: Any, table: _Table, at: Any, column: str) -> None:
    try:
        check_unicode(value, Path(table.label), at, column)
    except DatasetError as exc:
        raise table.error(at, exc.field, exc.message) from None


def _cell_metadata(value: Any, table: _Table, at: Any, column: str | None) -> dict:
    if column is None or _missing(value) or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_constant=non_finite, parse_float=finite_float)
        except (ValueError, RecursionError) as exc:
            raise table.error(at, column, f"not a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise table.error(at, column, f"expected an object (JSON text in CSV), got "
                                      f"{type(value).__name__}")
    _cell_unicode(value, table, at, column)
    return value


def _parquet_table(path: Path) -> _Table:
    """A parquet file; numbers are rows, 1-based."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        check_regular_file(path)
    except InputFileError as exc:
        raise file_error(path, exc) from None
    try:
        pfile = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(path, None, "file", f"cannot read as parquet: {exc}") from None
    columns = list(pfile.schema_arrow.names)

    def read(_hasher: Hasher) -> Iterator[tuple[int, dict[str, Any]]]:
        n = 0
        for batch in pfile.iter_batches(batch_size=8192):
            for row in batch.to_pylist():
                n += 1
                yield n, row

    return _Table(str(path), "row", columns, read)


def _jsonl_table(path: Path, hashed_name: str) -> _Table:
    """A JSONL file, validated like a BEIR one; its bytes are its hash, as in a BEIR folder."""
    def read(hasher: Hasher) -> Iterator[tuple[int, dict[str, Any]]]:
        yield from read_jsonl(path, hasher, hashed_name)

    return _Table(str(path), "line", None, read, raw=True)


def file_table(path: Path, role: str) -> _Table:
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")) and role != "qrels":
        return _jsonl_table(path, "corpus.jsonl" if role == "corpus" else "queries.jsonl")
    if name.endswith((".csv", ".tsv")):
        return _Table(str(path), "line", *delimited_rows(path))
    if name.endswith(".parquet"):
        return _parquet_table(path)
    valid = CORPUS_SUFFIXES if role != "qrels" else TABLE_SUFFIXES
    raise DatasetError(path, None, "file", f"unknown file type for the {role}; valid: {valid}")


def frame_table(frame: Any, label: str) -> _Table:
    """A pandas DataFrame; numbers are its index labels."""
    if not (hasattr(frame, "columns") and hasattr(frame, "index") and hasattr(frame, "iloc")):
        raise DatasetError(label, None, "frame",
                           f"expected a pandas DataFrame, got {type(frame).__name__}")
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise DatasetError(label, None, "columns", f"repeated column names: {columns}")

    def read(_hasher: Hasher) -> Iterator[tuple[Any, dict[str, Any]]]:
        values = [frame.iloc[:, i].tolist() for i in range(len(columns))]
        for at, row in zip(frame.index.tolist(), zip(*values, strict=True), strict=True):
            yield at, dict(zip(columns, row, strict=True))

    return _Table(label, "row", columns, read)


def one_file(folder: Path, stem: str, suffixes: tuple[str, ...]) -> Path:
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


def manifest_path(path: Path) -> Path | None:
    if path.is_file() and path.suffix == ".toml":
        return path
    return path / MANIFEST if (path / MANIFEST).exists() else None


def _is_beir(path: Path) -> bool:
    """A plain BEIR folder: corpus.jsonl(.gz), queries.jsonl, qrels/*.tsv only (or the corpus
    alone: documents with no queries or judgements)."""
    return (path.is_dir() and manifest_path(path) is None
            and any((path / f).exists() for f in CORPUS_FILES)
            and ((path / "queries.jsonl").exists() or not (path / "qrels").exists())
            and not any((path / f"{stem}{s}").exists() for stem in ("corpus", "queries")
                        for s in TABLE_SUFFIXES)
            and not any(p.suffix in (".csv", ".parquet") for p in (path / "qrels").glob("*")))


def read_manifest(mpath: Path) -> tuple[TabularSource, dict[str, Any]]:
    """A manifest's files and its keys, checked. A UTF-8 byte-order mark opening it (saved
    "UTF-8 with BOM") is not part of its text, as in every other file a dataset reads."""
    import tomllib

    try:
        data = tomllib.loads(read_bounded(mpath).decode("utf-8").removeprefix("\ufeff"))
    except InputFileError as exc:
        raise file_error(mpath, exc) from None
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
            str(s): file_table(file(f"qrels.{s}", f), "qrels") for s, f in qrels.items()}
    else:
        tables = {None: file_table(file("qrels", qrels), "qrels")}
    src = TabularSource(
        corpus=file_table(file("corpus", data["corpus"]), "corpus"),
        queries=file_table(file("queries", data["queries"]), "queries"),
        qrels=tables, columns=check_columns(data.get("columns", {}), mpath),
        default_split=data.get("split", "test"),
        answers=file("answers", data["answers"]) if "answers" in data else None, where=mpath)
    return src, data


def tabular_source(path: Path) -> TabularSource | None:
    """The files of a manifest or a folder of tabular files; None for a plain BEIR folder."""
    manifest = manifest_path(path)
    if manifest is not None:
        return read_manifest(manifest)[0]
    if _is_beir(path):
        return None
    answers = path / "answers.jsonl"
    return TabularSource(
        corpus=file_table(one_file(path, "corpus", CORPUS_SUFFIXES), "corpus"),
        queries=file_table(one_file(path, "queries", QUERY_SUFFIXES), "queries"),
        qrels={s: file_table(p, "qrels") for s, p in _qrels_files(path).items()},
        columns={}, answers=answers if answers.is_file() else None, where=path)


def tab_corpus(table: _Table, mapping: dict[str, str], name: str, hasher: Hasher
                ) -> Iterator[ItemRecord]:
    cols = resolve(table, "corpus", mapping)
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
                                          f"{same_id_note(f'{table.unit} {n}', row[id_col], raw)}")
        first[doc_id] = at, row[id_col]
        item = ItemRecord(
            id=doc_id, kind="doc", source=name, source_ref=f"{source}:{at}",
            title=_cell_text(row.get(cols["title"] or "", None), table, at, cols["title"]),
            text=_cell_text(_text_cell(row.get(text_col, None), table, at, text_col), table,
                            at, text_col),
            metadata=_cell_metadata(row.get(cols["metadata"] or "", None), table, at,
                                    cols["metadata"]))
        if not table.raw:
            hasher.update(doc_line(item).encode("utf-8"))
        yield item
    if not first:
        raise table.error(None, "corpus", "no documents")


def tab_queries(table: _Table, mapping: dict[str, str], hasher: Hasher) -> dict[str, str]:
    cols = resolve(table, "queries", mapping)
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
                                          f"{same_id_note(f'{table.unit} {n}', row[id_col], raw)}")
        if row.get(text_col, _ABSENT) is _ABSENT:
            raise table.error(at, text_col, "missing")
        first[qid] = at, row[id_col]
        queries[qid] = _cell_text(row[text_col], table, at, text_col)
        if not table.raw:
            hasher.update(query_line(qid, queries[qid]).encode("utf-8"))
    return queries


QrelsRow = tuple[_Table, Any, str, str, int]


def row_split(value: Any, default: str) -> str:
    """A qrels row's split: its ``split`` cell, else (none, or empty) ``default``."""
    return default if _missing(value) or not str(value).strip() else str(value).strip()


def tab_qrels_rows(table: _Table, mapping: dict[str, str], split: str | None,
                    default_split: str, queries: dict[str, str]
                    ) -> dict[str, list[QrelsRow]]:
    """``{split: rows}`` of one qrels table, each row checked alone."""
    cols = resolve(table, "qrels", mapping)
    q_col, d_col, s_col = cols["query_id"], cols["doc_id"], cols["score"]
    assert q_col is not None and d_col is not None and s_col is not None
    out: dict[str, list[QrelsRow]] = {}
    for at, row in table.read(NoHash()):
        qid = _cell_id(row.get(q_col), table, at, q_col)
        doc_id = _cell_id(row.get(d_col), table, at, d_col)
        raw = row.get(s_col)
        if _missing(raw):
            raise table.error(at, s_col, "missing grade")
        try:
            grade = parse_grade(str(raw).strip(), Path(table.label), at)
        except DatasetError as exc:
            raise table.error(at, s_col, exc.message) from None
        if qid not in queries:
            raise table.error(at, q_col, f"unknown query {qid!r}"
                              + ("" if queries else " (the queries table holds no query)"))
        name = split
        if name is None:
            name = row_split(row.get(cols["split"]) if cols["split"] else None, default_split)
        elif cols["split"] and (said := row_split(row.get(cols["split"]), name)) != name:
            # the file holds one split (its name, or its manifest key): a row of another
            # would be scored as this one
            raise table.error(at, cols["split"],
                              f"split {said!r}, but this "
                              f"file holds the {name!r} split; move the row to that split's "
                              f"file, or give one file with a split column "
                              f"(qrels = \"FILE\" in dataset.toml)")
        if not name or ":" in name or "/" in name or "\t" in name:
            raise table.error(at, cols["split"] or "split",
                              f"bad split name {name!r} (no ':', '/' or tab)")
        out.setdefault(name, []).append((table, at, qid, doc_id, grade))
    return out


def tab_qrels_splits(src: TabularSource, queries: dict[str, str], read_mixed: bool = True
                     ) -> tuple[list[str], Callable[[str], list[QrelsRow]]]:
    """A tabular source's qrels splits, sorted, and a reader of one split's rows (each row
    checked alone): a split's own table is read when its rows are asked for, a table of mixed
    splits (a split column) once, here (not at all without ``read_mixed``: its splits are then
    not listed)."""
    mapping = src.columns.get("qrels", {})
    mixed = src.qrels.get(None)
    rows: dict[str, list[QrelsRow]] = {}
    if mixed is not None and read_mixed:
        rows = tab_qrels_rows(mixed, mapping, None, src.default_split, queries)

    def split_rows(split: str) -> list[QrelsRow]:
        table = src.qrels.get(split)
        if table is None:
            return rows.get(split, [])
        return tab_qrels_rows(table, mapping, split, src.default_split, queries).get(split, [])

    return sorted({*rows, *(s for s in src.qrels if s is not None)}), split_rows


def split_column_hint(src: TabularSource, base: Path) -> str:
    """For a split asked for and not found: the first qrels file of a folder (one split per
    file, by its name) that has a ``split`` column, and how to read each row's split from it
    instead ("" when none has one)."""
    for split, table in sorted((s, t) for s, t in src.qrels.items() if s is not None):
        try:
            column = resolve(table, "qrels", src.columns.get("qrels", {}))["split"]
        except DatasetError:
            continue
        if column is not None:
            label = Path(table.label)
            rel = label.relative_to(base) if label.is_relative_to(base) else label
            return (f"; {rel} has a {column!r} column, but a file in the qrels folder is the "
                    f"split its name says ({split!r}): to read each row's split from that "
                    f"column, name the file in {MANIFEST} (qrels = \"{rel.as_posix()}\")")
    return ""


def tab_judged(split: str, rows: list[QrelsRow], corpus: dict[str, ItemRecord],
                hasher: Hasher) -> tuple[dict[str, dict[str, int]], int, int]:
    """``(judged, rows naming a document absent from the corpus, repeated identical rows)`` of
    one split, its rows fed to ``hasher`` as a BEIR qrels file."""
    judged: dict[str, dict[str, int]] = {}
    at: dict[tuple[str, str], tuple[_Table, Any]] = {}
    missing = duplicates = 0
    feed_file(hasher, f"{split}.tsv", qrels_lines(iter([(q, d, g) for _, _, q, d, g in rows])))
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
    check_judged(judged, Path(label))
    return judged, missing, duplicates
