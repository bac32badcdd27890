"""Stage keys and the on-disk stage cache."""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.engine.cache import StageCache
from aiblox.engine.task import stage_key


def test_stage_key_covers_name_version_config_and_inputs():
    k = stage_key("fusion", "1", {"w": 0.5}, ["a"])
    assert k == stage_key("fusion", 1, {"w": 0.5}, ["a"])
    assert len({k, stage_key("metrics", "1", {"w": 0.5}, ["a"]),
                stage_key("fusion", "2", {"w": 0.5}, ["a"]),
                stage_key("fusion", "1", {"w": 0.55}, ["a"]),
                stage_key("fusion", "1", {"w": 0.5}, ["b"])}) == 5


def test_stage_key_is_identical_in_a_fresh_process():
    code = ("from aiblox.engine.task import stage_key;"
            "print(stage_key('fusion', '1', {'b': [1, 0.1], 'a': {'x': None}}, ['k']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}, check=True).stdout.strip()
    assert out == stage_key("fusion", "1", {"a": {"x": None}, "b": [1, 0.1]}, ["k"])


def test_cache_computes_once_then_reuses(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"q1": [["d1", 0.5], ["d2", 0.25]]}

    cache = StageCache(tmp_path)
    rec1, out1 = cache.run("fusion", "1", {"w": 1}, ["s"], compute)
    rec2, out2 = cache.run("fusion", "1", {"w": 1}, ["s"], compute)
    assert len(calls) == 1
    assert rec1 == rec2 and out1 == out2
    assert cache.computed == {"fusion": 1} and cache.reused == {"fusion": 1}
    # a new cache object over the same folder (another process) reuses it too
    other = StageCache(tmp_path)
    rec3, out3 = other.run("fusion", "1", {"w": 1}, ["s"], compute, load=False)
    assert out3 is None and rec3.output_hash == rec1.output_hash and len(calls) == 1
    assert other.meta("fusion", rec1.key)["config"] == {"w": 1}


def test_entry_without_meta_is_incomplete_and_recomputed(tmp_path):
    cache = StageCache(tmp_path)
    rec, _ = cache.run("signals", "1", {}, [], lambda: [1, 2, 3])
    (tmp_path / "signals" / f"{rec.key}.meta.json").unlink()  # killed before the meta write
    fresh = StageCache(tmp_path)
    rec2, out = fresh.run("signals", "1", {}, [], lambda: [1, 2, 3])
    assert fresh.computed == {"signals": 1} and out == [1, 2, 3]
    assert rec2.output_hash == rec.output_hash


def test_fast_canonical_form_equals_canonical_json():
    from aiblox.hashing import canonical_json, canonical_plain_json

    value = {"b": [("d1", 0.1), ["d2", 1e-300]], "a": {"z": None, "é": True, "n": -3}}
    assert canonical_plain_json(value) == canonical_json(value)


def test_stage_keys_of_real_configs_are_the_canonical_json_hashes(sample_spec):
    """stage_key takes the fast canonical form; for every config a sweep keys (pydantic dumps:
    string keys, plain values) that is the hash it had through canonical_json, so caches and
    logged manifests keep their keys."""
    from aiblox.engine.configs import fusion_config, metrics_config, signals_config
    from aiblox.engine.task import STAGE_VERSIONS
    from aiblox.hashing import sha256_hex

    for prefs in sample_spec.points():
        for name, version, cfg in (
                ("signals", "1", signals_config(prefs, "d" * 64, "test", "duckdb", "emb")),
                ("fusion", STAGE_VERSIONS["fusion"], fusion_config(prefs)),
                ("metrics", "1", metrics_config(sample_spec.metrics, "test"))):
            assert stage_key(name, version, cfg, ["k"]) == sha256_hex(
                {"name": name, "version": version, "config": cfg, "inputs": ["k"]})


def test_arrays_codec_round_trips_and_hashes_its_bytes(tmp_path):
    import numpy as np

    from aiblox.engine.cache import decode_arrays, encode_arrays
    from aiblox.hashing import sha256_bytes

    arrays = {"scores": np.array([0.5, 1 / 3, -0.0]), "positions": np.array([2, 0, 1], np.int32),
              "counts": np.array([3], np.int32)}
    data = encode_arrays(arrays)
    back = decode_arrays(data)
    assert list(back) == ["counts", "positions", "scores"]  # names sorted: canonical bytes
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and back[k].tobytes() == v.tobytes()
    big_endian = {**arrays, "scores": arrays["scores"].astype(">f8")}
    assert encode_arrays(big_endian) == data  # byte order never changes the bytes
    cache = StageCache(tmp_path)
    rec, out = cache.run("fusion", 2, {"w": 1}, ["k"], lambda: arrays, codec="arrays")
    assert rec.output_hash == sha256_bytes(data) and out is arrays
    rec2, out2 = cache.run("fusion", 2, {"w": 1}, ["k"], lambda: 1 / 0, codec="arrays")
    assert rec2 == rec and out2["scores"].tobytes() == arrays["scores"].tobytes()
    assert cache.meta("fusion", rec.key)["codec"] == "arrays"
    with pytest.raises(ValueError, match="magic"):
        decode_arrays(b"{}")


@settings(max_examples=200, deadline=None)
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda c: st.lists(c, max_size=4) | st.tuples(c, c)
    | st.dictionaries(st.text(max_size=5), c, max_size=4), max_leaves=20))
def test_the_fast_canonical_form_gives_the_same_bytes(value):
    from aiblox.hashing import canonical_json, canonical_plain_json

    assert canonical_plain_json(value) == canonical_json(value)
