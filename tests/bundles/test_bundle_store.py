"""Evidence bundle tracking beside a store: bundles, run links and items, insert-only, on
DuckDB and PostgreSQL; the tables are the bundles' own (the core store neither creates them nor
carries a bundle method); lookups survive a reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiblox.bundles import (
    BundleStore,
    DuckDBBundleStore,
    EvidencePolicy,
    build_evidence_bundle,
    open_bundle_store,
    read_evidence_bundle,
    tracking_rows,
    write_evidence_bundle,
)
from aiblox.hashing import sha256_bytes
from aiblox.stores import DuckDBStore, Store, StoreError

BUNDLE_METHODS = ("record_evidence_bundle", "get_evidence_bundle", "list_run_bundles")
BUNDLE_TABLES = {"evidence_bundles", "run_evidence", "evidence_items"}


def _bundle(tmp_path: Path, text: str = "Luke trained on Dagobah. "):
    lake = tmp_path / "lake"
    policy = EvidencePolicy(max_item_bytes=200, enable_redaction=False)
    bundle = build_evidence_bundle(
        evidence_refs={
            "inline_text": [{"text": text * 20}, {"text": "short note"}],
            "sql_results": [{"query_key": "facts", "columns": ["k", "v"],
                             "rows": [[f"k{i}", i] for i in range(40)]}],
        },
        policy=policy,
        lake_root=lake,
        created_utc="2024-01-15T10:30:00Z",
    )
    return bundle, write_evidence_bundle(bundle, lake_root=lake)


def _tables(store: DuckDBStore) -> set[str]:
    return {r[0] for r in store.con.execute(
        "SELECT table_name FROM information_schema.tables").fetchall()}


def test_the_core_store_carries_no_bundle_method_and_makes_no_bundle_table(tmp_path):
    assert not [m for m in BUNDLE_METHODS if hasattr(Store, m)]
    db = tmp_path / "s.duckdb"
    with DuckDBStore(db, dim=8) as store:
        assert not [m for m in BUNDLE_METHODS if hasattr(store, m)]
        assert not BUNDLE_TABLES & _tables(store)  # created only when bundles are used
        tracked = open_bundle_store(store)
        assert isinstance(tracked, DuckDBBundleStore) and isinstance(tracked, BundleStore)
        assert _tables(store) >= BUNDLE_TABLES


def test_bundle_tracking_contract(bundle_store, tmp_path):
    bundle, artifact = _bundle(tmp_path)
    rows = tracking_rows(bundle, artifact, run_id="run-a")
    n_items = len(rows["evidence_item"])
    assert n_items == 3 and any(r["truncated"] for r in rows["evidence_item"])
    assert bundle_store.record_evidence_bundle(rows) == 1 + n_items + 1
    assert bundle_store.record_evidence_bundle(rows) == 0  # same bundle again: nothing new
    # the same bundle used by a second run only adds the link
    assert bundle_store.record_evidence_bundle(tracking_rows(bundle, artifact, "run-b")) == 1
    got = bundle_store.get_evidence_bundle(bundle.bundle_id)
    assert got is not None
    assert got["evidence_bundle"] == rows["evidence_bundle"]
    assert got["evidence_item"] == rows["evidence_item"]
    assert got["run_evidence"] == [{"run_id": r, "bundle_id": bundle.bundle_id}
                                   for r in ("run-a", "run-b")]
    assert bundle_store.list_run_bundles("run-a") == [bundle.bundle_id]
    assert bundle_store.get_evidence_bundle("missing") is None
    assert bundle_store.list_run_bundles("x") == []
    bad = {**rows, "evidence_item": [dict(r) for r in rows["evidence_item"]],
           "run_evidence": [{"run_id": "run-x", "bundle_id": bundle.bundle_id}]}
    bad["evidence_item"][0]["content_sha256"] = "0" * 64
    with pytest.raises(StoreError, match="different content"):
        bundle_store.record_evidence_bundle(bad)
    assert bundle_store.list_run_bundles("run-x") == []  # the failed call wrote nothing
    other = {**rows, "evidence_bundle": [{**rows["evidence_bundle"][0], "total_bytes": 1}]}
    with pytest.raises(StoreError, match="different content"):
        bundle_store.record_evidence_bundle(other)
    with pytest.raises(StoreError, match="one 'evidence_bundle' row"):
        bundle_store.record_evidence_bundle({"evidence_item": rows["evidence_item"]})
    stray = {**rows, "run_evidence": [{"run_id": "r", "bundle_id": "another"}]}
    with pytest.raises(StoreError, match="another"):
        bundle_store.record_evidence_bundle(stray)


def test_a_bundle_built_again_later_is_tracked_with_its_files_sha256(bundle_store, tmp_path):
    """The bundle id leaves ``created_utc`` out: the same evidence built a month later
    overwrote the lake file while the tracking row kept the first sha256 (QA audit)."""
    lake = tmp_path / "lake"
    artifacts = []
    for when in ("2026-01-01T00:00:00Z", "2026-02-02T00:00:00Z"):
        bundle = build_evidence_bundle(job_input={"evidence": ["fact one"]}, created_utc=when)
        artifact = write_evidence_bundle(bundle, lake_root=lake)
        bundle_store.record_evidence_bundle(tracking_rows(bundle, artifact, f"run-{when[:7]}"))
        artifacts.append(artifact)
    first, again = artifacts
    assert again == first  # the first artifact is kept, and given back
    data = Path(first.path).read_bytes()
    got = bundle_store.get_evidence_bundle(bundle.bundle_id)
    assert got is not None and got["evidence_bundle"][0]["artifact_sha256"] == sha256_bytes(data)
    assert read_evidence_bundle(first.path).created_utc == "2026-01-01T00:00:00Z"
    assert bundle_store.list_run_bundles("run-2026-02") == [bundle.bundle_id]
    # a row naming the same lake file with other bytes: one of them is not the file
    rows = tracking_rows(bundle, again.model_copy(update={"sha256": "f" * 64}), "run-x")
    with pytest.raises(StoreError, match="rewritten after it was tracked"):
        bundle_store.record_evidence_bundle(rows)
    assert bundle_store.list_run_bundles("run-x") == []
    # a damaged file under the id is not silently replaced
    Path(first.path).write_bytes(data.replace(b"fact one", b"fact two"))
    with pytest.raises(ValueError, match="holds another artifact"):
        write_evidence_bundle(bundle, lake_root=lake)


def test_two_bundles_are_listed_per_run_sorted(bundle_store, tmp_path):
    b1, a1 = _bundle(tmp_path / "1")
    b2, a2 = _bundle(tmp_path / "2", text="Leia led the rebellion. ")
    assert b1.bundle_id != b2.bundle_id
    bundle_store.record_evidence_bundle(tracking_rows(b2, a2, "run"))
    bundle_store.record_evidence_bundle(tracking_rows(b1, a1, "run"))
    assert bundle_store.list_run_bundles("run") == sorted([b1.bundle_id, b2.bundle_id])


def test_tracking_survives_a_reopen_and_reads_from_a_read_only_file(tmp_path):
    bundle, artifact = _bundle(tmp_path)
    rows = tracking_rows(bundle, artifact, run_id="run-a")
    db = tmp_path / "s.duckdb"
    with DuckDBStore(db, dim=8) as store:
        assert open_bundle_store(store).record_evidence_bundle(rows) == 1 + 3 + 1
    with DuckDBStore(db, dim=8, read_only=True) as store:
        tracked = open_bundle_store(store)
        got = tracked.get_evidence_bundle(bundle.bundle_id)
        assert got is not None and got["evidence_item"] == rows["evidence_item"]
        assert tracked.list_run_bundles("run-a") == [bundle.bundle_id]


def test_a_read_only_file_without_the_tables_finds_nothing(tmp_path):
    db = tmp_path / "s.duckdb"
    DuckDBStore(db, dim=8).close()
    with DuckDBStore(db, dim=8, read_only=True) as store:
        tracked = open_bundle_store(store)
        assert tracked.get_evidence_bundle("b") is None and tracked.list_run_bundles("r") == []


def _bad(rows, table, i, **change):
    out = {k: [dict(r) for r in v] for k, v in rows.items()}
    if i is None:  # a link added to the bundle
        out[table].append({"bundle_id": rows["evidence_bundle"][0]["bundle_id"], **change})
    else:
        out[table][i].update(change)
    return out


@pytest.mark.parametrize(("table", "i", "change", "message"), [
    ("run_evidence", 0, {"run_id": None}, r"run_evidence\[0\]\.run_id must be a non-empty "
                                          r"string, got None"),
    ("run_evidence", None, {}, r"run_evidence\[1\]\.run_id .* got None"),
    ("run_evidence", 0, {"run_id": 7}, r"run_evidence\[0\]\.run_id .* got 7"),
    ("evidence_item", 1, {"byte_count": "abc"}, r"evidence_item\[1\]\.byte_count must be an "
                                                r"int, got 'abc'"),
    ("evidence_item", 0, {"ordinal": "zero"}, r"evidence_item\[0\]\.ordinal must be an int"),
    ("evidence_item", 2, {"ordinal": 0}, r"evidence_item: two rows have ordinal 0"),
    ("evidence_item", 0, {"truncated": "no"}, r"evidence_item\[0\]\.truncated must be a bool"),
    ("evidence_bundle", 0, {"item_count": 3.0}, r"evidence_bundle\[0\]\.item_count must be an "
                                                r"int, got 3\.0"),
    ("evidence_bundle", 0, {"created_utc": 5}, r"evidence_bundle\[0\]\.created_utc must be a "
                                               r"string or null"),
])
def test_a_row_of_the_wrong_shape_is_refused_naming_table_row_and_field(
        bundle_store, tmp_path, table, i, change, message):
    """A run link with run_id None was stored as the run "None", one without run_id raised a
    bare KeyError, and a wrong type or a repeated ordinal the backend's own exception (QA
    audit): each is a StoreError naming the table, the row and the field, and nothing is
    written."""
    bundle, artifact = _bundle(tmp_path)
    rows = tracking_rows(bundle, artifact, run_id="run-a")
    with pytest.raises(StoreError, match=message):
        bundle_store.record_evidence_bundle(_bad(rows, table, i, **change))
    assert bundle_store.get_evidence_bundle(bundle.bundle_id) is None
    assert bundle_store.list_run_bundles("None") == []
    assert bundle_store.record_evidence_bundle(rows) == 1 + 3 + 1  # the good rows still go in
    with pytest.raises(StoreError, match=message):  # and so when the bundle is already there
        bundle_store.record_evidence_bundle(_bad(rows, table, i, **change))
    got = bundle_store.get_evidence_bundle(bundle.bundle_id)
    assert got is not None and got["run_evidence"] == rows["run_evidence"]


def test_the_row_checks_cover_every_tracked_column():
    from aiblox.bundles.store import _BUNDLE_TYPES, _ITEM_TYPES, BUNDLE_COLUMNS, ITEM_COLUMNS

    assert (tuple(_BUNDLE_TYPES), tuple(_ITEM_TYPES)) == (BUNDLE_COLUMNS, ITEM_COLUMNS)
