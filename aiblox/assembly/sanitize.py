"""``safe_normalize``: the sanitiser of evidence and question text (:data:`SANITIZATION_MODE`),
applied in step 2 of answer assembly (an empty result drops the chunk) and to the question.

It removes what can break a prompt's structure and nothing else:

1. every whitespace character (``str.isspace``: spaces, tabs, newlines, ``\\r``, ``\\v``, ``\\f``,
   the Unicode line and paragraph separators, no-break spaces...) becomes a space;
2. null bytes and the other control characters (Unicode category ``Cc``), lone surrogates
   (``Cs``), the byte order mark and the bidirectional embedding/override/isolate controls are
   removed;
3. runs of spaces collapse to one space and the ends are stripped;
4. a text with no visible character left (only format characters such as the zero width space,
   joiners and word joiner ``U+200B``/``U+200C``/``U+200D``/``U+2060``, variation selectors,
   Hangul fillers: Unicode's default ignorable code points) becomes empty, so such a chunk is
   dropped (DROP_EMPTY_AFTER_SANITIZE) and such a question fails as empty. Inside text with
   visible characters they stay (a zero width joiner in an emoji sequence is not touched).

Words, punctuation, casing and order are untouched: nothing is rewritten. Because newlines
become spaces, sanitised text is always a single line, so evidence text can never start a line
of its own in the prompt (a fake section header or a fake evidence header stays inside the line
of the chunk it came from).
"""

from __future__ import annotations

import unicodedata

__all__ = ["SANITIZATION_MODE", "kept_source_length", "normalize_question", "safe_normalize"]

SANITIZATION_MODE = "safe_normalize_v1"

_REMOVED_FORMAT_CHARS = frozenset(
    "\ufeff"  # byte order mark / zero width no-break space
    "\u202a\u202b\u202c\u202d\u202e"  # bidi embeddings and overrides
    "\u2066\u2067\u2068\u2069"  # bidi isolates
)
# default ignorable code points outside category Cf (combining grapheme joiner, Hangul fillers,
# Khmer inherent vowels, Mongolian free variation selectors, variation selectors)
_INVISIBLE_NON_FORMAT = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))
    + "".join(chr(c) for c in range(0xE0100, 0xE01F0))
)


def _visible(ch: str) -> bool:
    return not (
        ch.isspace() or ch in _INVISIBLE_NON_FORMAT or unicodedata.category(ch) == "Cf"
    )


def safe_normalize(text: str) -> str:
    """Sanitise ``text``: whitespace to single spaces, control characters removed, ends stripped;
    empty when no visible character is left."""
    out: list[str] = []
    for ch in text:
        if ch.isspace():
            out.append(" ")
        elif ch in _REMOVED_FORMAT_CHARS or unicodedata.category(ch) in ("Cc", "Cs"):
            continue
        else:
            out.append(ch)
    text = " ".join("".join(out).split())
    return text if any(_visible(ch) for ch in text) else ""


def kept_source_length(source: str, kept: str) -> int:
    """How much of ``source`` its sanitised, cut prefix ``kept`` covers (a chunk selection cut to
    a token budget after :func:`safe_normalize`): the longest prefix of ``source`` whose
    :func:`safe_normalize` is no longer than ``kept`` (sanitising a longer prefix never gives a
    shorter text, so a binary search finds it)."""
    lo, hi, n = 0, len(source), len(kept)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(safe_normalize(source[:mid])) <= n:
            lo = mid
        else:
            hi = mid - 1
    return lo


def normalize_question(question: str) -> str:
    """The question as inserted into the prompt: ``safe_normalize`` (whitespace collapsed,
    control characters removed), nothing rewritten."""
    return safe_normalize(question)
