"""Reading vectors out of a DuckDB store without moving more of them than asked for.

A 1M-document store holds 1.5 GB of item vectors and as much again in its embedding cache.

- :func:`vector_batches`: the item vectors of a model in id order, batch by batch, streamed
  from one sorted query (reading by row-id ranges instead was measured slower: 10.2 s against
  5.5 s at 1M).
- :func:`cached_embeddings`: the embedding cache's vectors of some text hashes: the row ids of
  those cached, then those rows (nothing read when none is cached, as in a fresh ingest
  batch; tens of rows for a search), or one read by key when the rows are spread over the
  table (a scan either way).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["cache_rows", "cached_embeddings", "cached_hash_set", "copy_cached_vectors",
           "embeddings_by_key", "vector_batches"]


def _matrix(column: Any, rows: int, dim: int) -> np.ndarray:
    """A fixed-size-list column (an arrow array, or chunked) as a ``rows x dim`` matrix."""
    if hasattr(column, "combine_chunks"):
        column = column.combine_chunks()
    flat = column.values.to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(rows, dim)


def vector_batches(cur: Any, dim: int, model_id: str, batch_size: int
                   ) -> Iterator[tuple[list[str], np.ndarray]]:
    """Batches of item ids ascending and their ``model_id`` vectors (items that exist only),
    streamed from the cursor ``cur`` (one query sorted by id: 5.5 s at 1M, warm)."""
    reader = cur.execute(
        "SELECT v.item_id, v.vector FROM item_vectors v JOIN items i ON i.id = v.item_id "
        "WHERE v.model_id = ? ORDER BY v.item_id", [model_id]).to_arrow_reader(batch_size)
    for batch in reader:
        if batch.num_rows:
            yield batch.column(0).to_pylist(), _matrix(batch.column(1), batch.num_rows, dim)


def _embeddings(con: Any, where: str, params: list[Any]) -> tuple[set[str], dict[str, Any]]:
    """The model ids and ``{text_sha256: float32 vector}`` of the cache rows ``where``."""
    table = con.execute("SELECT model_id, text_sha256, vector FROM embedding_cache "
                        f"WHERE {where}", params).to_arrow_table()
    vectors = table.column("vector").combine_chunks()
    flat = np.asarray(vectors.values.to_numpy(zero_copy_only=False), dtype=np.float32)
    offsets = vectors.offsets.to_numpy()
    hashes = table.column("text_sha256").to_pylist()
    return set(table.column("model_id").to_pylist()), {
        h: flat[offsets[i]:offsets[i + 1]] for i, h in enumerate(hashes)}


def embeddings_by_key(con: Any, model_id: str, wanted: list[str]) -> dict[str, np.ndarray]:
    """The cached vectors of ``wanted`` (hashes, sorted and unique) read by key: a scan of
    every cached vector."""
    return _embeddings(con, "model_id = ? AND text_sha256 IN (SELECT unnest(?::VARCHAR[]))",
                       [model_id, wanted])[1]


def cached_embeddings(con: Any, model_id: str, text_hashes: Sequence[str]
                      ) -> dict[str, np.ndarray]:
    """``{hash: vector}`` of the ``text_hashes`` the embedding cache holds for ``model_id``."""
    wanted = sorted(set(text_hashes))
    if not wanted:
        return {}
    if len(wanted) == 1:  # fetched as a row: no arrow set-up (~45 ms) for one vector
        row = con.execute("SELECT vector FROM embedding_cache WHERE model_id = ? "
                          "AND text_sha256 = ?", [model_id, *wanted]).fetchone()
        return {} if row is None else {wanted[0]: np.asarray(row[0], dtype=np.float32)}
    rowids = [r[0] for r in con.execute(
        "SELECT rowid FROM embedding_cache WHERE model_id = ? AND text_sha256 IN "
        "(SELECT unnest(?::VARCHAR[]))", [model_id, wanted]).fetchall()]
    if not rowids:
        return {}
    if len({r >> 11 for r in rowids}) > 64:  # rows in many 2,048-row vectors: a scan
        return embeddings_by_key(con, model_id, wanted)  # either way, the read by key is faster
    models, found = _embeddings(con, "rowid IN (SELECT unnest(?::BIGINT[]))", [sorted(rowids)])
    if len(found) != len(rowids) or models - {model_id} or found.keys() - set(wanted):
        return embeddings_by_key(con, model_id, wanted)  # rows moved between the reads
    return found


def cache_rows(model_id: str, hashes: list[str], vectors: list[np.ndarray]) -> Any:
    """Embedding cache rows as an arrow table (``model_id``, ``text_sha256``, ``vector``)."""
    import pyarrow as pa

    offsets = np.zeros(len(vectors) + 1, dtype=np.int32)
    np.cumsum([len(v) for v in vectors], out=offsets[1:])
    values = np.concatenate([np.asarray(v, dtype=np.float32).ravel() for v in vectors])
    return pa.table({"model_id": pa.array([model_id] * len(hashes), type=pa.string()),
                     "text_sha256": hashes,
                     "vector": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))})


def cached_hash_set(con: Any, model_id: str, text_hashes: Sequence[str]) -> set[str]:
    """The hashes among ``text_hashes`` the embedding cache holds for ``model_id`` (the hash
    column alone is read)."""
    wanted = sorted(set(text_hashes))
    if not wanted:
        return set()
    return {r[0] for r in con.execute(
        "SELECT text_sha256 FROM embedding_cache WHERE model_id = ? AND text_sha256 IN "
        "(SELECT unnest(?::VARCHAR[]))", [model_id, wanted]).fetchall()}


_SOUND = "isfinite(try(array_inner_product(v, v)))"
"""A sound cached vector ``v`` (cast to ``FLOAT[dim]`` by ``TRY_CAST``: NULL when of another
length): its squared norm a finite FLOAT, as :func:`~aiblox.embedding.cache.finite_rows` checks
one read out (a NaN, an infinity or a value past about 1.8e19 makes it not; a NULL among its values
makes the product an error, which ``try`` turns to NULL for that row alone, not sound). Measured
copying 300,000 cached vectors of 384 on one thread: 2.02 s of CPU unchecked, 2.09 s checked
(a check by ``list_sum`` and ``list_count`` took 2.97 s; ``list_inner_product`` on the list
fails, under ``try`` too, for every row of a chunk whose neighbours hold a NULL)."""


def copy_cached_vectors(con: Any, dim: int, model_id: str, pairs: str, location: str) -> int:
    """Write the item vectors of the registered table ``pairs`` (``item_id``, unique, and
    ``text_sha256``) from the embedding cache's vectors of ``model_id``, replacing those the
    items had; returns rows written, one per row of ``pairs``. A text the cache lacks is a
    :class:`~aiblox.stores.base.StoreError`, a cached vector that is not ``dim`` finite values
    a :class:`~aiblox.stores.base.DamagedCachedVectors` naming every such text (``location``:
    the store, in their messages); the caller rolls back what was written. One join: the cache
    is scanned once per call, so callers copy many rows at a time."""
    from aiblox.stores.base import DamagedCachedVectors, StoreError

    held = con.execute(f"SELECT count(*) FROM item_vectors WHERE model_id = ? AND item_id IN "
                       f"(SELECT item_id FROM {pairs})", [model_id]).fetchone()[0]
    verb = "INSERT OR REPLACE" if held else "INSERT"  # a plain insert: 1.5x faster
    cached = (f"SELECT p.item_id, p.text_sha256, TRY_CAST(c.vector AS FLOAT[{dim}]) AS v "
              f"FROM {pairs} p JOIN embedding_cache c ON c.model_id = ? "
              f"AND c.text_sha256 = p.text_sha256")
    row = con.execute(f"{verb} INTO item_vectors SELECT item_id, ?, text_sha256, v "
                      f"FROM ({cached}) WHERE {_SOUND}", [model_id, model_id]).fetchone()
    written = int(row[0]) if row else 0
    rows = con.execute(f"SELECT count(*) FROM {pairs}").fetchone()[0]
    if written == rows:
        return written
    damaged = {r[0] for r in con.execute(
        f"SELECT DISTINCT text_sha256 FROM ({cached}) WHERE NOT coalesce({_SOUND}, false)",
        [model_id]).fetchall()}
    if damaged:
        raise DamagedCachedVectors(
            f"{location}: {len(damaged)} cached {model_id} vectors are damaged (not {dim} "
            f"finite values)", damaged)
    raise StoreError(f"{location}: the embedding cache lacks {rows - written} of {rows} "
                     f"texts' {model_id} vectors")
