"""Chunkers (pure Python): split a document into chunks with exact character offsets.

Built-ins: ``token_window``, ``sentences``, ``headings`` and ``whole``, registered by name in
:data:`default_registry` through the same ``register`` call third-party chunkers use. The
chunk-level evaluation functions live in :mod:`aiblox.chunking.metrics`.
"""

from aiblox.chunking.base import (
    CHUNK_ID_HEX_CHARS,
    Chunk,
    Chunker,
    chunks_match_document,
    format_chunker_id,
    make_chunk_id,
    to_evidence_chunk,
)
from aiblox.chunking.headings import HeadingChunker, Section, split_sections
from aiblox.chunking.metrics import (
    ANSWER_MATCH_RULE,
    PROJECTION,
    GoldSpan,
    RankedChunk,
    answer_recall_at_k,
    max_passage_projection,
    mean_evidence_tokens,
)
from aiblox.chunking.registry import (
    BUILTIN_CHUNKERS,
    ChunkerFactory,
    ChunkerRegistry,
    UnknownChunkerError,
    default_registry,
    get_chunker,
    make_chunker,
    register_chunker,
)
from aiblox.chunking.sentences import SentenceChunker
from aiblox.chunking.token_window import TokenWindowChunker
from aiblox.chunking.whole import WholeDocumentChunker

__all__ = [
    "ANSWER_MATCH_RULE",
    "BUILTIN_CHUNKERS",
    "CHUNK_ID_HEX_CHARS",
    "Chunk",
    "Chunker",
    "ChunkerFactory",
    "ChunkerRegistry",
    "GoldSpan",
    "HeadingChunker",
    "PROJECTION",
    "RankedChunk",
    "Section",
    "SentenceChunker",
    "TokenWindowChunker",
    "UnknownChunkerError",
    "WholeDocumentChunker",
    "answer_recall_at_k",
    "chunks_match_document",
    "default_registry",
    "format_chunker_id",
    "get_chunker",
    "make_chunk_id",
    "make_chunker",
    "max_passage_projection",
    "mean_evidence_tokens",
    "register_chunker",
    "split_sections",
    "to_evidence_chunk",
]
