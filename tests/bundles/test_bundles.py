"""Evidence bundles end to end: loaders, bounding order, full refs, artifact, determinism."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from aiblox.bundles import (
    EvidenceLoadError,
    EvidencePolicy,
    LakePathError,
    build_evidence_bundle,
    bundle_artifact_bytes,
    read_evidence_bundle,
    tracking_rows,
    verify_evidence_bundle,
    write_evidence_bundle,
)
from aiblox.hashing import sha256_bytes, sha256_text
from aiblox.text.tokens import count_tokens


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    (root / "docs").mkdir(parents=True)
    (root / "results").mkdir()
    (root / "http").mkdir()
    (root / "docs" / "character_bio.md").write_text(
        "# Luke Skywalker\n" + "Luke trained as a Jedi on Dagobah. " * 400, encoding="utf-8"
    )
    (root / "results" / "character_facts.json").write_text(
        json.dumps({"columns": ["fact", "value"], "rows": [[f"f{i}", i] for i in range(120)]})
    )
    (root / "http" / "page.json").write_text(
        json.dumps(
            {
                "url": "https://example.org/luke",
                "status": 200,
                "reason": "OK",
                "headers": {"Content-Type": "text/html", "Set-Cookie": "session=abcdef123456"},
                "body": "<p>Luke</p>",
            }
        )
    )
    return root


def seed_example(lake: Path, **kw):
    policy = kw.pop(
        "policy",
        EvidencePolicy(
            max_items=30, max_total_bytes=75000, max_sql_rows=50, enable_redaction=False
        ),
    )
    job_input = {
        "entity_type": "character",
        "entity_id": "luke_skywalker",
        "extra_params": {
            "evidence": [{"text": "Luke Skywalker is a Jedi...", "source_uri": "wookieepedia"}]
        },
    }
    evidence_refs = {
        "lake_text": ["docs/character_bio.md"],
        "sql_results": [
            {"lake_uri": "results/character_facts.json", "query_key": "character_facts"}
        ],
    }
    return build_evidence_bundle(
        job_input=job_input, evidence_refs=evidence_refs, policy=policy, lake_root=lake, **kw
    )


def test_seed_usage_example(lake):
    bundle = seed_example(lake)
    ids = [i.evidence_id for i in bundle.items]
    assert ids == [
        "inline:0",
        f"lake:{sha256_text('docs/character_bio.md')[:12]}:0",
        f"sql:{sha256_text('character_facts')[:12]}:0",
    ]
    inline, text, sql = bundle.items
    assert inline.source_ref == {"source_uri": "wookieepedia"}
    assert inline.content == "Luke Skywalker is a Jedi..."
    for item in bundle.items:  # every item carries its bounding record and hashes
        assert item.content_sha256 == sha256_text(item.content)
        assert item.byte_count == len(item.content.encode("utf-8"))
        assert item.approx_tokens == count_tokens(item.content)
        assert set(item.metadata["bounding"]) == {
            "applied",
            "original_size",
            "bounded_size",
            "truncation_point",
            "note",
        }
    # the bio is 14k bytes: cut to 10,000, full_ref to the lake file itself
    bio = (lake / "docs" / "character_bio.md").read_bytes()
    assert text.byte_count == 10000
    assert text.metadata["bounding"] == {
        "applied": True,
        "original_size": len(bio),
        "bounded_size": 10000,
        "truncation_point": 10000,
        "note": "Truncated to 10000 byte limit",
    }
    assert text.full_ref.lake_uri == "docs/character_bio.md"
    assert text.full_ref.content_sha256 == sha256_bytes(bio)
    # 120 rows, 50 kept first_last: 25 + 25, full_ref with counts
    assert sql.metadata["sql"]["shown_rows"] == 50 and sql.metadata["sql"]["total_rows"] == 120
    assert "| 25 | f24 | 24 |" in sql.content and "| … 70 rows omitted … |" in sql.content
    assert "| 96 | f95 | 95 |" in sql.content
    assert sql.full_ref.row_count == 120 and sql.full_ref.col_count == 2
    assert sql.full_ref.lake_uri == "results/character_facts.json"
    s = bundle.summary
    assert s.item_count == 3 and s.type_counts == {
        "inline_text": 1,
        "lake_text": 1,
        "sql_result": 1,
    }
    assert s.total_bytes == sum(i.byte_count for i in bundle.items)
    assert s.approx_tokens == sum(i.approx_tokens for i in bundle.items)
    assert not s.bundle_bounding.applied
    assert bundle.policy.policy_version == "1"
    assert verify_evidence_bundle(bundle) == []


def test_same_input_same_bytes_across_lakes(lake, tmp_path):
    other = tmp_path / "other_lake"
    shutil.copytree(lake, other)
    a, b = seed_example(lake), seed_example(other)
    assert a.bundle_id == b.bundle_id
    assert bundle_artifact_bytes(a) == bundle_artifact_bytes(b)
    art_a = write_evidence_bundle(a, lake_root=lake)
    art_b = write_evidence_bundle(b, lake_root=other)
    assert art_a.sha256 == art_b.sha256 == sha256_bytes(Path(art_a.path).read_bytes())
    assert art_a.lake_uri == f"evidence/bundles/{a.bundle_id}.json"
    back = read_evidence_bundle(art_a.path)
    assert back == a
    # created_utc is recorded but never changes the id
    c = seed_example(lake, created_utc="2024-01-15T10:30:00Z")
    assert c.bundle_id == a.bundle_id and c.created_utc == "2024-01-15T10:30:00Z"


def test_tampered_artifact_fails_verification(lake, tmp_path):
    bundle = seed_example(lake)
    art = write_evidence_bundle(bundle, path=tmp_path / "b.json")
    data = json.loads(Path(art.path).read_text())
    data["items"][0]["content"] = "Luke Skywalker is a Sith..."
    Path(art.path).write_text(json.dumps(data))
    with pytest.raises(ValueError, match="content_sha256 does not match"):
        read_evidence_bundle(art.path)


def test_bundle_limits_drop_items_and_record_why(lake):
    refs = {"inline_text": [{"text": "x" * n} for n in (400, 400, 400, 50, 50, 50)]}
    policy = EvidencePolicy(max_items=3, max_total_bytes=700, max_item_bytes=300)
    b = build_evidence_bundle(None, refs, policy)
    # 300 + 300 kept; the third (300) would pass 700 bytes; a later small one still fits
    assert [i.evidence_id for i in b.items] == ["inline:0", "inline:1", "inline:3"]
    assert [i.byte_count for i in b.items] == [300, 300, 50]
    bb = b.summary.bundle_bounding
    assert (bb.applied, bb.original_count, bb.final_count, bb.items_dropped) == (True, 6, 3, 3)
    assert bb.dropped == [
        {"evidence_id": "inline:2", "reason": "max_total_bytes"},
        {"evidence_id": "inline:4", "reason": "max_items"},
        {"evidence_id": "inline:5", "reason": "max_items"},
    ]
    assert bb.note == "Dropped 3 items to meet bundle limits"
    assert b.summary.total_bytes == 650 <= policy.max_total_bytes


def test_cut_inline_content_is_persisted_to_the_lake(lake):
    text = "é" * 5001  # 10,002 bytes: the cut must not split a character
    b = build_evidence_bundle({"evidence": [text]}, None, EvidencePolicy(), lake)
    [item] = b.items
    assert item.byte_count == 10000 and item.content == "é" * 5000
    ref = item.full_ref
    assert ref.lake_uri == f"evidence/full/{sha256_text(text)}.txt"
    assert (lake / ref.lake_uri).read_text(encoding="utf-8") == text
    no_lake = build_evidence_bundle({"evidence": [text]}, None, EvidencePolicy())
    assert no_lake.items[0].full_ref.lake_uri is None
    assert no_lake.items[0].full_ref.content_sha256 == sha256_text(text)


def test_redaction_runs_before_bounding_and_is_recorded(lake):
    secret = "sk-ant-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456"
    text = "contact luke@rebels.org " + "pad " * 10 + f"key {secret}"
    policy = EvidencePolicy(enable_redaction=True, max_item_bytes=60)
    b = build_evidence_bundle({"evidence": [text]}, None, policy, lake)
    [item] = b.items
    dumped = json.dumps(b.model_dump(mode="json"))
    assert "luke@rebels.org" not in dumped and secret not in dumped
    assert [r["redactor"] for r in item.metadata["redactions"]] == ["api_key", "email"]
    # the persisted full copy is the redacted text
    full = (lake / item.full_ref.lake_uri).read_text()
    assert secret not in full and "[REDACTED:api_key]" in full
    assert item.metadata["bounding"]["original_size"] == len(full.encode("utf-8"))
    off = build_evidence_bundle({"evidence": [text]}, None, EvidencePolicy(), lake)
    assert "luke@rebels.org" in off.items[0].content and "redactions" not in off.items[0].metadata


def test_full_ref_of_a_redacted_lake_text_is_the_redacted_full_content(lake):
    """FullRef.content_sha256 is "sha256 of the full content (after redaction, before
    bounding)". A cut lake text whose secrets redaction replaced pointed at the raw lake file
    (its hash and size, the secrets in it), disagreeing with bounding.original_size. Now the
    redacted full text is written to the lake and pointed at; without redaction, or when it
    changed nothing, the pointer is the lake file as before."""
    secret = "sk-ant-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456"
    (lake / "docs" / "secret.txt").write_text(
        "contact luke@rebels.org " + "pad " * 20 + f"key {secret}\n", encoding="utf-8"
    )
    (lake / "docs" / "clean.txt").write_text("nothing to hide " * 10, encoding="utf-8")
    refs = {"lake_text": ["docs/secret.txt", "docs/clean.txt"]}
    on = EvidencePolicy(enable_redaction=True, max_item_bytes=60)
    secret_item, clean_item = build_evidence_bundle(None, refs, on, lake).items
    ref = secret_item.full_ref
    assert ref.lake_uri != "docs/secret.txt"
    full = (lake / ref.lake_uri).read_bytes()
    assert secret.encode() not in full and b"[REDACTED:api_key]" in full
    assert ref.content_sha256 == sha256_bytes(full)
    assert ref.byte_count == len(full) == secret_item.metadata["bounding"]["original_size"]
    # redaction found nothing: the lake file is the full content
    assert clean_item.full_ref.lake_uri == "docs/clean.txt"
    clean = (lake / "docs/clean.txt").read_bytes()
    assert clean_item.full_ref.content_sha256 == sha256_bytes(clean)
    # redaction off: the lake file, as before
    off = build_evidence_bundle(None, refs, EvidencePolicy(max_item_bytes=60), lake).items[0]
    assert off.full_ref.lake_uri == "docs/secret.txt"
    assert off.full_ref.content_sha256 == sha256_bytes((lake / "docs/secret.txt").read_bytes())


def test_full_ref_of_a_redacted_lake_sql_result_is_the_redacted_full_result(lake):
    """The same for a SQL result read from a lake file: cut, with redaction finding emails in
    it, its full_ref pointed at the raw lake JSON (the emails in it). Now it is the redacted full
    result, written to the lake, as a query's is; without redaction it is the lake file."""
    (lake / "results" / "people.json").write_text(json.dumps(
        {"columns": ["who", "email"], "rows": [[f"p{i}", f"user{i}@example.com"]
                                               for i in range(40)]}))
    refs = {"sql_results": [{"lake_uri": "results/people.json", "query_key": "people"}]}
    [item] = build_evidence_bundle(
        None, refs, EvidencePolicy(enable_redaction=True, max_sql_rows=5), lake).items
    assert "example.com" not in item.content
    ref = item.full_ref
    assert ref.lake_uri != "results/people.json" and ref.row_count == 40
    full = (lake / ref.lake_uri).read_bytes()
    assert b"example.com" not in full and b"[REDACTED:email]" in full
    assert ref.content_sha256 == sha256_bytes(full) and ref.byte_count == len(full)
    [off] = build_evidence_bundle(None, refs, EvidencePolicy(max_sql_rows=5), lake).items
    assert off.full_ref.lake_uri == "results/people.json"
    assert off.full_ref.content_sha256 == sha256_bytes(
        (lake / "results" / "people.json").read_bytes())


