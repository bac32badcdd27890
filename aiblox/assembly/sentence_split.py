"""A small deterministic sentence splitter: what counts as one sentence, shared by the per-chunk
cap of chunk selection (step 2: a cut chunk ends where a sentence ends), the extractive reader
(step 5) and answer validation (step 6): one rule for all three.

It fails closed: answer validation requires a citation in every sentence with content (seed
R5), so when a boundary is ambiguous it splits, and an extra uncited fragment fails the answer
rather than an uncited claim passing inside a cited one. The rule:

- every newline ends a sentence;
- ``.``, ``!`` and ``?`` (a run of them) end a sentence when whitespace or the end of the line
  follows (so ``3.14``, ``example.com`` and ``e.g.`` inside a word do not);
- every other Unicode ``Sentence_Terminal`` character (PropList.txt, Unicode 16.0: the CJK
  ``\u3002`` ``\uff01`` ``\uff1f`` ``\uff0e`` ``\uff61``, the Arabic ``\u061f`` ``\u06d4``, the
  Devanagari dandas, ...) ends a sentence with or without whitespace after it (CJK text has
  none); the Arabic semicolon ``\u061b`` and the ellipsis ``\u2026`` are not sentence terminals;
- closing quotes and brackets right after the terminator, then citation markers such as
  ``[C0]`` (spaces or tabs before them allowed), and a terminator after those markers, belong
  to the sentence before: ``Robertson et al. [C0].`` and ``at 5 p.m. [C0].`` are one sentence
  each (the abbreviation's full stop, followed by its citation and a full stop, ends it);
- a terminator followed by citation markers, or one right after a marker, ends a sentence even
  with no whitespace after it: ``BM25 [C0].Napoleon ...`` is two sentences, the second
  uncited;
- a list item's number or letter opening a line (``1.``, ``a.``, ``iv.``) is not a sentence;
- a single ``.`` is not a boundary only in two cases: after a title that always precedes a
  name (``Mr.``, ``Mrs.``, ``Ms.``, ``Dr.``, ``Prof.``) when a word follows on the line, and
  after an abbreviation or a single letter (``e.g.``, ``vs.``, ``No.``, ``U.S.``, ``J.``)
  when the next word starts with a lowercase letter or a digit (``e.g. the``, ``vs. the``,
  ``No. 5``). ``the U.S. Paris is ...``, ``Team A. Paris ...`` and ``is no. Paris ...``
  are two sentences.

Splitting more than a reader would costs a fragment, never a missed boundary: the extractive
reader quotes the pieces this function returns and validation splits the quote the same way.

The per-chunk cap fails closed the other way: a cut at a full stop inside a sentence leaves the
very fragment the cut at a sentence end is there to avoid, so it asks for
``sentence_offsets(text, split_ambiguous=False)``: the same rule, except that the single ``.``
after a title, an abbreviation of the list, a single letter or initials (``St. John's``,
``U.S. Patent``, ``Allan L. Benson``, ``H.W. Wembly``) never ends a sentence, whatever follows.
"""

from __future__ import annotations

import re

from aiblox.text.terminals import CLOSING_MARKS, OTHER_SENTENCE_TERMINALS

__all__ = ["sentence_offsets", "split_sentences"]

_CITATIONS = r"(?:[ \t]*\[C\d+\])*"
_AFTER_CITATION = r"(?:(?<=\[C\d\])|(?<=\[C\d\d\])|(?<=\[C\d\d\d\])|(?<=\[C\d\d\d\d\]))"
_BOUNDARY = re.compile(
    rf"[.!?]*[{OTHER_SENTENCE_TERMINALS}][.!?{OTHER_SENTENCE_TERMINALS}]*{CLOSING_MARKS}{_CITATIONS}"
    rf"|[.!?]+{CLOSING_MARKS}{_CITATIONS}(?:(?<=\])[.!?]+)?(?=\s|$)"
    # a terminator and citation markers, or a terminator right after a marker, end a sentence
    # whatever follows: "BM25 [C0].Napoleon ..." and "BM25.[C0]Napoleon ..." are two
    rf"|[.!?]+{CLOSING_MARKS}(?:[ \t]*\[C\d+\])+(?:[.!?]+)?"
    rf"|{_AFTER_CITATION}[.!?]+"
)
_ENUMERATOR = re.compile(r"\(?(?:\d{1,3}|[A-Za-z]|[ivxlcdm]{1,6}|[IVXLCDM]{1,6})")
"""A list item's number or letter opening a line, before its full stop (``1.``, ``a.``, ``iv.``,
``(2.``). A closing parenthesis is not part of it: ``(2). Second item.`` splits after ``(2).``
(kept so: the rule is the per-chunk cap's, the reader's and validation's alike)."""
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof"})
_ABBREVIATIONS = frozenset(
    {
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "cf",
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
        "pp",
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


def _word_before(line: str, end: int) -> str:
    """The casefolded word just before position ``end`` (a full stop), opening quotes and
    brackets left out."""
    start = end
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    return line[start:end].lstrip("(\"'[\u201c\u2018").casefold()


_INITIALS = re.compile(r"(?:[^\W\d_]\.)*[^\W\d_]")
"""A single letter or dotted initials before a full stop (``J``, ``H.W``, ``e.g``, ``U.S``)."""


def _abbreviated(line: str, stop: int) -> bool:
    """True when the full stop at ``stop`` follows a title, a listed abbreviation, a single
    letter or initials: a full stop that may or may not end the sentence."""
    word = _word_before(line, stop)
    return bool(word) and (word in _TITLES or word in _ABBREVIATIONS
                           or _INITIALS.fullmatch(word) is not None)


def _continues(line: str, stop: int, after: int) -> bool:
    """True when the full stop at ``stop`` (its match ending at ``after``) does not end a
    sentence: a title before a word, or an abbreviation or single letter before a word that
    starts lowercase or with a digit."""
    word = _word_before(line, stop)
    nxt = line[after:].lstrip()
    if not word or not nxt:
        return False
    if word in _TITLES:
        return True
    if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return nxt[0].islower() or nxt[0].isdigit()
    return False


def sentence_offsets(text: str, *, split_ambiguous: bool = True) -> list[tuple[int, int]]:
    """``(start, end)`` offsets in ``text`` of its sentences, whitespace at their ends left out,
    empty ones left out, in order: ``text[start:end]`` is a sentence of :func:`split_sentences`.
    A sentence ends where ``end`` is; a text's last sentence may have no terminator. With
    ``split_ambiguous=False`` a full stop after a title, abbreviation, letter or initials never
    ends one (the module's docstring says which way each caller fails closed)."""
    spans: list[tuple[int, int]] = []

    def add(offset: int, piece: str) -> None:
        stripped = piece.strip()
        if stripped:
            start = offset + len(piece) - len(piece.lstrip())
            spans.append((start, start + len(stripped)))

    offset = 0
    for raw in text.splitlines(keepends=True):
        line = raw.splitlines()[0] if raw else raw  # the line without its line break
        start = 0
        for match in _BOUNDARY.finditer(line):
            if match.group(0) == "." and (
                    _continues(line, match.start(), match.end())
                    or (not split_ambiguous and _abbreviated(line, match.start()))
                    or (start == 0 and _ENUMERATOR.fullmatch(line[:match.start()].strip()))):
                continue  # "Mr. Smith", "e.g. the", "No. 5"; a list item's "1. "
            add(offset + start, line[start : match.end()])
            start = match.end()
        add(offset + start, line[start:])
        offset += len(raw)
    return spans


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, stripped, empty ones left out, in order."""
    return [text[start:end] for start, end in sentence_offsets(text)]
