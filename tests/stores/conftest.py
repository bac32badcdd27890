"""The store contract suite runs on every backend: DuckDB files and a real PostgreSQL.

PostgreSQL: the server at ``AIBLOX_PG_URL`` when set (an admin URL: the tests create and drop
their own databases), else a throwaway PostgreSQL 16 + pgvector from the ``pgserver`` wheel,
started once per session and deleted afterwards. Never skipped.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def pg_admin_url():
    """Admin URL of a PostgreSQL server with pgvector."""
    from aiblox.stores.postgres import ThrowawayPostgres, normalize_url

    env = os.environ.get("AIBLOX_PG_URL")
    if env:
        yield normalize_url(env)
        return
    with ThrowawayPostgres() as url:
        yield url


@pytest.fixture(scope="session")
def pg_url(pg_admin_url):
    """A scratch database for this session, dropped at the end."""
    from aiblox.stores.postgres import scratch_database

    with scratch_database(pg_admin_url) as url:
        yield url


def empty_pg_store(url):
    """A PostgresStore on ``url`` with every table emptied."""
    from sqlalchemy import text

    from aiblox.stores.postgres import PostgresStore

    store = PostgresStore(url)
    with store.engine.begin() as conn:
        conn.execute(text("TRUNCATE items, item_vectors, embedding_cache, chunk_cache, "
                          "evidence_bundles, run_evidence, evidence_items, evidence_packs"))
        conn.execute(text("DELETE FROM aiblox_meta WHERE key IN ('dataset', 'sync', 'syncing')"))
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
