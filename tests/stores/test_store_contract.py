"""The store contract, one suite for every backend (``store`` runs on DuckDB and PostgreSQL):
idempotent ingest, fresh full-text results after writes, vectors, filters, ties, caches."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aiblox.chunking import get_chunker
from aiblox.contracts import ItemRecord, VectorConfig
from aiblox.embedding import CachedEmbedder, HashingEmbedder, VectorImportError, import_vectors
from aiblox.hashing import sha256_text
from aiblox.stores import (
    ChunkCache,
    ChunkCacheEntry,
    ChunkCacheKey,
    DamagedCachedVectors,
    DuckDBChunkCache,
    Store,
    StoreError,
    ingest_items,
)

DOCS = [
    ItemRecord(id="a", title="Hello world", text="the quick brown fox", metadata={"y": 2020}),
    ItemRecord(id="b", title="Foxes", text="foxes jumping over lazy dogs", metadata={"y": 2021}),
    ItemRecord(id="c", title="Databases", text="columnar storage and vectorised execution"),
]


def _reopen(store):
    if store.kind == "duckdb":
        from aiblox.stores import DuckDBStore

        return DuckDBStore(store.location)
    from aiblox.stores.postgres import PostgresStore

    return PostgresStore(store.url)


def _chunk_cache(store) -> ChunkCache:
    return DuckDBChunkCache(store) if store.kind == "duckdb" else store.chunk_cache()


def test_is_a_store(store):
    assert isinstance(store, Store) and store.kind in ("duckdb", "postgres")


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
    assert [d for d, _ in store.fts_search_many(["zebra"], 5)[0]] == ["a"]
    assert [d for d, _ in store.fts_search_many(["fox"], 5)[0]] == ["b"]
    q = emb.embed(["a treatise on zebras"])
    assert store.vector_search_many(q, emb.model_id, 1)[0][0][0] == "a"


def test_search_is_fresh_after_delete(store):
    ingest_items(store, DOCS, None, progress=False)
    assert store.fts_search_many(["columnar"], 5)[0][0][0] == "c"
    assert store.delete_items(["c", "zz"]) == 1
    assert store.fts_search_many(["columnar"], 5) == [[]]
    assert store.count_items() == 2 and store.delete_items([]) == 0


def test_batched_fts_keeps_query_order_and_k(store):
    ingest_items(store, DOCS, None, progress=False)
    runs = store.fts_search_many(["columnar", "nothing matches xyzzy", "fox", "lazy dogs"], 1)
    assert [[d for d, _ in r] for r in runs] == [["c"], [], ["b"], ["b"]]
    assert store.fts_search_many([], 5) == []


def test_ties_break_on_id_ascending(store):
    twins = [ItemRecord(id=i, title="twin", text="identical twin text") for i in ("t2", "t1", "t3")]
    emb = CachedEmbedder(HashingEmbedder(), store)
    ingest_items(store, twins + DOCS, emb, progress=False)
    fts = store.fts_search_many(["identical twin"], 10)[0]
    assert [d for d, _ in fts] == ["t1", "t2", "t3"] and len({s for _, s in fts}) == 1
    vec = store.vector_search_many(emb.embed(["identical twin text"]), emb.model_id, 2)[0]
    assert [d for d, _ in vec] == ["t1", "t2"]


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
    assert store.vector_search_many(q, "other-model", 3) == [[]]


def test_metadata_filters(store):
    emb = CachedEmbedder(HashingEmbedder(), store)
    ingest_items(store, DOCS, emb, progress=False)
    assert [d for d, _ in store.fts_search_many(["fox"], 5, filters={"metadata.y": 2021})[0]] \
        == ["b"]
    assert [d for d, _ in store.fts_search_many(
        ["fox"], 5, filters={"metadata.y": [2020, 2021], "kind": "doc"})[0]] == ["b", "a"]
    q = emb.embed(["fox"])
    got = store.vector_search_many(q, emb.model_id, 5, filters={"id": ["a", "c"]})[0]
    assert sorted(d for d, _ in got) == ["a", "c"]
    assert store.vector_search_many(q, emb.model_id, 5, filters={"source": "elsewhere"}) == [[]]
    with pytest.raises(StoreError, match="unknown filter field 'year'"):
        store.fts_search_many(["fox"], 5, filters={"year": 2020})


def test_a_boolean_metadata_filter_matches_boolean_fields(store):
    """``{"metadata.reviewed": True}`` matched nothing, and so did ``False``: the filter was
    compared as Python's ``"True"`` with the field's JSON text ``true``."""
    docs = [d.model_copy(update={"metadata": {**d.metadata, "reviewed": d.id != "b"}})
            for d in DOCS]
    ingest_items(store, docs, None, progress=False)
    for flag, want in ((True, ["a"]), (False, ["b"])):
        got = store.fts_search_many(["fox"], 5, filters={"metadata.reviewed": flag})[0]
        assert [d for d, _ in got] == want, flag


def test_a_numeric_metadata_filter_matches_by_value(store):
    """``{"metadata.v": 2}`` missed a field stored as ``2.0`` (and ``2.0`` missed ``2``): the
    values were compared as text. A number now matches a number field of the same value, on
    both stores (an integer exactly, at any size below 2**127), and a string or boolean field
    by its text (:mod:`aiblox.contracts.filter_rule`)."""
    values = {"i": 2, "f": 2.0, "s": "2", "h": 2.5, "b": True, "big": 2**60, "none": None}
    docs = [ItemRecord(id=k, title="fox", text="the fox", metadata={"v": v})
            for k, v in values.items()]
    ingest_items(store, [*docs, ItemRecord(id="missing", text="the fox")], None, progress=False)

    def ids(value):
        return sorted(store.matching_ids({"metadata.v": value}))

    assert ids(2) == ["f", "i", "s"]   # "s" by its text, as before
    assert ids(2.0) == ["f", "i"]
    assert ids([2.5, "nothing"]) == ["h"]
    assert ids(1) == [] and ids(True) == ["b"]
    assert ids(2**60) == ["big"] and ids(2**60 + 1) == []
    hits = store.fts_search_many(["fox"], 10, filters={"metadata.v": 2.0, "kind": "doc"})[0]
    assert sorted(d for d, _ in hits) == ["f", "i"]


def test_a_dotted_metadata_key_is_a_path_on_every_store(store):
    """``metadata.source.year`` was a JSON path on DuckDB and the literal key ``source.year`` on
    PostgreSQL: one filter, two answers. A dotted key is now a path into nested objects on both,
    each name taken whole (spaces, quotes and non-ASCII letters included)."""
    metas = {"nested": {"source": {"year": 2020, "année": "x"}},
             "flat": {"source.year": 2020},
             "odd": {'my "key"': {"n": 2.0}},
             "deeper": {"source": {"year": {"v": 2020}}}}
    docs = [ItemRecord(id=k, title="fox", text="the fox", metadata=m) for k, m in metas.items()]
    ingest_items(store, docs, None, progress=False)

    def ids(key, value):
        return sorted(store.matching_ids({key: value}))

    assert ids("metadata.source.year", 2020) == ["nested"]
    assert ids("metadata.source.année", "x") == ["nested"]
    assert ids('metadata.my "key".n', 2) == ["odd"]
    assert ids("metadata.source.year.v", [2020]) == ["deeper"]
    assert ids("metadata.source", "2020") == []
    hits = store.fts_search_many(["fox"], 10, filters={"metadata.source.year": 2020})[0]
    assert [d for d, _ in hits] == ["nested"]
    for bad in ("metadata.source..year", "metadata.source."):
        with pytest.raises(StoreError, match="an empty name in the metadata path"):
            store.matching_ids({bad: 1})


def test_items_round_trip_and_persist_across_reopen(store):
    odd = ItemRecord(id="o'1", kind="note", source="src", source_ref="file.txt:3",
                     title="Ünïcode \"quotes\"", text="back\\slash; DROP TABLE items; --",
                     metadata={"nested": {"k": [1, 2.5, None, True]}, "s": "x"})
    ingest_items(store, [*DOCS, odd], None, progress=False)
    got = store.get_items(["o'1", "a", "missing"])
    assert set(got) == {"o'1", "a"} and got["o'1"] == odd and got["o'1"].content_hash == \
        odd.content_hash
    with pytest.raises(StoreError, match="duplicate item id"):
        store.upsert_items([DOCS[0].model_copy(update={"text": "x"}),
                            DOCS[0].model_copy(update={"text": "y"})])
    again = _reopen(store)
    try:
        assert again.count_items() == 4 and again.item_hashes() == store.item_hashes()
        assert again.fts_search_many(["fox"], 1)[0][0][0] == "b"
    finally:
        again.close()


def test_item_texts_are_the_items_ids_titles_and_texts_in_order(store):
    """What an index build reads (:meth:`Store.iter_item_texts`): every item's id, title and
    text, ids ascending in code point order, in batches, as :meth:`Store.iter_items` has them."""
    items = [*DOCS, ItemRecord(id="B", kind="doc", source="t", title="", text="upper"),
             ItemRecord(id="ä", kind="doc", source="t", title="t", text="umlaut")]
    ingest_items(store, items, None, progress=False)
    texts = [list(batch) for batch in store.iter_item_texts(batch_size=2)]
    records = [it for batch in store.iter_items(batch_size=2) for it in batch]
    assert [len(b) for b in texts] == [2, 2, 1]
    assert [tuple(t) for b in texts for t in b] == [(it.id, it.title, it.text) for it in records]
    assert [t.id for b in texts for t in b] == sorted(it.id for it in items)


def test_wrong_dimension_refused(store):
    with pytest.raises(StoreError, match="384-dim"):
        store.set_item_vectors("m", [("a", "h", np.zeros(10))])


def test_item_vectors_read_whole_or_in_batches_alike(store):
    from aiblox.stores.identity import store_vectors_digest, vectors_digest

    items = [ItemRecord(id=f"d{i:02d}", title="", text=f"text {i}") for i in range(23)]
    store.upsert_items(items)
    rng = np.random.default_rng(7)
    store.set_item_vectors("m", [(it.id, "h", rng.standard_normal(384).astype(np.float32))
                                 for it in reversed(items)])
    ids, matrix = store.item_vectors("m")
    assert ids == sorted(it.id for it in items) and matrix.shape == (23, 384)
    batches = list(store.iter_item_vectors("m", batch_size=5))
    assert [len(b) for b, _ in batches] == [5, 5, 5, 5, 3]
    assert [i for b, _ in batches for i in b] == ids
    assert np.array_equal(np.vstack([v for _, v in batches]), matrix)
    # the streamed digest (two passes, one batch in memory) is the whole-matrix digest
    assert store_vectors_digest(store, "m") == vectors_digest("m", ids, matrix)
    assert list(store.iter_item_vectors("other")) == []


def test_embedding_cache_counts_new_rows(store):
    v = np.arange(384, dtype=np.float32) / 384
    assert store.put_embeddings("m", [("h1", v), ("h2", v * 2), ("h1", v)]) == 2
    assert store.put_embeddings("m", [("h1", v), ("h3", v)]) == 1
    got = store.get_embeddings("m", ["h1", "h2", "nope"])
    assert sorted(got) == ["h1", "h2"]
    np.testing.assert_array_equal(got["h2"], v * 2)
    assert got["h1"].dtype == np.float32
    assert store.get_embeddings("other", ["h1"]) == {} and store.get_embeddings("m", []) == {}


def test_cached_hashes_read_no_vector(store):
    v = np.ones(384, dtype=np.float32)
    store.put_embeddings("m", [("h1", v), ("h2", v)])
    assert store.cached_hashes("m", ["h2", "nope", "h1", "h2"]) == {"h1", "h2"}
    assert store.cached_hashes("other", ["h1"]) == set() and store.cached_hashes("m", []) == set()


def test_item_vectors_copied_from_the_cache_are_the_cached_vectors(store):
    items = [ItemRecord(id=f"d{i}", text=f"text {i}") for i in range(4)]
    store.upsert_items(items)
    rng = np.random.default_rng(3)
    cached = {f"h{i}": rng.standard_normal(384).astype(np.float32) for i in range(3)}
    store.put_embeddings("m", cached.items())
    store.write_meta({"sync": "{}"})
    assert store.set_item_vectors_from_cache("m", [("d2", "h0"), ("d0", "h1"), ("d1", "h1")]) == 3
    ids, matrix = store.item_vectors("m")
    assert ids == ["d0", "d1", "d2"]
    for row, h in zip(matrix, ["h1", "h1", "h0"], strict=True):
        assert row.tobytes() == cached[h].tobytes()  # the very bits, as set_item_vectors
    assert store.item_vector_hashes("m") == {"d0": "h1", "d1": "h1", "d2": "h0"}
    assert "sync" not in store.read_meta()  # a write to item vectors ends the sync record
    # an item's vector is replaced; a text the cache lacks refuses the whole call
    assert store.set_item_vectors_from_cache("m", [("d0", "h2")]) == 1
    assert store.item_vector_hashes("m")["d0"] == "h2"
    with pytest.raises(StoreError, match="lacks 1 of 2"):
        store.set_item_vectors_from_cache("m", [("d3", "h0"), ("d1", "nope")])
    assert store.item_vector_hashes("m") == {"d0": "h2", "d1": "h1", "d2": "h0"}
    assert store.set_item_vectors_from_cache("m", []) == 0


def _damaged(store):
    """Damaged cached vectors each backend can hold: another length (both), NaN and a NULL
    value (DuckDB: pgvector refuses them)."""
    if store.kind != "duckdb":
        return [np.ones(383, dtype=np.float32)]
    return [np.ones(383, dtype=np.float32), np.full(384, np.nan, dtype=np.float32), None]


def _damage(store, model, h, bad):
    if bad is None:  # a NULL among the values, as an edited row may hold
        store.con.execute("UPDATE embedding_cache SET vector = [NULL::FLOAT] || vector[2:] "
                          "WHERE model_id = ? AND text_sha256 = ?", [model, h])
    else:
        store.put_embeddings(model, [(h, bad)], replace=True)


def test_a_damaged_cached_vector_is_embedded_again_and_replaced(store):
    """A cached query vector of another length stopped a dense eval (``all input arrays must
    have the same shape``), a NaN one failed it as JSON; now each is embedded again."""
    emb = CachedEmbedder(HashingEmbedder(), store)
    texts = ["the quick brown fox", "lazy dogs", "the quick brown fox"]
    good = emb.embed(texts)
    h = sha256_text(texts[1])
    for n, bad in enumerate(_damaged(store), 1):
        _damage(store, emb.model_id, h, bad)
        with pytest.warns(UserWarning, match=r"embedding cache of store .+: 1 cached "
                                             r"hashing-v1-384 vector damaged"):
            assert np.array_equal(emb.embed(texts), good)
        assert emb.damaged == n
        assert store.get_embeddings(emb.model_id, [h])[h].tobytes() == good[1].tobytes()


def test_an_ingest_embeds_a_damaged_cached_vector_again_before_copying_it(store):
    """The copy of cached vectors into item vectors failed on one of another length (a DuckDB
    cast error, a pgvector dimension error) and copied a NaN one, which then ranked first for
    every query; now the copy refuses it, writing nothing, and the ingest embeds it again."""
    emb = CachedEmbedder(HashingEmbedder(), store)
    ingest_items(store, DOCS, emb, progress=False)
    ids, before = store.item_vectors(emb.model_id)
    hashes = store.item_vector_hashes(emb.model_id)
    for bad in _damaged(store):
        _damage(store, emb.model_id, hashes["b"], bad)
        with pytest.raises(DamagedCachedVectors, match=r"1 cached hashing-v1-384 vectors are "
                                                       r"damaged \(not 384 finite values\)") as exc:
            store.set_item_vectors_from_cache(emb.model_id, [("a", hashes["c"]),
                                                             ("b", hashes["b"])])
        assert exc.value.hashes == {hashes["b"]}
        assert store.item_vector_hashes(emb.model_id) == hashes  # nothing written
        with pytest.warns(UserWarning, match=r"1 cached hashing-v1-384 vector damaged"):
            r = ingest_items(store, DOCS, emb, progress=False, refresh=True)
        assert (r.vectors_written, r.embedding_cache_hits, r.embedding_cache_misses) == (3, 2, 1)
        now_ids, now = store.item_vectors(emb.model_id)
        assert now_ids == ids and now.tobytes() == before.tobytes()
        cached = store.get_embeddings(emb.model_id, [hashes["b"]])[hashes["b"]]
        assert cached.tobytes() == before[1].tobytes()


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
        assert err.value.row == 2 and err.value.field == field  # the second row, from 1
        assert "bad.parquet, row 2," in str(err.value)
    assert len(store.get_embeddings("m", ["a" * 64, "b" * 64, "c" * 64])) == 1


def _entry(item_id, content_hash, text="Alpha beta. Gamma delta. Epsilon.", precomputed=False):
    chunker = get_chunker("sentences", max_chunk_tokens=3)
    chunks = chunker.chunk(item_id, text, content_hash)
    key = ChunkCacheKey(item_id, content_hash, chunker.chunker_id, "m")
    vectors = np.arange(len(chunks) * 3, dtype=np.float32).reshape(len(chunks), 3) / 7.0
    return ChunkCacheEntry(key=key, chunks=chunks, vectors=vectors, precomputed=precomputed)


def _memory_copy(entries):
    from aiblox.stores.chunk_cache import InMemoryChunkCache

    cache = InMemoryChunkCache()
    cache.put_many([ChunkCacheEntry(key=e.key, chunks=e.chunks, vectors=e.vectors,
                                    precomputed=True) for e in entries])
    return cache


def test_chunk_cache_on_the_store(store):
    ingest_items(store, DOCS, None, progress=False)
    cache = _chunk_cache(store)
    assert isinstance(cache, ChunkCache)
    h = store.item_hashes()
    a, b = _entry("a", h["a"], precomputed=True), _entry("b", h["b"])
    assert cache.put_many([a, b]) == 2 and cache.count() == 2
    longer = _entry("a", h["a"], text="One two. Three four. Five six. Seven.")
    assert cache.put_many([longer]) == 1  # replaced, stays precomputed
    missing = a.key._replace(item_id="c", content_hash=h["c"])
    got = cache.get_many([a.key, b.key, missing])
    assert set(got.hits) == {a.key, b.key} and got.missing == [missing]
    assert got.hits[a.key].chunks == longer.chunks and got.hits[a.key].precomputed
    np.testing.assert_array_equal(got.hits[b.key].vectors, b.vectors)
    only = cache.get_many([a.key, b.key], precomputed_only=True)
    assert set(only.hits) == {a.key} and only.not_precomputed == [b.key]
    n, digest = cache.precomputed_digest(a.key.chunker_id, "m")
    # the same digest on every backend
    assert n == 1 and digest == _memory_copy([longer]).precomputed_digest(a.key.chunker_id, "m")[1]
    assert cache.prune({"a": h["a"], "b": "changed"}) == 1 and cache.count() == 1


def test_evidence_packs_are_insert_only(store):
    from aiblox.evidence import build_evidence_pack, pack_content, pack_from_json, pack_to_json
    from aiblox.evidence.audit_pack import Memo, MemoText, PackSource
    from aiblox.hashing import sha256_hex

    src = PackSource.from_content(name="sample", internal_ref="doc1#c0", content="Yoda " * 10,
                                  retrieved_at="2024-01-15T10:30:00Z", confidence=0.8)
    memo = Memo(primary=MemoText(language="en", title="Luke", executive_summary="Yoda.",
                                 body="Yoda trained Luke [1]."))
    pack = build_evidence_pack(query="Who trained Luke?", decision={"kind": "answer",
                               "text": "Yoda [C0]."}, sources=[src], memo=memo, trace_id="t1")
    sha = sha256_hex(pack_content(pack))
    put = (pack.pack_id, None, sha, pack_to_json(pack))
    assert store.put_evidence_pack(*put, trace_id="t1") is True
    assert store.put_evidence_pack(*put, created_at="2030-01-01") is False
    row = store.get_evidence_pack(pack.pack_id)
    assert pack_from_json(row["json"]) == pack and row["signed"] is False
    assert row["trace_id"] == "t1" and row["created_at"] is None  # the first row stays
    forged = sha[:16] + ("0" if sha[16] != "0" else "1") + sha[17:]
    with pytest.raises(StoreError, match="different evidence pack"):
        store.put_evidence_pack(pack.pack_id, None, forged, "{}")
    with pytest.raises(StoreError, match="64 lowercase hex"):
        store.put_evidence_pack(pack.pack_id, None, "abc", "{}")
    assert [r["pack_id"] for r in store.list_evidence_packs()] == [pack.pack_id]
    assert "json" not in store.list_evidence_packs()[0]
    assert store.list_evidence_packs(with_json=True) == [store.get_evidence_pack(pack.pack_id)]
    assert store.get_evidence_pack("pack_" + "f" * 16) is None


def test_retriever_and_late_chunking_run_unchanged(store, sample_dataset):
    from aiblox.contracts import RetrievalPrefs
    from aiblox.engine.workspace import prepare_store
    from aiblox.retrieval import make_retriever

    emb = CachedEmbedder(HashingEmbedder(), store)
    prepare_store(store, sample_dataset, emb, progress=False)
    retriever = make_retriever(store, emb)
    prefs = RetrievalPrefs(query_text="BM25 term frequency saturation", top_k_items=5,
                           top_k_chunks=4)
    bundle = retriever.search_many([prefs])[0]
    assert bundle.candidates[0].item_id == "d01" and len(bundle.candidates) == 5
    assert bundle.evidence and all(e.item_id in {c.item_id for c in bundle.candidates}
                                   for e in bundle.evidence)
    assert _chunk_cache(store).count() > 0  # late chunks were cached in the store
    again = retriever.search_many([prefs])[0]
    assert again.model_dump(exclude={"stats"}) == bundle.model_dump(exclude={"stats"})
