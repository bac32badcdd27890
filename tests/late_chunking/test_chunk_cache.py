"""The chunk cache on its own: round trips, key parts, payload checks, ttl, precomputed flag."""

import numpy as np
import pytest

from aiblox.chunking import get_chunker
from aiblox.stores import DuckDBStore
from aiblox.stores.chunk_cache import (
    ChunkCacheEntry,
    ChunkCacheKey,
    DuckDBChunkCache,
    InMemoryChunkCache,
    encode_entry,
)

TEXT = "Alpha beta gamma. Delta epsilon zeta eta. Theta iota kappa lambda mu. Nu xi omicron."


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _entry(item_id="d1", content_hash="h1", model="m1", precomputed=False, text=TEXT):
    chunker = get_chunker("sentences", max_chunk_tokens=8)
    chunks = chunker.chunk(item_id, text, content_hash)
    vectors = np.arange(len(chunks) * 3, dtype=np.float32).reshape(len(chunks), 3) / 7.0
    key = ChunkCacheKey(item_id, content_hash, chunker.chunker_id, model)
    return ChunkCacheEntry(key=key, chunks=chunks, vectors=vectors, precomputed=precomputed)


@pytest.fixture(params=["duckdb", "memory"])
def cache(request, tmp_path):
    clock = Clock()
    if request.param == "memory":
        yield InMemoryChunkCache(clock=clock)
        return
    store = DuckDBStore(tmp_path / "c.duckdb", dim=3)
    yield DuckDBChunkCache(store, clock=clock)
    store.close()


def test_round_trip_is_exact(cache):
    e = _entry()
    assert len(e.chunks) >= 3
    assert cache.put_many([e]) == 1
    got = cache.get_many([e.key]).hits[e.key]
    assert got.chunks == e.chunks
    assert got.vectors.dtype == np.float32 and np.array_equal(got.vectors, e.vectors)
    assert cache.count() == 1


@pytest.mark.parametrize("part", ["item_id", "content_hash", "chunker_id", "embedding_model_id"])
def test_every_key_part_matters(cache, part):
    e = _entry()
    cache.put_many([e])
    other = e.key._replace(**{part: "other"})
    lookup = cache.get_many([other])
    assert lookup.missing == [other] and not lookup.hits


def _damage(cache, key, column, value):
    if isinstance(cache, InMemoryChunkCache):
        names = ["chunks_json", "vectors", "dim", "payload_sha256", "precomputed", "created_at"]
        row = list(cache.rows[key])
        row[names.index(column)] = value(row[names.index(column)])
        cache.rows[key] = tuple(row)
    else:
        old = cache.con.execute(f"SELECT {column} FROM chunk_cache").fetchone()[0]
        cache.con.execute(f"UPDATE chunk_cache SET {column} = ?", [value(old)])


@pytest.mark.parametrize("column,value", [
    ("chunks_json", lambda v: v.replace("Alpha", "Alpho")),
    ("vectors", lambda v: bytes(v)[:-4] + b"\x00\x00\x80\x3f"),
    ("vectors", lambda v: bytes(v)[:-4]),
    ("payload_sha256", lambda v: "0" * 64),
    ("dim", lambda v: 4),
])
def test_damaged_entry_is_corrupt_not_served(cache, column, value):
    e = _entry()
    cache.put_many([e])
    _damage(cache, e.key, column, value)
    lookup = cache.get_many([e.key])
    assert lookup.corrupt == [e.key] and not lookup.hits


def test_entry_written_for_another_key_is_rejected(cache):
    e = _entry()
    cache.put_many([e])
    # Same payload, presented under another model id: the key is part of the payload hash.
    chunks_json, blob, dim, digest = encode_entry(e)
    other = e.key._replace(embedding_model_id="m2")
    if isinstance(cache, InMemoryChunkCache):
        cache.rows[other] = cache.rows[e.key]
    else:
        cache.con.execute("INSERT INTO chunk_cache SELECT item_id, content_hash, chunker_id, "
                          "'m2', chunks_json, vectors, dim, n_chunks, payload_sha256, "
                          "precomputed, created_at FROM chunk_cache")
    assert cache.get_many([other]).corrupt == [other]


