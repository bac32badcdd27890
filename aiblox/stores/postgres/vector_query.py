"""The batched vector query through pgvector's distance operators, exact or HNSW.

``distance`` maps to an operator and a "higher is better" score, as in the DuckDB store::

    cosine -> 1 - (v <=> q)   (cosine similarity)
    l2     -> -(v <-> q)      (negated Euclidean distance)
    ip     -> -(v <#> q)      (inner product; pgvector's <#> is its negation)

Query vectors travel as one bound ``text[]`` of pgvector literals, parsed once (a
``MATERIALIZED`` CTE: inlined, the cast would run again for every row scanned); each is ranked in a
``LATERAL`` subquery ``ORDER BY v.vector <op> q LIMIT k``, in one round trip. Exact search ties
on ``item_id`` and runs with index scans disabled; HNSW search orders by distance alone, with
sequential scans disabled so the planner takes the HNSW index whose operator class matches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import TextClause, text

from aiblox.stores.postgres.filters import filter_sql

__all__ = ["DISTANCE_OPS", "planner_settings", "vector_batch_query", "vector_literal"]

DISTANCE_OPS = {"cosine": ("<=>", "1 - {d}"), "l2": ("<->", "-{d}"), "ip": ("<#>", "-{d}")}
"""``distance`` -> (pgvector operator, score expression of the distance ``{d}``)."""
DEFAULT_EF_SEARCH = 40


def vector_literal(vec: np.ndarray) -> str:
    """A pgvector text literal that parses back to exactly these float32 values."""
    return "[" + ",".join(repr(x) for x in np.asarray(vec, dtype=np.float32).tolist()) + "]"


def vector_batch_query(vectors: np.ndarray, model_id: str, k: int, distance: str, dim: int,
                       index: str = "exact", filters: dict[str, Any] | None = None
                       ) -> tuple[TextClause, dict[str, Any]]:
    """The statement and parameters returning ``(qidx, id, score)`` rows, 0-based ``qidx``."""
    op, score = DISTANCE_OPS[distance]
    dist = f"(v.vector {op} q.qv)"
    order = dist if index == "hnsw" else f"{dist}, v.item_id"
    where, params = filter_sql(filters, "i")
    sql = f"""
        WITH q AS MATERIALIZED (
            SELECT CAST(u.vtext AS vector({int(dim)})) AS qv, u.qidx
            FROM unnest(CAST(:vectors AS text[])) WITH ORDINALITY AS u(vtext, qidx))
        SELECT q.qidx - 1 AS qidx, h.id, h.score
        FROM q CROSS JOIN LATERAL (
            SELECT v.item_id AS id, {score.format(d=dist)} AS score
            FROM item_vectors v JOIN items i ON i.id = v.item_id
            WHERE v.model_id = :model_id AND {where}
            ORDER BY {order}
            LIMIT :k) AS h
        ORDER BY q.qidx, h.score DESC, h.id ASC"""
    params.update(vectors=[vector_literal(v) for v in vectors], model_id=model_id, k=int(k))
    return text(sql), params


def planner_settings(index: str, ef_search: int | None, k: int) -> list[tuple[str, str]]:
    """Transaction-local settings (``set_config(name, value, true)``) for one search."""
    if index == "hnsw":
        ef = ef_search if ef_search is not None else min(1000, max(DEFAULT_EF_SEARCH, k))
        return [("enable_seqscan", "off"), ("enable_bitmapscan", "off"), ("enable_sort", "off"),
                ("hnsw.ef_search", str(int(ef)))]
    return [("enable_indexscan", "off"), ("enable_bitmapscan", "off")]
