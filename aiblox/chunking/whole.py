"""The whole document as one chunk (the baseline: no chunking)."""

from __future__ import annotations

from typing import Any, ClassVar

from aiblox.chunking._params import check_encoding
from aiblox.chunking._spans import make_chunks, trim
from aiblox.chunking.base import Chunk, format_chunker_id
from aiblox.text.tokens import DEFAULT_ENCODING

__all__ = ["WholeDocumentChunker", "whole"]


class WholeDocumentChunker:
    """One chunk spanning the document, trimmed of leading and trailing whitespace.

    There is no token budget: ``token_count`` is the document's own count.
    """

    name: ClassVar[str] = "whole"
    version: ClassVar[int] = 1
    sized: ClassVar[bool] = False
    """No token budget or overlap applies (a caller given one says it is ignored)."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        check_encoding(self.name, encoding)
        self.encoding = encoding
        self.chunker_id = format_chunker_id(self.name, {"enc": encoding, "v": self.version})

    @property
    def params(self) -> dict[str, Any]:
        """Keyword arguments that rebuild this chunker through the registry."""
        return {"encoding": self.encoding}

    def __repr__(self) -> str:
        return f"WholeDocumentChunker({self.chunker_id!r})"

    def chunk(self, item_id: str, text: str, content_hash: str) -> list[Chunk]:
        """``[one chunk]``, or ``[]`` for empty or whitespace-only text."""
        start, end = trim(text, 0, len(text))
        if start >= end:
            return []
        return make_chunks(item_id, text, content_hash, self.chunker_id, None, self.encoding,
                           [(start, end, None)])


def whole(max_chunk_tokens: int | None = None, overlap_tokens: int | None = None,
          include_headers: bool = True, encoding: str = DEFAULT_ENCODING) -> WholeDocumentChunker:
    """Registry factory; the budget, overlap and ``include_headers`` do not apply and are ignored,
    so they do not enter the chunker id (the chunks are the same whatever they are)."""
    del max_chunk_tokens, overlap_tokens, include_headers
    return WholeDocumentChunker(encoding=encoding)
