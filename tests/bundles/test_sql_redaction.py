"""SQL results under redaction (QA audit): the full result written to the lake is redacted in
nested cells, numbers and column names as the table is; a cell is redacted before it is cut;
``sql_sha256`` cannot confirm a guessed secret; a bad result names its reference and a failed
load leaves no temporary file in the lake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiblox.bundles import EvidenceLoadError, EvidencePolicy, build_evidence_bundle, redact
from aiblox.bundles.models import RedactionRecord
from aiblox.bundles.redaction import default_redactors
from aiblox.hashing import sha256_bytes, sha256_text

SECRETS = ("example.com", "555", "hunter2", "4111111111111111")
ON = EvidencePolicy(enable_redaction=True, max_sql_rows=2)


def _records(n: int = 5) -> list[dict]:
    return [{"id": i, "contact": {"email": f"person{i}@example.com", "password": "hunter2"},
             "tags": [f"tel +1 (555) 123-45{i:02d}"], "alice.smith@example.com": "x",
             "card": 4111111111111111} for i in range(n)]


def _full(lake: Path, item) -> tuple[bytes, dict]:
    ref = item.full_ref
    assert ref is not None and ref.lake_uri is not None
    data = (lake / ref.lake_uri).read_bytes()
    assert sha256_bytes(data) == ref.content_sha256 and len(data) == ref.byte_count
    return data, json.loads(data)


def _clean(data: bytes | str) -> None:
    text = data.decode() if isinstance(data, bytes) else data
    assert [s for s in SECRETS if s in text] == []


def test_the_full_copy_of_cut_records_is_redacted_in_nested_cells_and_names(tmp_path):
    """The content was clean but full_ref's file held every email, phone, the password under
    its key and the card number, and the email used as a column name."""
    [item] = build_evidence_bundle(
        evidence_refs={"sql_results": [{"query_key": "q", "records": _records()}]},
        policy=ON, lake_root=tmp_path).items
    _clean(item.content)
    data, full = _full(tmp_path, item)
    _clean(data)
    assert full["columns"] == ["id", "contact", "tags", "[REDACTED:email]", "card"]
    # a nested cell stays nested, its strings redacted as the table shows them
    assert full["rows"][0][:3] == [0, {"email": "[REDACTED:email]",
                                       "password": "[REDACTED:api_key]"},
                                   ["tel [REDACTED:phone]"]]
    assert full["rows"][0][4] == "[REDACTED:card]"
    assert item.metadata["sql"]["full_result_sha256"] == item.full_ref.content_sha256
    # redaction off: the full result as given
    [plain] = build_evidence_bundle(
        evidence_refs={"sql_results": [{"query_key": "q", "records": _records()}]},
        policy=EvidencePolicy(max_sql_rows=2), lake_root=tmp_path).items
    assert _full(tmp_path, plain)[1]["rows"][0][1]["email"] == "person0@example.com"


def test_the_full_copy_of_a_duckdb_struct_and_list_result_is_redacted(tmp_path):
    sql = ("SELECT range AS id, {'email': 'person' || range || '@example.com'} AS contact, "
           "['tel +1 (555) 123-45' || lpad(range::VARCHAR, 2, '0')] AS tags "
           "FROM range(5) ORDER BY id")
    [item] = build_evidence_bundle(
        evidence_refs={"sql_results": [{"query_key": "q", "sql": sql}]},
        policy=ON, lake_root=tmp_path).items
    _clean(item.content)
    data, full = _full(tmp_path, item)
    _clean(data)
    assert full["rows"][4] == [4, {"email": "[REDACTED:email]"}, ["tel [REDACTED:phone]"]]


def test_a_lake_result_whose_only_secrets_are_nested_is_not_its_own_full_copy(tmp_path):
    """full_ref pointed at the original lake file (the secrets in it): redaction changed no
    string cell, so the file was taken for the full content."""
    (tmp_path / "r.json").write_text(json.dumps(
        [{"id": r["id"], "contact": r["contact"]} for r in _records()]))
    refs = {"sql_results": [{"query_key": "q", "lake_uri": "r.json"}]}
    [item] = build_evidence_bundle(evidence_refs=refs, policy=ON, lake_root=tmp_path).items
    assert item.full_ref is not None and item.full_ref.lake_uri != "r.json"
    _clean(_full(tmp_path, item)[0])
    [plain] = build_evidence_bundle(evidence_refs=refs, policy=EvidencePolicy(max_sql_rows=2),
                                    lake_root=tmp_path).items
    assert plain.full_ref is not None and plain.full_ref.lake_uri == "r.json"


PAD = "x" * 170 + " "


@pytest.mark.parametrize(("cell", "secret", "redactor"), [
    (PAD + "contact jonathan.private@examplecorp.com now", "jonathan", "email"),
    (PAD + 'pw password="correct horse battery staple"', "horse", "api_key"),
    ("x" * 190 + " sk-ant-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456 x", "sk-ant", "api_key"),
])
def test_a_sql_cell_is_redacted_before_it_is_cut(cell, secret, redactor):
    """A cell was cut to max_cell_chars (200) before the table was redacted: a secret across
    the cut matched no redactor and its first characters leaked (``jonathan.private@exa…``)."""
    [item] = build_evidence_bundle(
        evidence_refs={"sql_results": [{"query_key": "q", "columns": ["note"],
                                        "rows": [[cell]]}]},
        policy=EvidencePolicy(enable_redaction=True)).items
    assert secret not in item.content
    [rec] = [r for r in item.metadata["redactions"] if r["redactor"] == redactor]
    assert rec["count"] == len(rec["spans"]) == 1
    [(start, end)] = rec["spans"]  # in the item's offsets, on its token (maybe cut itself)
    assert end > start and rec["replacement"].startswith(item.content[start:end])
    assert item.content[end:].startswith((" ", "\u2026", '"'))


def test_records_of_cells_cut_and_escaped_point_at_their_tokens():
    rows = [["password=hunter2 | x\nnext", "y" * 50 + " mail a.b@example.com", "ok"],
            ["a@b.com", "4111 1111 1111 1111", "call +1 (555) 123-4567"]]
    [item] = build_evidence_bundle(
        evidence_refs={"sql_results": [{"query_key": "q", "columns": ["c1@x.com", "c2", "c3"],
                                        "rows": rows}]},
        policy=EvidencePolicy(enable_redaction=True, max_cell_chars=60)).items
    _clean(item.content)
    assert "a.b@" not in item.content and "[RE…" in item.content  # a token cut, never a secret
    got = {r["redactor"]: r for r in item.metadata["redactions"]}
    assert {k: r["count"] for k, r in got.items()} == {"api_key": 1, "email": 3, "card": 1,
                                                       "phone": 1}
    for rec in got.values():
        for start, end in rec["spans"]:
            assert rec["replacement"].startswith(item.content[start:end])


def test_sql_sha256_cannot_confirm_a_guessed_secret():
    """With redaction on, sql_sha256 was the raw SQL's: the sqldef item shows the SQL with the
    secret masked, so a guess put back in its place hashed to it."""
    sql = "select count(*) as n from range(3) where 'password=hunter2' <> ''"
    refs = {"sql_query_defs": [{"query_key": "q", "sql": sql}],
            "sql_results": [{"query_key": "q", "sql": sql}]}
    qdef, result = build_evidence_bundle(evidence_refs=refs,
                                         policy=EvidencePolicy(enable_redaction=True)).items
    shown = qdef.content.splitlines()[-1]
    assert "hunter2" not in shown
    assert result.source_ref["sql_sha256"] == sha256_text(shown)
    assert result.source_ref["sql_sha256"] != sha256_text(sql)
    off = build_evidence_bundle(evidence_refs=refs).items[1]
    assert off.source_ref["sql_sha256"] == sha256_text(sql)


def test_a_bad_lake_result_or_a_missing_database_names_the_reference(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "shape.json").write_text('{"columns":["a"],"rows":[[1,2]]}')
    cases = [
        ({"query_key": "q", "lake_uri": "bad/shape.json"},
         r"evidence_refs\.sql_results\[0\]: 'bad/shape\.json': row 0 has 2 cells"),
        ({"query_key": "q", "sql": "select 1", "database": "missing.duckdb"},
         r"evidence_refs\.sql_results\[0\]\.database: .*missing\.duckdb"),
    ]
    for ref, message in cases:
        with pytest.raises(EvidenceLoadError, match=message):
            build_evidence_bundle(evidence_refs={"sql_results": [ref]}, lake_root=tmp_path)
        skipped = build_evidence_bundle(evidence_refs={"sql_results": [ref]},
                                        lake_root=tmp_path, on_error="skip")
        [err] = skipped.summary.load_errors
        assert err.ref == "evidence_refs.sql_results[0]" and err.error.startswith(
            "EvidenceLoadError: evidence_refs.sql_results[0]")


BAD = [
    {"query_key": "q", "columns": ["a"], "rows": [[1], [1, 2]]},
    {"query_key": "q", "records": [{"a": 1}, {"a": 2, "b": 3}], "sql": "x"},
    {"query_key": "q", "sql": "select (case when range < 4000 then range::VARCHAR else 'x' end)"
                              "::INTEGER as a from range(5000)"},
    {"query_key": "q", "lake_uri": "bad.json"},
]


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("redaction", [True, False])
def test_a_failed_sql_load_leaves_no_temporary_file(tmp_path, on_error, redaction):
    (tmp_path / "bad.json").write_text('{"columns":["a"],"rows":[[1],[2,3]]}')
    for ref in BAD:
        try:
            build_evidence_bundle(evidence_refs={"sql_results": [ref]}, lake_root=tmp_path,
                                  policy=EvidencePolicy(enable_redaction=redaction),
                                  on_error=on_error)  # type: ignore[arg-type]
        except EvidenceLoadError:
            assert on_error == "raise"
    left = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["bad.json"]


def test_prior_records_are_carried_through_a_later_redaction():
    """``redact(text, redactors, prior)``: replacements made before (a cell redacted before it
    was cut) keep their records, moved by this run's replacements, one record per redactor."""
    text = "[REDACTED:email] then b@example.com and [REDACTED:email]"
    prior = [RedactionRecord(redactor="email", count=2, spans=[(0, 16), (40, 56)],
                             replacement="[REDACTED:email]")]
    out, records = redact(text, default_redactors(), prior=prior)
    assert out == "[REDACTED:email] then [REDACTED:email] and [REDACTED:email]"
    assert [(r.redactor, r.count, r.spans) for r in records] == [
        ("email", 3, [(0, 16), (22, 38), (43, 59)])]
    assert redact("plain", default_redactors(), prior=[]) == ("plain", [])
