"""SQL results as evidence: bound rows and columns, sample deterministically, render a table.

A result is streamed once: only the sampled rows are kept, so memory is bounded by the policy
(``max_sql_rows`` x ``max_sql_cols``), not by the result size. While streaming, the sha256 of
the full result's canonical JSON (``{"columns": [...], "rows": [[...], ...]}``, cells made
JSON-plain by :func:`plain_cell`) is computed, and the full result can be written to a sink
(the lake) at the same time.

Rendering: a header (query key, rows and columns shown of total, sampling strategy), then a
pipe table whose first column ``#`` is the 1-based row number in the full result; a gap in the
sampled row numbers is marked with an ``… N rows omitted …`` line.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from aiblox.bundles.sampling import sample_row_indices

__all__ = [
    "CellFormatter",
    "SampledTable",
    "cell_json",
    "cell_text",
    "cut_cell",
    "plain_cell",
    "render_table",
    "rows_from_records",
    "run_duckdb_query",
    "sample_table",
]

_ELLIPSIS = "\u2026"


def plain_cell(value: Any) -> Any:
    """A JSON-plain, deterministic form of a cell: dates and times in ISO form, decimals as
    strings, bytes as hex, non-finite floats as strings, anything else unusual as ``str``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, _dt.date | _dt.datetime | _dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [plain_cell(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain_cell(v) for k, v in value.items()}
    return str(value)


def cell_json(value: Any) -> str:
    """The canonical JSON of a plain cell (keys sorted, no spaces, non-ASCII kept)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


class SampledTable(BaseModel):
    """The bounded view of a SQL result."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    columns: list[str]
    """Names of the kept columns (the first ``max_sql_cols``)."""
    total_columns: int
    """Columns in the full result."""
    total_rows: int
    """Rows in the full result."""
    row_numbers: list[int]
    """0-based row numbers of the kept rows in the full result."""
    rows: list[list[Any]] = Field(default_factory=list)
    """Kept rows, kept columns only, cells JSON-plain."""
    strategy: str
    """Sampling strategy applied (recorded even when all rows fit)."""
    full_sha256: str
    """sha256 of the canonical JSON of the full result."""
    full_bytes: int
    """UTF-8 bytes of that canonical JSON."""

    @property
    def rows_cut(self) -> bool:
        """True when rows were dropped."""
        return len(self.row_numbers) < self.total_rows

    @property
    def cols_cut(self) -> bool:
        """True when columns were dropped."""
        return len(self.columns) < self.total_columns


def sample_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    total_rows: int,
    *,
    max_rows: int,
    max_cols: int,
    strategy: str,
    sink: IO[str] | None = None,
    cell_filter: Callable[[Any], Any] | None = None,
) -> SampledTable:
    """Stream ``rows`` (exactly ``total_rows`` of them), keeping the sampled ones.

    ``sink`` receives the full result's canonical JSON as it streams; ``cell_filter`` (e.g. a
    redactor) is applied to every column name and plain cell before it is hashed and written
    (kept rows and names stay as they are: they are redacted as the table is rendered, where
    the redactions are recorded).
    """
    cols = [str(c) for c in columns]
    keep = sample_row_indices(total_rows, max_rows, strategy)
    keep_set = set(keep)
    h = hashlib.sha256()
    nbytes = 0

    def emit(text: str) -> None:
        nonlocal nbytes
        data = text.encode("utf-8")
        h.update(data)
        nbytes += len(data)
        if sink is not None:
            sink.write(text)

    names = cols if cell_filter is None else [cell_filter(c) for c in cols]
    emit('{"columns":' + cell_json(names) + ',"rows":[')
    kept: list[list[Any]] = []
    seen = 0
    for i, row in enumerate(rows):
        if len(row) != len(cols):
            raise ValueError(f"row {i} has {len(row)} cells, expected {len(cols)} (columns {cols})")
        cells = [plain_cell(v) for v in row]
        out = cells if cell_filter is None else [cell_filter(v) for v in cells]
        emit(("," if i else "") + cell_json(out))
        if i in keep_set:
            kept.append(cells[:max_cols])
        seen += 1
    if seen != total_rows:
        raise ValueError(f"expected {total_rows} rows, got {seen}")
    emit("]}")
    return SampledTable(
        columns=cols[:max_cols],
        total_columns=len(cols),
        total_rows=total_rows,
        row_numbers=keep,
        rows=kept,
        strategy=strategy,
        full_sha256=h.hexdigest(),
        full_bytes=nbytes,
    )


def cell_text(value: Any) -> str:
    """A cell (or a column name) as the table shows it, escaped for a pipe table, uncut."""
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, str):
        text = value
    else:
        text = cell_json(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "\\r").replace("\n", "\\n")