def test_a_secret_across_a_chunk_boundary_and_a_title_are_redacted(lake):
    """A document is redacted whole before it is split (a key cut in two by a chunk boundary
    once matched no redactor in either piece and leaked whole across two items); each chunk
    records the replacements that fall in it; a title is redacted as content is."""
    key, email = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "alice.secret@example.com"
    text = "x" * 80 + f" {key} " + "y" * 60 + f" mail {email} end " + "z" * 100
    policy = EvidencePolicy(enable_redaction=True, chunk_size=100, chunk_overlap=10)
    refs = {"doc_chunk": [{"doc_id": "d1", "text": text, "title": f"from {email}"}]}
    b = build_evidence_bundle(evidence_refs=refs, policy=policy,
                              created_utc="2026-01-01T00:00:00Z")
    dumped = json.dumps(b.model_dump(mode="json"))
    assert len(b.items) > 2
    assert not any(part in dumped for part in (key[:12], key[12:], "ABCDEFGHIJKL", email))
    for item in b.items:
        for rec in item.metadata["redactions"]:  # in the chunk's own offsets, on its tokens
            for start, end in rec["spans"]:
                assert set(item.content[start:end]) <= set(rec["replacement"])
    assert sum(r["count"] for it in b.items for r in it.metadata["redactions"]) >= 2
    assert b.items[0].metadata["title"] == "from [REDACTED:email]"


