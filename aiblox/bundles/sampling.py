"""Deterministic row sampling for oversized SQL results (evidence bundles seed).

- ``first_only``: rows ``0 .. max-1``.
- ``first_last``: the first ``ceil(max/2)`` and the last ``floor(max/2)`` rows.
- ``stride``: evenly spaced rows ``floor(i * total / max)`` for ``i`` in ``0 .. max-1``, every
  ``total/max``-th row, covering the whole result (the seed's ``K = total_rows / max_rows``
  without rounding K, so exactly ``max`` rows are kept).
"""

from __future__ import annotations

__all__ = ["sample_row_indices"]


def sample_row_indices(total: int, max_rows: int, strategy: str) -> list[int]:
    """Sorted indices of the rows to keep out of ``total``; all of them when they fit."""
    if total < 0 or max_rows < 1:
        raise ValueError(f"need total >= 0 and max_rows >= 1, got {total}, {max_rows}")
    if total <= max_rows:
        return list(range(total))
    if strategy == "first_only":
        return list(range(max_rows))
    if strategy == "first_last":
        head = (max_rows + 1) // 2
        tail = max_rows - head
        return list(range(head)) + list(range(total - tail, total))
    if strategy == "stride":
        return [(i * total) // max_rows for i in range(max_rows)]
    raise ValueError(f"unknown sampling strategy {strategy!r}; use first_only, first_last, stride")
