"""Evidence bundle tracking on PostgreSQL: three tables beside a
:class:`~aiblox.stores.postgres.PostgresStore`'s own, on its engine, declared on their own
metadata and created when a :class:`PostgresBundleStore` is first opened on the database.

Needs the ``postgres`` extra. Same semantics as the DuckDB tables (see
:class:`~aiblox.bundles.store.BundleStore`): a bundle id already tracked keeps its first record
and is refused when its content, or its lake artifact's sha256, differs; each call is one
transaction.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import BigInteger, Boolean, Integer, Table, Text, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from aiblox.bundles.store import (
    BUNDLE_COLUMNS,
    ITEM_COLUMNS,
    check_same_artifact,
    split_bundle_rows,
)
from aiblox.stores.base import StoreError
from aiblox.stores.postgres.store import PostgresStore

__all__ = [
    "BundleBase",
    "EvidenceBundleRow",
    "EvidenceItemRow",
    "PostgresBundleStore",
    "RunEvidenceRow",
]

_LOCK_KEY = 0x_A1B1_0B0D
"""Advisory lock id held while the tables are created (concurrent first openers wait)."""


class BundleBase(DeclarativeBase):
    """Declarative base of the evidence bundle tracking tables (apart from the store's own)."""

    __table__: ClassVar[Table]


class EvidenceBundleRow(BundleBase):
    """A tracked evidence bundle (the evidence bundles seed), insert-only."""

    __tablename__ = "evidence_bundles"

    bundle_id: Mapped[str] = mapped_column(Text, primary_key=True)
    build_version: Mapped[str] = mapped_column(Text)
    policy_version: Mapped[str] = mapped_column(Text)
    policy_sha256: Mapped[str] = mapped_column(Text)
    lake_uri: Mapped[str | None] = mapped_column(Text, nullable=True)
    artifact_sha256: Mapped[str] = mapped_column(Text)
    byte_count: Mapped[int] = mapped_column(BigInteger)
    item_count: Mapped[int] = mapped_column(Integer)
    total_bytes: Mapped[int] = mapped_column(BigInteger)
    approx_tokens: Mapped[int] = mapped_column(BigInteger)
    items_dropped: Mapped[int] = mapped_column(Integer)
    created_utc: Mapped[str | None] = mapped_column(Text, nullable=True)


class RunEvidenceRow(BundleBase):
    """A link from a run to a bundle it used."""

    __tablename__ = "run_evidence"

    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    bundle_id: Mapped[str] = mapped_column(Text, primary_key=True)


class EvidenceItemRow(BundleBase):
    """One item of a tracked bundle, by ordinal."""

    __tablename__ = "evidence_items"

    bundle_id: Mapped[str] = mapped_column(Text, primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, primary_key=True)
    evidence_id: Mapped[str] = mapped_column(Text)
    evidence_type: Mapped[str] = mapped_column(Text)
    content_sha256: Mapped[str] = mapped_column(Text)
    byte_count: Mapped[int] = mapped_column(BigInteger)
    approx_tokens: Mapped[int] = mapped_column(BigInteger)
    truncated: Mapped[bool] = mapped_column(Boolean)
    full_lake_uri: Mapped[str | None] = mapped_column(Text, nullable=True)


def _as_dict(row: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    return {c: getattr(row, c) for c in columns}


class PostgresBundleStore:
    """The bundle tracking tables of a PostgreSQL store's database (see
    :class:`~aiblox.bundles.store.BundleStore`); driver errors become
    :class:`~aiblox.stores.StoreError` s naming the masked URL."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.location = store.location
        self.sessions = store.sessions
        with store.db_errors("create the evidence bundle tables"), \
                store.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            BundleBase.metadata.create_all(conn, checkfirst=True)

    def record_evidence_bundle(self, rows: dict[str, list[dict[str, Any]]]) -> int:
        b, items, links = split_bundle_rows(rows)
        bundle_id = b["bundle_id"]
        written = 0
        with self.store.db_errors("track an evidence bundle"), self.sessions.begin() as s:
            old = s.get(EvidenceBundleRow, bundle_id, with_for_update=True)
            if old is None:
                s.add(EvidenceBundleRow(**b))
                s.add_all(EvidenceItemRow(**r) for r in items)
                s.flush()
                written += 1 + len(items)
            else:
                stored = [_as_dict(r, ITEM_COLUMNS) for r in s.scalars(
                    select(EvidenceItemRow).where(EvidenceItemRow.bundle_id == bundle_id)
                    .order_by(EvidenceItemRow.ordinal))]
                same = ((old.build_version, old.policy_sha256, old.item_count, old.total_bytes)
                        == (b["build_version"], b["policy_sha256"], b["item_count"],
                            b["total_bytes"]))
                if not same or stored != items:
                    raise StoreError(f"{self.location}: evidence bundle {bundle_id} is "
                                     "already tracked with different content")
                check_same_artifact(self.location, b, old.lake_uri, old.artifact_sha256)
            if links:
                result = s.execute(
                    pg_insert(RunEvidenceRow).values(
                        [{"run_id": r, "bundle_id": bundle_id} for r, _ in links])
                    .on_conflict_do_nothing().returning(RunEvidenceRow.run_id))
                written += len(result.all())
        return written

    def get_evidence_bundle(self, bundle_id: str) -> dict[str, list[dict[str, Any]]] | None:
        with self.store.db_errors("read an evidence bundle"), self.sessions.begin() as s:
            bundle = s.get(EvidenceBundleRow, bundle_id)
            if bundle is None:
                return None
            links = s.scalars(select(RunEvidenceRow).where(RunEvidenceRow.bundle_id == bundle_id)
                              .order_by(RunEvidenceRow.run_id))
            items = s.scalars(select(EvidenceItemRow)
                              .where(EvidenceItemRow.bundle_id == bundle_id)
                              .order_by(EvidenceItemRow.ordinal))
            return {"evidence_bundle": [_as_dict(bundle, BUNDLE_COLUMNS)],
                    "run_evidence": [_as_dict(r, ("run_id", "bundle_id")) for r in links],
                    "evidence_item": [_as_dict(r, ITEM_COLUMNS) for r in items]}

    def list_run_bundles(self, run_id: str) -> list[str]:
        with self.store.db_errors("list a run's evidence bundles"), \
                self.sessions.begin() as s:
            return list(s.scalars(select(RunEvidenceRow.bundle_id)
                                  .where(RunEvidenceRow.run_id == run_id)
                                  .order_by(RunEvidenceRow.bundle_id)))
