"""The store contract suite runs on every backend: DuckDB files and a real PostgreSQL (the
session's server and scratch database: ``pg_admin_url`` and ``pg_url`` in ``tests/conftest.py``).
"""

from __future__ import annotations

import pytest


def empty_pg_store(url):
    """A PostgresStore on ``url`` with its tables emptied."""
    from sqlalchemy import text

    from aiblox.stores.postgres import PostgresStore

    store = PostgresStore(url)
    with store.engine.begin() as conn:
        conn.execute(text("TRUNCATE items, item_vectors, embedding_cache, chunk_cache, "
                          "evidence_packs"))
        conn.execute(text("DELETE FROM aiblox_meta WHERE key IN ('dataset', 'sync', 'syncing', "
                          "'vectors_replaced')"))
    return store


@pytest.fixture()
def pg_store(pg_url):
    """An empty PostgresStore (the session database, truncated)."""
    store = empty_pg_store(pg_url)
    yield store
    store.close()


@pytest.fixture(params=["duckdb", "postgres"])
def store(request, tmp_path):
    """An empty store of each backend."""
    if request.param == "duckdb":
        from aiblox.stores import DuckDBStore

        s = DuckDBStore(tmp_path / "s.duckdb")
    else:
        s = empty_pg_store(request.getfixturevalue("pg_url"))
    yield s
    s.close()
