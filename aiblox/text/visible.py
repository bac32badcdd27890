"""Stored text as a terminal may show it: the characters that act on a terminal or on the text
around them, written as escapes, every other character as it is."""

from __future__ import annotations

import unicodedata

__all__ = ["BIDI_CONTROLS", "escape_controls", "has_controls"]

BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f"  # Arabic letter mark, left-to-right and right-to-left marks
    "\u202a\u202b\u202c\u202d\u202e"  # embeddings and overrides
    "\u2066\u2067\u2068\u2069"  # isolates
)
"""Unicode's ``Bidi_Control`` characters: they reorder the text shown after them (a right-to-left
override makes ``exe.txt`` read ``txt.exe``), so shown text may not carry them raw."""

_ESCAPED_CATEGORIES = ("Cc", "Cs", "Zl", "Zp")


def _escaped(ch: str) -> bool:
    return ch in BIDI_CONTROLS or unicodedata.category(ch) in _ESCAPED_CATEGORIES


def escape_controls(text: str) -> str:
    """``text`` with its control characters (Unicode category ``Cc``: ESC, NUL, newline, tab,
    DEL...), lone surrogates (``Cs``), line and paragraph separators and bidi controls written
    as Python escapes (``\\x1b``, ``\\n``, ``\\u202e``, ``\\ud800``), every other character as it
    is: an ANSI or OSC sequence in a stored question, id or label reached the terminal raw
    (recolouring it, retitling the window, clearing the screen), a newline broke a table's row,
    and a lone surrogate cannot be written as UTF-8 at all. A backslash already in the text stays
    as it is (the result is for reading, not for parsing back)."""
    if not any(_escaped(ch) for ch in text):
        return text
    return "".join(ascii(ch)[1:-1] if _escaped(ch) else ch for ch in text)


def has_controls(text: str) -> bool:
    """Whether :func:`escape_controls` would change ``text`` (an id with such a character is
    refused where it is given: it could not be shown as it was typed)."""
    return any(_escaped(ch) for ch in text)
