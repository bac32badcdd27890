"""Display snippets: whitespace collapsed, cut on a word boundary, at most ``max_chars`` long."""

from __future__ import annotations

__all__ = ["ELLIPSIS", "make_snippet"]

ELLIPSIS = "\u2026"
"""Appended to a snippet that was cut (counted in its length)."""

_TRAILING = " \t,;:-\u2013\u2014"


def make_snippet(text: str, max_chars: int) -> str:
    """``text`` with runs of whitespace collapsed to one space, cut to at most ``max_chars``.

    A text that fits is returned whole (collapsed). Otherwise it is cut at the last space that
    leaves room for the ellipsis ``…``, trailing separators (``,;:-`` and dashes) dropped, and
    ``…`` appended; the result is never longer than ``max_chars``. Only a first word longer than
    the room available is cut inside the word.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be a positive int, got {max_chars!r}")
    collapsed = " ".join(text.split())
    if len(collapsed) <= max_chars:
        return collapsed
    room = max_chars - len(ELLIPSIS)
    # Cut at a space at or before ``room``: the space itself is dropped.
    cut = collapsed.rfind(" ", 0, room + 1)
    head = collapsed[:cut].rstrip(_TRAILING) if cut > 0 else ""
    if not head:  # the first word alone does not fit
        head = collapsed[:room]
    return head + ELLIPSIS
