"""Fixed-size token windows with overlap (the classic sliding-window chunker)."""

from __future__ import annotations

from typing import ClassVar

from aiblox.chunking._params import BudgetedChunker
from aiblox.chunking._spans import TokenizedDocument, make_chunks, token_windows
from aiblox.chunking.base import Chunk
from aiblox.text.tokens import DEFAULT_ENCODING

__all__ = ["TokenWindowChunker", "token_window"]


class TokenWindowChunker(BudgetedChunker):
    """Windows of ``max_chunk_tokens`` tokens; consecutive windows share ``overlap_tokens``.

    The document is encoded once; window edges are its token boundaries, snapped down to the
    start of a character where a token ends inside a multi-byte character. A window whose text
    encodes on its own to more tokens than the budget is shortened by whole tokens, and the next
    window starts ``overlap_tokens`` tokens before the previous one ended. Windows are not
    trimmed (they tile the text); windows holding only whitespace are dropped.
    """

    name: ClassVar[str] = "token_window"
    version: ClassVar[int] = 2
    """2: every window ends after the one before it (1 could return a window lying inside the
    previous one where a token end snapped down inside a multi-token character)."""

    def __init__(self, max_chunk_tokens: int = 256, overlap_tokens: int = 32,
                 encoding: str = DEFAULT_ENCODING) -> None:
        self._setup(max_chunk_tokens, overlap_tokens, encoding)

    def chunk(self, item_id: str, text: str, content_hash: str) -> list[Chunk]:
        """Token windows of ``text`` in order; none for empty or whitespace-only text."""
        if not text.strip():
            return []
        doc = TokenizedDocument(text, self.encoding)
        spans = [
            (s, e, None)
            for s, e in token_windows(doc, 0, len(text), self.max_chunk_tokens,
                                      self.overlap_tokens)
            if text[s:e].strip()
        ]
        return make_chunks(item_id, text, content_hash, self.chunker_id, doc, self.encoding,
                           spans)


def token_window(max_chunk_tokens: int | None = None, overlap_tokens: int | None = None,
                 include_headers: bool = True, encoding: str = DEFAULT_ENCODING
                 ) -> TokenWindowChunker:
    """Registry factory: default 256 tokens; default overlap an eighth of the window (32 for
    256); ``include_headers`` does not apply."""
    del include_headers  # windows do not read headings
    size = 256 if max_chunk_tokens is None else max_chunk_tokens
    return TokenWindowChunker(
        max_chunk_tokens=size,
        overlap_tokens=size // 8 if overlap_tokens is None and isinstance(size, int)
        else overlap_tokens,
        encoding=encoding,
    )
