"""The stage cache verifies what it reads: a damaged, truncated or missing entry is computed
again and reported, never used and never a traceback; verify compares the logged values."""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.engine.cache import (
    StageCache,
    StageCacheCorrupt,
    StageCacheError,
    StageOutputNotStored,
    decode_arrays,
    encode_arrays,
)
from tests.sweep import entries


@pytest.fixture(scope="module")
def clean(tmp_path_factory, sample_spec, small_spec, sweep_db):
    """A small fusion sweep run once into a cache folder: the reference every damaged copy
    must reproduce exactly."""
    from aiblox.sweep import run_sweep

    spec = small_spec(sample_spec, blend=["linear", "rrf"], w_text=[0.25, 0.75],
                      normalize=["minmax"], rrf_k=[10, 60], depth=[20])
    root = tmp_path_factory.mktemp("clean") / "stages"
    result = run_sweep(spec, cache_dir=root, db=sweep_db, progress=False)
    return spec, root, result


def _key(result, stage: str) -> str:
    """The key of the best point's ``stage`` on the test split."""
    return next(s["key"] for s in result.best.manifest.splits["test"].stages
                if s["name"] == stage)


def _flip(raw: bytes) -> bytes:
    data = bytearray(raw)
    data[len(data) // 2] ^= 0x01
    return bytes(data)


def _truncate(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _halve(raw: bytes) -> bytes:
    """Every float of an arrays entry halved, the layout kept valid (only the hash can tell)."""
    arrays = {k: np.array(v) for k, v in decode_arrays(raw).items()}
    for k, v in arrays.items():
        if v.dtype.kind == "f":
            arrays[k] = v / 2
    return encode_arrays(arrays)


def _digit(field: str):
    """Change one hex digit of a meta's ``field`` (its first input key, its output hash): the
    bytes still parse, and its entry would pass the damage into a point's manifest."""
    def damage(raw: bytes) -> bytes:
        m = json.loads(raw)
        value = m[field][0] if field == "inputs" else m[field]
        bad = value[:5] + ("0" if value[5] != "0" else "1") + value[6:]
        return raw.replace(value.encode(), bad.encode(), 1)
    return damage


DAMAGE = {
    "metrics bit flip": ("metrics", "out", _flip),
    "metrics halved, layout valid": ("metrics", "out", _halve),
    "metrics truncated": ("metrics", "out", _truncate),
    "signals truncated (json.gz)": ("signals", "out", _truncate),
    "metrics meta deleted": ("metrics", "meta", lambda raw: None),
    "fusion meta not JSON": ("fusion", "meta", lambda raw: b"{not json"),
    # QA 20: parseable damage went into the manifests unnoticed
    "metrics meta, an input key's digit": ("metrics", "meta", _digit("inputs")),
    "fusion meta (recorded), the output hash's digit": ("fusion", "meta", _digit("output_hash")),
}


@pytest.mark.parametrize("layout", ["packs", "files"])
@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_entries_are_recomputed_and_reported(tmp_path, clean, sweep_db, case, layout):
    """Each damage, to an entry in a pack (as a sweep writes its points) and in its own files
    (a cache written outside a batch: Ray's workers, older caches)."""
    from aiblox.sweep import run_sweep

    spec, root, first = clean
    copy = tmp_path / "stages"
    shutil.copytree(root, copy)
    if layout == "files":
        entries.unpack(copy)
    stage, which, damage = DAMAGE[case]
    key = _key(first, stage)
    # a sweep's points are packed; its signals (retrieval, before the points) are files
    assert (copy / stage / f"{key}.meta.json").exists() is (layout == "files"
                                                            or stage == "signals")
    entries.change(copy, stage, key, which, damage)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]
    assert again.best.config_hash == first.best.config_hash
    assert [p.manifest.splits["test"].run_hash for p in again.points] == \
        [p.manifest.splits["test"].run_hash for p in first.points]
    if "meta deleted" not in case:  # a missing meta is simply a missing entry
        assert again.repaired.get(stage) == 1, again.repaired
        assert any(stage in str(w.message) and "damaged" in str(w.message) for w in seen)
    # every entry counted once, computed or reused: a damaged entry first looked at as intact
    # (its size) and repaired when read was counted both ways (QA 20)
    for name in {*first.computed, *again.computed, *again.reused}:
        assert again.computed.get(name, 0) + again.reused.get(name, 0) == \
            first.computed[name], (name, again.computed, again.reused)
    assert sum(again.computed.values()) >= 1
    third = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    assert third.computed == {} and third.repaired == {}


def test_a_same_size_damage_found_on_reading_is_counted_once(tmp_path, clean, sweep_db):
    """A signals entry flipped in place (its size right) passes the first look and is found
    damaged when its dependants read it: it was counted reused and repaired, 5 counts for 4
    entries (QA 20); now computed (repaired) and not reused."""
    from aiblox.sweep import run_sweep

    spec, root, first = clean
    copy = tmp_path / "stages"
    shutil.copytree(root, copy)
    entries.change(copy, "signals", _key(first, "signals"), "out", _flip)
    # so the signals are read: no fused run or metrics, no fusion index kept beside them
    for stage in ("fusion", "metrics", "doc_tables"):
        shutil.rmtree(copy / stage)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    assert again.repaired == {"signals": 1}
    assert again.computed["signals"] == 1
    assert again.reused.get("signals", 0) == first.computed["signals"] - 1
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]