def cut_cell(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, the last one an ellipsis, when longer."""
    if len(text) > max_chars:
        return text[: max(max_chars - 1, 0)] + _ELLIPSIS
    return text


CellFormatter = Callable[[Any, int], str]
"""``fmt(value, offset)``: the text of a cell (or column name) that starts at character
``offset`` of the rendered table."""


def render_table(table: SampledTable, *, query_key: str, max_cell_chars: int = 200,
                 cell: CellFormatter | None = None) -> str:
    """The readable text of ``table`` (see the module docstring). ``cell`` formats each column
    name and cell (default: :func:`cell_text` cut to ``max_cell_chars``)."""
    fmt = cell or (lambda v, _at: cut_cell(cell_text(v), max_cell_chars))
    parts: list[str] = []
    size = 0

    def put(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text)

    def row(first: str, values: Sequence[Any]) -> None:
        put("| " + first)
        for v in values:
            put(" | ")
            put(fmt(v, size))
        put(" |\n")

    put(f"SQL result: {query_key}\n"
        f"rows: {len(table.row_numbers)} of {table.total_rows} shown"
        + (f" (sampling: {table.strategy})" if table.rows_cut else "")
        + f"\ncolumns: {len(table.columns)} of {table.total_columns} shown"
        + (" (first columns kept)" if table.cols_cut else "") + "\n\n")
    row("#", table.columns)
    put("|" + "|".join("---" for _ in range(len(table.columns) + 1)) + "|\n")
    prev = -1
    for n, values in zip(table.row_numbers, table.rows, strict=True):
        if n != prev + 1:
            put(f"| {_ELLIPSIS} {n - prev - 1} rows omitted {_ELLIPSIS} |\n")
        row(str(n + 1), values)
        prev = n
    if table.total_rows and prev != table.total_rows - 1:
        put(f"| {_ELLIPSIS} {table.total_rows - prev - 1} rows omitted {_ELLIPSIS} |\n")
    if not table.total_rows:
        put("(no rows)\n")
    return "".join(parts)


def rows_from_records(records: Any) -> tuple[list[str], Sequence[Sequence[Any]]]:
    """Columns and rows from either ``{"columns": [...], "rows": [[...]]}`` or a list of
    objects (columns in first-seen key order; a missing key is NULL). Given rows are returned
    as they are, not copied, so that a large result costs no second copy in memory."""
    if isinstance(records, dict):
        if set(records) - {"columns", "rows", "query_key", "sql"} or "rows" not in records:
            raise ValueError(
                "a SQL result object needs 'columns' and 'rows' (and may carry 'query_key', 'sql')"
            )
        raw_rows = records["rows"]
        if not isinstance(raw_rows, list) or not all(isinstance(r, list | tuple) for r in raw_rows):
            raise ValueError("'rows' must be a list of lists")
        columns = records.get("columns") or []
        if not isinstance(columns, list):
            raise ValueError("'columns' must be a list of names")
        if not columns and raw_rows:
            raise ValueError("'columns' is missing or empty while 'rows' is not")
        return [str(c) for c in columns], raw_rows
    if not isinstance(records, list):
        raise ValueError(f"a SQL result must be an object or a list, got {type(records).__name__}")
    cols: list[str] = []
    seen: set[str] = set()
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise ValueError(f"row {i} is not an object")
        for k in rec:
            if k not in seen:
                seen.add(k)
                cols.append(str(k))
    return cols, [[rec.get(c) for c in cols] for rec in records]


class _DuckRows:
    """Rows of a DuckDB query, fetched in batches."""

    def __init__(self, con: Any, sql: str, params: Sequence[Any] | None) -> None:
        self.total = int(con.execute(f"SELECT count(*) FROM ({sql}) AS q", params).fetchone()[0])
        self.cur = con.execute(sql, params)
        self.columns = [d[0] for d in self.cur.description]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while True:
            batch = self.cur.fetchmany(2048)
            if not batch:
                return
            yield from batch


def run_duckdb_query(
    sql: str,
    *,
    max_rows: int,
    max_cols: int,
    strategy: str,
    database: str | os.PathLike[str] | None = None,
    connection: Any = None,
    params: Sequence[Any] | None = None,
    sink: IO[str] | None = None,
    cell_filter: Callable[[Any], Any] | None = None,
) -> SampledTable:
    """Run ``sql`` in DuckDB and sample its result.

    With ``connection``, that connection is used as is. Otherwise ``database`` (a DuckDB file,
    or None for an empty in-memory database) is opened read-only with file-system access
    disabled and the setting locked, so the query cannot read or write files. Row order is the
    query's: use ``ORDER BY`` for a result that is stable across DuckDB versions.
    """
    import duckdb

    own = connection is None
    if own:
        config: dict[str, Any] = {"enable_external_access": False, "lock_configuration": True}
        if database is None:
            con = duckdb.connect(":memory:", config=config)
        else:
            con = duckdb.connect(str(Path(database)), read_only=True, config=config)
    else:
        con = connection
    try:
        rows = _DuckRows(con, sql.strip().rstrip(";"), params)
        return sample_table(
            rows.columns,
            rows,
            rows.total,
            max_rows=max_rows,
            max_cols=max_cols,
            strategy=strategy,
            sink=sink,
            cell_filter=cell_filter,
        )
    finally:
        if own:
            con.close()
