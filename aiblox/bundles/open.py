"""Open the evidence bundle tracking tables beside a store: the one place that picks the
implementation by backend (so the protocol module imports none of them)."""

from __future__ import annotations

from aiblox.bundles.store import BundleStore
from aiblox.stores.base import Store, StoreError

__all__ = ["open_bundle_store"]


def open_bundle_store(store: Store) -> BundleStore:
    """The bundle tracking tables beside ``store`` (a DuckDB or PostgreSQL store), created if
    missing; they share the store's connection and live as long as it does."""
    from aiblox.stores.duckdb_store import DuckDBStore

    if isinstance(store, DuckDBStore):
        from aiblox.bundles.duckdb_store import DuckDBBundleStore

        return DuckDBBundleStore(store)
    if store.kind == "postgres":  # the postgres extra is imported only for a PostgreSQL store
        from aiblox.bundles.postgres_store import PostgresBundleStore
        from aiblox.stores.postgres import PostgresStore

        if isinstance(store, PostgresStore):
            return PostgresBundleStore(store)
    raise StoreError(f"{store.location}: no evidence bundle tracking for a {store.kind!r} store "
                     "(use a DuckDB or PostgreSQL store)")
