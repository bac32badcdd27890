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


def test_list_and_drop(store):
    _hits(store)
    ix = StoreIndexes(store)
    assert len(ix.infos()) == 2
    assert ix.drop() == sorted(i.name for i in ix.infos()) or ix.infos() == []
    assert ix.infos() == []
