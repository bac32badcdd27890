"""Prompt Contract V1 is frozen: template bytes, sections, refusal string, formats."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from aiblox.assembly import (
    PROMPT_CONTRACT_VERSION,
    REFUSAL_TEXT,
    SECTION_HEADERS,
    TEMPLATE_SHA256,
    PromptContractError,
    load_prompt_contract,
    parse_prompt,
    render_prompt,
)
from aiblox.assembly.prompt import contract as contract_module

SEED_REFUSAL = (
    b"NO_EVIDENCE: The provided evidence does not contain sufficient information to answer this"
    b" question."
)


def _template_bytes() -> bytes:
    return resources.files("aiblox.assembly.prompt").joinpath("prompt_contract_v1.txt").read_bytes()


def test_template_file_matches_the_recorded_sha256() -> None:
    # Editing prompt_contract_v1.txt breaks this test on purpose: Prompt Contract V1 is frozen.
    # A changed template needs a new contract version (new file, new constant), not an edit.
    assert hashlib.sha256(_template_bytes()).hexdigest() == TEMPLATE_SHA256
    assert PROMPT_CONTRACT_VERSION == "PROMPT_CONTRACT_V1"


def test_a_changed_template_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    load_prompt_contract.cache_clear()
    monkeypatch.setattr(contract_module, "TEMPLATE_SHA256", "0" * 64)
    try:
        with pytest.raises(PromptContractError, match="frozen"):
            load_prompt_contract()
    finally:
        monkeypatch.undo()
        load_prompt_contract.cache_clear()
    assert load_prompt_contract().template_text.encode() == _template_bytes()


def test_refusal_string_is_the_seed_text_byte_for_byte_in_the_system_section() -> None:
    assert REFUSAL_TEXT.encode("utf-8") == SEED_REFUSAL
    text = _template_bytes().decode()
    assert text.count(REFUSAL_TEXT) == 1
    contract = load_prompt_contract()
    assert REFUSAL_TEXT in contract.system_section
    assert text.index(REFUSAL_TEXT) < text.index(SECTION_HEADERS[1])


def test_five_sections_in_order_each_once() -> None:
    lines = _template_bytes().decode().split("\n")
    positions = [lines.index(h) for h in SECTION_HEADERS]
    assert positions == sorted(positions)
    assert all(lines.count(h) == 1 for h in SECTION_HEADERS)
    assert lines[0] == SECTION_HEADERS[0]


def test_closed_world_and_no_implicit_knowledge_rules_are_stated() -> None:
    contract = load_prompt_contract()
    system = contract.system_section
    assert "only use the evidence provided" in system
    assert "must not use external knowledge" in system
    assert "must refuse" in system
    safety = contract.safety_section
    for banned in ("entities", "dates", "numeric values", "procedural steps", "acronym expansions"):
        assert banned in safety
    assert "untrusted data" in safety
    out = contract.output_format_section
    assert "[C0], [C1], [C2]" in out
    text = contract.template_text.casefold()
    for permissive in ("general knowledge is allowed", "you may use your own knowledge"):
        assert permissive not in text


def test_render_then_parse_round_trip() -> None:
    block = (
        "[C0 | chunk_id=a1 | knowledge_id=k1 | source=s1]\nFirst chunk.\n\n"
        "[C1 | chunk_id=a2 | knowledge_id=k2 | source=s2]\nSecond chunk."
    )
    prompt = render_prompt(block, "Why?")
    parsed = parse_prompt(prompt)
    assert [e.anchor for e in parsed.evidence] == ["C0", "C1"]
    assert [e.chunk_id for e in parsed.evidence] == ["a1", "a2"]
    assert parsed.evidence[1].text == "Second chunk."
    assert parsed.question == "Why?"
    assert prompt.startswith(SECTION_HEADERS[0])


@pytest.mark.parametrize(
    "block",
    [
        "[C1 | chunk_id=a | knowledge_id=k | source=s]\ntext",  # does not start at C0
        "[C0 | chunk_id=a | knowledge_id=k | source=s]\nx\n\n[C2 | chunk_id=b | knowledge_id=k "
        "| source=s]\ny",  # gap
        "[C0 | chunk_id=a | knowledge_id=k]\ntext",  # missing field
        "[C0 | chunk_id=a | knowledge_id=k | source=s | page=3]\ntext",  # extra metadata
        "[C0 | chunk_id=a | knowledge_id=k | source=s]\nline one\nline two",  # two lines
    ],
)
def test_malformed_evidence_is_refused(block: str) -> None:
    with pytest.raises(PromptContractError):
        parse_prompt(render_prompt(block, "Why?"))


def test_reordered_or_edited_sections_are_refused() -> None:
    prompt = render_prompt("[C0 | chunk_id=a | knowledge_id=k | source=s]\nx", "Why?")
    with pytest.raises(PromptContractError):
        parse_prompt(prompt.replace("must refuse", "may refuse"))
    with pytest.raises(PromptContractError):
        parse_prompt(prompt + "\nExtra hidden section")
    head, tail = prompt.split("### EVIDENCE ###")
    with pytest.raises(PromptContractError):
        parse_prompt("### EVIDENCE ###" + tail + head)