def test_chunks_must_match_the_key():
    e = _entry()
    with pytest.raises(ValueError, match="belongs to"):
        encode_entry(ChunkCacheEntry(key=e.key._replace(item_id="d2"), chunks=e.chunks,
                                     vectors=e.vectors))
    with pytest.raises(ValueError, match="one vector per chunk"):
        encode_entry(ChunkCacheEntry(key=e.key, chunks=e.chunks, vectors=e.vectors[:1]))


def test_ttl_expiry(cache):
    e = _entry()
    cache.put_many([e])
    cache.clock.now += 60
    assert cache.get_many([e.key], ttl_seconds=60).hits
    cache.clock.now += 1
    lookup = cache.get_many([e.key], ttl_seconds=60)
    assert lookup.expired == [e.key] and not lookup.hits
    assert cache.get_many([e.key]).hits  # no ttl: no expiry
    cache.put_many([e])  # a rewrite renews created_at
    assert cache.get_many([e.key], ttl_seconds=60).hits


def test_precomputed_flag_survives_a_query_time_write(cache):
    pre, late = _entry(precomputed=True), _entry(item_id="d2")
    cache.put_many([pre, late])
    lookup = cache.get_many([pre.key, late.key], precomputed_only=True)
    assert list(lookup.hits) == [pre.key] and lookup.not_precomputed == [late.key]
    cache.put_many([_entry(precomputed=False)])
    assert cache.get_many([pre.key], precomputed_only=True).hits[pre.key].precomputed
    # precomputed entries are ingest output: the ttl does not apply to them
    cache.clock.now += 10_000
    assert cache.get_many([pre.key], ttl_seconds=1, precomputed_only=True).hits


def test_prune_drops_changed_and_deleted_items(cache):
    cache.put_many([_entry("d1", "h1"), _entry("d1", "h0"), _entry("d2", "h2"),
                    _entry("d3", "h3")])
    assert cache.prune({"d1": "h1", "d2": "h2"}) == 2
    assert cache.count() == 2


def test_precomputed_digest_covers_the_ingest_entries_of_one_chunker_and_model(cache):
    empty = cache.precomputed_digest(_entry().key.chunker_id, "m1")
    assert empty[0] == 0
    cache.put_many([_entry("d2", precomputed=True), _entry("d1", precomputed=True),
                    _entry("d3"),  # a query-time entry: not read by the precomputed strategy
                    _entry("d1", model="m2", precomputed=True)])  # another model's
    n, digest = cache.precomputed_digest(_entry().key.chunker_id, "m1")
    assert n == 2 and digest != empty[1]
    assert cache.precomputed_digest(_entry().key.chunker_id, "m2")[0] == 1
    assert cache.precomputed_digest("other", "m1") == empty
    cache.put_many([_entry("d2", precomputed=True, text="Another text. Its chunks differ.")])
    assert cache.precomputed_digest(_entry().key.chunker_id, "m1") not in ((n, digest), empty)
    cache.put_many([_entry("d3", precomputed=True)])
    assert cache.precomputed_digest(_entry().key.chunker_id, "m1")[0] == 3


def test_duckdb_cache_persists_across_processes_of_the_file(tmp_path):
    path = tmp_path / "p.duckdb"
    e = _entry()
    with DuckDBStore(path, dim=3) as store:
        DuckDBChunkCache(store).put_many([e])
    with DuckDBStore(path, dim=3) as store:
        got = DuckDBChunkCache(store).get_many([e.key]).hits[e.key]
    assert got.chunks == e.chunks and np.array_equal(got.vectors, e.vectors)


def test_read_only_store_without_the_table_misses_and_drops_writes(tmp_path):
    path = tmp_path / "ro.duckdb"
    DuckDBStore(path, dim=3).close()
    with DuckDBStore(path, dim=3, read_only=True) as store:
        cache = DuckDBChunkCache(store)
        e = _entry()
        assert cache.read_only and cache.put_many([e]) == 0
        assert cache.get_many([e.key]).missing == [e.key] and cache.count() == 0
    with DuckDBStore(path, dim=3) as store:
        DuckDBChunkCache(store).put_many([_entry()])
    with DuckDBStore(path, dim=3, read_only=True) as store:
        cache = DuckDBChunkCache(store)  # the table exists: reads work
        assert not cache.read_only and cache.get_many([_entry().key]).hits
