"""The stage cache shared by workers (issue 19): a root at an fsspec URI, atomic publication
under two racing processes, the sample sweep reused whole from a ``memory://`` and a
``file://`` cache, and bad cache or tracking URIs refused in one line before any work."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import uuid
from pathlib import Path

import fsspec
import numpy as np
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.engine.cache import (
    StageCache,
    StageCacheCorrupt,
    StageCacheError,
    check_cache_root,
    encode_arrays,
)
from aiblox.hashing import sha256_bytes
from aiblox.sweep import run_sweep
from tests.sweep.conftest import SAMPLE_SPEC

GRID = {"blend": ["linear", "rrf"], "w_text": [0.25, 0.75], "normalize": ["minmax"],
        "rrf_k": [60], "depth": [20]}
ROUNDS = 60


def _payload() -> dict[str, np.ndarray]:
    """About 2.4 MB: far more than one write() or page, so a torn file would show."""
    return {"scores": np.arange(400_000, dtype=np.float32) * np.float32(0.5),
            "ids": np.arange(200_000, dtype=np.int32)}


def _race(root: str, rounds: int, ready, go, results) -> None:
    """One worker: compute and publish the same two entries ``rounds`` times, reading each
    back after every publication (while the other worker replaces it)."""
    cache = StageCache(root)
    payload = _payload()
    doc = {"rows": [[f"q{i}", f"d{i}", i / 7] for i in range(20_000)]}
    bad: list[str] = []
    ready.set()
    go.wait()
    for i in range(rounds):
        arr = cache.store("race", 1, {"stage": "arrays"}, [], payload, codec="arrays")
        js = cache.store("race", 1, {"stage": "json"}, [], doc)
        for rec, codec in ((arr, "arrays"), (js, "json")):
            try:
                got = cache.load("race", rec.key)
            except StageCacheCorrupt as exc:
                bad.append(f"round {i}: {exc}")
                continue
            if codec == "arrays":
                ok = all(np.array_equal(got[k], payload[k]) for k in payload)
            else:
                ok = got == doc
            if not ok:
                bad.append(f"round {i}: {codec} entry read back different")
    results.put(bad)


@pytest.mark.parametrize("scheme", ["path", "local://"])
def test_two_processes_racing_on_one_key_never_read_a_partial_entry(tmp_path, scheme):
    """Two spawned processes publish the same keys 60 times each while reading them back;
    no read is ever torn or corrupt and the final bytes are the deterministic ones. ``path``:
    the local fast path (rename); ``local://``: the fsspec path (temp name, then mv)."""
    folder = tmp_path / "stages"
    root = str(folder) if scheme == "path" else f"local://{folder}"
    ctx = multiprocessing.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(2)]
    procs = [ctx.Process(target=_race, args=(root, ROUNDS, r, go, results)) for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        assert r.wait(120)
    go.set()
    bad = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert bad == [[], []]
    cache = StageCache(root)
    arr = cache.store("race", 1, {"stage": "arrays"}, [], _payload(), codec="arrays")
    data = (folder / "race" / f"{arr.key}.bin").read_bytes()
    assert data == encode_arrays(_payload())
    assert sha256_bytes(data) == arr.output_hash == cache.meta("race", arr.key)["output_hash"]
    assert sorted(p.name for p in (folder / "race").iterdir() if ".tmp" in p.name) == []
    assert len(list((folder / "race").iterdir())) == 4  # two outputs, two metas


def test_a_cache_uri_is_its_identity_on_any_worker(tmp_path):
    local = StageCache(tmp_path / "c")
    assert local.uri == str((tmp_path / "c").absolute()) and local.root == tmp_path / "c"
    assert StageCache(f"file://{tmp_path}/c").root == tmp_path / "c"
    uri = f"memory://aiblox-{uuid.uuid4().hex}/stages"
    cache = StageCache(uri)
    rec = cache.store("s", 1, {"a": 1}, [], {"x": [1, 2]})
    again = pickle.loads(pickle.dumps(cache))  # how a worker receives it
    assert again.uri == uri and again.load("s", rec.key) == {"x": [1, 2]}
    # the key is the same whatever the root: content-addressed, not place-addressed
    assert local.store("s", 1, {"a": 1}, [], {"x": [1, 2]}) == rec
    assert fsspec.filesystem("memory").exists(uri.removeprefix("memory:/") + "/s")


def _memory_uri() -> str:
    return f"memory://aiblox-{uuid.uuid4().hex}/stages"


def _fingerprint(result) -> list:
    return sorted((p.config_hash, p.manifest.manifest_hash, json.dumps(p.metrics, sort_keys=True),
                   *(p.manifest.splits[s].run_hash for s in result.splits))
                  for p in result.points)


def test_sample_sweep_twice_on_a_memory_cache_reuses_every_stage(
        tmp_path, sample_spec, small_spec, sweep_db, sample_dataset):
    spec = small_spec(sample_spec, **GRID)
    uri = _memory_uri()
    first = run_sweep(spec, cache_dir=uri, db=sweep_db, progress=False, dataset=sample_dataset)
    again = run_sweep(spec, cache_dir=uri, db=sweep_db, progress=False, dataset=sample_dataset)
    assert first.computed and again.computed == {}
    assert set(again.reused) >= set(first.computed)
    local = run_sweep(spec, cache_dir=tmp_path / "stages", db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert _fingerprint(first) == _fingerprint(again) == _fingerprint(local)
    assert local.computed == first.computed


def test_a_search_study_lives_in_the_cache_uri_and_resumes(sample_spec, small_spec, sweep_db,
                                                           sample_dataset):
    pytest.importorskip("optuna")
    from aiblox.sweep import SweepSpec
    from aiblox.sweep.search import study_path

    data = small_spec(sample_spec, blend=["linear"], w_text=[0.1, 0.3, 0.5, 0.7, 0.9],
                      normalize=["minmax", "zscore"], depth=[20]).model_dump()
    data["search"] = {"strategy": "tpe", "n": 4, "seed": 0}
    spec = SweepSpec.model_validate(data)
    uri = _memory_uri()
    first = run_sweep(spec, cache_dir=uri, db=sweep_db, progress=False, dataset=sample_dataset)
    fs, folder = fsspec.core.url_to_fs(f"{uri}/studies")
    (study,) = fs.ls(folder, detail=True)  # published beside the stages, where a resume finds it
    assert study["name"].endswith(".db") and study["size"] > 0
    assert study_path(spec, uri).startswith(f"{uri}/studies/{spec.name}-")
    again = run_sweep(spec, cache_dir=uri, db=sweep_db, progress=False, dataset=sample_dataset)
    assert again.trials == first.trials and len(first.trials) == 4
    assert again.computed == {}


def test_cli_sweep_twice_on_a_file_uri_reuses_every_stage(tmp_path, sweep_db):
    uri = f"file://{tmp_path}/shared/stages"
    args = ["sweep", str(SAMPLE_SPEC), "--db", sweep_db, "--cache-dir", uri, "--no-tracking",
            "--json"]
    env = {"AIBLOX_NO_PROGRESS": "1"}
    runs = [CliRunner().invoke(app, args, env=env) for _ in range(2)]
    assert [r.exit_code for r in runs] == [0, 0], runs[0].output + runs[1].output
    first, again = (json.loads(r.stdout) for r in runs)
    assert first["computed"] and again["computed"] == {}
    assert first["best"] == again["best"] and first["leaderboard"] == again["leaderboard"]
    assert (tmp_path / "shared" / "stages" / "fusion").is_dir()


# ------------------------------------------------------------------ bad input, before any work
def _one_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args],
                              env={"AIBLOX_NO_PROGRESS": "1", "AIBLOX_DEBUG": ""})


