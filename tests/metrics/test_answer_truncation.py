"""A chunk the selection policy cut to its token budget holds only what it kept: an answer past
the cut was never shown to the reader, and counted for ``evidence_answer_recall`` and
``citation_precision`` (QA: on squad with a 60-token budget, 10 of 21 evidence hits of the tune
half had no gold answer in the selected text)."""

from __future__ import annotations

import pytest

from aiblox.assembly.sanitize import kept_source_length, safe_normalize
from aiblox.metrics.answers import query_answer_metrics, seen_spans

TEXT = "The show was headlined by Coldplay  with\tguests.\n Beyoncé and Bruno Mars sang."
START = 1000  # the chunk's offset in its document
ANSWER = "Beyoncé and Bruno Mars"
GOLD = [("d1", ANSWER, START + TEXT.index(ANSWER))]


def bundle(cut: str, truncated: bool) -> dict:
    return {"assembly_status": "OK", "selected_evidence": [
        {"chunk_id": "c1", "sanitized_text": cut, "token_count": 9, "truncated": truncated}]}


VALIDATION = {"generation_status": "OK", "is_refusal": False, "validation_status": "PASSED",
              "validated_answer_text": "Coldplay [C0].", "cited_chunk_ids": ["c1"]}
SPANS = {"c1": ("d1", START, START + len(TEXT), TEXT)}


@pytest.mark.parametrize(("cut", "truncated", "held"), [
    (safe_normalize(TEXT), False, 1.0),
    (safe_normalize(TEXT)[:48], True, 0.0),   # "... with guests." : the answer was cut away
    (safe_normalize(TEXT)[:72], True, 1.0),   # the cut falls after the answer
])
def test_an_answer_past_the_cut_is_not_held(cut, truncated, held):
    got = query_answer_metrics("q", bundle(cut, truncated), VALIDATION, SPANS, GOLD, [ANSWER],
                               kept=kept_source_length)
    assert got["evidence_answer_recall"] == held
    assert got["citation_precision"] == held


def test_the_kept_length_maps_the_sanitised_cut_back_to_the_source():
    norm = safe_normalize(TEXT)
    for n in range(len(norm) + 1):
        k = kept_source_length(TEXT, norm[:n])
        assert len(safe_normalize(TEXT[:k])) <= n  # never more than was kept
        assert k == len(TEXT) or len(safe_normalize(TEXT[:k + 1])) > n  # and all of it
    (item, start, end, text), = seen_spans(bundle(norm[:48], True), SPANS,
                                           kept_source_length).values()
    assert (item, start) == ("d1", START) and text == TEXT[:end - START]
    assert safe_normalize(text) == norm[:48].rstrip()
