"""Chunk ids are stable across processes and differ between chunkers and parameter sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiblox.chunking import get_chunker, make_chunk_id
from aiblox.hashing import sha256_hex

TEXT = (
    "# Intro\nLate chunking cuts documents at query time. It keeps offsets exact.\n\n"
    "## Details\nÜnïcödé and emoji 😀 are fine. Windows overlap by a few tokens.\n"
) * 3

CONFIGS = [
    ("token_window", {"max_chunk_tokens": 16, "overlap_tokens": 4}),
    ("sentences", {"max_chunk_tokens": 16, "overlap_tokens": 0}),
    ("headings", {"max_chunk_tokens": 16, "include_headers": False}),
    ("whole", {}),
]

SCRIPT = """
import json, sys
from aiblox.chunking import get_chunker
text, configs = json.loads(sys.stdin.read())
out = [[c.chunk_id for c in get_chunker(n, **p).chunk("item-7", text, "c0ffee")]
       for n, p in configs]
print(json.dumps(out))
"""


def ids_in_subprocess(seed: str) -> list[list[str]]:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONHASHSEED": seed,
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps([TEXT, CONFIGS]),
                            capture_output=True, text=True, env=env, check=True, timeout=120)
    return json.loads(result.stdout)


def test_ids_are_stable_across_processes_and_hash_seeds() -> None:
    here = [[c.chunk_id for c in get_chunker(n, **p).chunk("item-7", TEXT, "c0ffee")]
            for n, p in CONFIGS]
    assert all(here)
    assert ids_in_subprocess("1") == here
    assert ids_in_subprocess("4242") == here


def test_chunk_id_is_the_documented_hash() -> None:
    expected = sha256_hex({"item_id": "a", "content_hash": "h", "chunker_id": "whole(v=1)",
                           "position": 3})[:24]
    assert make_chunk_id("a", "h", "whole(v=1)", 3) == expected
    assert len(expected) == 24


@pytest.mark.parametrize(
    ("field", "other"),
    [("item_id", "b"), ("content_hash", "h2"), ("chunker_id", "whole(v=2)"), ("position", 4)],
)
def test_every_input_changes_the_id(field: str, other: object) -> None:
    base = {"item_id": "a", "content_hash": "h", "chunker_id": "whole(v=1)", "position": 3}
    assert make_chunk_id(**{**base, field: other}) != make_chunk_id(**base)


def test_parameter_sets_never_share_a_chunker_id() -> None:
    chunkers = [
        get_chunker(name, max_chunk_tokens=m, overlap_tokens=o, include_headers=h, encoding=e)
        for name in ("token_window", "sentences", "headings")
        for m in (64, 128)
        for o in (0, 8)
        for h in (True, False)
        for e in ("cl100k_base", "o200k_base")
    ]
    ids = {c.chunker_id for c in chunkers}
    # include_headers only changes the headings chunker: 16 headings ids, 8 for each other.
    assert len(ids) == 16 + 8 + 8
    assert get_chunker("whole", encoding="cl100k_base").chunker_id not in ids
    assert (get_chunker("whole", encoding="cl100k_base").chunker_id
            != get_chunker("whole", encoding="o200k_base").chunker_id)


def test_chunk_ids_differ_between_parameter_sets_and_documents() -> None:
    a = get_chunker("token_window", max_chunk_tokens=16, overlap_tokens=4)
    b = get_chunker("token_window", max_chunk_tokens=16, overlap_tokens=5)
    ids_a = [c.chunk_id for c in a.chunk("x", TEXT, "h")]
    ids_b = [c.chunk_id for c in b.chunk("x", TEXT, "h")]
    ids_changed = [c.chunk_id for c in a.chunk("x", TEXT, "h-new")]
    assert len(set(ids_a)) == len(ids_a)
    assert not set(ids_a) & set(ids_b)
    assert not set(ids_a) & set(ids_changed)


def test_chunker_id_spells_out_parameters() -> None:
    assert (get_chunker("token_window").chunker_id
            == "token_window(max=256,overlap=32,enc=cl100k_base,v=2)")
    assert get_chunker("sentences").chunker_id == "sentences(max=256,overlap=0,enc=cl100k_base,v=3)"
    assert (get_chunker("headings", include_headers=False).chunker_id
            == "headings(max=256,overlap=0,headers=false,enc=cl100k_base,v=4)")
    assert get_chunker("whole").chunker_id == "whole(enc=cl100k_base,v=1)"


def test_chunks_match_document_detects_stale_or_corrupt_chunks() -> None:
    from aiblox.chunking import chunks_match_document

    chunker = get_chunker("sentences", max_chunk_tokens=16)
    chunks = chunker.chunk("item-7", TEXT, "c0ffee")
    assert chunks_match_document(chunks, "item-7", TEXT, "c0ffee", chunker.chunker_id)
    assert chunks_match_document([], "item-7", TEXT, "c0ffee", chunker.chunker_id)
    changed = TEXT.replace("Late", "Lazy")
    assert not chunks_match_document(chunks, "item-7", changed, "c0ffee", chunker.chunker_id)
    assert not chunks_match_document(chunks, "item-7", TEXT, "beef", chunker.chunker_id)
    assert not chunks_match_document(chunks, "item-8", TEXT, "c0ffee", chunker.chunker_id)
    assert not chunks_match_document(chunks, "item-7", TEXT, "c0ffee", "other(v=1)")
    assert not chunks_match_document(chunks[1:], "item-7", TEXT, "c0ffee", chunker.chunker_id)
    forged = chunks[0].model_copy(update={"chunk_id": "0" * 24})
    assert not chunks_match_document([forged, *chunks[1:]], "item-7", TEXT, "c0ffee",
                                     chunker.chunker_id)
    shifted = chunks[0].model_copy(update={"end_idx": chunks[0].end_idx + 1})
    assert not chunks_match_document([shifted], "item-7", TEXT, "c0ffee", chunker.chunker_id)
