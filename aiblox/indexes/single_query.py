"""One query's BM25 top ``k`` and candidate rescoring in numpy: the compiled kernels' results
(:mod:`aiblox.indexes.kernels`) without loading numba.

A process that searches once (``aiblox search``) would spend ~0.8 s importing numba and loading
its cached kernels (their typing context pulls in scipy) for milliseconds of work: with one
query, the indexes take these paths instead; batches keep the kernels.

- :func:`bm25_top_k_one`: the float32 sum of the query's term columns in query order (as
  :func:`~aiblox.indexes.kernels.bm25_top_k`: the same additions in the same order, so the same
  bits), then the documents holding a term, scoring other than 0.0 and allowed, by score desc
  then position asc (what the kernel's heap keeps, ties at the cut-off included).
- :func:`rescore_one`: each candidate's similarity summed in float64 and rounded to float32
  once, the reference :func:`~aiblox.indexes.kernels.rescore` is held to (its SIMD float64 sum
  is ordered differently, so a sum within ~1e-15 of a float32 rounding boundary could round
  the other way; tests compare the two).
"""

from __future__ import annotations

import numpy as np

__all__ = ["bm25_top_k_one", "rescore_one"]


def bm25_top_k_one(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                   terms: np.ndarray, extra: float, allowed: np.ndarray | None, n_docs: int,
                   k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and float32 scores of one query's top ``k`` (its term columns ``terms``, in
    query order, repeats kept; ``extra`` added to every score; ``allowed`` a bool mask or
    None for every document)."""
    if len(terms) == 0 or k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = np.zeros(n_docs, dtype=np.float32)
    for t in terms.tolist():
        np.add.at(scores, indices[indptr[t]:indptr[t + 1]], data[indptr[t]:indptr[t + 1]])
    docs = np.flatnonzero(scores)  # those holding a term, less any whose sum is 0.0
    if allowed is not None:
        docs = docs[allowed[docs]]
    summed = scores[docs]
    if extra != 0.0:
        summed = summed + np.float32(extra)
    order = np.lexsort((docs, -summed))[:k]
    return docs[order], summed[order].astype(np.float32)


def rescore_one(query: np.ndarray, vectors: np.ndarray, pos: np.ndarray, l2: bool
                ) -> np.ndarray:
    """The similarity of ``query`` to the rows ``pos`` of ``vectors`` (float64, rounded to
    float32 once): inner product, or with ``l2`` the negated Euclidean distance."""
    rows = np.asarray(vectors[pos], dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    if l2:
        diff = rows - q
        return (-np.sqrt(np.einsum("ij,ij->i", diff, diff))).astype(np.float32)
    return (rows @ q).astype(np.float32)
