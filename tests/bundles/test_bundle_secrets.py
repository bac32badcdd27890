"""Redaction leaves no secret in a bundle (QA audit): a quoted ``key=value`` secret is replaced
whole, metadata and source references are redacted like the content, and a cut HTTP capture's
``full_ref`` never points at the raw capture file, which holds its credentials unmasked."""

from __future__ import annotations

import json

import pytest

from aiblox.bundles import (
    EvidencePolicy,
    build_evidence_bundle,
    bundle_artifact_bytes,
    redact,
)
from aiblox.bundles.lake import resolve_lake_uri
from aiblox.bundles.redaction import default_redactors
from aiblox.hashing import sha256_bytes

K = "[REDACTED:api_key]"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # a quoted value whole, spaces included (2.2 replaced its first word only)
        ('password="correct horse battery staple"', f'password="{K}"'),
        ("password='it is me'.", f"password='{K}'."),
        # ``=>``: 2.2 took ">" for the value and kept the secret
        ("'password' => 'hunter2'", f"'password' => '{K}'"),
        ("password => hunter2", f"password => {K}"),
        # a call's parentheses: 2.2 kept the quoted value after "("
        ('api_key = ("abc123xyz")', f'api_key = ("{K}")'),
        # JSON "key": "value" with spaces (2.2 kept it all), short under a quoted key
        ('"client_secret": "abc def ghi"', f'"client_secret": "{K}"'),
        ("{'password': 'ab'}", f"{{'password': '{K}'}}"),
        ('{"password": "a\\"b c"}', f'{{"password": "{K}"}}'),
        # PGP private key blocks, URL userinfo passwords, Stripe and Hugging Face keys
        ("k -----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGV\nq83kd=\n"
         "-----END PGP PRIVATE KEY BLOCK----- end", f"k {K} end"),
        ("db postgresql+psycopg://me:s3cret@db.example.com/x ok",
         f"db postgresql+psycopg://me:{K}@db.example.com/x ok"),
        ("see https://u:Pa55word@h.example.com/", f"see https://u:{K}@h.example.com/"),
        ("stripe sk_live_" + "a1B2" * 6 + " and rk_test_" + "Z9y8" * 6, f"stripe {K} and {K}"),
        ("hub hf_" + "AbCdEfGh" * 4 + "xy.", f"hub {K}."),
    ],
)
def test_a_secret_value_is_redacted_whole(text, want):
    out, records = redact(text, default_redactors())
    assert out == want
    assert [r.redactor for r in records] == ["api_key"]


@pytest.mark.parametrize(
    "text",
    [
        'print("password=" + pw)',  # a quote opening on a space is code, not a value
        'The token: "ab" is short.',
        "use hf_hub_download and sk_live_short, https://example.com:8080/path",
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQINBF\n-----END PGP PUBLIC KEY BLOCK-----",
        'password=""',
    ],
)
def test_the_new_patterns_leave_code_and_prose_alone(text):
    assert redact(text, default_redactors()) == (text, [])


def test_redaction_reaches_metadata_source_refs_and_load_errors(tmp_path):
    """An HTTP capture's URL (metadata) and an inline source URI kept their secrets."""
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "cap.json").write_text(json.dumps({
        "url": "https://api.x.com/v1?api_key=SECRETKEY123456", "status": 200,
        "headers": {}, "body": "x"}))
    refs = {"evidence": [{"text": "hi", "title": "token=TITLESECRET9",
                          "source_uri": "https://u:Pa55word@h.example.com/?token=SECRET99"}]}
    bundle = build_evidence_bundle(
        job_input=refs, evidence_refs={"lake_http": ["cap.json"],  # a missing file: its error
                                       "lake_text": ["old/password=LOADSECRET.txt"]},  # quotes it
        policy=EvidencePolicy(enable_redaction=True), lake_root=lake, on_error="skip")
    dumped = bundle_artifact_bytes(bundle).decode()
    for secret in ("SECRETKEY123456", "Pa55word", "SECRET99", "TITLESECRET9", "LOADSECRET"):
        assert secret not in dumped, secret
    inline, http = bundle.items
    assert inline.source_ref == {
        "source_uri": f"https://u:{K}@h.example.com/?token={K}"}
    assert http.metadata["http"]["url"] == f"https://api.x.com/v1?api_key={K}"
    assert http.source_ref == {"lake_uri": "cap.json"}  # identifiers stay as given
    assert len(bundle.summary.load_errors) == 1
    # without redaction nothing is changed
    plain = build_evidence_bundle(job_input=refs, evidence_refs={"lake_http": ["cap.json"]},
                                  lake_root=lake)
    assert plain.items[0].source_ref == {"source_uri": refs["evidence"][0]["source_uri"]}
    assert "SECRETKEY123456" in plain.items[1].metadata["http"]["url"]


@pytest.mark.parametrize("redaction", [True, False])
def test_a_cut_http_capture_points_at_its_full_content_not_the_raw_capture(tmp_path, redaction):
    """``full_ref`` named the capture file (unmasked bearer token in it) with the file's size,
    not the content's: byte_count 5160 against bounding.original_size 5103."""
    lake = tmp_path / "lake"
    lake.mkdir()
    token = "abcdefghijklmnopqrstuvwxyz"
    (lake / "cap2.json").write_text(json.dumps({
        "url": "https://a/x", "status": 200, "headers": {"Authorization": f"Bearer {token}"},
        "body": "B" * 5000}))
    bundle = build_evidence_bundle(
        evidence_refs={"lake_http": ["cap2.json"]}, lake_root=lake,
        policy=EvidencePolicy(enable_redaction=redaction, max_item_bytes=1000))
    item = bundle.items[0]
    ref = item.full_ref
    assert ref is not None and ref.lake_uri != "cap2.json"
    assert ref.byte_count == item.metadata["bounding"]["original_size"]
    data = resolve_lake_uri(lake, ref.lake_uri).read_bytes()
    assert sha256_bytes(data) == ref.content_sha256 and len(data) == ref.byte_count
    assert token not in data.decode() and data.decode().startswith(item.content)


def test_an_unredacted_lake_text_still_points_at_its_own_file(tmp_path):
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "t.txt").write_bytes(("word " * 400).encode())
    bundle = build_evidence_bundle(evidence_refs={"lake_text": ["t.txt"]}, lake_root=lake,
                                   policy=EvidencePolicy(max_item_bytes=100))
    ref = bundle.items[0].full_ref
    assert ref is not None and ref.lake_uri == "t.txt" and ref.byte_count == 2000
