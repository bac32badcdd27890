"""What only the DuckDB store does: a BM25 index marked stale and rebuilt on read, batched BM25
equal to the fts extension's own macro. The shared store contract is in test_store_contract.py."""

import pytest

from aiblox.contracts import ItemRecord
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.stores import DuckDBStore, ingest_items

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
