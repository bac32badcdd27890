"""Items' vectors by id, as a vector index compares them: for stages that read documents' vectors
without searching (dense feedback moves a query toward its top documents; a dense rescorer
scores the documents another stage found).

The vectors are those of the store's exact vector index of one model and distance
(:meth:`~aiblox.indexes.StoreIndexes.vectors`, built from the store's item vectors when missing,
memory-mapped and held for the process): L2-normalised for ``cosine``, as stored for ``ip`` and
``l2``. A similarity is computed by the compiled loop the index's own search ends with
(:func:`aiblox.indexes.kernels.rescore`: summed in float64, rounded to float32 once), so a
document's score here is bit for bit its score in a dense run of the same index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from aiblox.contracts.retrieval import VectorConfig
from aiblox.indexes.knn import VectorIndex, prepared

__all__ = ["exact_index", "positions", "prepared_queries", "similarities"]


def exact_index(indexes: Any, model_id: str, distance: Literal["cosine", "ip", "l2"]
                ) -> VectorIndex:
    """The store's exact vector index of ``model_id`` under ``distance`` (``indexes``: a
    :class:`~aiblox.indexes.StoreIndexes`). Its rows are the items' vectors in id order, whatever
    index kind a search uses: an HNSW index holds the same rows, so a store searched through HNSW
    gets an exact index beside it (one float32 copy of the vectors, no graph)."""
    return indexes.vectors(model_id, VectorConfig(distance=distance, index="exact"))


def positions(index: VectorIndex, ids: Sequence[str]) -> np.ndarray:
    """The rows of ``ids`` in ``index.vectors`` (int64); ``ValueError`` naming the first id the
    index does not hold (an item without a vector for this model)."""
    if not len(ids):
        return np.zeros(0, dtype=np.int64)
    wanted = np.asarray(list(ids), dtype=object)
    pos = np.searchsorted(index.id_array, wanted).astype(np.int64)
    inside = pos < index.n
    found = np.zeros(len(wanted), dtype=bool)
    found[inside] = index.id_array[pos[inside]] == wanted[inside]
    if not found.all():
        missing = wanted[~found][0]
        raise ValueError(f"document {missing!r} has no vector in the index of "
                         f"{index.n} items")
    return pos


def prepared_queries(index: VectorIndex, queries: np.ndarray) -> np.ndarray:
    """``(n, dim)`` query vectors as the index's search prepares them (L2-normalised for
    ``cosine``), float32."""
    return prepared(np.atleast_2d(queries), index.config.distance)


def similarities(index: VectorIndex, queries: np.ndarray, rows: Sequence[np.ndarray]
                 ) -> list[np.ndarray]:
    """Per query (already :func:`prepared_queries`), the similarity of each of its documents
    (``rows[i]``: their :func:`positions`), in that order: inner product, or the negated
    Euclidean distance for ``l2``; float32, equal to the index's search scores."""
    from aiblox.indexes.kernels import rescore

    nq = len(rows)
    if nq == 0:
        return []
    if queries.shape[1] != index.vectors.shape[1]:
        raise ValueError(f"query vectors have {queries.shape[1]} dimensions, the index "
                         f"{index.vectors.shape[1]}")
    width = max((len(r) for r in rows), default=0)
    pos = np.zeros((nq, max(width, 1)), dtype=np.int64)
    counts = np.zeros(nq, dtype=np.int64)
    for i, r in enumerate(rows):
        pos[i, :len(r)] = r
        counts[i] = len(r)
    scores = rescore(np.ascontiguousarray(queries, dtype=np.float32), index.vectors, pos,
                     counts, index.config.distance == "l2")
    return [scores[i, :counts[i]].copy() for i in range(nq)]
