"""Display snippets: whitespace collapsed, cut on a word boundary, at most ``max_chars`` long."""

from __future__ import annotations

__all__ = ["ELLIPSIS", "make_snippet"]

ELLIPSIS = "\u2026"
"""Appended to a snippet that was cut (counted in its length)."""

_TRAILING = " \t,;:-\u2013\u2014"
_WORD_END = ",;:.!?"


def make_snippet(text: str, max_chars: int) -> str:
    """``text`` with runs of whitespace collapsed to one space, cut to at most ``max_chars``.

    A text that fits is returned whole (collapsed). Otherwise it is cut at the last word end
    (before a space, or before punctuation ``,;:.!?`` that a space follows) that leaves room for
    the ellipsis ``…``, trailing separators (``,;:-`` and dashes) are dropped, and ``…`` is
    appended; the result is never longer than ``max_chars``. Only a first word longer than the
    room available (``max_chars - 1``) is cut inside the word.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be a positive int, got {max_chars!r}")
    collapsed = " ".join(text.split())
    if len(collapsed) <= max_chars:
        return collapsed
    room = max_chars - len(ELLIPSIS)
    head = ""
    # The last word end at or before ``room``: a space, or punctuation that ends a word.
    for cut in range(room, 0, -1):
        after = collapsed[cut]
        if after == " " or (after in _WORD_END and collapsed[cut + 1:cut + 2] in ("", " ")):
            head = collapsed[:cut].rstrip(_TRAILING)
            if head:
                break
    if not head:  # the first word alone does not fit
        head = collapsed[:room]
    return head + ELLIPSIS
