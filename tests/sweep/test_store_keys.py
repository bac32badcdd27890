"""A sweep's retrieval results are keyed by what the store holds: a fresh store holding the same
content reuses them, a store holding other vectors recomputes them."""

from __future__ import annotations


def _signals_keys(result) -> set[str]:
    return {s["key"] for p in result.points for sm in p.manifest.splits.values()
            for s in sm.stages if s["name"] == "signals"}


def test_signals_follow_the_store_content(tmp_path, sample_spec, small_spec):
    from aiblox.embedding import HashingEmbedder
    from aiblox.stores import DuckDBStore
    from aiblox.sweep import run_sweep

    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[60], depth=[20])
    cache = tmp_path / "stages"
    first = run_sweep(spec, cache_dir=cache, db=str(tmp_path / "a.duckdb"), progress=False)
    assert first.computed["signals"] == 2

    fresh = str(tmp_path / "b.duckdb")  # a new store: synced to the same content, reused
    again = run_sweep(spec, cache_dir=cache, db=fresh, progress=False)
    assert "signals" not in again.computed
    assert _signals_keys(again) == _signals_keys(first)
    assert [p.manifest.splits[s].run_hash for p in again.points for s in ("train", "test")] == \
        [p.manifest.splits[s].run_hash for p in first.points for s in ("train", "test")]

    model = HashingEmbedder().model_id
    with DuckDBStore(fresh) as store:  # same texts, other vector values for one item
        ids, matrix = store.item_vectors(model)
        text_hash = store.item_vector_hashes(model)[ids[0]]
        store.set_item_vectors(model, [(ids[0], text_hash, -matrix[0])])
    other = run_sweep(spec, cache_dir=cache, db=fresh, progress=False)
    assert other.computed["signals"] == 2
    assert not _signals_keys(other) & _signals_keys(first)
