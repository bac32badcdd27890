"""Audit packs on PostgreSQL (the ``evidence_packs`` table), insert-only.

Same semantics as the DuckDB store (see :class:`aiblox.stores.base.Store`): a pack id keeps its
first row and is refused under another sha256. Each call is one transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session, sessionmaker

from aiblox.stores.base import PACK_COLUMNS, StoreError, check_pack_row
from aiblox.stores.postgres.models import EvidencePackRow

__all__ = ["PackRepo"]


def _as_dict(row: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    return {c: getattr(row, c) for c in columns}


class PackRepo:
    """The ``evidence_packs`` table behind the store protocol's pack methods."""

    def __init__(self, sessions: sessionmaker[Session], location: str) -> None:
        self.sessions = sessions
        self.location = location

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

    def list_packs(self, with_json: bool = False) -> list[dict[str, Any]]:
        columns = (*PACK_COLUMNS, "json") if with_json else PACK_COLUMNS
        with self.sessions.begin() as s:
            return [_as_dict(r, columns) for r in s.scalars(
                select(EvidencePackRow).order_by(EvidencePackRow.pack_id))]