def test_sql_from_rows_from_duckdb_and_query_defs(lake):
    import duckdb

    db = lake / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT range AS id, 'name ' || range AS name FROM range(10000)")
    con.close()
    refs = {
        "sql_query_defs": [
            {"query_key": "all_t", "sql": "SELECT * FROM t ORDER BY id", "description": "every row"}
        ],
        "sql_results": [
            {"query_key": "all_t", "sql": "SELECT * FROM t ORDER BY id", "database": "w.duckdb"},
            {"query_key": "given", "columns": ["a", "b"], "rows": [[1, "x"], [2, None]]},
            {"query_key": "recs", "records": [{"a": 1}, {"a": 2, "b": True}]},
        ],
    }
    policy = EvidencePolicy(max_sql_rows=10, sampling_strategy="stride")
    b = build_evidence_bundle(None, refs, policy, lake)
    qdef, big, given, recs = b.items
    assert qdef.evidence_id == f"sqldef:{sha256_text('all_t')[:12]}"
    assert big.evidence_id == f"sql:{sha256_text('all_t')[:12]}:0"
    assert qdef.content == "-- query_key: all_t\n-- every row\nSELECT * FROM t ORDER BY id\n"
    assert "rows: 10 of 10000 shown (sampling: stride)" in big.content
    assert "| 1001 | 1000 | name 1000 |" in big.content
    full = json.loads((lake / big.full_ref.lake_uri).read_text())
    assert len(full["rows"]) == 10000 and full["rows"][9999] == [9999, "name 9999"]
    assert big.full_ref.content_sha256 == sha256_bytes((lake / big.full_ref.lake_uri).read_bytes())
    assert given.full_ref is None and "| 2 | 2 | NULL |" in given.content
    assert "| 1 | 1 | NULL |" in recs.content and "| 2 | 2 | true |" in recs.content


