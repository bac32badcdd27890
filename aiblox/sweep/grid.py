"""Exact grids from integer steps: decimal ranges and weight simplices.

A float loop (``w += 0.05``) accumulates error, and a filter on ``sum(weights) == 1.0`` then drops
valid combinations: ranx's ``optimize_fusion`` keeps only weight tuples whose float sum is
exactly 1.0, so three runs at step 0.1 lose e.g. ``(0.2, 0.7, 0.1)``. Here every value is
``start + i * step`` computed in :class:`decimal.Decimal` from the decimal text of the bounds,
and a simplex is enumerated over integer compositions, so nothing is dropped and every value is
the float nearest its decimal (``0.15``, never ``0.15000000000000002``).

Sizes are computed before anything is built (:func:`decimal_count`, ``comb`` for a simplex), so
a step of ``1e-7`` is refused in microseconds when ``limit`` is given instead of filling memory.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from itertools import combinations
from math import comb

__all__ = ["GridError", "decimal_count", "decimal_range", "simplex", "to_decimal"]


class GridError(ValueError):
    """A grid axis that cannot be built exactly (step does not divide the range, bad bounds)."""


def to_decimal(value: float | int | str | Decimal) -> Decimal:
    """The decimal a person wrote: ``0.05`` (a float) becomes ``Decimal("0.05")``, not the
    binary expansion of the float."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise GridError(f"expected a number, got {value!r}")
    try:
        return Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except (InvalidOperation, TypeError) as exc:
        raise GridError(f"not a number: {value!r}") from exc


def decimal_count(start: float | int | str, stop: float | int | str,
                  step: float | int | str) -> int:
    """How many values :func:`decimal_range` gives (checked the same way, nothing built)."""
    a, b, s = to_decimal(start), to_decimal(stop), to_decimal(step)
    if not (a.is_finite() and b.is_finite() and s.is_finite()):
        raise GridError(f"start, stop and step must be finite numbers, got {start!r}, "
                        f"{stop!r}, {step!r}")
    if s <= 0:
        raise GridError(f"step must be positive, got {step!r}")
    if b < a:
        raise GridError(f"stop {stop!r} is below start {start!r}")
    n = (b - a) / s
    if n != n.to_integral_value():
        raise GridError(f"step {step!r} does not divide the range {start!r}..{stop!r} "
                        f"into whole steps ({n} steps)")
    return int(n) + 1


def decimal_range(start: float | int | str, stop: float | int | str,
                  step: float | int | str, limit: int | None = None) -> list[float]:
    """Every ``start + i * step`` from ``start`` to ``stop`` inclusive, exactly.

    ``(stop - start) / step`` must be a whole number, so the last value is ``stop`` itself:
    ``decimal_range(0, 1, 0.05)`` has exactly 21 values. With ``limit``, more than ``limit``
    values is a :class:`GridError` raised before any is built.
    """
    count = decimal_count(start, stop, step)
    if limit is not None and count > limit:
        raise GridError(f"{start!r}..{stop!r} by {step!r} has {count:,} values, above the "
                        f"limit of {limit:,}")
    a, s = to_decimal(start), to_decimal(step)
    return [float(a + i * s) for i in range(count)]


def simplex(n: int, step: float | int | str, total: float | int | str = 1,
            limit: int | None = None) -> list[tuple[float, ...]]:
    """All ``n``-tuples of non-negative multiples of ``step`` summing exactly to ``total``.

    Built from integer compositions (stars and bars), so the count is always
    ``C(m + n - 1, n - 1)`` with ``m = total / step``: 66 triples at step 0.1. Tuples are in
    lexicographic order of their integer parts (first weight ascending). With ``limit``, a
    count above it is a :class:`GridError` raised before any tuple is built.
    """
    if n < 1:
        raise GridError(f"a simplex needs at least one weight, got n={n}")
    s, t = to_decimal(step), to_decimal(total)
    if s <= 0:
        raise GridError(f"step must be positive, got {step!r}")
    m = t / s
    if m != m.to_integral_value() or m < 0:
        raise GridError(f"step {step!r} does not divide the total {total!r} into whole steps")
    m_int = int(m)
    count = comb(m_int + n - 1, n - 1)
    if limit is not None and count > limit:
        raise GridError(f"a {n}-weight simplex at step {step!r} has {count:,} points, above "
                        f"the limit of {limit:,}")
    out: list[tuple[float, ...]] = []
    # choose n-1 bar positions among m + n - 1 slots; the gaps are the integer parts
    for bars in combinations(range(m_int + n - 1), n - 1):
        parts, prev = [], -1
        for b in bars:
            parts.append(b - prev - 1)
            prev = b
        parts.append(m_int + n - 1 - prev - 1)
        out.append(tuple(float(p * s) for p in parts))
    return sorted(out)
