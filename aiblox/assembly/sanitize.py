"""``safe_normalize``: the sanitiser of evidence and question text (:data:`SANITIZATION_MODE`),
applied in step 2 of answer assembly (an empty result drops the chunk) and to the question.

It removes what can break a prompt's structure and nothing else:

1. every whitespace character (``str.isspace``: spaces, tabs, newlines, ``\\r``, ``\\v``, ``\\f``,
   the Unicode line and paragraph separators, no-break spaces...) becomes a space;
2. null bytes and the other control characters (Unicode category ``Cc``), lone surrogates
   (``Cs``), the byte order mark and the bidirectional embedding/override/isolate controls are
   removed;
3. runs of spaces collapse to one space and the ends are stripped.

Words, punctuation, casing and order are untouched: nothing is rewritten. Because newlines
become spaces, sanitised text is always a single line, so evidence text can never start a line
of its own in the prompt (a fake section header or a fake evidence header stays inside the line
of the chunk it came from).
"""

from __future__ import annotations

import unicodedata

__all__ = ["SANITIZATION_MODE", "normalize_question", "safe_normalize"]

SANITIZATION_MODE = "safe_normalize_v1"

_REMOVED_FORMAT_CHARS = frozenset(
    "\ufeff"  # byte order mark / zero width no-break space
    "\u202a\u202b\u202c\u202d\u202e"  # bidi embeddings and overrides
    "\u2066\u2067\u2068\u2069"  # bidi isolates
)


def safe_normalize(text: str) -> str:
    """Sanitise ``text``: whitespace to single spaces, control characters removed, ends stripped."""
    out: list[str] = []
    for ch in text:
        if ch.isspace():
            out.append(" ")
        elif ch in _REMOVED_FORMAT_CHARS or unicodedata.category(ch) in ("Cc", "Cs"):
            continue
        else:
            out.append(ch)
    return " ".join("".join(out).split())


def normalize_question(question: str) -> str:
    """The question as inserted into the prompt: ``safe_normalize`` (whitespace collapsed,
    control characters removed), nothing rewritten."""
    return safe_normalize(question)
