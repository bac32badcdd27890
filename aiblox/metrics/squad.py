"""SQuAD answer scoring: exact match and token F1 of a predicted answer against gold answers.

The official SQuAD v1.1 evaluation (Rajpurkar et al., "SQuAD: 100,000+ Questions for Machine
Comprehension of Text", EMNLP 2016): both strings are normalised (lower case, punctuation and the
articles ``a``/``an``/``the`` removed, whitespace collapsed); exact match is 1 when the
normalised strings are equal, F1 is the harmonic mean of token precision and recall over the
bag of tokens; each takes the best over the gold answers. Citation markers (``[C0]``) are removed
from the prediction first, since they are the prompt contract's, not the answer's.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

__all__ = ["exact_match", "normalize_answer", "strip_citations", "token_f1"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CITATION = re.compile(r"\[C\d+\]")
_PUNCT = frozenset(string.punctuation)


def strip_citations(text: str) -> str:
    """``text`` without ``[Cn]`` citation markers."""
    return _CITATION.sub(" ", text)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals one normalised gold answer."""
    pred = normalize_answer(strip_citations(prediction))
    return float(any(pred == normalize_answer(g) for g in golds))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """The best token F1 of the prediction against the gold answers (0.0 without any)."""
    pred = normalize_answer(strip_citations(prediction)).split()
    return max((_f1(pred, normalize_answer(g).split()) for g in golds), default=0.0)
