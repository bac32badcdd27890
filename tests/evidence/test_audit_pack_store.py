"""Audit packs through the store protocol, on a real DuckDB file: insert-only semantics, and
lookups survive a reopen."""

from __future__ import annotations

import pytest

from aiblox.evidence import (
    build_evidence_pack,
    pack_content,
    pack_from_json,
    pack_to_json,
    revise_pack,
    verify_pack,
)
from aiblox.evidence.audit_pack import Memo, MemoText, PackSource
from aiblox.hashing import sha256_hex
from aiblox.stores import DuckDBStore, Store, StoreError


def _pack(query: str = "Who trained Luke?"):
    src = PackSource.from_content(name="sample", internal_ref="doc1#c0", content="Yoda " * 10,
                                  retrieved_at="2024-01-15T10:30:00Z", confidence=0.8)
    memo = Memo(primary=MemoText(language="en", title="Luke", executive_summary="Yoda.",
                                 body="Yoda trained Luke [1]."))
    return build_evidence_pack(query=query, decision={"kind": "answer", "text": "Yoda [C0]."},
                               sources=[src], memo=memo, trace_id="t1")


def _put(store: Store, pack) -> bool:
    return store.put_evidence_pack(pack.pack_id, pack.parent_pack_id,
                                   sha256_hex(pack_content(pack)), pack_to_json(pack),
                                   tenant_id=pack.tenant_id, trace_id=pack.trace_id,
                                   created_at=pack.created_at, signed=pack.signature is not None)


def test_duckdb_store_satisfies_the_protocol(tmp_path):
    with DuckDBStore(tmp_path / "s.duckdb", dim=8) as store:
        assert isinstance(store, Store)


def test_pack_store_is_insert_only(tmp_path):
    pack = _pack()
    db = tmp_path / "s.duckdb"
    with DuckDBStore(db, dim=8) as store:
        assert _put(store, pack) is True
        assert _put(store, pack) is False  # same content: no-op
        # same content, another created_at: still the first row (insert-only)
        later = pack.model_copy(update={"created_at": "2030-01-01T00:00:00Z"})
        assert later.pack_id == pack.pack_id and _put(store, later) is False
        sha = sha256_hex(pack_content(pack))
        wrong = pack.pack_id[:-1] + ("0" if pack.pack_id[-1] != "0" else "1")
        with pytest.raises(StoreError, match="does not match its sha256"):
            store.put_evidence_pack(wrong, None, sha, pack_to_json(pack))
        with pytest.raises(StoreError, match="64 lowercase hex"):
            store.put_evidence_pack(pack.pack_id, None, "abc", pack_to_json(pack))
        child = revise_pack(pack, decision={"kind": "refusal", "text": "No."})
        assert _put(store, child) is True
    with DuckDBStore(db, dim=8) as store:
        row = store.get_evidence_pack(child.pack_id)
        assert row is not None and row["parent_pack_id"] == pack.pack_id
        assert row["sha256"] == sha256_hex(pack_content(child)) and row["signed"] is False
        stored = pack_from_json(row["json"])
        assert stored == child and verify_pack(stored) == []
        assert store.get_evidence_pack(pack.pack_id)["created_at"] is None  # the first row
        listed = store.list_evidence_packs()
        assert [r["pack_id"] for r in listed] == sorted([pack.pack_id, child.pack_id])
        assert all("json" not in r for r in listed)
        assert store.get_evidence_pack("pack_" + "f" * 16) is None


def test_other_content_under_an_existing_id_is_refused(tmp_path):
    pack, other = _pack(), _pack("Who trained Leia?")
    sha = sha256_hex(pack_content(pack))
    forged = sha[:16] + ("0" if sha[16] != "0" else "1") + sha[17:]  # same id, other content
    with DuckDBStore(tmp_path / "s.duckdb", dim=8) as store:
        _put(store, pack)
        with pytest.raises(StoreError, match="different evidence pack"):
            store.put_evidence_pack(pack.pack_id, None, forged, pack_to_json(other))
        assert pack_from_json(store.get_evidence_pack(pack.pack_id)["json"]) == pack
