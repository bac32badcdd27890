"""SQuAD answer scoring and the answer status of one query, with values worked out by hand."""

from __future__ import annotations

import pytest

from aiblox.metrics import answer_status, exact_match, normalize_answer, token_f1


def test_normalize_drops_case_punctuation_articles_and_citations():
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert exact_match("the Denver Broncos. [C0]", ["Denver Broncos"]) == 1.0
    assert exact_match("Denver", ["Denver Broncos"]) == 0.0


def test_token_f1_by_hand():
    # prediction 4 tokens, gold 2, overlap 2: P = 2/4, R = 2/2, F1 = 2 * 0.5 * 1 / 1.5 = 2/3
    assert token_f1("Denver Broncos won it [C1]", ["Denver Broncos"]) == pytest.approx(2 / 3)
    assert token_f1("x", ["Denver Broncos", "x"]) == 1.0  # best over gold answers
    assert token_f1("nothing here", ["Denver"]) == 0.0
    assert token_f1("anything", []) == 0.0


@pytest.mark.parametrize("assembly, validation, status", [
    ("NO_EVIDENCE", {"generation_status": "NO_EVIDENCE", "is_refusal": True,
                     "validation_status": "PASSED"}, "NO_EVIDENCE"),
    ("FAILED", {"generation_status": "FAILED", "is_refusal": False,
                "validation_status": "FAILED"}, "FAILED"),
    ("OK", {"generation_status": "FAILED", "is_refusal": False,
            "validation_status": "FAILED"}, "FAILED"),
    ("OK", {"generation_status": "OK", "is_refusal": True,
            "validation_status": "PASSED"}, "REFUSED"),
    ("OK", {"generation_status": "OK", "is_refusal": False,
            "validation_status": "FAILED"}, "INVALID"),
    ("OK", {"generation_status": "OK", "is_refusal": False,
            "validation_status": "PASSED"}, "ANSWERED"),
])
def test_answer_status(assembly, validation, status):
    assert answer_status({"assembly_status": assembly}, validation) == status