def _bad_roots(tmp_path: Path) -> list[str]:
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file")
    import importlib.util

    # s3:// without s3fs installed: the missing package is named (with it: no bucket there)
    s3 = [] if importlib.util.find_spec("s3fs") else ["s3://bucket/stages"]
    return ["nosuchproto://bucket/stages", f"file://{blocker}/stages", *s3]


def test_an_unwritable_cache_uri_is_one_line_before_the_store_is_opened(tmp_path):
    db = tmp_path / "s.duckdb"
    for root in _bad_roots(tmp_path):
        err = _one_error(_cli("sweep", SAMPLE_SPEC, "--no-tracking", "--cache-dir", root,
                              "--db", db))
        assert err.startswith(f"error: --cache-dir {root}: cannot write there: "), err
        assert not db.exists()
        with pytest.raises(StageCacheError, match="cannot write there"):
            check_cache_root(root)


def test_a_refusing_tracking_server_is_one_line_before_work_and_keeps_the_cache(
        tmp_path, sweep_db):
    import socket
    import time

    cache = tmp_path / "stages"
    done = _cli("sweep", SAMPLE_SPEC, "--no-tracking", "--cache-dir", cache, "--db", sweep_db)
    assert done.exit_code == 0, done.output
    before = sorted((p.relative_to(cache), p.read_bytes()) for p in cache.rglob("*")
                    if p.is_file())
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "fresh.duckdb"
    t0 = time.perf_counter()
    err = _one_error(_cli("sweep", SAMPLE_SPEC, "--tracking-uri", f"http://127.0.0.1:{port}",
                          "--cache-dir", cache, "--db", db))
    assert time.perf_counter() - t0 < 30  # not MLflow's minutes of retries
    assert err.startswith(f"error: cannot reach the MLflow server http://127.0.0.1:{port} "
                          f"(--tracking-uri): "), err
    assert not db.exists()  # refused before the store was opened
    after = sorted((p.relative_to(cache), p.read_bytes()) for p in cache.rglob("*")
                   if p.is_file())
    assert after == before and len(before) > 10  # nothing computed is lost
