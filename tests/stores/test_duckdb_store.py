"""What only the DuckDB store does: a BM25 index marked stale and rebuilt on read, batched BM25
equal to the fts extension's own macro. The shared store contract is in test_store_contract.py."""

import pytest

from aiblox.contracts import ItemRecord
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.stores import DuckDBStore, ingest_items
from aiblox.stores.duckdb_vectors import embeddings_by_key

DOCS = [
    ItemRecord(id="a", title="Hello world", text="the quick brown fox", metadata={"y": 2020}),
    ItemRecord(id="b", title="Foxes", text="foxes jumping over lazy dogs", metadata={"y": 2021}),
    ItemRecord(id="c", title="Databases", text="columnar storage and vectorised execution"),
]


@pytest.fixture()
def store(tmp_path):
    s = DuckDBStore(tmp_path / "s.duckdb")
    yield s
    s.close()


def test_changed_text_marks_the_index_stale_and_the_read_rebuilds_it(store):
    emb = CachedEmbedder(HashingEmbedder(), store)
    ingest_items(store, DOCS, emb, progress=False)
    assert [d for d, _ in store.fts_search_many(["fox"], 5)[0]] == ["b", "a"]
    old_hash, old_vec = store.item_hashes()["a"], store.item_vector_hashes(emb.model_id)["a"]
    changed = DOCS[0].model_copy(update={"text": "a treatise on zebras"})
    report = ingest_items(store, [changed, *DOCS[1:]], emb, progress=False)
    assert (report.items.updated, report.items.unchanged, report.vectors_written) == (1, 2, 1)
    assert store.item_hashes()["a"] != old_hash
    assert store.item_vector_hashes(emb.model_id)["a"] != old_vec
    assert store.fts_stale  # marked by the write...
    assert [d for d, _ in store.fts_search_many(["zebra"], 5)[0]] == ["a"]  # ...rebuilt on read
    assert not store.fts_stale
    assert [d for d, _ in store.fts_search_many(["fox"], 5)[0]] == ["b"]
    q = emb.embed(["a treatise on zebras"])
    assert store.vector_search_many(q, emb.model_id, 1)[0][0][0] == "a"


def test_batched_bm25_equals_match_bm25_macro(sample_store):
    store, _ = sample_store
    queries = ["bm25 term frequency saturation", "dense vector embeddings", "library catalogue"]
    batched = store.fts_search_many(queries, 10)
    for q, run in zip(queries, batched, strict=True):
        macro = store.con.execute(
            "SELECT id, fts_main_items.match_bm25(id, ?) AS s FROM items WHERE s IS NOT NULL "
            "ORDER BY s DESC, id LIMIT 10", [q]).fetchall()
        assert [d for d, _ in run] == [d for d, _ in macro]
        assert [s for _, s in run] == pytest.approx([s for _, s in macro], rel=1e-12)


def test_persists_across_reopen(tmp_path):
    path = tmp_path / "p.duckdb"
    with DuckDBStore(path) as s:
        ingest_items(s, DOCS, CachedEmbedder(HashingEmbedder(), s), progress=False)
        s.rebuild_fts()
    with DuckDBStore(path) as s:
        assert s.count_items() == 3 and not s.fts_stale
        assert s.fts_search_many(["fox"], 1)[0][0][0] == "b"
        assert s.get_items(["a"])["a"].metadata == {"y": 2020}


def test_embedding_lookup_by_row_ids_equals_the_read_by_key(tmp_path):
    """get_embeddings (row ids of the cached hashes, then the vectors of those rows) returns
    what one read by key returns, vector bytes included: none cached, some, all, duplicate
    hashes, one hash (read by equality), rows spread over DuckDB's row groups (122,880 rows
    each) and another model's rows beside them; and the same after the file is opened
    again read-only."""
    import hashlib

    import numpy as np

    rng = np.random.default_rng(0)
    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(130_000)]
    vectors = rng.standard_normal((len(hashes), 8)).astype(np.float32)
    path = tmp_path / "cache.duckdb"
    with DuckDBStore(path) as store:
        for start in range(0, len(hashes), 50_000):  # several writes, as ingest batches
            rows = zip(hashes[start:start + 50_000], vectors[start:start + 50_000], strict=True)
            assert store.put_embeddings("m", rows) == len(hashes[start:start + 50_000])
        store.put_embeddings("other", [(hashes[5], -vectors[5]), ("only-other", vectors[0])])
    at = {h: i for i, h in enumerate(hashes)}
    absent = [hashlib.sha256(f"absent {i}".encode()).hexdigest() for i in range(100)]
    cases = {
        "none cached": absent,
        "some": [hashes[3], absent[0], hashes[129_999], absent[1], hashes[64_000]],
        "all, spread (read by key)": [hashes[i] for i in range(0, 130_000, 997)],
        "a contiguous batch (by row id)": hashes[50_000:55_000] + absent[:5],
        "duplicates": [hashes[7], hashes[7], absent[2], hashes[122_880], hashes[7]],
        "another model's only": ["only-other"],
        "one (a query)": [hashes[100_001]],
        "one, not cached": [absent[3]],
    }
    for reopen in (False, True):
        with DuckDBStore(path, read_only=reopen) as store:
            for name, asked in cases.items():
                got = store.get_embeddings("m", asked)
                assert sorted(got) == sorted({h for h in asked if h in at}), name
                want = embeddings_by_key(store.con, "m", sorted(set(asked)))
                assert got.keys() == want.keys(), name
                for h, v in got.items():
                    assert v.dtype == np.float32 and v.tobytes() == want[h].tobytes(), name
                    assert v.tobytes() == vectors[at[h]].tobytes(), name
            assert store.get_embeddings("other", [hashes[5]])[hashes[5]].tobytes() == \
                (-vectors[5]).tobytes()


def test_item_vectors_in_id_order(tmp_path):
    """Item vectors come back in id order, batch by batch, equal to what was written, before
    and after vectors were replaced and items deleted; vectors of another model and of deleted
    items never show."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = [f"d{i:05d}" for i in range(2_000)]
    vecs = rng.standard_normal((len(ids), 8)).astype(np.float32)
    with DuckDBStore(tmp_path / "v.duckdb", dim=8) as store:
        store.upsert_items([ItemRecord(id=i, kind="doc", source="t", text=f"text {i}")
                            for i in ids])
        for start in range(0, len(ids), 700):  # several writes, as ingest batches
            store.set_item_vectors("m", [(i, "h", vecs[n]) for n, i in
                                         enumerate(ids[start:start + 700], start)])
        store.set_item_vectors("other", [(i, "h", -vecs[n]) for n, i in enumerate(ids[:50])])

        def read(batch_size):
            batches = list(store.iter_item_vectors("m", batch_size=batch_size))
            return [i for b, _ in batches for i in b], np.concatenate([m for _, m in batches])

        expect = dict(zip(ids, vecs, strict=True))
        for stage in ("in id order", "replaced and deleted"):
            for size in (333, 5_000):
                got_ids, got = read(size)
                assert got_ids == sorted(expect), (stage, size)
                assert got.tobytes() == np.stack([expect[i] for i in got_ids]).tobytes()
            whole_ids, whole = store.item_vectors("m")
            assert whole_ids == sorted(expect) and whole.tobytes() == got.tobytes()
            if stage != "in id order":
                break
            changed = ids[10:20] + ids[1_500:1_510]
            for i in changed:
                expect[i] = expect[i] * 2
            store.set_item_vectors("m", [(i, "h2", expect[i]) for i in changed])
            gone = ids[100:130]
            store.delete_items(gone)
            for i in gone:
                del expect[i]
