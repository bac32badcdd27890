"""Store filters as a SQL ``WHERE`` fragment with bound parameters (PostgreSQL dialect)."""

from __future__ import annotations

from typing import Any

from aiblox.stores.base import FilterClause, parse_filters

__all__ = ["filter_sql"]

_EXACT_FLOAT = 2**53
"""A number field this large is a whole number: compared with the non-integer floats of a
filter never (and never cast to float8, which overflows past 1e308)."""


def filter_sql(filters: dict[str, Any] | None, alias: str = "i") -> tuple[str, dict[str, Any]]:
    """``(sql, params)`` restricting ``items`` rows aliased ``alias``; ``TRUE`` when no filters.

    Column names come from :data:`aiblox.stores.base.FILTER_FIELDS` (validated by
    :func:`parse_filters`); metadata keys and every value travel as bound parameters. Metadata
    fields match by the rule of :mod:`aiblox.contracts.filter_rule`, as the DuckDB store reads it:
    the field is found key by key (``metadata -> 'a' -> 'b'``: a step into anything but an
    object is NULL, where ``#>`` would read ``tags.0`` as an array's first element), a string
    or boolean field matches by its text, a number field by value (as ``numeric`` for the
    integers, exactly, as ``float8`` for other numbers), an array field when one of its scalar
    elements does, an object field never.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for n, f in enumerate(parse_filters(filters or {})):
        params[f"f{n}"] = f.texts
        if f.key is None:
            clauses.append(f"{alias}.{f.column} = ANY(CAST(:f{n} AS text[]))")
            continue
        field = f"{alias}.metadata" + "".join(f" -> CAST(:f{n}_k{i} AS text)"
                                              for i in range(len(f.path)))
        params.update({f"f{n}_k{i}": key for i, key in enumerate(f.path)})
        if f.integers:
            params[f"f{n}_int"] = [str(i) for i in f.integers]
        if f.floats:
            params[f"f{n}_float"] = f.floats
        clauses.append(
            f"(CASE jsonb_typeof({field}) WHEN 'array' THEN EXISTS (SELECT 1 FROM "
            f"jsonb_array_elements({field}) AS e(v) WHERE {_scalar_match('e.v', n, f)}) "
            f"ELSE {_scalar_match(field, n, f)} END)")
    return (" AND ".join(clauses) or "TRUE"), params


def _scalar_match(field: str, n: int, f: FilterClause) -> str:
    """A JSON value ``field`` (jsonb) that is a string or boolean with one of filter ``n``'s
    texts, or a number equal to one of its integers or floats (``f``: its clause)."""
    text = (f"(jsonb_typeof({field}) IN ('string', 'boolean') AND ({field} #>> '{{}}') = "
            f"ANY(CAST(:f{n} AS text[])))")
    numbers = []
    if f.integers:
        numbers.append(f"CAST({field} AS numeric) = ANY(CAST(:f{n}_int AS numeric[]))")
    if f.floats:
        numbers.append(f"(CASE WHEN abs(CAST({field} AS numeric)) < {_EXACT_FLOAT} THEN "
                       f"CAST(CAST({field} AS numeric) AS float8) END) = "
                       f"ANY(CAST(:f{n}_float AS float8[]))")
    if not numbers:
        return text
    return (f"({text} OR (CASE WHEN jsonb_typeof({field}) = 'number' THEN "
            f"{' OR '.join(numbers)} ELSE FALSE END))")
