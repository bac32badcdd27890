"""Plain-Python references of RM3 (Anserini's Rm3Reranker) and Bo1 (Terrier's parameter-free
QueryExpansion), written from the formulas with dicts and loops over documents given as
``{term: count}``: what ``aiblox.engine.stages.rm3`` and ``bo1`` are held to. Nothing here
reads the index or numpy."""

from __future__ import annotations

import math
import re
from collections import Counter


def collection_stats(docs: dict[str, dict[str, float]]) -> tuple[dict[str, int], dict[str, float]]:
    """Document and collection frequencies of every term."""
    df: Counter[str] = Counter()
    cf: dict[str, float] = {}
    for counts in docs.values():
        for t, c in counts.items():
            df[t] += 1
            cf[t] = cf.get(t, 0.0) + c
    return dict(df), cf


def _top(weights: dict[str, float], k: int) -> list[tuple[str, float]]:
    """The ``k`` largest, ties by term (Anserini's FeatureVector.pruneToSize order)."""
    return sorted(weights.items(), key=lambda tw: (-tw[1], tw[0]))[:k]


def rm3_reference(query_terms: list[str], feedback: list[tuple[str, float]],
                  docs: dict[str, dict[str, float]], *, fb_docs: int, fb_terms: int,
                  orig_weight: float, max_df: float = 0.1, english_terms: bool = True
                  ) -> dict[str, float]:
    """RM3: ``feedback`` the run's ``(doc, score)`` best first."""
    df, _ = collection_stats(docs)
    n = len(docs)
    qtf = Counter(query_terms)
    q = {t: c / sum(qtf.values()) for t, c in qtf.items()}
    chosen = [(d, s) for d, s in feedback[:fb_docs] if s > 0]
    total = sum(s for _, s in chosen)
    rm: dict[str, float] = {}
    for d, s in chosen:
        vec = {t: c for t, c in docs[d].items()
               if 2 <= len(t) <= 20
               and (not english_terms or re.fullmatch("[a-z0-9]+", t))
               and df[t] / n <= max_df}
        vec = dict(_top(vec, fb_terms))
        norm = sum(vec.values())
        if norm <= 0.001:
            continue
        for t, c in vec.items():  # P(t|D) P(D|Q), documents in rank order
            rm[t] = rm.get(t, 0.0) + c / norm * (s / total)
    kept = _top(rm, fb_terms)
    z = sum(abs(w) for _, w in kept)
    rm = {t: w / z for t, w in kept} if z > 0 else {}
    out = {t: orig_weight * w for t, w in q.items()}
    for t, w in rm.items():
        out[t] = out.get(t, 0.0) + (1 - orig_weight) * w
    return {t: w for t, w in out.items() if w != 0.0}


def bo1_reference(query_terms: list[str], feedback: list[str],
                  docs: dict[str, dict[str, float]], *, fb_docs: int, fb_terms: int,
                  min_docs: int = 2, beta: float | None = None) -> dict[str, float]:
    """Bo1 (Amati; Terrier's DFRBagExpansionTerms, parameter free unless ``beta``)."""
    _, cf = collection_stats(docs)
    n = len(docs)
    qtf = Counter(query_terms)
    top_q = max(qtf.values(), default=0)
    out = {t: c / top_q for t, c in qtf.items()}
    chosen = feedback[:fb_docs]
    tf_x: dict[str, float] = {}
    n_x: Counter[str] = Counter()
    for d in chosen:
        for t, c in docs[d].items():
            tf_x[t] = tf_x.get(t, 0.0) + c
            n_x[t] += 1
    if not tf_x:
        return out

    def bo1(tf: float, f: float) -> float:
        return tf * math.log2((1 + f) / f) + math.log2(1 + f)

    w = {}
    for t in tf_x:
        if len(chosen) >= min_docs and n_x[t] < min_docs and t not in qtf:
            w[t] = 0.0
        else:
            w[t] = bo1(tf_x[t], cf[t] / n)
    best = _top(w, 1)[0][0]
    norm = bo1(tf_x[best], tf_x[best] / n) if beta is None else w[best]
    if not norm > 0:
        return out
    scaled = {t: v / norm * (beta if beta is not None else 1.0) for t, v in w.items()}
    for t, v in _top(scaled, max(fb_terms, len(qtf))):
        out[t] = out.get(t, 0.0) + v
    return {t: v for t, v in out.items() if v != 0.0}
