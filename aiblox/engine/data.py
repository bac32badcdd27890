"""What flows between the stages of a pipeline: :class:`Queries` (the topics, or the queries a
feedback stage made of them) and :class:`Run` (a ranked list of documents per query).

Both are plain, immutable and ordered: queries in the split's order, each query's documents
best first (score descending, then document id ascending, the one tie rule), so the same
inputs give the same bytes. Both convert to named numpy arrays (:meth:`Run.to_arrays`), the
form the stage cache stores and hashes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Queries", "Run"]


@dataclass(frozen=True)
class Queries:
    """Queries by id, in order. After feedback a query may carry weighted ``terms`` (RM3, Bo1:
    analysed index terms and their weights, which BM25 scores directly) or a ``vector``
    (Rocchio on the query embedding, which the vector index searches directly)."""

    qids: tuple[str, ...]
    texts: tuple[str, ...]
    terms: tuple[tuple[tuple[str, float], ...], ...] | None = None
    """Per query ``((term, weight), ...)`` sorted by term; None: the texts are analysed."""
    vectors: np.ndarray | None = None
    """``(n, dim)`` float32 query vectors; None: the texts are embedded."""

    def __post_init__(self) -> None:
        if len(self.qids) != len(self.texts):
            raise ValueError(f"{len(self.qids)} query ids for {len(self.texts)} texts")
        if self.terms is not None and len(self.terms) != len(self.qids):
            raise ValueError(f"{len(self.terms)} term lists for {len(self.qids)} queries")
        if self.vectors is not None and len(self.vectors) != len(self.qids):
            raise ValueError(f"{len(self.vectors)} vectors for {len(self.qids)} queries")

    @classmethod
    def of(cls, pairs: Sequence[tuple[str, str]]) -> Queries:
        """From ``[(qid, text), ...]``."""
        return cls(tuple(q for q, _ in pairs), tuple(t for _, t in pairs))

    def __len__(self) -> int:
        return len(self.qids)

    def text_of(self) -> dict[str, str]:
        """``{qid: text}``."""
        return dict(zip(self.qids, self.texts, strict=True))

    def with_terms(self, terms: Sequence[Mapping[str, float]]) -> Queries:
        """The same queries with weighted terms (sorted by term)."""
        return Queries(self.qids, self.texts,
                       tuple(tuple(sorted((str(t), float(w)) for t, w in m.items()))
                             for m in terms), None)

    def with_vectors(self, vectors: np.ndarray) -> Queries:
        """The same queries with query vectors."""
        return Queries(self.qids, self.texts, None, np.ascontiguousarray(vectors,
                                                                         dtype=np.float32))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named arrays (the stage cache's form)."""
        out: dict[str, np.ndarray] = {"qids": np.asarray(self.qids, dtype=str),
                                      "texts": np.asarray(self.texts, dtype=str)}
        if self.terms is not None:
            out["term_counts"] = np.asarray([len(t) for t in self.terms], dtype=np.int32)
            out["terms"] = np.asarray([t for ts in self.terms for t, _ in ts], dtype=str)
            out["weights"] = np.asarray([w for ts in self.terms for _, w in ts],
                                        dtype=np.float64)
        if self.vectors is not None:
            out["vectors"] = self.vectors
        return out

    @classmethod
    def from_arrays(cls, a: Mapping[str, np.ndarray]) -> Queries:
        """From :meth:`to_arrays`."""
        qids, texts = tuple(a["qids"].tolist()), tuple(a["texts"].tolist())
        terms = None
        if "terms" in a:
            words, weights = a["terms"].tolist(), a["weights"].tolist()
            lists, start = [], 0
            for c in a["term_counts"].tolist():
                lists.append(tuple(zip(words[start:start + c], weights[start:start + c],
                                       strict=True)))
                start += c
            terms = tuple(lists)
        vectors = np.asarray(a["vectors"], dtype=np.float32) if "vectors" in a else None
        return cls(qids, texts, terms, vectors)


@dataclass(frozen=True)
class Run:
    """A ranked run: per query (in order) its documents and scores, best first."""

    qids: tuple[str, ...]
    docs: tuple[tuple[str, ...], ...]
    scores: tuple[tuple[float, ...], ...]

    @classmethod
    def from_lists(cls, qids: Sequence[str], lists: Sequence[Sequence[Sequence[Any]]]) -> Run:
        """From per-query ``[(doc_id, score), ...]`` lists, already best first."""
        return cls(tuple(qids), tuple(tuple(str(d) for d, _ in hs) for hs in lists),
                   tuple(tuple(float(s) for _, s in hs) for hs in lists))

    @classmethod
    def from_dict(cls, run: Mapping[str, Sequence[Sequence[Any]]],
                  qids: Sequence[str] | None = None) -> Run:
        """From ``{qid: [(doc_id, score), ...]}`` (``qids``: their order; default sorted)."""
        order = list(qids) if qids is not None else sorted(run)
        return cls.from_lists(order, [run.get(q, []) for q in order])

    def __len__(self) -> int:
        return len(self.qids)

    def as_dict(self) -> dict[str, list[tuple[str, float]]]:
        """``{qid: [(doc_id, score), ...]}``."""
        return {q: list(zip(d, s, strict=True))
                for q, d, s in zip(self.qids, self.docs, self.scores, strict=True)}

    def cut(self, k: int) -> Run:
        """The first ``k`` documents of each query."""
        return Run(self.qids, tuple(d[:k] for d in self.docs), tuple(s[:k] for s in self.scores))

    def depth(self) -> int:
        """The longest list's length."""
        return max((len(d) for d in self.docs), default=0)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named arrays (the stage cache's form): query ids, per-query counts, flat documents
        and scores."""
        return {"qids": np.asarray(self.qids, dtype=str),
                "counts": np.asarray([len(d) for d in self.docs], dtype=np.int32),
                "docs": np.asarray([d for ds in self.docs for d in ds], dtype=str),
                "scores": np.asarray([s for ss in self.scores for s in ss], dtype=np.float64)}

    @classmethod
    def from_arrays(cls, a: Mapping[str, np.ndarray]) -> Run:
        """From :meth:`to_arrays`."""
        docs, scores = a["docs"].tolist(), a["scores"].tolist()
        out_d, out_s, start = [], [], 0
        for c in a["counts"].tolist():
            out_d.append(tuple(docs[start:start + c]))
            out_s.append(tuple(scores[start:start + c]))
            start += c
        return cls(tuple(a["qids"].tolist()), tuple(out_d), tuple(out_s))
