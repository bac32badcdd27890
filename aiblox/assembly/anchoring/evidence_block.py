"""Step 3 of answer assembly: the evidence block, the exact text placed in the prompt's evidence
section.

Each selected chunk is rendered as the frozen header line and its sanitised text on the next
line; chunks are separated by one blank line::

    [C0 | chunk_id=... | knowledge_id=... | source=...]
    <sanitized_text>

    [C1 | chunk_id=... | knowledge_id=... | source=...]
    <sanitized_text>

No other metadata is rendered. Header values are sanitised to one line and the three
characters that delimit a header (``[``, ``]``, ``|``) are replaced by ``(``, ``)``, ``/`` so a
value can never close or split its header; the anchor map keeps the real ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiblox.assembly.records import SelectedEvidence
from aiblox.assembly.sanitize import safe_normalize

__all__ = ["EVIDENCE_SEPARATOR", "header_value", "render_evidence_block", "render_evidence_entry"]

EVIDENCE_SEPARATOR = "\n\n"
_HEADER_ESCAPES = str.maketrans({"[": "(", "]": ")", "|": "/"})


def header_value(value: str) -> str:
    """A metadata value made safe for an evidence header (one line, no delimiters)."""
    return safe_normalize(value).translate(_HEADER_ESCAPES) or "unknown"


def render_evidence_entry(
    anchor: str, chunk_id: str, knowledge_id: str, source: str, sanitized_text: str
) -> str:
    """One chunk: its header line, a newline, its sanitised text."""
    return (
        f"[{anchor} | chunk_id={header_value(chunk_id)} | knowledge_id={header_value(knowledge_id)}"
        f" | source={header_value(source)}]\n{sanitized_text}"
    )


def render_evidence_block(evidence: Sequence[SelectedEvidence]) -> str:
    """The evidence block for chunks already in final order with their anchors assigned."""
    return EVIDENCE_SEPARATOR.join(
        render_evidence_entry(
            ev.citation_anchor, ev.chunk_id, ev.knowledge_id, ev.source_reference, ev.sanitized_text
        )
        for ev in evidence
    )