def test_lake_http_masks_credential_headers(lake):
    b = build_evidence_bundle(None, {"lake_http": ["http/page.json"]}, EvidencePolicy(), lake)
    [item] = b.items
    assert item.content.startswith("HTTP 200 OK\nURL: GET https://example.org/luke\n")
    assert "session=abcdef123456" not in item.content
    assert "Set-Cookie: [REDACTED:header]" in item.content
    assert item.content.endswith("\n\n<p>Luke</p>")
    assert item.metadata["http"]["masked_headers"] == ["set-cookie"]
    (lake / "http" / "raw.http").write_text(
        "HTTP/1.1 404 Not Found\r\nAuthorization: Bearer zzz\r\n\r\nnope"
    )
    [raw] = build_evidence_bundle(None, {"lake_http": ["http/raw.http"]}, None, lake).items
    assert raw.content == "HTTP 404 Not Found\nAuthorization: [REDACTED:header]\n\nnope"


def test_doc_and_transcript_chunks(lake):
    text = "0123456789" * 3
    refs = {
        "doc_chunks": [{"doc_id": "doc123", "text": text}],
        "transcript_chunks": [{"transcript_id": "call7", "text": "hello", "chunk_index": 4}],
    }
    b = build_evidence_bundle(None, refs, EvidencePolicy(chunk_size=12, chunk_overlap=2))
    p = sha256_text("doc123")[:12]
    assert [i.evidence_id for i in b.items] == [
        f"doc:{p}:0",
        f"doc:{p}:1",
        f"doc:{p}:2",
        f"transcript:{sha256_text('call7')[:12]}:4",
    ]
    assert [i.content for i in b.items[:3]] == [text[0:12], text[10:22], text[20:30]]
    assert b.items[1].metadata["chunk"] == {
        "index": 1,
        "count": 3,
        "byte_start": 10,
        "byte_end": 22,
    }