def test_a_hybrid_fused_run_is_recorded_and_computed_again_when_read(tmp_path, clean, sweep_db):
    """A hybrid point's fused run is recorded, not stored (its meta and output hash: no output
    file): metrics computed again read it by fusing the signals again, with the same run
    hashes and values, and it is counted as reused, not computed."""
    from aiblox.sweep import run_sweep

    spec, root, first = clean
    fusion = [entries.read(root, "fusion", k) for k in entries.keys(root, "fusion")]
    assert len(fusion) == first.computed["fusion"]
    assert all(json.loads(m)["stored"] is False and out == b"" for m, out in fusion)
    copy = tmp_path / "stages"
    shutil.copytree(root, copy)
    shutil.rmtree(copy / "metrics")
    again = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    assert set(again.computed) == {"metrics"} and again.repaired == {}
    assert again.reused["fusion"] == first.computed["fusion"]
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]
    assert [p.manifest.splits["test"].run_hash for p in again.points] == \
        [p.manifest.splits["test"].run_hash for p in first.points]


def test_a_recorded_run_that_computes_to_another_hash_is_a_damaged_entry(tmp_path, clean,
                                                                          sweep_db):
    """A recorded fused run whose output, computed again, is not the one it recorded (its
    meta's hash altered): repaired with a warning when read, never used; the TREC text of the
    run is refused the same way."""
    from aiblox.engine.outputs import StageReader
    from aiblox.sweep import run_sweep

    spec, root, first = clean
    copy = tmp_path / "stages"
    shutil.copytree(root, copy)
    stages = first.best.manifest.splits["test"].stages
    frec = next(s for s in stages if s["name"] == "fusion")
    m = json.loads(entries.read(copy, "fusion", frec["key"])[0])
    m.pop("meta_sha256")  # a meta written whole with another hash (its checksum catches a digit)
    other = json.dumps({**m, "output_hash": "0" * 64}).encode()
    entries.change(copy, "fusion", frec["key"], "meta", lambda raw: other)
    with pytest.raises(StageCacheCorrupt, match="computed again, does not match"):
        StageReader(StageCache(copy)).fused_trec(frec["inputs"][0], frec["key"], "t")
    # removed (from its pack): computed (and recorded) again when next needed
    assert frec["key"] not in entries.keys(copy, "fusion")
    (copy / "fusion" / f"{frec['key']}.meta.json").write_bytes(other)
    mrec = next(s for s in stages if s["name"] == "metrics")
    entries.change(copy, "metrics", mrec["key"], "meta", lambda raw: None)  # the run is read
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    assert again.repaired == {"fusion": 1}
    assert any("fusion" in str(w.message) and "computed again, does not match" in
               str(w.message) for w in seen)
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]
    assert json.loads(entries.read(copy, "fusion", frec["key"])[0])["output_hash"] == \
        m["output_hash"]
    third = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    assert third.computed == {} and third.repaired == {}


