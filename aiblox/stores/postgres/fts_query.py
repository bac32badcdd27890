"""The batched full-text query: one statement ranks every query of a batch (tsquery + ts_rank).

``fts.mode`` picks the tsquery parser (the retriever seed's table)::

    web -> websearch_to_tsquery   plain -> plainto_tsquery
    phrase -> phraseto_tsquery    strict -> to_tsquery

``fts.rank_func`` picks ``ts_rank_cd`` (cover density, the default) or ``ts_rank``, and
``fts.config`` the text search configuration. Function names come from these fixed tables; the
query texts, the regconfig, filter values, ``k`` and ``min_rank`` are bound parameters, so no query
text can change the statement. The queries travel as one ``text[]`` and are ranked in a
``LATERAL`` subquery each, in one round trip.

With the store's own configuration the stored ``items.tsv`` (GIN-indexed) is searched; another
configuration computes ``to_tsvector(config, title || ' ' || text)`` on the fly (no index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import TextClause, text

from aiblox.contracts.retrieval import FtsConfig
from aiblox.stores.postgres.filters import filter_sql

__all__ = ["RANK_FUNCS", "TSQUERY_FUNCS", "fts_batch_query", "tsquery_check"]

TSQUERY_FUNCS = {"web": "websearch_to_tsquery", "plain": "plainto_tsquery",
                 "phrase": "phraseto_tsquery", "strict": "to_tsquery"}
RANK_FUNCS = {"ts_rank_cd": "ts_rank_cd", "ts_rank": "ts_rank"}


def clean_query(q: str) -> str:
    """PostgreSQL text cannot hold NUL; it becomes a space (a word separator either way)."""
    return q.replace("\x00", " ")


def fts_batch_query(queries: Sequence[str], k: int, cfg: FtsConfig, store_config: str,
                    filters: dict[str, Any] | None = None) -> tuple[TextClause, dict[str, Any]]:
    """The statement and parameters returning ``(qidx, id, score)`` rows, 0-based ``qidx``,
    ``score`` desc then ``id`` asc within each query, at most ``k`` per query."""
    func = TSQUERY_FUNCS[cfg.mode]
    rank = RANK_FUNCS[cfg.rank_func]
    regconfig = cfg.config or store_config
    doc = ("i.tsv" if regconfig == store_config
           else "to_tsvector(CAST(:regconfig AS regconfig), i.title || ' ' || i.text)")
    where, params = filter_sql(filters, "i")
    gate = "" if cfg.min_rank is None else "WHERE h.score >= :min_rank"
    sql = f"""
        SELECT q.qidx - 1 AS qidx, h.id, h.score
        FROM unnest(CAST(:queries AS text[])) WITH ORDINALITY AS q(qtext, qidx)
        CROSS JOIN LATERAL (
            SELECT i.id, CAST({rank}({doc}, tq.query) AS double precision) AS score
            FROM {func}(CAST(:regconfig AS regconfig), q.qtext) AS tq(query), items i
            WHERE {doc} @@ tq.query AND {where}
            ORDER BY score DESC, i.id ASC
            LIMIT :k) AS h
        {gate}
        ORDER BY q.qidx, h.score DESC, h.id ASC"""
    params.update(queries=[clean_query(q) for q in queries], regconfig=regconfig, k=int(k))
    if cfg.min_rank is not None:
        params["min_rank"] = float(cfg.min_rank)
    return text(sql), params


def tsquery_check(query: str, cfg: FtsConfig, store_config: str) -> tuple[TextClause,
                                                                           dict[str, Any]]:
    """The statement parsing one query alone (to name the query a batch failed on)."""
    func = TSQUERY_FUNCS[cfg.mode]
    return (text(f"SELECT {func}(CAST(:regconfig AS regconfig), :q)"),
            {"regconfig": cfg.config or store_config, "q": clean_query(query)})
