"""Sentence grouping: whole sentences, greedily grouped up to a token budget."""

from __future__ import annotations

from typing import ClassVar

from aiblox.chunking._params import BudgetedChunker
from aiblox.chunking._spans import TokenizedDocument, group_units, make_chunks, sentence_spans
from aiblox.chunking.base import Chunk
from aiblox.text.tokens import DEFAULT_ENCODING

__all__ = ["SentenceChunker", "sentences"]


class SentenceChunker(BudgetedChunker):
    """Consecutive sentences grouped into chunks of at most ``max_chunk_tokens`` tokens.

    Sentences come from a regular expression: a sentence ends after ``.``, ``!``, ``?`` or ``…``
    (with any closing quotes or brackets) followed by whitespace and a character that is not a
    lower-case ASCII letter, after any other Unicode sentence terminator (``。``, ``！``, ``？``,
    ``؟``, ``।``, ...: :mod:`aiblox.text.terminals`) whatever follows, and at every blank line
    (its line endings ``\\n``, ``\\r\\n`` or ``\\r``). A sentence longer than the budget is
    cut into token windows. ``overlap_tokens > 0`` repeats whole trailing sentences: the next
    chunk starts with the longest run of the previous chunk's last sentences holding at most
    ``overlap_tokens`` tokens (none when even the last sentence is longer). Chunks are trimmed of
    surrounding whitespace, so every non-whitespace character lies in some chunk.
    """

    name: ClassVar[str] = "sentences"
    version: ClassVar[int] = 3
    """2: a blank line between ``\\r\\n`` or ``\\r`` endings ends a sentence, as one between
    ``\\n`` did (1 ran ``Introduction\\r\\n\\r\\nthe method`` into one sentence); 3: the
    terminators of other scripts end one (2 ran a CJK paragraph, which puts no space after
    ``。``, into one sentence, cut by token windows wherever the budget fell)."""

    def __init__(self, max_chunk_tokens: int = 256, overlap_tokens: int = 0,
                 encoding: str = DEFAULT_ENCODING) -> None:
        self._setup(max_chunk_tokens, overlap_tokens, encoding)

    def chunk(self, item_id: str, text: str, content_hash: str) -> list[Chunk]:
        """Sentence-grouped chunks of ``text`` in order; none for whitespace-only text."""
        if not text.strip():
            return []
        doc = TokenizedDocument(text, self.encoding)
        units = sentence_spans(text)
        spans = [(s, e, None) for s, e in
                 group_units(doc, units, self.max_chunk_tokens, self.overlap_tokens)]
        return make_chunks(item_id, text, content_hash, self.chunker_id, doc, self.encoding,
                           spans)


def sentences(max_chunk_tokens: int | None = None, overlap_tokens: int | None = None,
              include_headers: bool = True, encoding: str = DEFAULT_ENCODING) -> SentenceChunker:
    """Registry factory: defaults 256 tokens, no overlap; ``include_headers`` does not apply."""
    del include_headers  # sentence grouping does not read headings
    return SentenceChunker(
        max_chunk_tokens=256 if max_chunk_tokens is None else max_chunk_tokens,
        overlap_tokens=0 if overlap_tokens is None else overlap_tokens,
        encoding=encoding,
    )
