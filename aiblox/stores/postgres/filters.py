"""Store filters as a SQL ``WHERE`` fragment with bound parameters (PostgreSQL dialect)."""

from __future__ import annotations

from typing import Any

from aiblox.stores.base import parse_filters

__all__ = ["filter_sql"]


def filter_sql(filters: dict[str, Any] | None, alias: str = "i") -> tuple[str, dict[str, Any]]:
    """``(sql, params)`` restricting ``items`` rows aliased ``alias``; ``TRUE`` when no filters.

    Column names come from :data:`aiblox.stores.base.FILTER_FIELDS` (validated by
    :func:`parse_filters`); metadata keys and every value travel as bound parameters.
    Metadata values compare as text (``metadata #>> path``: a dotted key is a path into nested
    objects), and a number also by value with a number field, as in the DuckDB store; an array
    field matches when one of its scalar elements does, an object field never.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for n, f in enumerate(parse_filters(filters or {})):
        params[f"f{n}"] = f.texts
        if f.key is None:
            clauses.append(f"{alias}.{f.column} = ANY(CAST(:f{n} AS text[]))")
            continue
        field = f"{alias}.metadata #> CAST(:f{n}_path AS text[])"
        clauses.append(
            f"(CASE jsonb_typeof({field}) WHEN 'array' THEN EXISTS (SELECT 1 FROM "
            f"jsonb_array_elements({field}) AS e(v) WHERE jsonb_typeof(e.v) NOT IN ('array', "
            f"'object') AND {_scalar_match('e.v', n, f.numbers)}) WHEN 'object' THEN FALSE "
            f"ELSE {_scalar_match(field, n, f.numbers)} END)")
        if f.numbers:
            params[f"f{n}_num"] = f.numbers
        params[f"f{n}_path"] = list(f.path)
    return (" AND ".join(clauses) or "TRUE"), params


def _scalar_match(field: str, n: int, numbers: list[float]) -> str:
    """A JSON value ``field`` (jsonb) equal to filter ``n``'s texts, or a number equal in
    value to one of its ``numbers``."""
    value = f"({field} #>> '{{}}')"
    text = f"({value} = ANY(CAST(:f{n} AS text[]))"
    if numbers:
        text += (f" OR (CASE WHEN jsonb_typeof({field}) = 'number' THEN CAST({value} AS float8) "
                 f"END) = ANY(CAST(:f{n}_num AS float8[]))")
    return text + ")"
