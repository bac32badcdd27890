"""How every table marks a difference from the baseline: the one convention of ``aiblox eval``
(terminal, Markdown, LaTeX, CSV), the sweep board, ``aiblox compare`` and the sweep report.

A compared value carries its signed delta to the baseline (``+0.0123``, ``-0.2326``) and the
adjusted p-value of its paired test (``p=0.0120``; ``p<0.0001`` below four decimals;
``p>0.0500`` just above alpha where four decimals would show alpha itself); a
significant difference (adjusted p <= alpha) is marked by its direction beside the delta:
``▲`` significantly higher than the baseline, ``▼`` significantly lower. The arrow follows the
value, not the verdict: for a cost (tokens, latency; :mod:`aiblox.metrics.directions`) a
``▼`` is the better way, and the tables that hold costs name each metric's direction.
Values are shown at :data:`DIGITS` decimals everywhere (p-values too); CSV and JSON keep full
precision.
"""

from __future__ import annotations

__all__ = [
    "DIGITS",
    "DOWN",
    "UP",
    "adjusted_text",
    "delta_text",
    "legend",
    "mark",
    "counts_text",
    "p_text",
    "value_text",
]

UP = "▲"
"""Significantly higher than the baseline (adjusted p <= alpha)."""
DOWN = "▼"
"""Significantly lower than the baseline (adjusted p <= alpha)."""
DIGITS = 4
"""Decimals of a value, a delta and a p-value in every table."""


def mark(delta: float, significant: bool) -> str:
    """``▲`` or ``▼`` for a significant difference by the sign of ``delta``; ``""`` otherwise
    (not significant, or no difference in the means)."""
    if not significant or delta == 0:
        return ""
    return UP if delta > 0 else DOWN


def value_text(value: float) -> str:
    """A metric value as a table shows it (:data:`DIGITS` decimals)."""
    return f"{value:.{DIGITS}f}"


def delta_text(delta: float, significant: bool = False) -> str:
    """The signed delta, its mark beside it when significant: ``-0.2326▼``, ``+0.0120``."""
    return f"{delta:+.{DIGITS}f}{mark(delta, significant)}"


def p_text(p: float, alpha: float = 0.05) -> str:
    """A p-value at :data:`DIGITS` decimals; ``<0.0001`` below that; ``>0.0500`` for a p just
    above ``alpha`` that would round to it (0.05004 is not significant at 0.05, and ``0.0500``
    beside an unmarked delta read as if it were)."""
    floor = 10.0 ** -DIGITS
    if p < floor / 2:
        return f"<{floor:.{DIGITS}f}"
    shown = f"{p:.{DIGITS}f}"
    return f">{alpha:.{DIGITS}f}" if p > alpha and float(shown) <= alpha else shown


def adjusted_text(correction: str) -> str:
    """How a table names its adjusted p-values: ``Holm-adjusted``, ``Bonferroni-adjusted``, or
    ``unadjusted`` (correction ``none``)."""
    return f"{correction.capitalize()}-adjusted" if correction != "none" else "unadjusted"


def legend(against: str = "the baseline", alpha: float = 0.05) -> str:
    """The line under a table that says what the marks mean."""
    return (f"{UP}/{DOWN} significantly higher/lower than {against} (adjusted p <= "
            f"{alpha:g}); deltas are the system's mean minus {against}'s")


def counts_text(wins: int, ties: int, losses: int, dropped: int = 0) -> str:
    """``7/3/2``: wins, ties and losses; ``7/3/2 (2 NaN)`` when ``dropped`` queries were left
    out of the test because a side's value is NaN (:attr:`aiblox.metrics.Comparison.dropped`)."""
    return f"{wins}/{ties}/{losses}" + (f" ({dropped} NaN left out)" if dropped else "")
