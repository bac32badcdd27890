"""Pure text utilities: token counting (offline tiktoken), token offsets, snippets, BM25, the
texts a lexical analyser cannot index, and stored text escaped for a terminal."""

from aiblox.text.analysis import TOKEN_PATTERN, Analyzer, stop_words
from aiblox.text.lexical import ANALYZER_ID, ENGLISH_STOP_WORDS, analyze, bm25_scores, stem
from aiblox.text.lexical_gaps import (
    ANALYZERS,
    DUCKDB_FTS,
    LexicalGaps,
    analyzer_tokens,
    lexical_gaps,
)
from aiblox.text.snippet import ELLIPSIS, make_snippet
from aiblox.text.terminals import CLOSING_MARKS, OTHER_SENTENCE_TERMINALS
from aiblox.text.token_offsets import token_char_offsets, utf8_safe
from aiblox.text.tokens import (
    DEFAULT_ENCODING,
    OFFLINE_ENCODINGS,
    count_tokens,
    get_encoding,
    seed_tiktoken_cache,
)
from aiblox.text.visible import BIDI_CONTROLS, escape_controls, has_controls

__all__ = [
    "ANALYZERS",
    "ANALYZER_ID",
    "Analyzer",
    "BIDI_CONTROLS",
    "CLOSING_MARKS",
    "DEFAULT_ENCODING",
    "DUCKDB_FTS",
    "ELLIPSIS",
    "ENGLISH_STOP_WORDS",
    "LexicalGaps",
    "OFFLINE_ENCODINGS",
    "OTHER_SENTENCE_TERMINALS",
    "TOKEN_PATTERN",
    "analyze",
    "analyzer_tokens",
    "bm25_scores",
    "count_tokens",
    "escape_controls",
    "get_encoding",
    "has_controls",
    "lexical_gaps",
    "make_snippet",
    "seed_tiktoken_cache",
    "stem",
    "stop_words",
    "token_char_offsets",
    "utf8_safe",
]
