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
    objects), and a number also by value with a number field, as in the DuckDB store.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for n, f in enumerate(parse_filters(filters or {})):
        params[f"f{n}"] = f.texts
        if f.key is None:
            clauses.append(f"{alias}.{f.column} = ANY(CAST(:f{n} AS text[]))")
            continue
        field = f"{alias}.metadata #> CAST(:f{n}_path AS text[])"
        value = f"{alias}.metadata #>> CAST(:f{n}_path AS text[])"
        text = f"(({value}) = ANY(CAST(:f{n} AS text[]))"
        if f.numbers:
            text += (f" OR (CASE WHEN jsonb_typeof({field}) = 'number' THEN "
                     f"CAST({value} AS float8) END) = ANY(CAST(:f{n}_num AS float8[]))")
            params[f"f{n}_num"] = f.numbers
        clauses.append(text + ")")
        params[f"f{n}_path"] = list(f.path)
    return (" AND ".join(clauses) or "TRUE"), params
