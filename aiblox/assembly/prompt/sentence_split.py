"""A small deterministic sentence splitter: what counts as one sentence of an answer, shared
by the extractive reader (step 5) and answer validation (step 6).

A sentence ends at ``.``, ``!`` or ``?`` (optionally followed by closing quotes or brackets and
by citation markers such as ``[C0]``) when whitespace or the end of the text follows, and at
every newline. It does not end after a single letter (initials, ``U.S.``) or after a few common
abbreviations. Citation markers written after the full stop belong to the sentence before them.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences"]

_BOUNDARY = re.compile(r"[.!?]+[\"'\)\]\u201d\u2019]*(?:[ \t]*\[C\d+\])*(?=\s|$)")
_ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "no",
        "inc",
        "ltd",
        "co",
        "corp",
        "mt",
        "ft",
        "approx",
        "fig",
        "vol",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
        "a.m",
        "p.m",
    }
)


def _is_abbreviation(line: str, end: int) -> bool:
    """True when the word just before position ``end`` (a full stop) is an abbreviation."""
    start = end
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    word = line[start:end].lstrip("(\"'[\u201c\u2018").casefold()
    if not word:
        return False
    if len(word) == 1 and word.isalpha():
        return True
    return word in _ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, stripped, empty ones left out, in order."""
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _BOUNDARY.finditer(line):
            if match.group(0) == "." and _is_abbreviation(line, match.start()):
                continue  # "Mr. Smith", "U.S. Army", "J. K. Rowling"
            piece = line[start : match.end()].strip()
            if piece:
                sentences.append(piece)
            start = match.end()
        rest = line[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences
