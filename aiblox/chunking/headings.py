"""Heading-aware chunking for markdown-like text: sections, heading paths, grouped to a budget."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from aiblox.chunking._params import check_budget, check_encoding
from aiblox.chunking._spans import (
    Span,
    TokenizedDocument,
    group_units,
    make_chunks,
    sentence_spans,
    trim,
)
from aiblox.chunking.base import Chunk, format_chunker_id
from aiblox.text.tokens import DEFAULT_ENCODING

__all__ = ["HeadingChunker", "Section", "headings", "split_sections"]

# ATX heading: up to three spaces, 1-6 '#', then a space or the end of the line; an optional
# closing run of '#' is not part of the title (a title of '#'s alone is that run: empty).
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_CLOSING_RUN = re.compile(r"#+")
# a fence opens with 3+ backticks or tildes and any info string (a backtick fence's has no
# backtick); it closes with a run of the same character, at least as long, and blanks only
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_CLOSING_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
# CommonMark's line endings: \n, \r\n and \r (str.splitlines also broke at \x0b, \x0c,
# \x1c-\x1e, \x85, \u2028 and \u2029, so "para\x0b# fake" held a heading)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")


def _lines(text: str) -> list[tuple[int, str]]:
    """``(start offset, line without its ending)`` of each line, by CommonMark's endings."""
    return [(m.start(), m.group().rstrip("\r\n")) for m in _LINE.finditer(text) if m.group()]


@dataclass(frozen=True)
class Section:
    """A heading line (absent before the first heading) and the body up to the next heading."""

    heading: Span | None
    """Span of the heading line, trimmed; None for the text before the first heading."""
    body: Span
    """Span of the text after the heading line up to the next heading (not trimmed)."""
    path: list[str]
    """Titles of the enclosing headings, outermost first, this section's own title last."""


def split_sections(text: str) -> list[Section]:
    """ATX (``#``) sections of ``text`` in order; ``#`` lines inside fenced code are not headings.

    Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (CommonMark's line endings), and a fence closes
    only at a line of its fence character alone. Setext headings (underlined with ``===`` or
    ``---``) are not recognised.
    """
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    heading: Span | None = None
    path: list[str] = []
    body_start = 0
    fence: str | None = None
    for line_start, content in _lines(text):
        if fence is not None:  # inside fenced code: only its closing fence counts
            closing = _CLOSING_FENCE.match(content)
            run = closing.group(1) if closing else ""
            if run[:1] == fence[0] and len(run) >= len(fence):
                fence = None
            continue
        opening = _FENCE.match(content)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
            continue
        match = _HEADING.match(content)
        if not match:
            continue
        sections.append(Section(heading, (body_start, line_start), path))
        level = len(match.group(1))
        title = (match.group(2) or "").strip()
        if _CLOSING_RUN.fullmatch(title):
            title = ""
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        path = [t for _, t in stack]
        heading = trim(text, line_start, line_start + len(content))
        body_start = line_start + len(content)
    sections.append(Section(heading, (body_start, len(text)), path))
    return [s for s in sections if s.heading is not None or text[s.body[0]:s.body[1]].strip()]


def _under(path: list[str], parent: list[str]) -> bool:
    """``path`` is strictly inside the section whose path is ``parent``."""
    return len(path) > len(parent) and path[: len(parent)] == parent


