"""What only the PostgreSQL store does, on a real server: the four tsquery modes, both rank
functions, regconfig, min_rank; bound query text (property test); exact vs HNSW with ef_search;
the versioned, idempotent schema."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from aiblox.contracts import FtsConfig, ItemRecord, VectorConfig
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.stores import StoreError, ingest_items, open_store
from aiblox.stores.postgres import PostgresStore, scratch_database

DOCS = [
    ItemRecord(id="a", title="Hello world", text="the quick brown fox", metadata={"y": 2020}),
    ItemRecord(id="b", title="Foxes", text="foxes jumping over lazy dogs", metadata={"y": 2021}),
    ItemRecord(id="c", title="Databases", text="columnar storage and vectorised execution"),
    ItemRecord(id="d", title="Fox news", text="a brown dog and a quick fox; the fox again"),
]


@pytest.fixture()
def docs_store(pg_store):
    ingest_items(pg_store, DOCS, None, progress=False)
    return pg_store


def _ids(store, q, cfg=None, k=10, **kw):
    return [d for d, _ in store.fts_search_many([q], k, cfg, **kw)[0]]


def test_open_store_takes_a_postgres_url(pg_url):
    store = open_store(pg_url.render_as_string(hide_password=False))
    try:
        assert isinstance(store, PostgresStore) and store.kind == "postgres"
    finally:
        store.close()


def test_tsquery_modes(docs_store):
    web = FtsConfig(mode="web")
    assert _ids(docs_store, "fox", web) == ["d", "b", "a"]  # fox 3, 2 (stemmed foxes), 1 times
    assert _ids(docs_store, "fox -lazy", web) == ["d", "a"]  # websearch negation
    assert _ids(docs_store, '"quick brown fox"', web) == ["a"]  # websearch phrase
    assert _ids(docs_store, "fox or columnar", web) == ["d", "b", "a", "c"]  # a, c tie: by id
    plain = FtsConfig(mode="plain")
    assert _ids(docs_store, "quick fox", plain) == ["d", "a"]  # AND of both words
    assert _ids(docs_store, "fox -lazy", plain) == ["b"]  # '-' is not an operator here
    phrase = FtsConfig(mode="phrase")
    assert _ids(docs_store, "brown fox", phrase) == ["a"]  # adjacent, in order
    assert _ids(docs_store, "fox brown", phrase) == []
    anyword = FtsConfig(mode="any")
    assert _ids(docs_store, "quick fox", FtsConfig(mode="web")) == ["d", "a"]
    assert _ids(docs_store, "zebra columnar foxes", anyword) == ["d", "b", "a", "c"]
    assert _ids(docs_store, "the of and", anyword) == []  # stop words only: no lexeme
    strict = FtsConfig(mode="strict")
    assert _ids(docs_store, "fox & !lazy", strict) == ["d", "a"]
    assert _ids(docs_store, "colum:*", strict) == ["c"]  # prefix match
    assert _ids(docs_store, "(dog | storage) & !fox", strict) == ["c"]


def test_rank_functions_config_and_min_rank(docs_store):
    cd = docs_store.fts_search_many(["quick fox"], 5, FtsConfig(rank_func="ts_rank_cd"))[0]
    tr = docs_store.fts_search_many(["quick fox"], 5, FtsConfig(rank_func="ts_rank"))[0]
    assert [d for d, _ in cd] == [d for d, _ in tr] == ["d", "a"]
    assert [s for _, s in cd] != pytest.approx([s for _, s in tr])
    # 'english' stems foxes -> fox; 'simple' does not
    assert _ids(docs_store, "foxes", FtsConfig(config="english")) == ["d", "b", "a"]
    assert _ids(docs_store, "foxes", FtsConfig(config="simple")) == ["b"]
    top = cd[0][1]
    gated = docs_store.fts_search_many(["quick fox"], 5, FtsConfig(min_rank=top))[0]
    assert gated == [cd[0]]
    with pytest.raises(StoreError, match="configuration 'klingon' is not known"):
        docs_store.fts_search_many(["fox"], 5, FtsConfig(config="klingon"))


def test_strict_query_that_does_not_parse_names_the_query(docs_store):
    with pytest.raises(StoreError) as err:
        docs_store.fts_search_many(["fox", "quick brown & (", "dog"], 5,
                                   FtsConfig(mode="strict"))
    assert "'quick brown & ('" in str(err.value) and "strict" in str(err.value)
    assert _ids(docs_store, "fox", FtsConfig(mode="strict")) == ["d", "b", "a"]  # still usable


def test_uses_the_gin_index_and_batches_in_one_statement(docs_store):
    from aiblox.stores.postgres.fts_query import fts_batch_query

    stmt, params = fts_batch_query(["fox", "dog"], 5, FtsConfig(), "english")
    assert ":queries" in stmt.text and "fox" not in stmt.text  # text travels bound
    with docs_store.engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(conn.execute(text("EXPLAIN " + stmt.text), params).scalars())
    assert "ix_items_tsv" in plan


HOSTILE = st.lists(st.sampled_from(
    list("'\"\\&|!():*<->-;%_ ab\x00é") +
    ["fox", "OR", "or", "AND", "NOT", "' OR 1=1 --", "'); DROP TABLE items; --", "$$", "::",
     "%s", ":queries", "E'\\x27'", "/*", "*/"]), max_size=25).map("".join)
"""Query text made of tsquery operators, quotes, backslashes and SQL fragments."""


@pytest.fixture(scope="module")
def hostile_store(pg_admin_url):
    with scratch_database(pg_admin_url) as url:
        store = PostgresStore(url)
        ingest_items(store, DOCS, None, progress=False)
        yield store
        store.close()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=HOSTILE, mode=st.sampled_from(["web", "plain", "phrase", "any"]))
def test_hostile_query_text_is_data_never_sql(hostile_store, query, mode):
    runs = hostile_store.fts_search_many([query, "fox"], 5, FtsConfig(mode=mode))
    assert all(d in {"a", "b", "c", "d"} for d, _ in runs[0])
    assert [d for d, _ in runs[1]] == ["d", "b", "a"]
    assert hostile_store.count_items() == 4


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=HOSTILE)
def test_hostile_strict_query_gives_results_or_an_error_naming_it(hostile_store, query):
    try:
        run = hostile_store.fts_search_many([query], 5, FtsConfig(mode="strict"))[0]
    except StoreError as e:
        assert repr(query.replace("\x00", " ")) in str(e) or repr(query) in str(e)
    else:
        assert all(d in {"a", "b", "c", "d"} for d, _ in run)
    assert hostile_store.count_items() == 4


@pytest.fixture(scope="module")
def vec_store(pg_admin_url, sample_dataset):
    """The sample corpus plus 160 synthetic documents, with hashing-embedder vectors."""
    rng = np.random.default_rng(7)
    extra = [ItemRecord(id=f"r{i:03d}", text=" ".join(f"w{j}" for j in rng.integers(0, 3000, 30)))
             for i in range(160)]
    with scratch_database(pg_admin_url) as url:
        store = PostgresStore(url)
        emb = CachedEmbedder(HashingEmbedder(), store)
        ingest_items(store, list(sample_dataset.corpus.values()) + extra, emb, progress=False)
        yield store, emb, sample_dataset
        store.close()


@pytest.mark.parametrize("distance", ["cosine", "l2", "ip"])
def test_hnsw_serves_each_distance_and_agrees_with_exact(vec_store, distance):
    store, emb, ds = vec_store
    q = emb.embed(sorted(ds.queries.values())[:20])
    cfg = VectorConfig(distance=distance)
    hnsw_plan = store.explain_vector_search(q[0], emb.model_id, 10, cfg, index="hnsw")
    assert f"ix_item_vectors_hnsw_{distance}" in hnsw_plan
    assert "hnsw" not in store.explain_vector_search(q[0], emb.model_id, 10, cfg, index="exact")
    exact = store.vector_search_many(q, emb.model_id, 10, cfg)
    approx = store.vector_search_many(q, emb.model_id, 10, cfg.model_copy(
        update={"index": "hnsw", "ef_search": 100}))
    recall = np.mean([len({d for d, _ in a} & {d for d, _ in e}) / len(e)
                      for a, e in zip(approx, exact, strict=True)])
    assert recall >= 0.9
    for a, e in zip(approx, exact, strict=True):  # same scores for the documents both found
        es = dict(e)
        for d, s in a:
            if d in es:
                assert s == pytest.approx(es[d], abs=1e-6)
        assert [s for _, s in a] == sorted((s for _, s in a), reverse=True)


def test_ef_search_is_set_per_query(vec_store):
    store, emb, ds = vec_store
    q = emb.embed(["bm25 retrieval"])
    small = store.vector_search_many(q, emb.model_id, 30, VectorConfig(index="hnsw",
                                                                       ef_search=5))[0]
    assert 0 < len(small) <= 5  # HNSW returns at most ef_search candidates
    full = store.vector_search_many(q, emb.model_id, 30, VectorConfig(index="hnsw"))[0]
    assert len(full) == 30  # default ef_search = max(40, k)
    exact = store.vector_search_many(q, emb.model_id, 30)[0]
    assert len(exact) == 30
    with pytest.raises(StoreError, match="unknown vector index"):
        store.vector_search_many(q, emb.model_id, 3, index="ivf")


def test_schema_is_idempotent_and_versioned(pg_admin_url):
    with scratch_database(pg_admin_url) as url:
        first = PostgresStore(url)
        second = PostgresStore(url)  # creating again changes nothing
        assert first.meta == second.meta == {"schema_version": "1", "vector_dim": "384",
                                             "fts_config": "english"}
        with first.engine.begin() as conn:
            indexes = dict(conn.execute(text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")).all())
            generated = conn.execute(text(
                "SELECT is_generated FROM information_schema.columns "
                "WHERE table_name = 'items' AND column_name = 'tsv'")).scalar_one()
            conn.execute(text("UPDATE aiblox_meta SET value = '99' "
                              "WHERE key = 'schema_version'"))
        assert "USING gin (tsv)" in indexes["ix_items_tsv"] and generated == "ALWAYS"
        for name, ops in (("cosine", "vector_cosine_ops"), ("l2", "vector_l2_ops"),
                          ("ip", "vector_ip_ops")):
            assert f"USING hnsw (vector {ops})" in indexes[f"ix_item_vectors_hnsw_{name}"]
        first.close()
        second.close()
        with pytest.raises(StoreError, match="schema version 99, this aiblox reads 1"):
            PostgresStore(url)
        with pytest.raises(StoreError, match="holds 384-dim vectors"):
            PostgresStore(url, dim=8)


def test_nul_in_item_text_is_a_clear_error(pg_store):
    with pytest.raises(StoreError, match="item 'n': field 'text' holds a NUL"):
        pg_store.upsert_items([ItemRecord(id="n", text="a\x00b")])
    assert pg_store.count_items() == 0


def test_bulk_vector_write_rebuilds_the_hnsw_indexes_in_its_transaction(pg_store, monkeypatch):
    from aiblox.stores.postgres import repos

    monkeypatch.setattr(repos, "BULK_REBUILD_ROWS", 2)
    emb = CachedEmbedder(HashingEmbedder(), pg_store)
    ingest_items(pg_store, DOCS, emb, progress=False)  # 4 rows into an empty table: rebuild
    with pg_store.engine.begin() as conn:
        names = set(conn.execute(text("SELECT indexname FROM pg_indexes "
                                      "WHERE tablename = 'item_vectors'")).scalars())
    assert {f"ix_item_vectors_hnsw_{d}" for d in ("cosine", "l2", "ip")} <= names
    q = emb.embed(["quick brown fox"])
    exact = pg_store.vector_search_many(q, emb.model_id, 4)
    assert pg_store.vector_search_many(q, emb.model_id, 4, index="hnsw") == exact
    with pytest.raises(StoreError, match="failed to write item vectors"):
        # the server refuses NaN after the indexes were dropped: all of it rolls back
        pg_store.set_item_vectors(emb.model_id, [("x", "h", np.zeros(384, dtype=np.float32)),
                                                 ("y", "h", np.full(384, np.nan))])
    assert set(pg_store.item_vector_hashes(emb.model_id)) == {"a", "b", "c", "d"}
    assert "ix_item_vectors_hnsw_cosine" in pg_store.explain_vector_search(
        q[0], emb.model_id, 4, index="hnsw")
