"""A bundle store over each backend: a DuckDB file and the session's PostgreSQL database."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["duckdb", "postgres"])
def bundle_store(request, tmp_path):
    """An empty :class:`~aiblox.bundles.BundleStore` beside an empty store of each backend."""
    from aiblox.bundles import open_bundle_store

    if request.param == "duckdb":
        from aiblox.stores import DuckDBStore

        store = DuckDBStore(tmp_path / "s.duckdb", dim=8)
    else:
        from sqlalchemy import text

        from aiblox.stores.postgres import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_url"))
    tracked = open_bundle_store(store)
    if request.param == "postgres":
        with store.engine.begin() as conn:
            conn.execute(text("TRUNCATE evidence_bundles, run_evidence, evidence_items"))
    yield tracked
    store.close()
