"""Evidence bundle tracking in a DuckDB store's file: three tables beside the store's own,
created when a :class:`DuckDBBundleStore` is first opened on it, sharing its connection and lock.
"""

from __future__ import annotations

import contextlib
from typing import Any

from aiblox.bundles.store import (
    BUNDLE_COLUMNS,
    ITEM_COLUMNS,
    check_same_artifact,
    split_bundle_rows,
)
from aiblox.stores.base import StoreError, store_writes
from aiblox.stores.duckdb_store import DuckDBStore, query_rows

__all__ = ["DuckDBBundleStore"]

_TABLES = (
    """CREATE TABLE IF NOT EXISTS evidence_bundles (
        bundle_id VARCHAR PRIMARY KEY, build_version VARCHAR NOT NULL,
        policy_version VARCHAR NOT NULL, policy_sha256 VARCHAR NOT NULL,
        lake_uri VARCHAR, artifact_sha256 VARCHAR NOT NULL, byte_count BIGINT NOT NULL,
        item_count INTEGER NOT NULL, total_bytes BIGINT NOT NULL,
        approx_tokens BIGINT NOT NULL, items_dropped INTEGER NOT NULL,
        created_utc VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS run_evidence (
        run_id VARCHAR NOT NULL, bundle_id VARCHAR NOT NULL,
        PRIMARY KEY (run_id, bundle_id))""",
    """CREATE TABLE IF NOT EXISTS evidence_items (
        bundle_id VARCHAR NOT NULL, ordinal INTEGER NOT NULL,
        evidence_id VARCHAR NOT NULL, evidence_type VARCHAR NOT NULL,
        content_sha256 VARCHAR NOT NULL, byte_count BIGINT NOT NULL,
        approx_tokens BIGINT NOT NULL, truncated BOOLEAN NOT NULL,
        full_lake_uri VARCHAR, PRIMARY KEY (bundle_id, ordinal))""",
)


class DuckDBBundleStore:
    """The bundle tracking tables of a :class:`~aiblox.stores.DuckDBStore` (see
    :class:`~aiblox.bundles.store.BundleStore`). On a read-only file without the tables, every
    lookup finds nothing."""

    def __init__(self, store: DuckDBStore) -> None:
        self.store = store
        self.location = store.location
        self.con = store.con
        self.lock = store.lock
        # a read-only file cannot take the tables: lookups then find nothing (a shared one
        # takes them when it first records a bundle)
        with self.lock, contextlib.suppress(Exception):
            for ddl in _TABLES:
                self.con.execute(ddl)

    def _count(self, sql: str, params: list[Any]) -> int:
        row = self.con.execute(sql, params).fetchone()
        return int(row[0]) if row else 0

    def record_evidence_bundle(self, rows: dict[str, list[dict[str, Any]]]) -> int:
        b, items, links = split_bundle_rows(rows)
        bundle_id = b["bundle_id"]
        written = 0
        with self.lock, store_writes(self.store):
            for ddl in _TABLES:
                self.con.execute(ddl)
            self.con.execute("BEGIN TRANSACTION")
            try:
                old = self.con.execute(
                    "SELECT build_version, policy_sha256, item_count, total_bytes, lake_uri, "
                    "artifact_sha256 FROM evidence_bundles WHERE bundle_id = ?",
                    [bundle_id]).fetchone()
                if old is None:
                    self.con.execute(
                        f"INSERT INTO evidence_bundles ({', '.join(BUNDLE_COLUMNS)}) VALUES "
                        f"({', '.join('?' * len(BUNDLE_COLUMNS))})",
                        [b[k] for k in BUNDLE_COLUMNS])
                    if items:
                        self.con.executemany(
                            f"INSERT INTO evidence_items ({', '.join(ITEM_COLUMNS)}) VALUES "
                            f"({', '.join('?' * len(ITEM_COLUMNS))})",
                            [[r[k] for k in ITEM_COLUMNS] for r in items])
                    written += 1 + len(items)
                else:
                    stored = query_rows(self.con, "SELECT * FROM evidence_items "
                                        "WHERE bundle_id = ? ORDER BY ordinal", [bundle_id])
                    new = (b["build_version"], b["policy_sha256"], b["item_count"],
                           b["total_bytes"])
                    if tuple(old[:4]) != new or [dict(r) for r in stored] != items:
                        raise StoreError(f"{self.location}: evidence bundle {bundle_id} is "
                                         "already tracked with different content")
                    check_same_artifact(self.location, b, old[4], old[5])
                for run_id, _ in links:
                    present = self._count(
                        "SELECT count(*) FROM run_evidence WHERE run_id = ? AND bundle_id = ?",
                        [run_id, bundle_id])
                    if not present:
                        self.con.execute("INSERT INTO run_evidence VALUES (?, ?)",
                                         [run_id, bundle_id])
                        written += 1
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise
        return written

    def get_evidence_bundle(self, bundle_id: str) -> dict[str, list[dict[str, Any]]] | None:
        with self.lock:
            bundle = query_rows(self.con, "SELECT * FROM evidence_bundles WHERE bundle_id = ?",
                                [bundle_id])
            if not bundle:
                return None
            return {
                "evidence_bundle": bundle,
                "run_evidence": query_rows(self.con, "SELECT run_id, bundle_id FROM run_evidence "
                                           "WHERE bundle_id = ? ORDER BY run_id", [bundle_id]),
                "evidence_item": query_rows(self.con, "SELECT * FROM evidence_items "
                                            "WHERE bundle_id = ? ORDER BY ordinal", [bundle_id]),
            }

    def list_run_bundles(self, run_id: str) -> list[str]:
        with self.lock:
            return [r["bundle_id"] for r in query_rows(
                self.con, "SELECT bundle_id FROM run_evidence WHERE run_id = ? ORDER BY bundle_id",
                [run_id])]
