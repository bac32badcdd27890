"""Patterns of the answer rules Prompt Contract V1 states (its citation and output format
contracts), shared by answer validation (step 6) and the extractive reader (step 5):
citation-like markers, evidence metadata and meta commentary."""

from __future__ import annotations

import re

__all__ = ["CITATION_LIKE_PATTERN", "METADATA_PATTERN", "META_COMMENTARY_PATTERN", "is_quotable"]

CITATION_LIKE_PATTERN = re.compile(r"\[[^\[\]\n]{0,40}?\b[cC]\s*\d+\b[^\[\]\n]{0,200}?\]")
"""Anything that looks like a citation marker (``[c0]``, ``[C 1]``, ``[C0, C1]``, ``[C0]``)."""

METADATA_PATTERN = re.compile(r"chunk_id|knowledge_id|\bsource\s*=|\[C\d+\s*\|", re.IGNORECASE)
"""Evidence metadata fields or an evidence header."""

META_COMMENTARY_PATTERN = re.compile(
    r"\b(?:provided|given|supplied|above) (?:evidence|context|documents?|passages?|chunks?)\b"
    r"|\b(?:the|this) (?:evidence|prompt|system prompt)\b"
    r"|\bevidence (?:block|section|chunks?)\b"
    r"|\b(?:my|these|the) instructions\b"
    r"|\bas an ai\b|\blanguage model\b",
    re.IGNORECASE,
)
"""Talk about the evidence, the prompt, the instructions or being an AI."""


_HEADING = re.compile(r"#{1,6}\s")


def is_quotable(sentence: str) -> bool:
    """True when quoting ``sentence`` cannot break an answer rule by itself."""
    return not (
        _HEADING.match(sentence)  # a Markdown heading (``# BM25.``): a title, not a claim
        or CITATION_LIKE_PATTERN.search(sentence)
        or re.search(r"\[C\d+\]", sentence)
        or "NO_EVIDENCE" in sentence
        or METADATA_PATTERN.search(sentence)
        or META_COMMENTARY_PATTERN.search(sentence)
    )
