"""A throwaway PostgreSQL 16 + pgvector server (the ``pgserver`` wheel) and scratch databases.

For tests and benchmarks on a machine without a PostgreSQL install: ``pgserver`` ships the server
binaries and pgvector in a wheel, runs as an unprivileged system user when started as root, and
listens on a unix socket only. ``ThrowawayPostgres`` deletes its data directory on exit.
"""

from __future__ import annotations

import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

from aiblox.stores.base import StoreError
from aiblox.stores.postgres.store import normalize_url

__all__ = ["ThrowawayPostgres", "scratch_database"]


class ThrowawayPostgres:
    """``with ThrowawayPostgres() as url:`` a running server's admin URL (database
    ``postgres``), stopped and deleted on exit."""

    def __init__(self) -> None:
        self.server: Any = None
        self.url: URL | None = None

    def start(self) -> URL:
        try:
            with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR in containers
                warnings.simplefilter("ignore")
                import pgserver
        except ImportError as e:
            raise StoreError("a throwaway PostgreSQL needs: pip install 'aiblox[postgres]' "
                             "(pgserver)") from e
        pgdata = tempfile.mkdtemp(prefix="aiblox_pg_")
        self.server = pgserver.get_server(pgdata, cleanup_mode="delete")
        self.url = normalize_url(self.server.get_uri())
        return self.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None

    def __enter__(self) -> URL:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextmanager
def scratch_database(admin_url: str | URL, prefix: str = "aiblox_test") -> Iterator[URL]:
    """A new, empty database on the server of ``admin_url``, dropped on exit (with force)."""
    admin = normalize_url(admin_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield admin.set(database=name)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()
