"""The batched full-text query: one statement ranks every query of a batch (tsquery + ts_rank).

``fts.mode`` picks how the query text becomes a tsquery (the retriever seed's table, plus
``any``)::

    web -> websearch_to_tsquery   plain -> plainto_tsquery
    phrase -> phraseto_tsquery    strict -> to_tsquery
    any -> the query's lexemes (to_tsvector) joined with OR

The first four require every word (AND semantics), which suits keyword queries; ``any`` matches
documents holding any of the query's words and lets the rank function order them, which suits
natural-language queries (the BM25 signal of the DuckDB store is a bag of words too).

``fts.rank_func`` picks ``ts_rank_cd`` (cover density, the default) or ``ts_rank``, and
``fts.config`` the text search configuration. SQL comes from these fixed tables; the query texts,
the regconfig, filter values, ``k`` and ``min_rank`` are bound parameters, so no query text can
change the statement. The queries travel as one ``text[]`` and are ranked in a ``LATERAL``
subquery each, in one round trip.

With the store's own configuration the stored ``items.tsv`` (GIN-indexed) is searched; another
configuration computes ``to_tsvector(config, title || ' ' || text)`` on the fly (no index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import TextClause, text

from aiblox.contracts.retrieval import FtsConfig
from aiblox.stores.postgres.filters import filter_sql

__all__ = ["RANK_FUNCS", "TSQUERY_SQL", "fts_batch_query", "tsquery_check"]

_CFG = "CAST(:regconfig AS regconfig)"
# any: each lexeme quoted for tsquery input ('' for a quote, \\ for a backslash), OR-joined;
# no lexeme at all gives the empty tsquery, which matches nothing.
_ANY = (r"(SELECT CAST(coalesce(string_agg('''' || replace(replace(u.lexeme, '\', '\\'), "
        r"'''', '''''') || '''', ' | ' ORDER BY u.lexeme), '') AS tsquery) "
        f"FROM unnest(to_tsvector({_CFG}, {{q}})) AS u)")
TSQUERY_SQL = {
    "web": f"websearch_to_tsquery({_CFG}, {{q}})",
    "plain": f"plainto_tsquery({_CFG}, {{q}})",
    "phrase": f"phraseto_tsquery({_CFG}, {{q}})",
    "strict": f"to_tsquery({_CFG}, {{q}})",
    "any": _ANY,
}
"""SQL turning the query text ``{q}`` into a tsquery, per ``fts.mode``."""
RANK_FUNCS = {"ts_rank_cd": "ts_rank_cd", "ts_rank": "ts_rank"}


def clean_query(q: str) -> str:
    """PostgreSQL text cannot hold NUL; it becomes a space (a word separator either way)."""
    return q.replace("\x00", " ")


def fts_batch_query(queries: Sequence[str], k: int, cfg: FtsConfig, store_config: str,
                    filters: dict[str, Any] | None = None) -> tuple[TextClause, dict[str, Any]]:
    """The statement and parameters returning ``(qidx, id, score)`` rows, 0-based ``qidx``,
    ``score`` desc then ``id`` asc within each query, at most ``k`` per query."""
    tsquery = TSQUERY_SQL[cfg.mode].format(q="q.qtext")
    rank = RANK_FUNCS[cfg.rank_func]
    regconfig = cfg.config or store_config
    doc = ("i.tsv" if regconfig == store_config
           else f"to_tsvector({_CFG}, i.title || ' ' || i.text)")
    where, params = filter_sql(filters, "i")
    gate = "" if cfg.min_rank is None else "WHERE h.score >= :min_rank"
    sql = f"""
        SELECT q.qidx - 1 AS qidx, h.id, h.score
        FROM unnest(CAST(:queries AS text[])) WITH ORDINALITY AS q(qtext, qidx)
        CROSS JOIN LATERAL (
            SELECT i.id, CAST({rank}({doc}, tq.query) AS double precision) AS score
            FROM (SELECT {tsquery} AS query) AS tq, items i
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
    return (text(f"SELECT {TSQUERY_SQL[cfg.mode].format(q=':q')}"),
            {"regconfig": cfg.config or store_config, "q": clean_query(query)})
