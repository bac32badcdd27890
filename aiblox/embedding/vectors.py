"""Import precomputed vectors from parquet into an embedding cache.

The file holds one row per text with columns ``_id`` (string), ``text_sha256`` (hex sha256 of
the exact UTF-8 text embedded) and ``vector`` (a list of floats); ``../shared/embeddings`` holds
such files for the shared datasets. Every row is checked before anything is written: a wrong
dimension, a malformed hash, a missing or non-finite value is an error naming the file, the row
and the field, and the cache is left unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from aiblox.embedding.cache import EmbeddingCache

__all__ = ["VectorImportError", "import_vectors", "read_vectors"]

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
REQUIRED_COLUMNS = ("_id", "text_sha256", "vector")


class VectorImportError(ValueError):
    """A vectors file that cannot be imported; names file, row and field."""

    def __init__(self, path: str | Path, row: int | None, field: str, message: str) -> None:
        where = f"{path}" + (f", row {row}" if row is not None else "")
        super().__init__(f"{where}, field {field!r}: {message}")
        self.path, self.row, self.field = str(path), row, field


def read_vectors(path: str | Path, dim: int) -> tuple[list[str], list[str], np.ndarray]:
    """Read and validate a vectors parquet file: ``(ids, text_hashes, matrix)``."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise VectorImportError(path, None, "file", "no such file")
    table = pq.read_table(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise VectorImportError(path, None, missing[0],
                                f"missing column (has {table.column_names})")
    ids = table.column("_id").to_pylist()
    hashes = table.column("text_sha256").to_pylist()
    vectors = table.column("vector").to_pylist()
    matrix = np.zeros((len(ids), dim), dtype=np.float32)
    for i, (doc_id, h, vec) in enumerate(zip(ids, hashes, vectors, strict=True)):
        if not isinstance(doc_id, str) or not doc_id:
            raise VectorImportError(path, i, "_id", "missing or not a string")
        if not isinstance(h, str) or not _HEX64.match(h):
            raise VectorImportError(path, i, "text_sha256", f"not a hex sha256: {h!r}")
        if vec is None or len(vec) != dim:
            got = None if vec is None else len(vec)
            raise VectorImportError(path, i, "vector", f"dimension {got}, expected {dim}")
        row = np.asarray(vec, dtype=np.float32)
        if not np.all(np.isfinite(row)):
            raise VectorImportError(path, i, "vector", "contains NaN or infinity")
        matrix[i] = row
    return ids, hashes, matrix


def import_vectors(path: str | Path, cache: EmbeddingCache, model_id: str, dim: int) -> int:
    """Validate ``path`` whole, then store its vectors under ``model_id``; returns rows new."""
    _ids, hashes, matrix = read_vectors(path, dim)
    return cache.put_embeddings(model_id, zip(hashes, matrix, strict=True))
