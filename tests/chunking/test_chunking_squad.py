"""Chunkers on the shared SQuAD v1.1 dev paragraphs (slow tier: reads a shared dataset)."""

from __future__ import annotations

import json
import time

import pytest

from aiblox.chunking import GoldSpan, answer_recall_at_k, get_chunker
from tests.conftest import shared_dataset

pytestmark = pytest.mark.slow

CHUNKERS = [
    ("token_window", {"max_chunk_tokens": 64, "overlap_tokens": 8}),
    ("sentences", {"max_chunk_tokens": 64}),
    ("headings", {"max_chunk_tokens": 64}),
    ("whole", {}),
]


@pytest.fixture(scope="module")
def squad() -> tuple[dict[str, str], dict[str, list[GoldSpan]]]:
    root = shared_dataset("squad-v1.1-dev")
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        docs = {row["_id"]: row["text"] for row in map(json.loads, fh)}
    answers: dict[str, list[GoldSpan]] = {}
    with open(root / "answers.jsonl", encoding="utf-8") as fh:
        for row in map(json.loads, fh):
            answers[row["_id"]] = [GoldSpan(row["corpus-id"], text, start)
                                   for text, start in zip(row["answers"], row["answer_starts"],
                                                          strict=True)]
    return docs, answers


@pytest.mark.parametrize(("name", "params"), CHUNKERS)
def test_two_thousand_paragraphs_chunk_fast_and_exactly(squad, name, params) -> None:
    docs, _ = squad
    ids = sorted(docs)[:2000]
    chunker = get_chunker(name, **params)
    chunker.chunk("warm-up", "Warm up.", "h")
    started = time.perf_counter()
    chunks = {i: chunker.chunk(i, docs[i], "h") for i in ids}
    elapsed = time.perf_counter() - started
    assert elapsed < 10.0, f"{chunker.chunker_id}: {elapsed:.2f}s for 2,000 paragraphs"
    for i in ids:
        assert chunks[i], i
        for c in chunks[i]:
            assert docs[i][c.start_idx:c.end_idx] == c.text
            assert name == "whole" or c.token_count <= params["max_chunk_tokens"]


def test_gold_spans_line_up_with_chunk_offsets(squad) -> None:
    """With whole-document chunks every gold span is found by offsets: the offsets agree."""
    docs, answers = squad
    qids = sorted(answers)[:3000]
    whole = get_chunker("whole")
    run = {}
    for q in qids:
        doc_id = answers[q][0].doc_id
        run[q] = whole.chunk(doc_id, docs[doc_id], "h")
    mean, _ = answer_recall_at_k(run, {q: answers[q] for q in qids}, k=1)
    assert mean == 1.0
    # Small windows cut some answers in half, so recall by span drops below 1 but stays high.
    windows = get_chunker("token_window", max_chunk_tokens=32, overlap_tokens=8)
    run = {}
    for q in qids:
        doc_id = answers[q][0].doc_id
        run[q] = windows.chunk(doc_id, docs[doc_id], "h")
    mean, _ = answer_recall_at_k(run, {q: answers[q] for q in qids}, k=100)
    assert 0.9 < mean < 1.0
