"""BM25 for many queries in one DuckDB statement over the fts extension's own tables (``dict``,
``terms``, ``docs``, ``stats``), with the same formula, tokenizer and stemmer as the
extension's ``match_bm25`` macro (:data:`BM25_K1`, :data:`BM25_B`); the query texts travel as
a registered table ``_aiblox_q`` (``qidx``, ``qtext``); and the extension's loading, from its
installed PyPI package."""

from __future__ import annotations

from typing import Any

from aiblox.stores.base import StoreError

__all__ = ["BM25_B", "BM25_K1", "bm25_sql", "load_extension"]

BM25_K1 = 1.2
BM25_B = 0.75


def bm25_sql(where: str, min_rank: str, k: int) -> str:
    """The statement: per query its top ``k`` documents (score descending, id ascending) among
    the items ``where`` holds for (alias ``i``), above ``min_rank`` (a SQL condition or
    empty)."""
    return f"""
                    WITH tokens AS (
                        SELECT DISTINCT qidx, t FROM (
                            SELECT qidx, stem(unnest(fts_main_items.tokenize(qtext)), 'porter') AS t
                            FROM _aiblox_q)),
                    qterms AS (
                        SELECT tokens.qidx, d.termid, d.df
                        FROM tokens JOIN fts_main_items.dict d ON d.term = tokens.t),
                    term_tf AS (
                        SELECT q.qidx, t.docid, t.termid, any_value(q.df) AS df, count(*) AS tf
                        FROM qterms q JOIN fts_main_items.terms t ON t.termid = q.termid
                        GROUP BY q.qidx, t.docid, t.termid),
                    sub AS (
                        SELECT tt.qidx, docs.name AS id, tt.termid,
                            log(((st.num_docs - tt.df) + 0.5) / (tt.df + 0.5) + 1)
                            * ((tt.tf * ({BM25_K1} + 1))
                               / (tt.tf + {BM25_K1} * ((1 - {BM25_B})
                                  + {BM25_B} * (docs.len / st.avgdl)))) AS subscore
                        FROM term_tf tt JOIN fts_main_items.docs docs ON docs.docid = tt.docid,
                             fts_main_items.stats st),
                    scores AS (
                        SELECT qidx, id, list_sum(list_sort(list(subscore))) AS score
                        FROM sub GROUP BY qidx, id)
                    SELECT s.qidx, s.id, s.score FROM scores s JOIN items i ON i.id = s.id
                    WHERE {where} {min_rank}
                    QUALIFY row_number() OVER (PARTITION BY s.qidx
                                               ORDER BY s.score DESC, s.id ASC) <= {int(k)}
                    ORDER BY s.qidx, s.score DESC, s.id ASC"""


def load_extension(con: Any, name: str) -> None:
    """Load a DuckDB extension from its installed PyPI package (never from the network)."""
    try:
        import duckdb_extensions
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise StoreError("DuckDB extensions need: pip install duckdb-extensions") from exc
    try:
        duckdb_extensions.import_extension(name, con=con)
    except ModuleNotFoundError as exc:
        raise StoreError(f"DuckDB extension {name!r} needs: pip install "
                         f"duckdb-extension-{name}==1.5.5") from exc
    con.execute(f"LOAD {name}")