@pytest.mark.parametrize("uri", ["/etc/passwd", "../outside.txt", "docs/../../outside.txt"])
def test_lake_escape_refused_by_the_builder(lake, uri):
    (lake.parent / "outside.txt").write_text("secret")
    with pytest.raises(LakePathError, match=r"evidence_refs\.lake_text\[0\]"):
        build_evidence_bundle(None, {"lake_text": [uri]}, None, lake)
    # a refused URI is recorded, not silently skipped
    b = build_evidence_bundle(None, {"lake_text": [uri]}, None, lake, on_error="skip")
    assert b.items == [] and b.summary.load_errors[0].ref == "evidence_refs.lake_text[0]"
    assert "LakePathError" in b.summary.load_errors[0].error


def test_bad_references_name_the_field(lake):
    with pytest.raises(EvidenceLoadError, match=r"evidence_refs\.lake_text\[0\].*no file"):
        build_evidence_bundle(None, {"lake_text": ["docs/missing.md"]}, None, lake)
    with pytest.raises(EvidenceLoadError, match=r"evidence_refs\.bogus: unknown evidence type"):
        build_evidence_bundle(None, {"bogus": []}, None, lake)
    with pytest.raises(EvidenceLoadError, match=r"sql_results\[0\]: give exactly one"):
        build_evidence_bundle(None, {"sql_results": [{"query_key": "q"}]}, None, lake)
    with pytest.raises(EvidenceLoadError, match=r"unknown key\(s\) \['colour'\]"):
        build_evidence_bundle(None, {"lake_text": [{"lake_uri": "x", "colour": 1}]}, None, lake)
    with pytest.raises(EvidenceLoadError, match="repeat"):
        build_evidence_bundle(None, {"lake_text": ["docs/character_bio.md"] * 2}, None, lake)
    with pytest.raises(EvidenceLoadError, match="query failed"):
        build_evidence_bundle(None, {"sql_results": [{"query_key": "q", "sql": "SELEC 1"}]})


def test_policy_validation():
    with pytest.raises(ValidationError):
        EvidencePolicy(max_itemz=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="chunk_overlap"):
        EvidencePolicy(chunk_size=100, chunk_overlap=100)
    with pytest.raises(ValidationError):
        EvidencePolicy(sampling_strategy="random")  # type: ignore[arg-type]
    p = EvidencePolicy()
    assert (
        p.max_items,
        p.max_total_bytes,
        p.max_item_bytes,
        p.max_sql_rows,
        p.max_sql_cols,
        p.chunk_size,
        p.chunk_overlap,
        p.enable_redaction,
    ) == (50, 100_000, 10_000, 100, 20, 5_000, 200, False)


def test_tracking_rows(lake):
    bundle = seed_example(lake)
    art = write_evidence_bundle(bundle, lake_root=lake)
    rows = tracking_rows(bundle, art, run_id="run-1")
    assert rows["evidence_bundle"][0]["artifact_sha256"] == art.sha256
    assert rows["run_evidence"] == [{"run_id": "run-1", "bundle_id": bundle.bundle_id}]
    assert [r["evidence_id"] for r in rows["evidence_item"]] == [
        i.evidence_id for i in bundle.items
    ]
    assert [r["truncated"] for r in rows["evidence_item"]] == [False, True, False]
