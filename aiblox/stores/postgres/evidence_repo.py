"""Evidence tracking on PostgreSQL: bundles, run links, items and packs, insert-only.

Same semantics as the DuckDB store (see :class:`aiblox.stores.base.Store`): a bundle id already
tracked keeps its first record and is refused when its content differs; a pack id keeps its first
row and is refused under another sha256. Each call is one transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session, sessionmaker

from aiblox.stores.base import (
    BUNDLE_COLUMNS,
    ITEM_COLUMNS,
    PACK_COLUMNS,
    StoreError,
    check_pack_row,
    split_bundle_rows,
)
from aiblox.stores.postgres.models import (
    EvidenceBundleRow,
    EvidenceItemRow,
    EvidencePackRow,
    RunEvidenceRow,
)

__all__ = ["EvidenceRepo"]



def _as_dict(row: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    return {c: getattr(row, c) for c in columns}


class EvidenceRepo:
    """The evidence tracking tables behind the store protocol's evidence methods."""

    def __init__(self, sessions: sessionmaker[Session], location: str) -> None:
        self.sessions = sessions
        self.location = location

    def record_bundle(self, rows: dict[str, list[dict[str, Any]]]) -> int:
        b, items, links = split_bundle_rows(rows)
        bundle_id = b["bundle_id"]
        written = 0
        with self.sessions.begin() as s:
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
            if links:
                result = s.execute(
                    pg_insert(RunEvidenceRow).values(
                        [{"run_id": r, "bundle_id": bundle_id} for r, _ in links])
                    .on_conflict_do_nothing().returning(RunEvidenceRow.run_id))
                written += len(result.all())
        return written

    def get_bundle(self, bundle_id: str) -> dict[str, list[dict[str, Any]]] | None:
        with self.sessions.begin() as s:
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

    def run_bundles(self, run_id: str) -> list[str]:
        with self.sessions.begin() as s:
            return list(s.scalars(select(RunEvidenceRow.bundle_id)
                                  .where(RunEvidenceRow.run_id == run_id)
                                  .order_by(RunEvidenceRow.bundle_id)))

    def put_pack(self, pack_id: str, parent_pack_id: str | None, sha256: str, json_text: str,
                 tenant_id: str = "default", trace_id: str | None = None,
                 created_at: str | None = None, signed: bool = False) -> bool:
        check_pack_row(pack_id, parent_pack_id, sha256, json_text)
        with self.sessions.begin() as s:
            written = s.execute(
                pg_insert(EvidencePackRow).values(
                    pack_id=pack_id, parent_pack_id=parent_pack_id, tenant_id=tenant_id,
                    trace_id=trace_id, created_at=created_at, sha256=sha256,
                    signed=bool(signed), json=json_text)
                .on_conflict_do_nothing().returning(EvidencePackRow.pack_id)).all()
            if written:
                return True
            stored = s.scalar(select(EvidencePackRow.sha256)
                              .where(EvidencePackRow.pack_id == pack_id))
        if stored != sha256:
            raise StoreError(f"{self.location}: a different evidence pack is stored under "
                             f"{pack_id}")
        return False

    def get_pack(self, pack_id: str) -> dict[str, Any] | None:
        with self.sessions.begin() as s:
            row = s.get(EvidencePackRow, pack_id)
            return None if row is None else _as_dict(row, (*PACK_COLUMNS, "json"))

    def list_packs(self) -> list[dict[str, Any]]:
        with self.sessions.begin() as s:
            return [_as_dict(r, PACK_COLUMNS) for r in s.scalars(
                select(EvidencePackRow).order_by(EvidencePackRow.pack_id))]