def test_a_recorded_entry_keeps_no_output(tmp_path):
    """``store(stored=False)``: the meta and the hash only; a direct load says so, a run with
    ``load`` computes it again and checks it, a different output is a damaged entry."""
    cache = StageCache(tmp_path)
    rec = cache.store("fusion", 2, {"w": 1}, ["k"], {"a": np.arange(3)}, "arrays", stored=False)
    assert [p.name for p in (tmp_path / "fusion").iterdir()] == [f"{rec.key}.meta.json"]
    assert cache.stored("fusion", rec.key) is False and cache.intact("fusion", rec.key)
    assert cache.check("fusion", rec.key) is None
    with pytest.raises(StageOutputNotStored, match="keeps no output"):
        cache.load("fusion", rec.key)
    again, out = cache.run("fusion", 2, {"w": 1}, ["k"], lambda: {"a": np.arange(3)},
                           codec="arrays", stored=False)
    assert again == rec and out["a"].tolist() == [0, 1, 2] and cache.reused == {"fusion": 1}
    with pytest.warns(UserWarning, match="does not match the sha256 recorded"):
        fixed, out = cache.run("fusion", 2, {"w": 1}, ["k"], lambda: {"a": np.arange(4)},
                               codec="arrays", stored=False)
    assert cache.repaired == {"fusion": 1} and fixed.output_hash != rec.output_hash
    assert cache.stored("fusion", rec.key) is False  # recorded again, with the new hash


def test_a_damaged_entry_read_late_is_recomputed_too(tmp_path, clean, sweep_db):
    """A flipped bit in the signals (read only when a fused run must be made again) and a
    deleted fused run of the same point: the signals are found damaged when read."""
    from aiblox.sweep import run_sweep

    spec, root, first = clean
    copy = tmp_path / "stages"
    shutil.copytree(root, copy)
    def flip(data: bytes) -> bytes:  # same size on disk is not required
        raw = bytearray(gzip.decompress(data))
        raw[len(raw) // 3] ^= 0x02
        return gzip.compress(bytes(raw), mtime=0)

    entries.change(copy, "signals", _key(first, "signals"), "out", flip)
    for stage in ("fusion", "metrics"):
        shutil.rmtree(copy / stage)
    again = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    assert again.repaired.get("signals") == 1
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]


def test_the_cli_names_the_repair_and_shows_no_traceback(tmp_path, sweep_db):
    from typer.testing import CliRunner

    from aiblox.cli.main import app
    from tests.sweep.conftest import SAMPLE_SPEC

    def sweep():
        return CliRunner().invoke(
            app, ["sweep", str(SAMPLE_SPEC), "--cache-dir", str(tmp_path / "stages"), "--db",
                  sweep_db, "--no-tracking", "--json"],
            env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "300"})

    first = sweep()
    assert first.exit_code == 0, first.output
    clean = json.loads(first.stdout)
    bins = entries.keys(tmp_path / "stages", "metrics")
    for key in bins:  # every cached metric halved, layouts valid
        entries.change(tmp_path / "stages", "metrics", key, "out", _halve)
    r = sweep()
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and "damaged" in r.output
    out = json.loads(r.stdout)
    assert out["repaired"]["metrics"] == len(bins)
    assert out["best"] == clean["best"] and out["leaderboard"] == clean["leaderboard"]


def test_an_unwritable_cache_is_one_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = StageCache(blocker / "stages")
    with pytest.raises(StageCacheError, match=str(blocker)):
        cache.store("fusion", "1", {"a": 1}, [], {"x": [1, 2]})


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_no_damage_to_an_entry_is_ever_accepted(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("h")
    cache = StageCache(root)
    codec = data.draw(st.sampled_from(["json", "arrays"]))
    output = ({"a": np.arange(7, dtype=np.float64) / 3, "b": np.arange(5, dtype=np.int32)}
              if codec == "arrays" else {"qids": ["q1", "q2"], "text": [[["d1", 0.5]], []]})
    packed = data.draw(st.booleans())  # in a pack (a batch), or in its own files
    with cache.batched() if packed else contextlib.nullcontext():
        rec = cache.store("s", "1", {"c": 1}, [], output, codec=codec)  # type: ignore[arg-type]
    path = (next((root / "s" / "packs").iterdir()) if packed else
            next(p for p in (root / "s").iterdir() if not p.name.endswith(".meta.json")))
    cache = StageCache(root)  # a new reader: nothing of the batch in memory
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans()):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= data.draw(st.integers(1, 255))
    else:
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    path.write_bytes(bytes(raw))
    try:
        got = cache.load("s", rec.key)
    except StageCacheCorrupt:
        got = None
    if got is not None:  # a change gzip's container absorbs (its header) may decode the same
        assert json.dumps(got, default=lambda a: a.tolist(), sort_keys=True) == json.dumps(
            output, default=lambda a: a.tolist(), sort_keys=True)
    again, out = StageCache(root).run("s", "1", {"c": 1}, [], lambda: output,
                                      codec=codec)  # type: ignore[arg-type]
    assert again.output_hash == rec.output_hash
