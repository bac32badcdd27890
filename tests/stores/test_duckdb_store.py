"""The DuckDB store on real files: idempotent ingest, never-stale BM25, vectors, filters."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aiblox.contracts import ItemRecord, VectorConfig
from aiblox.embedding import CachedEmbedder, HashingEmbedder, VectorImportError, import_vectors
from aiblox.stores import DuckDBStore, StoreError, ingest_items

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


def test_ingest_is_idempotent(store):
    emb = CachedEmbedder(HashingEmbedder(), store)
    first = ingest_items(store, DOCS, emb, progress=False)
    assert (first.items.inserted, first.vectors_written, first.embedding_cache_misses) == (3, 3, 3)
    hashes = store.item_hashes()
    again = ingest_items(store, DOCS, emb, progress=False)
    assert (again.items.unchanged, again.items.inserted, again.items.updated) == (3, 0, 0)
    assert again.vectors_written == 0 and again.embedding_cache_misses == 0
    assert store.item_hashes() == hashes and store.count_items() == 3


def test_changed_text_updates_hash_index_and_vector(store):
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


def test_index_is_never_stale_after_delete(store):
    ingest_items(store, DOCS, None, progress=False)
    assert store.fts_search_many(["columnar"], 5)[0][0][0] == "c"
    assert store.delete_items(["c", "zz"]) == 1
    assert store.fts_search_many(["columnar"], 5) == [[]]


def test_vector_distances_and_min_score(store):
    emb = CachedEmbedder(HashingEmbedder(), store)
    ingest_items(store, DOCS, emb, progress=False)
    q = emb.embed(["quick brown fox"])
    cos = store.vector_search_many(q, emb.model_id, 3, VectorConfig(distance="cosine"))[0]
    ip = store.vector_search_many(q, emb.model_id, 3, VectorConfig(distance="ip"))[0]
    l2 = store.vector_search_many(q, emb.model_id, 3, VectorConfig(distance="l2"))[0]
    assert cos[0][0] == ip[0][0] == l2[0][0] == "a"
    for (_, c), (_, i) in zip(cos, ip, strict=True):  # unit vectors: cosine == inner product
        assert c == pytest.approx(i, abs=1e-6)
    for (_, c), (_, d) in zip(cos, l2, strict=True):  # |a-b| = sqrt(2 - 2cos)
        assert -d == pytest.approx(np.sqrt(max(0.0, 2 - 2 * c)), abs=1e-5)
    gated = store.vector_search_many(q, emb.model_id, 3, VectorConfig(min_score=cos[0][1]))[0]
    assert [d for d, _ in gated] == ["a"]


def test_metadata_filters(store):
    emb = CachedEmbedder(HashingEmbedder(), store)
    ingest_items(store, DOCS, emb, progress=False)
    assert [d for d, _ in store.fts_search_many(["fox"], 5, filters={"metadata.y": 2021})[0]] \
        == ["b"]
    q = emb.embed(["fox"])
    got = store.vector_search_many(q, emb.model_id, 5, filters={"id": ["a", "c"]})[0]
    assert sorted(d for d, _ in got) == ["a", "c"]
    with pytest.raises(StoreError, match="unknown filter field 'year'"):
        store.fts_search_many(["fox"], 5, filters={"year": 2020})


def test_persists_across_reopen(tmp_path):
    path = tmp_path / "p.duckdb"
    with DuckDBStore(path) as s:
        ingest_items(s, DOCS, CachedEmbedder(HashingEmbedder(), s), progress=False)
        s.rebuild_fts()
    with DuckDBStore(path) as s:
        assert s.count_items() == 3 and not s.fts_stale
        assert s.fts_search_many(["fox"], 1)[0][0][0] == "b"
        assert s.get_items(["a"])["a"].metadata == {"y": 2020}


def test_wrong_dimension_refused(store):
    with pytest.raises(StoreError, match="384-dim"):
        store.set_item_vectors("m", [("a", "h", np.zeros(10))])


def _write_vectors(path, rows):
    pq.write_table(pa.table({"_id": [r[0] for r in rows], "text_sha256": [r[1] for r in rows],
                             "vector": [r[2] for r in rows]}), path)


def test_vector_import_checks_every_row_before_writing(store, tmp_path):
    good = ("d1", "a" * 64, [0.1] * 384)
    ok = tmp_path / "ok.parquet"
    _write_vectors(ok, [good])
    assert import_vectors(ok, store, "m", 384) == 1
    assert import_vectors(ok, store, "m", 384) == 0  # already cached
    for rows, field in (([good, ("d2", "b" * 64, [0.1] * 383)], "vector"),
                        ([good, ("d3", "not-a-hash", [0.1] * 384)], "text_sha256"),
                        ([good, ("d4", "c" * 64, [float("nan")] * 384)], "vector")):
        bad = tmp_path / "bad.parquet"
        _write_vectors(bad, rows)
        with pytest.raises(VectorImportError) as err:
            import_vectors(bad, store, "m", 384)
        assert err.value.row == 1 and err.value.field == field and "bad.parquet" in str(err.value)
    assert len(store.get_embeddings("m", ["a" * 64, "b" * 64, "c" * 64])) == 1
