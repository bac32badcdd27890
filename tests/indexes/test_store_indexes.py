"""A store's indexes are built on first use, reused after, rebuilt when the items change or a
file is damaged, never served stale; they can be listed and dropped."""

from __future__ import annotations

import json

import pytest

from aiblox.contracts import ItemRecord, RetrievalPrefs
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.indexes import StoreIndexes, forget_loaded
from aiblox.retrieval import HybridRetriever
from aiblox.stores import DuckDBStore


@pytest.fixture()
def store(tmp_path, sample_dataset):
    from aiblox.engine.workspace import prepare_store

    s = DuckDBStore(tmp_path / "s.duckdb")
    prepare_store(s, sample_dataset, CachedEmbedder(HashingEmbedder(), s), progress=False)
    forget_loaded()
    yield s
    s.close()
    forget_loaded()


def _hits(store, mode="hybrid", query="BM25 term frequency saturation"):
    r = HybridRetriever(store, CachedEmbedder(HashingEmbedder(), store))
    sig = r.signals([RetrievalPrefs(query_text=query, mode=mode)])
    return sig, r.indexes


def test_built_once_then_read_back(store):
    sig, ix = _hits(store)
    assert sorted(n.split("-")[0] for n in ix.built) == ["bm25", "knn"]
    assert sig.text[0][0][0] == "d01"
    forget_loaded()
    again, ix2 = _hits(store)
    assert ix2.built == [] and again == sig
    infos = {i.kind: i for i in ix2.infos()}
    assert set(infos) == {"bm25", "knn"} and all(i.current and i.ok for i in infos.values())
    assert infos["bm25"].n == 40 and infos["bm25"].size_bytes > 0


def test_changed_items_get_a_new_index_never_the_stale_one(store):
    sig, ix = _hits(store, "bm25", "zebra")
    assert sig.text == [[]]
    store.upsert_items([ItemRecord(id="zz", title="Zebra", text="a zebra okapi")])
    sig2, ix2 = _hits(store, "bm25", "zebra")
    assert sig2.text[0][0][0] == "zz" and ix2.built
    names = [i.name for i in ix2.infos() if i.kind == "bm25"]
    assert len(names) == 1  # the superseded index was dropped


@pytest.mark.parametrize("damage", ["truncate", "flip", "manifest", "delete"])
def test_a_damaged_index_is_rebuilt(store, damage):
    sig, ix = _hits(store, "bm25")
    folder = ix.root / next(n for n in ix.built if n.startswith("bm25"))
    target = folder / "data.npy"
    if damage == "truncate":
        target.write_bytes(target.read_bytes()[:-16])
    elif damage == "flip":
        raw = bytearray(target.read_bytes())
        raw[-3] ^= 0x40
        target.write_bytes(bytes(raw))
    elif damage == "manifest":
        m = json.loads((folder / "manifest.json").read_text())
        m["key"] = "0" * 64  # another version's or another content's index
        (folder / "manifest.json").write_text(json.dumps(m))
    else:
        target.unlink()
    forget_loaded()
    again, ix2 = _hits(store, "bm25")
    assert ix2.rebuilt == [folder.name] and again == sig


def _reshaped(m):
    """Manifests that are valid JSON but not of a build's shape (QA: ``[]`` crashed ``index
    list``/``build``, ``search`` and ``eval`` until the index was dropped)."""
    def files(meta):
        return {**m, "files": {**m["files"], "data.npy": meta}}

    size, sha = m["files"]["data.npy"]["size"], m["files"]["data.npy"]["sha256"]
    return [[], "manifest", 3, None, {**m, "key": 7}, {**m, "files": []},
            {**m, "spec": "bm25"}, {**m, "n": "40"}, {k: v for k, v in m.items() if k != "n"},
            files({"size": str(size), "sha256": sha}), files({"size": True, "sha256": sha}),
            files({"size": -1, "sha256": sha}), files({"sha256": sha}),
            files({"size": size, "sha256": None}), files([size, sha]),
            {**m, "files": {**m["files"], "../s.duckdb": {"size": 1, "sha256": "0"}}}]


def test_a_manifest_of_another_shape_is_no_readable_manifest(store):
    sig, ix = _hits(store, "bm25")
    folder = ix.root / next(n for n in ix.built if n.startswith("bm25"))
    good = json.loads((folder / "manifest.json").read_text())
    for bad in _reshaped(good):
        (folder / "manifest.json").write_text(json.dumps(bad))
        forget_loaded()
        (info,) = StoreIndexes(store).infos()
        assert (info.name, info.kind, info.ok, info.current) == (folder.name, "bm25", False,
                                                                 False), bad
        again, ix2 = _hits(store, "bm25")
        assert ix2.rebuilt == [folder.name] and again == sig, bad
        assert ix2.damage == {folder.name: "no readable manifest"}
    (folder / "manifest.json").unlink()
    assert [(i.kind, i.ok, i.current) for i in StoreIndexes(store).infos()] == [
        ("bm25", False, False)]


def test_list_and_drop(store):
    _hits(store)
    ix = StoreIndexes(store)
    assert len(ix.infos()) == 2
    assert ix.drop() == sorted(i.name for i in ix.infos()) or ix.infos() == []
    assert ix.infos() == []


def _age(folder, seconds=60):
    """Date every file of an index back, as if built ``seconds`` ago."""
    import os
    import time

    for p in folder.iterdir():
        t = time.time() - seconds
        os.utime(p, (t, t))


def test_a_checked_index_is_not_hashed_again_until_a_file_changes(store, monkeypatch):
    import aiblox.indexes.store_indexes as si

    sig, ix = _hits(store, "bm25")
    folder = ix.root / next(n for n in ix.built if n.startswith("bm25"))
    _age(folder)
    digests = []
    real = si._file_digest
    monkeypatch.setattr(si, "_file_digest", lambda p: digests.append(p.name) or real(p))
    forget_loaded()
    _hits(store, "bm25")  # the first open since the build: every file hashed, then recorded
    n_files = len(json.loads((folder / "manifest.json").read_text())["files"])
    assert len(digests) == n_files and (folder / si.VERIFIED).exists()
    forget_loaded()
    again, ix2 = _hits(store, "bm25")  # unchanged since: trusted, nothing hashed
    assert len(digests) == n_files and ix2.rebuilt == [] and again == sig
    target = folder / "data.npy"  # the same size, a byte flipped: a new mtime, a real check
    raw = bytearray(target.read_bytes())
    raw[-3] ^= 0x40
    target.write_bytes(bytes(raw))
    forget_loaded()
    again, ix3 = _hits(store, "bm25")
    assert ix3.rebuilt == [folder.name] and again == sig


def test_a_file_changed_just_before_its_check_is_checked_again(store, monkeypatch):
    import aiblox.indexes.store_indexes as si

    _, ix = _hits(store, "bm25")
    folder = ix.root / next(n for n in ix.built if n.startswith("bm25"))
    digests = []
    real = si._file_digest
    monkeypatch.setattr(si, "_file_digest", lambda p: digests.append(p.name) or real(p))
    _age(folder, -60)  # modified at (or after) its checks: a write in their clock tick could hide
    for _ in range(2):
        forget_loaded()
        _hits(store, "bm25")
    n_files = len(json.loads((folder / "manifest.json").read_text())["files"])
    assert len(digests) == 2 * n_files
