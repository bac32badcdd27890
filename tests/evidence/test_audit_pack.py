"""Evidence pack: content-derived ids, immutability by revision, signing, export, store."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from aiblox.evidence.audit_pack import (
    PackSource,
    ToolCallRecord,
    build_evidence_pack,
    compute_pack_id,
    pack_content,
    pack_from_json,
    pack_to_html,
    pack_to_json,
    revise_pack,
    sign_pack,
    verify_pack,
)
from aiblox.hashing import sha256_text

KEY = b"tenant-a-secret-key"


def sources(n=3):
    return [
        PackSource.from_content(
            name="scifact",
            internal_ref=f"doc{i}",
            content=f"full content {i} " * 300,
            retrieved_at="2024-01-15T10:30:00Z",
            confidence=0.9 - i / 10,
        )
        for i in range(n)
    ]


def fields(**over):
    base = {
        "tenant_id": "tenant-a",
        "query": "Does vitamin D reduce fractures?",
        "decision": {"kind": "answer", "text": "Mostly not [1][2].", "status": "OK"},
        "sources": sources(),
        "tool_calls": [
            {
                "tool_name": "retriever.search",
                "kind": "retrieval",
                "intended_action": "hybrid search top 20",
                "actual_action": "hybrid search top 20",
                "outputs": {"candidates": 20},
            },
            {
                "tool_name": "llm.generate",
                "kind": "llm",
                "intended_action": "answer with gpt",
                "actual_action": "timed out",
                "status": "failed",
                "error": "timeout after 30 s",
            },
        ],
        "prompts": [
            {
                "template_name": "prompt_contract_v1",
                "template_version": "1",
                "prompt_sha256": sha256_text("the exact prompt"),
            }
        ],
        "model": "mockllm",
        "model_version": "0",
        "trace_id": "trace-1",
        "memo": {
            "primary": {
                "language": "en",
                "title": "Vitamin D and fractures",
                "executive_summary": "No clear effect.",
                "body": "Trials [1] and [2] find no effect; a review [3] agrees.",
            },
            "secondary": {
                "language": "ar",
                "title": "فيتامين د",
                "executive_summary": "لا أثر واضح.",
                "body": "التجارب [1] و[2] والمراجعة [3].",
            },
        },
    }
    base.update(over)
    return base


def test_pack_id_is_derived_from_content_and_ignores_time():
    a = build_evidence_pack(**fields())
    b = build_evidence_pack(**fields(created_at="2030-01-01T00:00:00Z"))
    assert a.pack_id == b.pack_id and a.pack_id.startswith("pack_") and len(a.pack_id) == 21
    assert a.pack_id == compute_pack_id(pack_content(a))
    c = build_evidence_pack(**fields(query="Another question?"))
    assert c.pack_id != a.pack_id
    assert verify_pack(a) == []


def test_sources_rules():
    s = sources(1)[0]
    assert len(s.excerpt) == 2000 and s.content_sha256 == sha256_text("full content 0 " * 300)
    with pytest.raises(ValidationError, match="uri or an internal_ref"):
        PackSource(name="x", excerpt="e", content_sha256="0" * 64, retrieved_at="t", confidence=0.5)
    with pytest.raises(ValidationError):
        PackSource(
            name="x",
            uri="u",
            excerpt="e" * 2001,
            content_sha256="0" * 64,
            retrieved_at="t",
            confidence=0.5,
        )
    with pytest.raises(ValidationError):
        PackSource(
            name="x",
            uri="u",
            excerpt="e",
            content_sha256="0" * 64,
            retrieved_at="t",
            confidence=1.5,
        )


def test_tool_calls_flag_contradictions_and_keep_failures():
    pack = build_evidence_pack(**fields())
    ok, failed = pack.tool_calls
    assert not ok.contradiction_flag and failed.contradiction_flag
    assert failed.status == "failed" and failed.error == "timeout after 30 s"
    with pytest.raises(ValidationError, match="contradiction_flag"):
        ToolCallRecord(
            tool_name="t", intended_action="a", actual_action="b", contradiction_flag=False
        )


def test_memo_must_cite_top_three_sources_in_each_language():
    bad = fields()
    bad["memo"] = {**bad["memo"], "primary": {**bad["memo"]["primary"], "body": "See [1]."}}
    with pytest.raises(ValidationError, match=r"memo\.en\.body.*\['\[2\]', '\[3\]'\]"):
        build_evidence_pack(**bad)
    refusal = fields(
        decision={
            "kind": "refusal",
            "text": "No evidence.",
            "status": "NO_EVIDENCE",
            "reason": "no candidates",
        },
        sources=[],
        memo={
            "primary": {
                "language": "en",
                "title": "Refused",
                "executive_summary": "No evidence.",
                "body": "Nothing found.",
            }
        },
    )
    assert build_evidence_pack(**refusal).decision.kind == "refusal"


def test_packs_are_immutable_and_revisions_point_at_parents():
    a = build_evidence_pack(**fields())
    with pytest.raises(ValidationError):
        a.query = "changed"  # type: ignore[misc]
    b = revise_pack(a, decision={"kind": "answer", "text": "Revised [1].", "status": "OK"})
    assert b.parent_pack_id == a.pack_id and b.pack_id != a.pack_id
    assert a.decision.text == "Mostly not [1][2]."
    assert verify_pack(b) == []
    with pytest.raises(ValueError, match="changes nothing"):
        revise_pack(b, query=b.query)
    with pytest.raises(ValueError, match="set by revise_pack"):
        revise_pack(b, parent_pack_id=a.pack_id)


def test_signing_detects_any_change():
    signed = sign_pack(build_evidence_pack(**fields()), KEY, "tenant-a/1")
    assert verify_pack(signed, {"tenant-a/1": KEY}, require_signature=True) == []
    assert verify_pack(signed, {"tenant-a/1": b"wrong"}) == ["signature does not match the pack"]
    assert "no key" in verify_pack(signed, {})[0]
    # tamper through the JSON: change an excerpt; recomputing the id does not help
    data = json.loads(pack_to_json(signed))
    data["sources"][0]["excerpt"] = "forged"
    forged = pack_from_json(json.dumps(data))
    assert "pack_id does not match the pack's content" in verify_pack(forged, {"tenant-a/1": KEY})
    data["pack_id"] = compute_pack_id(pack_content(forged))
    reid = pack_from_json(json.dumps(data))
    assert verify_pack(reid, {"tenant-a/1": KEY}) == ["signature does not match the pack"]
    unsigned = build_evidence_pack(**fields())
    assert verify_pack(unsigned, require_signature=True) == ["pack is not signed"]


def test_json_round_trip_and_html_export():
    pack = sign_pack(build_evidence_pack(**fields(query="<script>alert(1)</script>")), KEY, "k")
    text = pack_to_json(pack)
    assert pack_from_json(text) == pack and pack_to_json(pack_from_json(text)) == text
    page = pack_to_html(pack)
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert pack.pack_id in page and 'dir="rtl"' in page and "contradiction" in page
