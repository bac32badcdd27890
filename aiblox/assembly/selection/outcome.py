"""The assembly metrics of a selection outcome: what was kept, what was dropped and why, the
evidence token count against its budget (step 2's record, carried by the answer bundle and
recomputed by the prompt builder when it trims evidence)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from aiblox.assembly.policy import SelectionPolicy
from aiblox.assembly.records import (
    DROP_BELOW_SIMILARITY_FLOOR,
    DROP_BUDGET,
    DROP_DUP,
    DROP_EMPTY_AFTER_SANITIZE,
    DROP_PER_KNOWLEDGE_CAP,
    DROP_REASONS,
    AssemblyMetrics,
    DroppedChunk,
    SelectedEvidence,
)

__all__ = ["build_metrics"]


def build_metrics(
    *,
    retrieved_k: int,
    selected: Sequence[SelectedEvidence],
    dropped: Sequence[DroppedChunk],
    evidence_token_count: int,
    evidence_token_budget: int,
    policy: SelectionPolicy,
) -> AssemblyMetrics:
    """Assembly metrics from the selection outcome."""
    counts = Counter(d.reason for d in dropped)
    truncated = sum(1 for ev in selected if ev.truncated)
    return AssemblyMetrics(
        retrieved_k=retrieved_k,
        selected_k=len(selected),
        dedup_dropped_count=counts[DROP_DUP],
        budget_dropped_count=counts[DROP_BUDGET],
        per_knowledge_cap_dropped_count=counts[DROP_PER_KNOWLEDGE_CAP],
        empty_after_sanitize_dropped_count=counts[DROP_EMPTY_AFTER_SANITIZE],
        below_similarity_floor_dropped_count=counts[DROP_BELOW_SIMILARITY_FLOOR],
        drop_reasons={code: counts[code] for code in DROP_REASONS},
        dropped=list(dropped),
        evidence_token_count=evidence_token_count,
        evidence_token_budget=evidence_token_budget,
        per_chunk_token_cap=policy.per_chunk_token_cap,
        truncation_applied=truncated > 0,
        truncated_count=truncated,
    )
