"""Hand-worked cases for the chunk-level evaluation functions."""

from __future__ import annotations

import pytest

from aiblox.chunking import (
    PROJECTION,
    GoldSpan,
    RankedChunk,
    answer_recall_at_k,
    get_chunker,
    max_passage_projection,
    mean_evidence_tokens,
)
from aiblox.contracts.retrieval import EvidenceChunk

DOC = "Super Bowl 50 was played in Santa Clara. The Denver Broncos won."
#      0         1         2         3         4         5         6
#      0123456789012345678901234567890123456789012345678901234567890123
BRONCOS = GoldSpan("d1", "Denver Broncos", 45)
SANTA = GoldSpan("d1", "Santa Clara", 28)


def test_gold_offsets_used_below_match_the_document() -> None:
    assert DOC[45:45 + len("Denver Broncos")] == "Denver Broncos"
    assert DOC[28:28 + len("Santa Clara")] == "Santa Clara"


def test_answer_recall_by_span() -> None:
    chunks = {
        # q1: the answer is in the second chunk -> hit at k=2, miss at k=1.
        "q1": [("d1", 0, 40, DOC[0:40]), ("d1", 41, 64, DOC[41:64])],
        # q2: right text, wrong document -> miss.
        "q2": [("d2", 0, 64, DOC)],
        # q3: the chunk cuts the answer span in half -> miss.
        "q3": [("d1", 0, 33, DOC[0:33])],
    }
    answers = {"q1": [BRONCOS], "q2": [BRONCOS], "q3": [SANTA], "q4": [SANTA]}
    mean, per_query = answer_recall_at_k(chunks, answers, k=2)
    assert per_query == {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 0.0}  # q4: no chunks
    assert mean == 0.25
    mean, per_query = answer_recall_at_k(chunks, answers, k=1)
    assert per_query["q1"] == 0.0 and mean == 0.0


def test_span_rule_prefers_offsets_over_text() -> None:
    # The chunk holds the string "Santa Clara" but the gold span is elsewhere in the document.
    text = "Santa Clara hosts. Later: Santa Clara again."
    gold = GoldSpan("d1", "Santa Clara", 26)
    chunks = {"q": [RankedChunk("d1", 0, 18, text[0:18])]}
    assert answer_recall_at_k(chunks, {"q": [gold]}, k=1)[0] == 0.0
    assert answer_recall_at_k(chunks, {"q": [gold]}, k=1, match="text")[0] == 1.0
    # Unknown offsets fall back to the text rule.
    chunks_no_offsets = {"q": [RankedChunk("d1", None, None, text[0:18])]}
    assert answer_recall_at_k(chunks_no_offsets, {"q": [gold]}, k=1)[0] == 1.0
    assert answer_recall_at_k(chunks, {"q": [GoldSpan("d1", "Santa Clara", None)]}, 1)[0] == 1.0


def test_any_of_several_gold_answers_counts() -> None:
    chunks = {"q": [("d1", 41, 64, DOC[41:64])]}
    answers = {"q": [SANTA, BRONCOS]}
    assert answer_recall_at_k(chunks, answers, k=1) == (1.0, {"q": 1.0})


def test_queries_without_answers_are_left_out_and_extra_queries_ignored() -> None:
    chunks = {"q1": [("d1", 41, 64, DOC[41:64])], "extra": [("d1", 0, 64, DOC)]}
    mean, per_query = answer_recall_at_k(chunks, {"q1": [BRONCOS], "empty": []}, k=5)
    assert per_query == {"q1": 1.0} and mean == 1.0
    assert answer_recall_at_k({}, {}, k=5) == (0.0, {})


def test_chunk_objects_are_accepted() -> None:
    chunk = get_chunker("sentences", max_chunk_tokens=10).chunk("d1", DOC, "h")
    assert [c.text for c in chunk] == ["Super Bowl 50 was played in Santa Clara.",
                                       "The Denver Broncos won."]
    assert answer_recall_at_k({"q": chunk}, {"q": [BRONCOS]}, k=1)[0] == 0.0
    assert answer_recall_at_k({"q": chunk}, {"q": [BRONCOS]}, k=2)[0] == 1.0
    evidence = [EvidenceChunk(item_id="d1", text=DOC[41:64], start_idx=41, end_idx=64, score=1)]
    assert answer_recall_at_k({"q": evidence}, {"q": [BRONCOS]}, k=1)[0] == 1.0


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_is_refused(k: object) -> None:
    with pytest.raises(ValueError, match="k must be"):
        answer_recall_at_k({}, {}, k=k)  # type: ignore[arg-type]


def test_malformed_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="chunk tuple"):
        answer_recall_at_k({"q": [("d1", 0, 5)]}, {"q": [BRONCOS]}, k=1)
    with pytest.raises(ValueError, match="gold answer"):
        answer_recall_at_k({"q": []}, {"q": [("d1", "x")]}, k=1)


def test_mean_evidence_tokens() -> None:
    counts = {"q1": [10, 20, 30], "q2": [5], "q3": []}
    assert mean_evidence_tokens(counts) == ((60 + 5 + 0) / 3, {"q1": 60, "q2": 5, "q3": 0})
    assert mean_evidence_tokens(counts, k=2) == ((30 + 5 + 0) / 3, {"q1": 30, "q2": 5, "q3": 0})
    assert mean_evidence_tokens({}) == (0.0, {})
    with pytest.raises(ValueError, match="token counts"):
        mean_evidence_tokens({"q": [-1]})


def test_max_passage_projection() -> None:
    run = {
        "q1": [("b", 0.2), ("a", 0.5), ("b", 0.9), ("c", 0.5), ("a", 0.1)],
        "q0": [],
    }
    projected = max_passage_projection(run)
    assert projected == {"q0": {}, "q1": {"b": 0.9, "a": 0.5, "c": 0.5}}
    # Ranked by score desc, then doc id asc: ties do not depend on input order.
    assert list(projected["q1"]) == ["b", "a", "c"]
    reversed_run = {"q1": list(reversed(run["q1"]))}
    assert list(max_passage_projection(reversed_run)["q1"]) == ["b", "a", "c"]
    assert PROJECTION == "max_passage"
    with pytest.raises(ValueError, match="NaN"):
        max_passage_projection({"q": [("a", float("nan"))]})
