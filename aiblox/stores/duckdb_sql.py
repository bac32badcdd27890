"""A DuckDB connection that writes a statement's few plain parameters into its SQL text.

DuckDB's Python client (1.5) imports pandas the first time it binds any parameter, whatever its
type (it checks each value against pandas's types): 0.2-0.3 s, a fifth of a one-query
``aiblox search`` on a 1M-document store, spent in every command that opens a store. A
statement whose parameters are a few plain values (``str`` without NUL, ``int``, finite
``float``, ``bool``, ``None``, short non-empty lists of ``str``, ``int`` or ``float``) is sent
with them as SQL literals instead, which DuckDB reads to the same values; any other statement
(named parameters, arrays, long lists, bytes) is bound as before.

:func:`duckdb_filter_sql` writes a store filter as a ``WHERE`` fragment in DuckDB's dialect.

String literals are DuckDB's standard ones (``'...'``, a quote doubled, backslashes literal),
so any text is written exactly; placeholders are the ``?`` outside quoted strings and
identifiers.

:func:`check_database_file` refuses, before DuckDB opens it, an existing file that is not a
DuckDB database; :func:`check_tables_readable` finds, cheaply, a store file damaged since it was
written (a truncated copy, a block that fails its checksum).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from aiblox.stores.base import StoreError, parse_filters

__all__ = [
    "INLINE_LIST_MAX",
    "Connection",
    "check_database_file",
    "check_tables_readable",
    "duckdb_filter_sql",
    "inline_parameters",
]

INLINE_LIST_MAX = 1000
"""Longer lists are bound: a literal list costs DuckDB about 8 µs an element to parse (10 ms
at 1,000), binding about 1 µs, plus the one pandas import this module avoids."""


def check_database_file(location: str) -> None:
    """Refuse an existing file that is not a DuckDB database (a DuckDB file names ``DUCK`` at
    byte 8) with :class:`~aiblox.stores.StoreError`: DuckDB opens a JSON, CSV or Parquet file as
    a temporary in-memory database, so ``--db corpus.jsonl`` would ingest into nothing and say
    it had stored every document. A missing or empty file, a folder or an unreadable path are
    left to DuckDB (it makes a store, or says what is wrong)."""
    try:
        with open(location, "rb") as f:
            head = f.read(12)
    except OSError:
        return
    if head and head[8:12] != b"DUCK":
        stem = Path(location).stem  # a name other than the file refused (QA 23)
        new = f"{stem}.duckdb" if Path(location).suffix != ".duckdb" else f"{stem}-store.duckdb"
        raise StoreError(f"the file {location!r} exists, but it is not a DuckDB database file "
                         f"(a dataset file? the store is the file aiblox writes: name a new "
                         f"one, e.g. {new})")


def check_tables_readable(con: Any, location: str, tables: Sequence[str]) -> None:
    """Raise :class:`~aiblox.stores.StoreError` naming ``location`` when one of ``tables`` cannot
    be read back: a block it uses lies past the end of the file (DuckDB's block list, read from
    its metadata, against the file's size: a truncated copy), or its first row does not read
    (DuckDB checks each block's checksum as it reads it). Milliseconds whatever the store's
    size (its metadata and a block or two of each table, not every block: only a full read
    finds a damaged block in the middle of a table)."""
    import duckdb

    try:
        block_size = int(con.execute("SELECT block_size FROM pragma_database_size()")
                         .fetchone()[0])
        size = Path(location).stat().st_size
        for table in tables:
            last = con.execute(
                "SELECT max(greatest(block_id, coalesce(list_max(additional_block_ids), -1))) "
                f"FROM pragma_storage_info('{table}') WHERE persistent").fetchone()[0]
            if last is not None and (int(last) + 1) * block_size > size:
                raise StoreError(
                    f"store {location} is damaged: its table {table} uses block {last}, past "
                    f"the end of the file ({size:,} bytes: a truncated copy?); restore the file, "
                    f"or ingest into a new --db")
            con.execute(f"SELECT * FROM {table} LIMIT 1").fetchall()
    except (duckdb.Error, OSError) as exc:
        raise StoreError(f"store {location} is damaged: {' '.join(str(exc).split())[:300]}; "
                         f"restore the file, or ingest into a new --db") from None


_NUMBER_TYPES = "('BIGINT', 'UBIGINT', 'DOUBLE')"  # json_type's names for a JSON number

Sql = tuple[str, list[Any]]
"""A fragment of SQL and the parameters of its ``?`` placeholders, in order."""


def _sql(*parts: str | Sql) -> Sql:
    """The parts (plain SQL, or SQL with its parameters) written one after another."""
    text: list[str] = []
    params: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
        else:
            text.append(part[0])
            params += part[1]
    return "".join(text), params


def duckdb_filter_sql(filters: dict[str, Any] | None, alias: str) -> tuple[str, list[Any]]:
    """``(sql, params)`` restricting ``items`` rows aliased ``alias`` (``TRUE`` when no filters):
    :func:`~aiblox.stores.base.parse_filters`'s clauses in DuckDB's dialect, by the rule of
    :mod:`aiblox.contracts.filter_rule`, as the PostgreSQL store reads it: string and boolean
    fields by text, number fields by value (integers as HUGEINT, other numbers as DOUBLE), an
    array field by its scalar elements, an object field never."""
    clauses: list[str] = []
    params: list[Any] = []
    for f in parse_filters(filters or {}):
        if f.key is None:
            clauses.append(f"{alias}.{f.column} IN (SELECT unnest(?::VARCHAR[]))")
            params.append(f.texts)
            continue
        # the field read once (the lambda's v), an array's elements each (the lambda's x)
        sql, args = _sql(
            "list_transform([", _field(f.path, alias), "], v -> (",
            _scalar_match(("v", []), f.texts, f.integers, f.floats), " OR (json_type(v) = "
            "'ARRAY' AND len(list_filter(json_extract(v, '$[*]'), x -> ",
            _scalar_match(("x", []), f.texts, f.integers, f.floats), ")) > 0)))[1]")
        clauses.append(sql)
        params += args
    return (" AND ".join(clauses) or "TRUE"), params


def _field(path: Sequence[str], alias: str) -> Sql:
    """The JSON value at ``path`` in the row's metadata, each step a key of an object (NULL
    when a step meets anything else). Read by JSON pointer (``/a/b``, ``~`` and ``/`` in a
    key escaped as ``~0`` and ``~1``), where every name is a key (a JSONPath ``$."*"`` is a
    wildcard), with the value at every step before the last (one read of the metadata: the
    lambda's ``p``) checked to be an object (a pointer's ``/0`` reads an array's first
    element)."""
    pointers = ["".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path[:n])
                for n in range(1, len(path) + 1)]
    if len(pointers) == 1:
        return f"json_extract({alias}.metadata, ?)", pointers
    steps = " AND ".join(f"json_type(p[{n}]) = 'OBJECT'" for n in range(1, len(pointers)))
    return (f"list_transform([json_extract({alias}.metadata, ?::VARCHAR[])], p -> CASE WHEN "
            f"{steps} THEN p[{len(pointers)}] END)[1]", [pointers])


def _scalar_match(value: Sql, texts: list[str], integers: list[int],
                  floats: list[float]) -> Sql:
    """A JSON ``value`` that is a string or boolean whose text is one of ``texts``, or a number
    equal to one of ``integers`` or of ``floats`` (its text read as DOUBLE; for an integer, as
    HUGEINT too, exact for ``1e23`` as for ``9007199254740993``, once the DOUBLE has matched:
    an integer's DOUBLE is a whole number, which no other number's is, and the HUGEINT cast
    would round ``2.5`` to 3)."""
    text = _sql("json_extract_string(", value, ", '$')")
    out = _sql("(json_type(", value, ") IN ('VARCHAR', 'BOOLEAN') AND list_contains(",
               ("?::VARCHAR[]", [texts]), ", ", text, "))")
    double = _sql("TRY_CAST(", text, " AS DOUBLE)")
    numbers: list[Sql] = []
    if integers:
        numbers.append(_sql("(list_contains(", ("?::DOUBLE[]", [[float(i) for i in integers]]),
                            ", ", double, ") AND list_contains(",
                            ("?::HUGEINT[]", [[str(i) for i in integers]]), ", TRY_CAST(",
                            text, " AS HUGEINT)))"))
    if floats:
        numbers.append(_sql("list_contains(", ("?::DOUBLE[]", [floats]), ", ", double, ")"))
    if not numbers:
        return out
    either = numbers[0] if len(numbers) == 1 else _sql(numbers[0], " OR ", numbers[1])
    return _sql("(", out, " OR (json_type(", value, f") IN {_NUMBER_TYPES} AND (", either,
                ")))")


def _literal(value: Any, in_list: bool = False) -> str | None:
    """``value`` as a DuckDB literal of the type its binding would give; None when it is not
    one of the plain kinds."""
    if value is None:
        return None if in_list else "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if -2**63 <= value < 2**63 else None
    if isinstance(value, float):
        return f"'{value!r}'::DOUBLE" if math.isfinite(value) else None
    if isinstance(value, str):
        return None if "\x00" in value else "'" + value.replace("'", "''") + "'"
    if isinstance(value, (list, tuple)) and not in_list and 0 < len(value) <= INLINE_LIST_MAX:
        kinds = {type(v) for v in value}
        if kinds not in ({str}, {int}, {float}):
            return None
        parts = [_literal(v, in_list=True) for v in value]
        return None if None in parts else "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
    return None


def inline_parameters(sql: str, parameters: Any) -> str | None:
    """``sql`` with each ``?`` placeholder replaced by its parameter as a literal; None when a
    parameter is not plain, the parameters are not a list or tuple, or their count does not
    match the placeholders."""
    if not isinstance(parameters, (list, tuple)):
        return None
    literals = []
    for value in parameters:
        lit = _literal(value)
        if lit is None:
            return None
        literals.append(lit)
    out: list[str] = []
    quote: str | None = None
    n = 0
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None  # a doubled quote closes and reopens: the same text
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "?":
            if n == len(literals):
                return None
            out.append(literals[n])
            n += 1
            continue
        out.append(ch)
    return "".join(out) if n == len(literals) and quote is None else None


class Connection:
    """A ``duckdb.DuckDBPyConnection`` whose :meth:`execute` inlines plain parameters; every
    other attribute is the connection's own."""

    def __init__(self, con: Any) -> None:
        self._con = con

    def execute(self, query: str, parameters: Any = None) -> Any:
        if parameters is None:
            return self._con.execute(query)
        inlined = inline_parameters(query, parameters)
        if inlined is not None:
            return self._con.execute(inlined)
        return self._con.execute(query, parameters)

    @contextlib.contextmanager
    def registered(self, name: str, table: Any) -> Iterator[None]:
        """``table`` (an arrow table) readable as the view ``name`` inside the block."""
        self._con.register(name, table)
        try:
            yield
        finally:
            self._con.unregister(name)

    def replace(self, con: Any) -> None:
        """Use ``con`` from now on (the store opened its file again: to read or to write);
        every holder of this object follows."""
        self._con = con

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self._con.close()
