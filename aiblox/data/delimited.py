"""CSV and TSV files read as rows under their header line, in bounded memory (the tables of
:mod:`aiblox.data.tables`), and a warning for a TSV field that a CSV writer quoted.

A TSV field is the text between tabs, quotes and all (MS MARCO's and BEIR's TSVs hold quotes in
passages). A CSV writer told to write tabs (pandas' ``to_csv(sep="\\t")``) still quotes a field
holding ``"`` as RFC 4180 says (in quotes, each ``"`` of the text doubled), which a TSV reader
keeps as written: the text would change silently. So such a field (``"`` first and last,
``""`` between) is warned about once per file, naming the first one's line and column and
counting them; it is kept as written (the quotes may be the text). Write TSV with
``quoting=csv.QUOTE_NONE``, or write CSV.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiblox.data.beir import file_error
from aiblox.data.rules import DatasetError, Hasher
from aiblox.inputs import InputFileError, bounded_lines

__all__ = ["delimited_rows", "looks_csv_quoted"]


Rows = Callable[[Hasher], Iterator[tuple[int, dict[str, Any]]]]


def delimited_rows(path: Path) -> tuple[list[str], Rows]:
    """``(header, read)`` of a CSV (``,``) or TSV (tab) file with a header row: ``read(hasher)``
    yields ``(line, {column: field})``, the line a row starts on (``hasher`` is fed nothing:
    a table's hash is its rows written as BEIR lines). Fields are read as written (ids stay
    strings: ``007`` is not ``7``). A CSV field may be quoted (RFC 4180: a quoted field may
    hold commas, ``""`` and line breaks), and a quote never closed is an error naming the line
    it opens on; a TSV field is the text between tabs, quotes and all, one row per line, and a
    field a CSV writer quoted is warned about (see the module doc)."""
    tsv = path.suffix == ".tsv"
    delimiter = "\t" if tsv else ","

    def lines() -> Iterator[str]:
        try:
            for lineno, raw in bounded_lines(path):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(path, lineno, "encoding", f"not UTF-8: {exc}") from None
                yield text.removeprefix("\ufeff") if lineno == 1 else text
        except InputFileError as exc:
            raise file_error(path, exc) from None
        except OSError as exc:
            raise DatasetError(path, None, "file", f"cannot read: {exc.strerror or exc}"
                               ) from None

    def records() -> Iterator[tuple[int, list[str]]]:
        csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))  # long documents
        reader = (csv.reader(lines(), delimiter=delimiter, quoting=csv.QUOTE_NONE) if tsv
                  else csv.reader(lines(), delimiter=delimiter, strict=True))
        done = 0
        try:
            for record in reader:
                start, done = done + 1, reader.line_num
                if record:
                    yield start, record
        except csv.Error as exc:
            hint = ("; a quote opened on this line is never closed" if "end of data" in str(exc)
                    else "")
            raise DatasetError(path, done + 1, "row", f"malformed {path.suffix[1:].upper()}: "
                                                      f"{exc}{hint}") from None

    first = next(records(), None)
    if first is None:
        raise DatasetError(path, None, "header", "no header row (an empty file)")
    header_line, header = first[0], [c.strip() for c in first[1]]
    for i, column in enumerate(header):
        if not column or column in header[:i]:
            raise DatasetError(path, header_line, "header",
                               f"column {i + 1} is {'empty' if not column else 'repeated'}: "
                               f"{header} (the first line names the columns)")

    def read(_hasher: Hasher) -> Iterator[tuple[int, dict[str, Any]]]:
        rows = records()
        next(rows)
        quoted: list[tuple[int, str, str]] = []
        for lineno, record in rows:
            if len(record) != len(header):
                raise DatasetError(path, lineno, "row",
                                   f"{len(record)} field(s); the header (line {header_line}) "
                                   f"has {len(header)}: {header}")
            if tsv:
                quoted += [(lineno, c, v) for c, v in zip(header, record, strict=True)
                           if looks_csv_quoted(v)]
            yield lineno, dict(zip(header, record, strict=True))
        if quoted:
            _warn_quoted(path, quoted)

    return header, read


def looks_csv_quoted(field: str) -> bool:
    """Whether ``field`` reads as one a CSV writer quoted (RFC 4180): it opens and closes with
    ``"`` and holds ``""`` between (a ``"`` of the text, doubled)."""
    return len(field) >= 4 and field[0] == field[-1] == '"' and '""' in field[1:-1]


def _warn_quoted(path: Path, quoted: list[tuple[int, str, str]]) -> None:
    lineno, column, value = quoted[0]
    shown = value if len(value) <= 60 else value[:57] + "..."
    more = f" ({len(quoted)} fields of the file look so)" if len(quoted) > 1 else ""
    warnings.warn(f"{path}:{lineno}: field {column!r}: {shown!r} looks quoted as a CSV writer "
                  f"quotes a field holding '\"' (RFC 4180; pandas' to_csv(sep=\"\\t\") writes "
                  f"so), but a TSV field is read as written, quotes and all{more}: kept as "
                  f"written; write the TSV with quoting=csv.QUOTE_NONE, or write CSV",
                  stacklevel=3)