class HeadingChunker:
    """Chunks that follow the document's ``#`` headings and carry their ``heading_path``.

    The text is cut into sections at ATX headings (``#`` to ``######``, not inside fenced code);
    a section's ``heading_path`` lists the titles of its enclosing headings, e.g.
    ``["Intro", "Details"]`` (``[]`` before the first heading).

    Chunk text is always a contiguous slice of the document, so ``include_headers`` decides
    whether heading lines are inside chunk spans:

    * ``True``: a section's span starts at its heading line. A section that fits the budget is
      grouped with the whole subsections that follow it while they fit (a chunk is a
      section with the start of its subtree, and its ``heading_path`` is that section's path;
      the text before the first heading counts as the parent of every section). A section
      over budget is split like the sentence chunker, its heading line being the first unit,
      so only its first chunk shows the heading line.
    * ``False``: heading lines are never inside a chunk; each section's body is grouped on its own
      (sections are not merged, since a merged span would contain the next heading line).

    ``overlap_tokens`` applies to the sentence grouping inside a section that is split.
    """

    name: ClassVar[str] = "headings"
    version: ClassVar[int] = 4
    """2: lines split at CommonMark's endings only, fences closed by a bare fence line, and a
    title of closing ``#``s alone empty (1 read ``para\\x0b# fake`` as a heading); 3: a blank
    line between ``\\r\\n`` or ``\\r`` endings ends a sentence, as one between ``\\n`` did;
    4: the terminators of other scripts (``。``) end a sentence, as in ``sentences`` 3."""

    def __init__(self, max_chunk_tokens: int = 256, overlap_tokens: int = 0,
                 include_headers: bool = True, encoding: str = DEFAULT_ENCODING) -> None:
        check_budget(self.name, max_chunk_tokens, overlap_tokens)
        check_encoding(self.name, encoding)
        self.max_chunk_tokens = max_chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.include_headers = bool(include_headers)
        self.encoding = encoding
        self.chunker_id = format_chunker_id(
            self.name,
            {"max": max_chunk_tokens, "overlap": overlap_tokens,
             "headers": self.include_headers, "enc": encoding, "v": self.version},
        )

    @property
    def params(self) -> dict[str, Any]:
        """Keyword arguments that rebuild this chunker through the registry."""
        return {"max_chunk_tokens": self.max_chunk_tokens,
                "overlap_tokens": self.overlap_tokens,
                "include_headers": self.include_headers, "encoding": self.encoding}

    def __repr__(self) -> str:
        return f"HeadingChunker({self.chunker_id!r})"

    def _units(self, text: str, section: Section) -> list[Span]:
        units = sentence_spans(text, *section.body)
        if self.include_headers and section.heading is not None:
            units.insert(0, section.heading)
        return units

    def chunk(self, item_id: str, text: str, content_hash: str) -> list[Chunk]:
        """Heading-aware chunks of ``text`` in order; none for whitespace-only text."""
        if not text.strip():
            return []
        doc = TokenizedDocument(text, self.encoding)
        budget, overlap = self.max_chunk_tokens, self.overlap_tokens
        spans: list[tuple[int, int, list[str] | None]] = []
        sections = [(s, self._units(text, s)) for s in split_sections(text)]
        sections = [(s, u) for s, u in sections if u]
        i = 0
        while i < len(sections):
            section, units = sections[i]
            start, end = units[0][0], units[-1][1]
            if doc.count(start, end) > budget:
                spans.extend((s, e, list(section.path))
                             for s, e in group_units(doc, units, budget, overlap))
                i += 1
                continue
            j = i
            if self.include_headers:
                while (j + 1 < len(sections)
                       and _under(sections[j + 1][0].path, section.path)
                       and doc.approx(start, sections[j + 1][1][-1][1]) <= budget
                       and doc.count(start, sections[j + 1][1][-1][1]) <= budget):
                    j += 1
            end = sections[j][1][-1][1]
            spans.append((start, end, list(section.path)))
            i = j + 1
        return make_chunks(item_id, text, content_hash, self.chunker_id, doc, self.encoding,
                           spans)


def headings(max_chunk_tokens: int | None = None, overlap_tokens: int | None = None,
             include_headers: bool = True, encoding: str = DEFAULT_ENCODING) -> HeadingChunker:
    """Registry factory: defaults 256 tokens, no overlap, heading lines included."""
    return HeadingChunker(
        max_chunk_tokens=256 if max_chunk_tokens is None else max_chunk_tokens,
        overlap_tokens=0 if overlap_tokens is None else overlap_tokens,
        include_headers=include_headers,
        encoding=encoding,
    )
