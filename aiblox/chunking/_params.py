"""Parameter checks shared by the built-in chunkers."""

from __future__ import annotations

from typing import Any, ClassVar

from aiblox.text.tokens import (
    DEFAULT_ENCODING,
    OFFLINE_ENCODINGS,
    get_encoding,
    seed_tiktoken_cache,
)


def check_budget(name: str, max_chunk_tokens: int, overlap_tokens: int) -> None:
    """Raise ``ValueError`` naming the chunker and field when the budget is unusable."""
    if isinstance(max_chunk_tokens, bool) or not isinstance(max_chunk_tokens, int):
        raise ValueError(f"{name}: max_chunk_tokens must be an int, got {max_chunk_tokens!r}")
    if isinstance(overlap_tokens, bool) or not isinstance(overlap_tokens, int):
        raise ValueError(f"{name}: overlap_tokens must be an int, got {overlap_tokens!r}")
    if max_chunk_tokens < 1:
        raise ValueError(f"{name}: max_chunk_tokens must be >= 1, got {max_chunk_tokens}")
    if overlap_tokens < 0:
        raise ValueError(f"{name}: overlap_tokens must be >= 0, got {overlap_tokens}")
    if overlap_tokens >= max_chunk_tokens:
        raise ValueError(
            f"{name}: overlap_tokens ({overlap_tokens}) must be smaller than "
            f"max_chunk_tokens ({max_chunk_tokens})"
        )


def check_encoding(name: str, encoding: str) -> None:
    """Raise ``ValueError`` when tiktoken does not know ``encoding``. A known encoding whose
    BPE file is in tiktoken's cache is not loaded here (0.1 s, for a chunker that may never
    chunk: a search whose chunks are cached); any other is loaded, so it fails now."""
    import tiktoken

    known = tiktoken.list_encoding_names()
    if encoding in known and seed_tiktoken_cache(encoding):
        return
    offline = ", ".join(n for n in OFFLINE_ENCODINGS if n in known)
    if encoding not in known:
        raise ValueError(f"{name}: unknown tiktoken encoding {encoding!r}; known: "
                         f"{', '.join(sorted(known))} (offline: {offline})")
    try:
        get_encoding(encoding)
    except Exception as exc:  # noqa: BLE001 - a download that failed (offline: no network)
        raise ValueError(f"{name}: tiktoken encoding {encoding!r} is not bundled (offline: "
                         f"{offline}) and could not be downloaded ({type(exc).__name__})"
                         ) from None


__all__ = ["DEFAULT_ENCODING", "check_budget", "check_encoding"]


class BudgetedChunker:
    """Shared set-up of the chunkers with a token budget and an overlap.

    Subclasses set ``name`` and ``version`` and call :meth:`_setup` from their ``__init__``;
    the chunker id, ``params`` and ``repr`` then follow from the parameters alone.
    """

    name: ClassVar[str]
    version: ClassVar[int]

    def _setup(self, max_chunk_tokens: int, overlap_tokens: int, encoding: str) -> None:
        from aiblox.chunking.base import format_chunker_id

        check_budget(self.name, max_chunk_tokens, overlap_tokens)
        check_encoding(self.name, encoding)
        self.max_chunk_tokens = max_chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.encoding = encoding
        self.chunker_id = format_chunker_id(
            self.name,
            {"max": max_chunk_tokens, "overlap": overlap_tokens, "enc": encoding,
             "v": self.version},
        )

    @property
    def params(self) -> dict[str, Any]:
        """Keyword arguments that rebuild this chunker through the registry."""
        return {"max_chunk_tokens": self.max_chunk_tokens,
                "overlap_tokens": self.overlap_tokens, "encoding": self.encoding}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.chunker_id!r})"
