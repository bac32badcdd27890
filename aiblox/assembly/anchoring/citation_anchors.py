"""Step 3 of answer assembly: citation anchors. After the evidence order is frozen, the chunk
at position ``i`` gets anchor ``C{i}``; the anchor map sends each anchor to its chunk id."""

from __future__ import annotations

from collections.abc import Sequence

from aiblox.assembly.records import SelectedEvidence

__all__ = ["anchor_map", "assign_anchors"]


def assign_anchors(evidence: Sequence[SelectedEvidence]) -> list[SelectedEvidence]:
    """Copies of ``evidence`` (in its given, final order) with anchors C0, C1, ..."""
    return [ev.model_copy(update={"citation_anchor": f"C{i}"}) for i, ev in enumerate(evidence)]


def anchor_map(evidence: Sequence[SelectedEvidence]) -> dict[str, str]:
    """Anchor to chunk id for anchored evidence."""
    return {ev.citation_anchor: ev.chunk_id for ev in evidence}
