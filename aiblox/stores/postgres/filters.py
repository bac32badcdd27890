"""Store filters as a SQL ``WHERE`` fragment with bound parameters (PostgreSQL dialect)."""

from __future__ import annotations

from typing import Any

from aiblox.stores.base import parse_filters

__all__ = ["filter_sql"]


def filter_sql(filters: dict[str, Any] | None, alias: str = "i") -> tuple[str, dict[str, Any]]:
    """``(sql, params)`` restricting ``items`` rows aliased ``alias``; ``TRUE`` when no filters.

    Column names come from :data:`aiblox.stores.base.FILTER_FIELDS` (validated by
    :func:`parse_filters`); metadata keys and every value travel as bound parameters.
    Metadata values compare as text (``metadata ->> key``), as in the DuckDB store.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for n, (column, meta_key, values) in enumerate(parse_filters(filters or {})):
        if column == "metadata":
            clauses.append(f"({alias}.metadata ->> CAST(:f{n}_key AS text)) "
                           f"= ANY(CAST(:f{n} AS text[]))")
            params[f"f{n}_key"] = meta_key
        else:
            clauses.append(f"{alias}.{column} = ANY(CAST(:f{n} AS text[]))")
        params[f"f{n}"] = values
    return (" AND ".join(clauses) or "TRUE"), params
