"""The named points' TREC files of a re-run need no signals read back for a stored fused run
(a single-signal point's): each split's document table is kept beside the stage entries
(:meth:`StageReader.doc_table`), checked, rebuilt when stale. A hybrid point's fused run is
recorded, not stored, so its TREC file computes it again from the signals."""

from __future__ import annotations

from aiblox.engine.cache import StageCache
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
