"""``aiblox eval verify`` re-reads the dataset a point was computed from at the path its manifest
records, checked by hash: a sweep over a folder given by path verifies, data edited there is the
first difference, a folder gone needs a copy named with ``--dataset``, and a folder named like
another dataset (``scifact``) is never confused with it. Real sweeps on copies of the sample
dataset (hashing embedder, real DuckDB files in the test's folder, real MLflow sqlite store)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.data import load_dataset
from aiblox.engine.manifest import PointManifest
from aiblox.sweep import SweepSpec, run_sweep
from tests.conftest import SAMPLE

runner = CliRunner()


def _copy(where: Path) -> Path:
    where.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SAMPLE, where, ignore=shutil.ignore_patterns("*.py", "README.md"))
    return where


def _edit_a_query(folder: Path) -> None:
    path = folder / "queries.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    obj = json.loads(lines[0])
    obj["text"] += " (edited)"
    lines[0] = json.dumps(obj) + "\n"
    path.write_text("".join(lines), encoding="utf-8")


def _sweep(spec: SweepSpec, dataset: str, cache: Path, **kw):
    spec = SweepSpec.model_validate({**spec.model_dump(), "dataset": dataset, "name": "bypath"})
    return run_sweep(spec, cache_dir=cache, progress=False, **kw)


def _verify(run: str, *extra: str, env: dict[str, str] | None = None):
    return runner.invoke(app, ["eval", "verify", run, *extra],
                         env={"AIBLOX_NO_PROGRESS": "1", **(env or {})})


@pytest.fixture()
def point(tmp_path, monkeypatch, sample_spec, small_spec):
    """A sweep over ``data/scifact`` (a copy of the sample dataset, given by path, named like a
    shipped dataset), run in ``tmp_path`` (its default stores live there); its best point's
    manifest written as ``manifest.json``."""
    monkeypatch.chdir(tmp_path)
    folder = _copy(tmp_path / "data" / "scifact")
    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[60], depth=[10])
    result = _sweep(spec, "data/scifact", tmp_path / "stages")
    path = tmp_path / "manifest.json"
    path.write_text(result.best.manifest.model_dump_json(), encoding="utf-8")
    return {"folder": folder, "manifest": path, "result": result}


def test_a_sweep_over_a_folder_by_path_verifies_and_an_edit_is_the_first_difference(point):
    folder, manifest = point["folder"], point["manifest"]
    m = PointManifest.model_validate_json(manifest.read_text(encoding="utf-8"))
    assert m.dataset == "scifact" and m.dataset_path == folder.resolve().as_posix()

    res = _verify(str(manifest), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["identical"] and out["dataset_path"] == m.dataset_path and out["notes"] == []
    assert out["checks"][0] == {"where": "dataset", "expected": m.dataset_hash,
                                "actual": m.dataset_hash, "identical": True,
                                "detail": f"read from {m.dataset_path}"}

    _edit_a_query(folder)
    now = load_dataset(folder, splits=list(m.splits)).hash
    assert now != m.dataset_hash
    res = _verify(str(manifest), "--json")
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    assert out["first_difference"] == "dataset" and len(out["checks"]) == 1
    assert out["checks"][0]["detail"] == (f"dataset at {m.dataset_path} changed since the point "
                                          f"was computed: hash {m.dataset_hash}, now {now}")
    res = _verify(str(manifest))
    assert res.exit_code == 1
    said = " ".join(res.output.split())
    assert (f"differs: first at dataset: dataset at {m.dataset_path} changed since the point "
            f"was computed: hash {m.dataset_hash}, now {now}") in said


def test_a_folder_named_like_another_dataset_is_not_confused_with_it(point, tmp_path):
    """A decoy ``scifact`` that the name finds first (``$AIBLOX_DATASETS``): the manifest's
    path is read, not the decoy; an old manifest (no path) falls on the decoy, and says so."""
    folder, manifest = point["folder"], point["manifest"]
    decoy = _copy(tmp_path / "shipped" / "scifact")
    _edit_a_query(decoy)
    env = {"AIBLOX_DATASETS": str(tmp_path / "shipped")}
    m = PointManifest.model_validate_json(manifest.read_text(encoding="utf-8"))

    res = _verify(str(manifest), "--json", env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["dataset_path"] == folder.resolve().as_posix()

    old = tmp_path / "old.json"  # as written before the path was recorded
    data = json.loads(manifest.read_text(encoding="utf-8"))
    del data["dataset_path"]
    old.write_text(json.dumps(data), encoding="utf-8")
    res = _verify(str(old), "--json", env=env)
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    where = decoy.resolve().as_posix()
    assert out["first_difference"] == "dataset" and out["dataset_path"] == where
    assert out["notes"] == [f"the manifest records no dataset path (a dataset built in memory, "
                            f"or a manifest older than the path): dataset 'scifact' found by "
                            f"name at {where}"]
    assert f"dataset 'scifact' found by name at {where} is not the data the point was " \
           f"computed from" in out["checks"][0]["detail"]
    assert "note: the manifest records no dataset path" in " ".join(res.stderr.split())
    # the old manifest, pointed at the right folder
    res = _verify(str(old), "--json", "--dataset", str(folder), env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["dataset_path"] == folder.resolve().as_posix()

    # the manifest hash does not depend on the machine's folders
    assert PointManifest.model_validate(data).manifest_hash == m.manifest_hash


def test_a_gone_folder_is_said_and_a_copy_named_with_dataset_is_checked_by_hash(point, tmp_path):
    folder, manifest = point["folder"], point["manifest"]
    m = PointManifest.model_validate_json(manifest.read_text(encoding="utf-8"))
    moved = tmp_path / "moved" / "scifact"
    moved.parent.mkdir()
    folder.rename(moved)
    env = {"AIBLOX_DATASETS": str(tmp_path / "nowhere")}

    res = _verify(str(manifest), env=env)
    assert res.exit_code == 2
    said = " ".join(res.stderr.split())
    assert said.startswith(f"error: dataset at {m.dataset_path} is gone: the point was computed "
                           f"from it (hash {m.dataset_hash[:16]})")
    assert "--dataset PATH" in said and "Traceback" not in res.output

    res = _verify(str(manifest), "--json", "--dataset", str(moved), env=env)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["identical"] and out["dataset_path"] == moved.resolve().as_posix()
    assert out["notes"] == [f"the point was computed from {m.dataset_path}; verifying against "
                            f"the dataset at {out['dataset_path']} instead (checked by its hash)"]

    _edit_a_query(moved)  # a copy that is not the data: a difference, named
    res = _verify(str(manifest), "--json", "--dataset", str(moved), env=env)
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["first_difference"] == "dataset"
    assert out["checks"][0]["detail"].startswith(
        f"dataset at {out['dataset_path']} (named for {m.dataset_path}) is not the data the "
        f"point was computed from: hash {m.dataset_hash}, now ")


def test_a_gone_folder_whose_name_finds_the_very_same_bytes_verifies(tmp_path, monkeypatch,
                                                                     sample_spec, small_spec):
    """A sweep over a copy of ``sample`` by path; the copy deleted, the name ``sample`` finds the
    shipped one, which holds the same bytes (same hash): identical, with a note."""
    monkeypatch.chdir(tmp_path)
    folder = _copy(tmp_path / "copy" / "sample")
    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[60], depth=[10])
    result = _sweep(spec, str(folder), tmp_path / "stages")
    path = tmp_path / "manifest.json"
    path.write_text(result.best.manifest.model_dump_json(), encoding="utf-8")
    shutil.rmtree(folder)
    res = _verify(str(path), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["identical"] and out["dataset_path"] == SAMPLE.resolve().as_posix()
    assert out["notes"][0].startswith(f"dataset at {folder.resolve().as_posix()} is gone; "
                                      f"dataset 'sample' found by name at {SAMPLE.resolve()}")


def test_logged_sweep_and_eval_points_record_and_verify_the_folder(tmp_path, monkeypatch,
                                                                   sample_spec, small_spec,
                                                                   mlflow_uri):
    """``aiblox sweep`` then ``eval verify SWEEP``, and ``aiblox eval --mlflow`` then
    ``eval verify RUN_ID``, on a folder given by path: both verify, both see an edit."""
    from aiblox.engine.tracking import SweepTracker

    monkeypatch.chdir(tmp_path)
    folder = _copy(tmp_path / "data" / "scifact")
    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[60], depth=[10])
    spec = SweepSpec.model_validate({**spec.model_dump(), "dataset": "data/scifact",
                                     "name": "verify_bypath"})
    tr = SweepTracker(mlflow_uri, "verify-bypath", spec.hash, spec.model_dump(mode="json"))
    run_sweep(spec, cache_dir=tmp_path / "stages", progress=False, tracker=tr)
    r = runner.invoke(app, ["eval", "data/scifact", "--mode", "bm25", "--embedder", "hashing",
                            "--mlflow", "--tracking-uri", mlflow_uri, "--experiment",
                            "verify-bypath-eval", "--format", "json"],
                      env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    run_id = re.search(r"^mlflow: bm25 logged as run (\w+)", r.stderr, re.MULTILINE)[1]
    where = folder.resolve().as_posix()
    for run in ("verify_bypath", run_id):
        res = _verify(run, "--tracking-uri", mlflow_uri, "--json")
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["identical"] and out["dataset_path"] == where
    _edit_a_query(folder)
    for run in ("verify_bypath", run_id):
        res = _verify(run, "--tracking-uri", mlflow_uri, "--json")
        assert res.exit_code == 1, res.output
        out = json.loads(res.stdout)
        assert out["first_difference"] == "dataset"
        assert out["checks"][0]["detail"].startswith(f"dataset at {where} changed since the "
                                                     f"point was computed: hash ")


@pytest.mark.parametrize(("text", "said"), [
    ("{}", "man.json: field 'sweep': missing (and "),
    ('{"config": ', "man.json:1: not valid JSON: Expecting value (column 12)"),
    ("[1]", "man.json: field '(manifest)': "),
])
def test_a_manifest_file_that_is_not_one_is_one_line_naming_it(tmp_path, text, said):
    """QA 27: pydantic's seven-error dump, or json's message without the file."""
    path = tmp_path / "man.json"
    path.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["eval", "verify", str(path)], env={"AIBLOX_NO_PROGRESS": "1"})
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and out.startswith(f"error: {tmp_path}/{said}"), r.output
    assert "pydantic" not in out and "\n" not in r.output.strip()
