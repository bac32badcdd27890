"""Redaction of SQL results: the full result written to the lake, and the rendered table.

The full result (``full_ref``, :func:`~aiblox.bundles.sql_result.sample_table`'s sink) is the
result after redaction, as the item's content is: every column name and every cell is redacted,
a string as it is, a number as the table shows it, a list or an object (a DuckDB ``LIST`` or
``STRUCT``, a JSON result's nested value) as its canonical JSON, so a secret under a key, in a
key, or split across a key and its value (``{"password": "hunter2"}``) is replaced as it is in
the table; a nested cell stays nested unless a replacement made its JSON ambiguous (then the
redacted JSON text is the cell).

The rendered table is redacted cell by cell before each cell is cut to ``max_cell_chars``
(the seed's order: redact, then bound), so a secret across the cut is replaced whole instead of
leaking its first characters; the records give each replacement's place in the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from aiblox.bundles.models import RedactionRecord
from aiblox.bundles.redaction import Redactor, redact
from aiblox.bundles.sql_result import SampledTable, cell_json, cell_text, cut_cell, render_table

__all__ = ["full_result_cell_filter", "render_redacted_table"]


def full_result_cell_filter(redactors: Sequence[Redactor]) -> Callable[[Any], Any]:
    """A ``cell_filter`` for :func:`~aiblox.bundles.sql_result.sample_table`: a plain cell (or
    column name) redacted, returned as it is when redaction changed nothing."""

    def f(value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            return redact(value, redactors)[0]
        nested = isinstance(value, dict | list)
        text = cell_json(value) if nested else repr(value) if isinstance(value, float) \
            else str(value)
        out = redact(text, redactors)[0]
        if out == text:
            return value
        if nested:
            try:
                back = json.loads(out)
            except ValueError:
                return out
            if cell_json(back) == out:  # the same structure, its strings redacted
                return back
        return out

    return f


def render_redacted_table(table: SampledTable, *, query_key: str, max_cell_chars: int,
                          redactors: Sequence[Redactor]
                          ) -> tuple[str, list[RedactionRecord]]:
    """The rendered table with each column name and cell redacted before it is cut, and the
    records of those replacements (spans in the table's offsets; one cut by the ellipsis ends
    at the cut), one per redactor, in the redactors' order."""
    spans: dict[str, list[tuple[int, int]]] = {r.name: [] for r in redactors}

    def fmt(value: Any, at: int) -> str:
        full, records = redact(cell_text(value), redactors)
        shown = cut_cell(full, max_cell_chars)
        keep = len(full) if shown == full else max(max_cell_chars - 1, 0)
        for rec in records:
            spans[rec.redactor] += [(at + a, at + min(b, keep)) for a, b in rec.spans if a < keep]
        return shown

    text = render_table(table, query_key=query_key, max_cell_chars=max_cell_chars, cell=fmt)
    records = [RedactionRecord(redactor=r.name, count=len(spans[r.name]), spans=spans[r.name],
                               replacement=r.token())
               for r in redactors if spans[r.name]]
    return text, records
