"""Pure text utilities: token counting (offline tiktoken), token offsets, snippets, BM25."""

from aiblox.text.analysis import TOKEN_PATTERN, Analyzer, stop_words
from aiblox.text.lexical import ANALYZER_ID, ENGLISH_STOP_WORDS, analyze, bm25_scores, stem
from aiblox.text.snippet import ELLIPSIS, make_snippet
from aiblox.text.token_offsets import token_char_offsets, utf8_safe
from aiblox.text.tokens import DEFAULT_ENCODING, count_tokens, get_encoding, seed_tiktoken_cache

__all__ = [
    "ANALYZER_ID",
    "Analyzer",
    "DEFAULT_ENCODING",
    "ELLIPSIS",
    "ENGLISH_STOP_WORDS",
    "TOKEN_PATTERN",
    "analyze",
    "bm25_scores",
    "count_tokens",
    "get_encoding",
    "make_snippet",
    "seed_tiktoken_cache",
    "stem",
    "stop_words",
    "token_char_offsets",
    "utf8_safe",
]
