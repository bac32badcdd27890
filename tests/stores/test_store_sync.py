"""A store knows what it holds (every backend): it is bound to one dataset, a sync adds, changes
and deletes items with their vectors and cached chunks, and searches refuse a store that would
silently miss documents."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from aiblox.contracts import ItemRecord, RetrievalPrefs
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.retrieval import HybridRetriever
from aiblox.stores import StoreError, ingest_items
from aiblox.stores.base import StoreMismatch
from aiblox.stores.identity import (
    DatasetBinding,
    check_searchable,
    items_digest,
    read_binding,
    read_mark,
    read_sync,
    store_fingerprint,
)
from aiblox.stores.ingest import sync_dataset

A = DatasetBinding(name="alpha", source="/data/alpha")
B = DatasetBinding(name="beta", source="/data/beta")
A_ELSEWHERE = DatasetBinding(name="alpha", source="/other/alpha")

DOCS = [
    ItemRecord(id="d1", source="alpha", title="Foxes", text="the quick brown fox"),
    ItemRecord(id="d2", source="alpha", title="Dogs", text="lazy dogs sleep all day"),
    ItemRecord(id="d3", source="alpha", title="Stores", text="columnar storage engines"),
]
OTHER = [ItemRecord(id="d1", source="beta", title="Other", text="a different first document"),
         ItemRecord(id="x9", source="beta", title="More", text="beta's own document")]


def _sync(store, binding=A, docs=DOCS, corpus_hash="h1", replace=False, emb=True):
    embedder = CachedEmbedder(HashingEmbedder(), store) if emb else None
    return sync_dataset(store, binding, corpus_hash, docs, embedder, replace=replace,
                        progress=False)


def test_first_sync_binds_the_store_and_records_what_it_holds(store):
    report = _sync(store)
    assert (report.items.inserted, report.vectors_written, report.up_to_date) == (3, 3, False)
    assert read_binding(store) == A
    record = read_sync(store)
    assert record is not None and record.corpus_hash == "h1" and record.n_items == 3
    assert record.items == items_digest({d.id: d.content_hash for d in DOCS})
    assert list(record.vectors) == [HashingEmbedder().model_id]
    assert "syncing" not in store.read_meta()
    again = _sync(store)
    assert again.up_to_date and again.items.unchanged == 3 and again.vectors_written == 0


def test_the_sync_line_adds_up_when_documents_share_a_text(store):
    """Embedded and cached count texts once each: two documents with one text make the count
    of vectors written one more than the texts, and the line says why."""
    twins = [*DOCS, ItemRecord(id="d4", source="alpha", title="Foxes",
                               text="the quick brown fox")]
    report = _sync(store, docs=twins)
    assert (report.vectors_written, report.embedding_cache_misses) == (4, 3)
    assert report.changes().endswith(
        "4 vectors written (3 embedded, 0 from cache, 1 sharing its text with another "
        "document)")
    assert _sync(store, B, DOCS, "h2", replace=True).changes().endswith(
        "3 vectors written (0 embedded, 3 from cache)")


def test_another_dataset_is_refused_and_nothing_stored_is_lost(store):
    _sync(store)
    before = store.item_hashes()
    for other in (B, A_ELSEWHERE):  # another name, or the same name from another folder
        with pytest.raises(StoreMismatch) as err:
            _sync(store, other, OTHER, "h2")
        msg = str(err.value)
        assert "'alpha' (/data/alpha)" in msg and other.describe() in msg and "--replace" in msg
    assert store.item_hashes() == before and read_binding(store) == A
    assert read_sync(store) is not None  # still a complete, searchable store
    check_searchable(store, HashingEmbedder().model_id)


def test_replace_empties_the_store_and_binds_it_to_the_new_dataset(store):
    _sync(store)
    report = _sync(store, B, OTHER, "h2", replace=True)
    # every item of the dataset replaced counts as deleted (it was once reported as 0)
    assert report.items.inserted == 2 and report.items.deleted == len(DOCS)
    assert read_binding(store) == B
    assert store.item_hashes() == {d.id: d.content_hash for d in OTHER}
    assert store.get_items(["d1"])["d1"].text == "a different first document"
    assert store.vector_count(HashingEmbedder().model_id) == 2


def test_items_without_a_binding_are_refused(store):
    ingest_items(store, DOCS, None, progress=False)
    with pytest.raises(StoreMismatch, match="3 items of no recorded dataset"):
        _sync(store)
    assert store.count_items() == 3


def test_resync_adds_changes_and_deletes_items_with_their_vectors(store):
    _sync(store)
    changed = DOCS[0].model_copy(update={"text": "the quick red fox"})
    new = ItemRecord(id="d4", source="alpha", title="New", text="a new document")
    report = _sync(store, docs=[changed, DOCS[2], new], corpus_hash="h2")
    i = report.items
    assert (i.inserted, i.updated, i.deleted, i.unchanged) == (1, 1, 1, 1)
    assert sorted(store.item_hashes()) == ["d1", "d3", "d4"]
    model = HashingEmbedder().model_id
    assert sorted(store.item_vector_hashes(model)) == ["d1", "d3", "d4"]
    assert store.vector_count(model) == 3
    record = read_sync(store)
    assert record is not None and record.corpus_hash == "h2" and record.n_items == 3


def test_an_update_keeps_the_cached_passages_of_the_documents_left_alone(store):
    # passages were keyed by the sha256 of the embedded text, the prune kept entries keyed by
    # the item's content hash: an update of one document dropped every document's passages
    from aiblox.contracts.retrieval import ChunkingConfig, RetrievalPrefs, VectorConfig
    from aiblox.indexes import PassageIndex, PassageStats, passage_chunker_id
    from aiblox.retrieval import LateChunker
    from aiblox.stores.chunk_cache import default_chunk_cache

    _sync(store)
    emb = CachedEmbedder(HashingEmbedder(), store)
    cache = default_chunk_cache(store)
    cfg = VectorConfig(doc_score="maxp", passage_tokens=3, passage_overlap=1)
    PassageIndex.build(DOCS, cfg, emb, cache)
    changed = DOCS[0].model_copy(update={"text": "the quick red fox"})
    report = _sync(store, docs=[changed, *DOCS[1:]], corpus_hash="h2")
    assert report.chunks_pruned == 1
    PassageIndex.build([changed, *DOCS[1:]], cfg, emb, cache, stats=(stats := PassageStats()))
    assert (stats.cache_hits, stats.chunked) == (2, 1)
    # evidence chunks cut from the text alone by the same chunker, hash and model never read a
    # document's passages (cut from its title and text) as their own, nor the other way round
    late = LateChunker(emb, cache)
    prefs = RetrievalPrefs(query_text="q", chunking=ChunkingConfig(
        chunker_id="token_window", max_chunk_tokens=3, overlap_tokens=1))
    assert late.chunker_for(prefs.chunking).chunker_id == passage_chunker_id(cfg)
    counts: dict[str, int] = {}
    late.prepare(prefs, [changed, *DOCS[1:]], counts)
    assert (counts["chunk_cache_misses"], counts["chunk_cache_corrupt"]) == (3, 0)
    PassageIndex.build([changed, *DOCS[1:]], cfg, emb, cache, stats=(stats := PassageStats()))
    assert stats.cache_hits == 3


def test_a_document_moved_in_its_file_is_cited_where_it_now_is(store):
    """A line inserted above a document moves its ``corpus.jsonl:N``: a sync once kept the old
    place of every unchanged document (two documents then cited one line, and answers cited
    the wrong one). Its place is rewritten; its content, vectors and the digests stand."""
    placed = [d.model_copy(update={"source_ref": f"corpus.jsonl:{i}"})
              for i, d in enumerate(DOCS, start=1)]
    _sync(store, docs=placed)
    model = HashingEmbedder().model_id
    vectors = store.item_vector_hashes(model)
    top = ItemRecord(id="d0", source="alpha", source_ref="corpus.jsonl:1", title="Top",
                     text="a document inserted first")
    moved = [top] + [d.model_copy(update={"source_ref": f"corpus.jsonl:{i}"})
                     for i, d in enumerate(DOCS, start=2)]
    report = _sync(store, docs=moved, corpus_hash="h2")
    i = report.items
    assert (i.inserted, i.updated, i.deleted, i.unchanged) == (1, 0, 0, 3)
    got = store.get_items([d.id for d in moved])
    assert {k: v.source_ref for k, v in got.items()} == {d.id: d.source_ref for d in moved}
    assert {k: v for k, v in store.item_vector_hashes(model).items() if k != "d0"} == vectors
    assert {k: store.item_hashes()[k] for k in vectors} == {d.id: d.content_hash for d in DOCS}
    assert read_sync(store).items == items_digest({d.id: d.content_hash for d in moved})


def test_vectors_copied_inside_the_store_equal_those_written_from_python(store, monkeypatch,
                                                                         tmp_path):
    """The store as its own embedding cache: item vectors are copied from the cache inside the
    store, every few batches (COPY_ROWS) and at the end; with the cache elsewhere they are
    written from Python. Both give the same vectors, digests and counts, a resync included."""
    import aiblox.stores.ingest as ingest
    from aiblox.embedding import InMemoryEmbeddingCache
    from aiblox.stores import DuckDBStore

    monkeypatch.setattr(ingest, "COPY_ROWS", 4)
    docs = [ItemRecord(id=f"d{i:02d}", source="alpha", title=f"T{i}", text=f"text number {i}")
            for i in range(11)]
    other = DuckDBStore(tmp_path / "other.duckdb")
    reports = []
    for target, cache in ((store, store), (other, InMemoryEmbeddingCache())):
        first = sync_dataset(target, A, "h1", docs, CachedEmbedder(HashingEmbedder(), cache),
                             batch_size=3, progress=False)
        changed = [d.model_copy(update={"text": d.text + " changed"}) if i % 3 == 0 else d
                   for i, d in enumerate(docs)]
        second = sync_dataset(target, A, "h2", changed, CachedEmbedder(HashingEmbedder(), cache),
                              batch_size=3, progress=False)
        reports.append((first.model_dump(), second.model_dump()))
    assert reports[0] == reports[1]
    assert reports[0][0]["vectors_written"] == 11 and reports[0][1]["vectors_written"] == 4
    model = HashingEmbedder().model_id
    ids, matrix = store.item_vectors(model)
    ids_o, matrix_o = other.item_vectors(model)
    assert ids == ids_o and matrix.tobytes() == matrix_o.tobytes()
    assert read_sync(store) == read_sync(other)
    other.close()


def test_a_large_syncs_last_steps_say_so(store, monkeypatch, capsys):
    import aiblox.stores.ingest as ingest

    monkeypatch.delenv("AIBLOX_NO_PROGRESS", raising=False)
    monkeypatch.setattr(ingest, "PHASE_ITEMS", 3)
    sync_dataset(store, A, "h1", DOCS, CachedEmbedder(HashingEmbedder(), store), progress=True)
    said = capsys.readouterr().err
    model = HashingEmbedder().model_id
    assert "item vectors: 3 copied from the embedding cache ... " in said
    assert f"item vectors: {model} digest ... " in said
    monkeypatch.setattr(ingest, "PHASE_ITEMS", 4)  # fewer items: the steps run unannounced
    sync_dataset(store, A, "h2", DOCS[:2], CachedEmbedder(HashingEmbedder(), store),
                 progress=True)
    assert "item vectors" not in capsys.readouterr().err


def test_any_write_drops_the_sync_record(store):
    _sync(store)
    fp = store_fingerprint(store, HashingEmbedder().model_id)
    store.upsert_items([ItemRecord(id="d9", title="x", text="stray")])
    assert read_sync(store) is None
    moved = store_fingerprint(store, HashingEmbedder().model_id)  # computed, not recorded
    assert moved["items"] != fp["items"] and moved["vectors"] == fp["vectors"]
    _sync(store)  # the stray item is deleted again
    assert store_fingerprint(store, HashingEmbedder().model_id) == fp


def test_vector_digest_covers_the_values_not_only_the_text(store):
    model = HashingEmbedder().model_id
    _sync(store)
    fp = store_fingerprint(store, model)
    ids, matrix = store.item_vectors(model)
    assert ids == ["d1", "d2", "d3"] and matrix.shape == (3, store.dim)
    text_hash = store.item_vector_hashes(model)["d2"]
    nudged = matrix[1].copy()
    nudged[0] += 1e-3
    store.set_item_vectors(model, [("d2", text_hash, nudged)])
    assert read_sync(store) is None
    assert store_fingerprint(store, model)["vectors"] != fp["vectors"]
    _sync(store)  # the text did not change: the sync keeps the vector and records its digest
    assert store_fingerprint(store, model)["vectors"] != fp["vectors"]


def test_searches_refuse_a_store_that_would_miss_documents(store):
    model = HashingEmbedder().model_id
    retr = HybridRetriever(store, CachedEmbedder(HashingEmbedder(), store))
    prefs = RetrievalPrefs(query_text="fox", mode="hybrid")
    with pytest.raises(StoreMismatch, match="holds no items"):
        retr.signals([prefs])
    ingest_items(store, DOCS, None, progress=False)  # items, no vectors
    with pytest.raises(StoreMismatch, match=f"3 of 3 items have no {model} vector"):
        retr.signals([prefs])
    with pytest.raises(StoreMismatch):
        retr.signals([prefs.model_copy(update={"mode": "dense"})])
    bm25 = retr.signals([prefs.model_copy(update={"mode": "bm25"})])
    assert bm25.text[0] and bm25.text[0][0][0] == "d1"


def test_an_unfinished_sync_is_named_until_a_sync_completes_it(store):
    _sync(store)
    store.write_meta({"syncing": "h2"})  # what a sync of an older version killed half way left
    with pytest.raises(StoreMismatch, match="left half-synced by an interrupted ingest"):
        check_searchable(store, None)
    _sync(store, corpus_hash="h2")
    check_searchable(store, HashingEmbedder().model_id)


def test_an_ingest_still_running_is_not_taken_for_an_interrupted_one(store):
    """Two ingests of one PostgreSQL store at once (DuckDB's file lock refuses the second): the
    second once took the first's mark for an interrupted ingest and wrote beside it. A mark of
    a process still running on this machine is refused, naming it; once it is gone, the
    sync completes it."""
    import subprocess
    import sys

    from aiblox.stores.identity import SyncMark

    _sync(store)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        mark = SyncMark.now(source=A.source, corpus_hash="h2").model_copy(
            update={"pid": other.pid})
        store.write_meta({"syncing": json.dumps(mark.model_dump(mode="json"))})
        with pytest.raises(StoreError, match=rf"being synced by an ingest still running "
                                             rf"\(pid {other.pid}"):
            _sync(store, corpus_hash="h2")
        assert read_mark(store) == mark  # left as it was
    finally:
        other.kill()
        other.wait()
    report = _sync(store, corpus_hash="h2")
    assert report.completed == mark.started and read_mark(store) is None


def test_digests_are_equal_across_backends(tmp_path, pg_store):
    from aiblox.stores import DuckDBStore

    model = HashingEmbedder().model_id
    with DuckDBStore(tmp_path / "d.duckdb") as duck:
        for s in (duck, pg_store):
            _sync(s)
        assert read_sync(duck) == read_sync(pg_store)
        assert store_fingerprint(duck, model) == store_fingerprint(pg_store, model)
        d_ids, d_m = duck.item_vectors(model)
        p_ids, p_m = pg_store.item_vectors(model)
        assert d_ids == p_ids and np.array_equal(d_m, p_m)


def test_meta_round_trips_and_none_deletes(store):
    store.write_meta({"k1": "v", "k2": json.dumps({"a": 1})})
    assert store.read_meta()["k1"] == "v"
    store.write_meta({"k1": None})
    assert "k1" not in store.read_meta() and "k2" in store.read_meta()
    assert isinstance(StoreMismatch("x"), StoreError)


class Interrupted(BaseException):
    """What a Ctrl-C (or a full disk) raises in the middle of a sync."""


def _stream_then_stop(docs, after):
    for i, d in enumerate(docs):
        if i == after:
            raise Interrupted
        yield d


def test_an_interrupted_replace_is_marked_before_its_first_deletion(store):
    """The replace's deletions come first: a sync stopped after them leaves the store bound to
    the new dataset, marked, refused by every search, and completed by the next sync."""
    model = HashingEmbedder().model_id
    _sync(store)
    many = [ItemRecord(id=f"x{i:02d}", source="beta", title="", text=f"beta document {i}")
            for i in range(30)]
    embedder = CachedEmbedder(HashingEmbedder(), store)
    with pytest.raises(Interrupted):
        sync_dataset(store, B, "h2", _stream_then_stop(many, 15), embedder, replace=True,
                     progress=False, batch_size=10)
    assert store.count_items() == 10  # alpha's items gone, one batch of beta's written
    mark = read_mark(store)
    assert mark is not None and mark.source == "/data/beta" and mark.embedder == "hashing"
    assert read_binding(store) == B and read_sync(store) is None
    for m in (None, model):
        with pytest.raises(StoreMismatch) as err:
            check_searchable(store, m)
        assert str(err.value).startswith(f"store {store.location} was left half-synced by an "
                                         f"interrupted ingest (started {mark.started} by pid ")
        assert str(err.value).endswith(f"; rerun: aiblox ingest /data/beta --db "
                                       f"{shlex.quote(store.location)} --embedder hashing")
    with pytest.raises(StoreMismatch, match="half-synced"):  # another dataset: refused still
        _sync(store, A, DOCS, "h1")
    report = _sync(store, B, many, "h2")  # no --replace needed: bound to beta already
    assert report.completed == mark.started and report.items.inserted == 20
    assert read_mark(store) is None and store.count_items() == 30
    check_searchable(store, model)


def test_an_interrupted_vectors_import_rewrites_every_vector_on_completion(store, tmp_path):
    """A sync whose vectors import was stopped (cache rows written, item vectors not yet)
    marks it; the sync that completes it writes every item vector again from the cache."""
    from aiblox.embedding.vectors import KnownTexts, plan_import, write_import
    from aiblox.hashing import sha256_text

    model = HashingEmbedder().model_id
    _sync(store)
    fp = store_fingerprint(store, model)
    texts = {d.id: sha256_text(d.embedding_text) for d in DOCS}
    vectors = np.eye(store.dim, dtype=np.float32)[:3]
    path = tmp_path / "v.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"_id": list(texts), "text_sha256": list(texts.values()),
                             "vector": [list(map(float, v)) for v in vectors]}), path)
    plan = plan_import([path], store, model, store.dim, KnownTexts(texts, {}))
    assert plan.replaced == set(texts.values()) and plan.rows == 3

    def stopped() -> set[str]:
        write_import(plan, store, model, store.dim)
        raise Interrupted

    with pytest.raises(Interrupted):
        sync_dataset(store, A, "h1", DOCS, CachedEmbedder(HashingEmbedder(), store),
                     prepare=stopped, progress=False)
    mark = read_mark(store)
    assert mark is not None and mark.refresh_vectors
    with pytest.raises(StoreMismatch, match="half-synced"):
        check_searchable(store, model)
    report = _sync(store)  # no file this time: every item vector comes from the cache again
    assert report.vectors_written == 3 and read_mark(store) is None
    ids, matrix = store.item_vectors(model)
    assert ids == ["d1", "d2", "d3"] and np.array_equal(matrix, vectors)
    assert store_fingerprint(store, model)["vectors"] != fp["vectors"]
