"""The lexical analyser (Porter stems through PyStemmer) and BM25 over a few texts."""

from __future__ import annotations

import math

import pytest

from aiblox.text import ENGLISH_STOP_WORDS, analyze, bm25_scores, stem

# Examples from M. F. Porter, "An algorithm for suffix stripping" (1980), steps 1 to 5.
PORTER_PAPER = {
    "caresses": "caress", "ponies": "poni", "ties": "ti", "caress": "caress", "cats": "cat",
    "feed": "feed", "agreed": "agre", "plastered": "plaster", "bled": "bled",
    "motoring": "motor", "sing": "sing", "conflated": "conflat", "troubled": "troubl",
    "sized": "size", "hopping": "hop", "tanned": "tan", "falling": "fall", "hissing": "hiss",
    "fizzed": "fizz", "failing": "fail", "filing": "file", "happy": "happi", "sky": "sky",
    "relational": "relat", "conditional": "condit", "rational": "ration",
    "valenci": "valenc", "hesitanci": "hesit", "digitizer": "digit",
    "conformabli": "conform", "radicalli": "radic", "differentli": "differ", "vileli": "vile",
    "analogousli": "analog", "vietnamization": "vietnam", "predication": "predic",
    "operator": "oper", "feudalism": "feudal", "decisiveness": "decis",
    "hopefulness": "hope", "callousness": "callous", "formaliti": "formal",
    "sensitiviti": "sensit", "sensibiliti": "sensibl", "triplicate": "triplic",
    "formative": "form", "formalize": "formal", "electriciti": "electr",
    "electrical": "electr", "hopeful": "hope", "goodness": "good", "revival": "reviv",
    "allowance": "allow", "inference": "infer", "airliner": "airlin", "gyroscopic": "gyroscop",
    "adjustable": "adjust", "defensible": "defens", "irritant": "irrit",
    "replacement": "replac", "adjustment": "adjust", "dependent": "depend",
    "adoption": "adopt", "homologou": "homolog", "communism": "commun",
    "activate": "activ", "angulariti": "angular", "homologous": "homolog",
    "effective": "effect", "bowdlerize": "bowdler", "probate": "probat", "rate": "rate",
    "cease": "ceas", "controll": "control", "roll": "roll", "generalizations": "gener",
}


@pytest.mark.parametrize(("word", "expected"), sorted(PORTER_PAPER.items()))
def test_porter_paper_examples(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_analyze() -> None:
    # "_" and "-" split words; "at" and "the" are stop words.
    assert analyze("The Running dogs, e.g. 3 DOGS_at-home!") == [
        "run", "dog", "e", "g", "3", "dog", "home",
    ]
    assert analyze("") == []
    assert analyze("the and of") == []  # stop words only
    assert "the" in ENGLISH_STOP_WORDS and len(ENGLISH_STOP_WORDS) == 33
    assert analyze("Ünïcödé café") == ["ünïcödé", "café"]


def test_bm25_hand_worked() -> None:
    # N=2, df("dog")=1: idf = ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2. Both texts have one
    # term, so dl = avgdl and the tf part is 1 * 2.2 / (1 + 1.2) = 1.
    assert bm25_scores("dogs", ["dog", "cat"]) == [pytest.approx(math.log(2)), 0.0]
    # Texts "dog dog" (dl 2), "cat" (dl 1), "cat" (dl 1): avgdl = 4/3,
    # idf = ln(1 + (3 - 1 + 0.5) / 1.5) = ln(8/3),
    # norm = 1.2 * (0.25 + 0.75 * 2 / (4/3)) = 1.65, tf part = 2 * 2.2 / (2 + 1.65).
    expected = math.log(8 / 3) * 2 * 2.2 / (2 + 1.65)
    assert bm25_scores("dog", ["dog dog", "cat", "cat"]) == [pytest.approx(expected), 0.0, 0.0]


def test_bm25_edge_cases() -> None:
    assert bm25_scores("dog", []) == []
    assert bm25_scores("the of", ["dog"]) == [0.0]  # a query of stop words only
    assert bm25_scores("dog", ["", "dog"])[0] == 0.0
    # A repeated query term counts once.
    assert bm25_scores("dog dog", ["dog", "cat"]) == bm25_scores("dog", ["dog", "cat"])
    with pytest.raises(ValueError, match="k1"):
        bm25_scores("dog", ["dog"], b=1.5)


def test_bm25_is_deterministic_and_order_free_per_text() -> None:
    texts = ["late chunking of documents", "chunk caches", "documents about cats", "x"]
    scores = bm25_scores("chunking documents cache", texts)
    assert scores == bm25_scores("chunking documents cache", texts)
    reordered = bm25_scores("chunking documents cache", list(reversed(texts)))
    assert reordered == list(reversed(scores))
    assert scores[0] > scores[2] > 0.0 and scores[3] == 0.0
