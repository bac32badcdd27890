"""The named points' TREC files of a re-run need no signals read back for a stored fused run
(a single-signal point's): each split's document table is kept beside the stage entries
(:meth:`StageReader.doc_table`), checked, rebuilt when stale. A hybrid point's fused run is
recorded, not stored, so its TREC file computes it again from the signals."""

from __future__ import annotations

import pytest

from aiblox.engine.cache import StageCache, StageCacheCorrupt
from aiblox.engine.outputs import StageReader, load_fused_run
from aiblox.engine.tracking import trec_run
from aiblox.sweep import run_sweep

GRID = {"blend": ["linear", "rrf"], "w_text": [0.3], "normalize": ["minmax"], "rrf_k": [60],
        "depth": [20]}


def _point_keys(tmp_path, sample_dataset, sweep_db, small_spec, sample_spec, mode="bm25"):
    """The signals and fusion keys of a point on the test split: a BM25 point's fused run (its
    list cut) is stored, a hybrid point's recorded."""
    spec = small_spec(sample_spec, **GRID)
    spec = spec.model_copy(update={"base": {**spec.base, "mode": mode}})
    r = run_sweep(spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False,
                  dataset=sample_dataset)
    stages = {s["name"]: s["key"] for s in r.points[0].manifest.splits["test"].stages}
    assert StageCache(tmp_path / "c").stored("fusion", stages["fusion"]) is (mode != "hybrid")
    return stages["signals"], stages["fusion"]


def test_trec_from_the_kept_table_is_the_decoded_run_and_reads_no_signals(
        tmp_path, sample_dataset, sweep_db, small_spec, sample_spec):
    skey, fkey = _point_keys(tmp_path, sample_dataset, sweep_db, small_spec, sample_spec)
    cache = StageCache(tmp_path / "c")
    want = trec_run(load_fused_run(cache, skey, fkey), "t")
    assert want.count("\n") > 10
    assert StageReader(cache).fused_trec(skey, fkey, "t") == want  # builds the table
    table = tmp_path / "c" / "doc_tables" / f"{skey}.txt"
    assert table.is_file()
    # the signals output gone (its meta kept): a new reader writes the same text from the table
    (tmp_path / "c" / "signals" / f"{skey}.json.gz").unlink()
    assert StageReader(cache).fused_trec(skey, fkey, "t") == want


def test_a_recorded_hybrid_run_writes_its_trec_from_the_signals(tmp_path, sample_dataset,
                                                               sweep_db, small_spec,
                                                               sample_spec):
    skey, fkey = _point_keys(tmp_path, sample_dataset, sweep_db, small_spec, sample_spec,
                             mode="hybrid")
    cache = StageCache(tmp_path / "c")
    want = trec_run(load_fused_run(cache, skey, fkey), "t")
    assert want.count("\n") > 10 and StageReader(cache).fused_trec(skey, fkey, "t") == want


def test_a_stale_or_damaged_table_is_rebuilt(tmp_path, sample_dataset, sweep_db, small_spec,
                                             sample_spec):
    skey, fkey = _point_keys(tmp_path, sample_dataset, sweep_db, small_spec, sample_spec)
    cache = StageCache(tmp_path / "c")
    want = trec_run(load_fused_run(cache, skey, fkey), "t")
    StageReader(cache).fused_trec(skey, fkey, "t")
    table = tmp_path / "c" / "doc_tables" / f"{skey}.txt"
    good = table.read_bytes()
    # a body that is not the one hashed (a document renamed): rebuilt from the signals
    table.write_bytes(good[:-1] + (b"X" if good[-1:] != b"X" else b"Y"))
    assert StageReader(cache).fused_trec(skey, fkey, "t") == want
    assert table.read_bytes() == good
    # a table of other signals (its header names another output hash): rebuilt
    table.write_bytes(good.replace(cache.meta("signals", skey)["output_hash"].encode(),
                                   b"0" * 64, 1))
    assert StageReader(cache).fused_trec(skey, fkey, "t") == want
    assert table.read_bytes() == good


def test_the_fusion_index_is_kept_and_read_back_without_the_signals(
        tmp_path, sample_dataset, sweep_db, small_spec, sample_spec):
    """A split's fusion index is kept as arrays beside its document table
    (``doc_tables/<signals key>.index``): a later reader (a later sweep over the same signals)
    reads it back instead of the signals' JSON, checked like the table; one damaged or of
    other signals is rebuilt from the signals; after :meth:`StageReader.forget` (a damaged
    entry found late) the index is built from a fresh read of the signals."""
    skey, fkey = _point_keys(tmp_path, sample_dataset, sweep_db, small_spec, sample_spec,
                             mode="hybrid")
    cache = StageCache(tmp_path / "c")
    kept = tmp_path / "c" / "doc_tables" / f"{skey}.index"
    good = kept.read_bytes()  # written by the sweep
    want = load_fused_run(cache, skey, fkey)
    signals = tmp_path / "c" / "signals" / f"{skey}.json.gz"
    sig_bytes = signals.read_bytes()
    signals.unlink()  # not read: the run is computed from the kept index
    reader = StageReader(cache)
    assert reader.fused_run(skey, fkey) == want
    assert reader.index(skey).qids == [q for q, _ in sample_dataset.split_queries("test")]
    signals.write_bytes(sig_bytes)
    for bad in (good[:-1] + bytes([good[-1] ^ 1]),  # a flipped bit in the arrays
                good.replace(cache.meta("signals", skey)["output_hash"].encode(), b"0" * 64, 1)):
        kept.write_bytes(bad)
        assert StageReader(cache).fused_run(skey, fkey) == want
        assert kept.read_bytes() == good  # rebuilt from the signals, written again
    reader.forget(skey)
    signals.write_bytes(sig_bytes[:-8])  # damaged signals: read now, not the kept index
    with pytest.raises(StageCacheCorrupt):
        reader.index(skey)
