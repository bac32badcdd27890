"""Small holes around MLflow, closed: no filter string built from a user's string, names that
cannot leave their folder, readers that never create a store, API keys that reach no log, no
MLflow run, no artifact and no cached stage (real sqlite store, real HTTP server)."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402
from aiblox.engine.cache_packs import read_pack  # noqa: E402
from aiblox.engine.tracking import (  # noqa: E402
    SweepTracker,
    TrackingStoreError,
    artifact_location,
    tag_filter,
    tracking_client,
)
from aiblox.explore import mlflow_runs  # noqa: E402
from aiblox.sweep import SweepSpec, SweepSpecError, load_spec, run_sweep
from aiblox.sweep.report import find_sweep_run
from tests.chat_server import ChatServer  # noqa: E402

runner = CliRunner()
KEY = "sk-aiblox-sweep-KEY-0a1b2c3d4e5f6789"


def _cli(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "500"})


@pytest.fixture(scope="module")
def logged(tmp_path_factory, sample_spec, small_spec, sample_dataset, sweep_db):
    root = tmp_path_factory.mktemp("holes")
    uri = f"sqlite:///{root}/mlflow.db"
    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[10, 60], depth=[10])
    spec = SweepSpec.model_validate({**spec.model_dump(), "name": "holes"})
    tr = SweepTracker(uri, "holes", spec.hash, spec.model_dump(mode="json"))
    run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False,
              dataset=sample_dataset, tracker=tr)
    return {"uri": uri, "root": root, "client": tr.client, "parent": tr.parent_id}


@pytest.mark.parametrize("name", ["holes' or tags.`aiblox.kind` = 'sweep", "x'", "x\"y",
                                  "holes\\", "' OR ''='", ".."])
def test_a_quote_in_a_sweep_name_neither_crashes_nor_adds_clauses(logged, name):
    with pytest.raises(ValueError, match="no sweep run with id or name"):
        find_sweep_run(logged["client"], name)
    r = _cli("eval", "verify", name, "--tracking-uri", logged["uri"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert f"no sweep run with id or name {name!r}" in r.output
    assert find_sweep_run(logged["client"], "holes").info.run_id == logged["parent"]


def test_tag_filter_takes_plain_names_only():
    assert tag_filter("aiblox.sweep_name", "scifact_fusion.v2") == \
        "tags.`aiblox.sweep_name` = 'scifact_fusion.v2'"
    for bad in ("a'b", 'a"b', "a b", "a\\b", "", ".hidden", "a`b"):
        with pytest.raises(ValueError, match="is not a plain name"):
            tag_filter("aiblox.sweep_name", bad)


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "a'b", "-x"])
def test_a_spec_name_cannot_leave_its_folder(tmp_path, name):
    spec = Path(__file__).resolve().parents[2] / "evals" / "sweeps" / "sample_fusion.toml"
    bad = tmp_path / "bad.toml"
    bad.write_text(spec.read_text().replace('name = "sample_fusion"',
                                            f"name = {json.dumps(name)}"))
    with pytest.raises(SweepSpecError, match=r"bad\.toml.*'name'"):
        load_spec(bad)


@pytest.mark.parametrize("sweep", ["..", ".", ".hidden", "../x"])
def test_report_refuses_to_write_outside_reports(logged, tmp_path, monkeypatch, sweep):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    r = _cli("report", sweep, "--tracking-uri", logged["uri"], "--no-log")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "would write outside reports/" in r.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["work"]  # nothing written anywhere
    # a name or run id writes reports/<sweep>, inside
    ok = _cli("report", "holes", "--tracking-uri", logged["uri"], "--no-log", "--json")
    assert ok.exit_code == 0, ok.output
    assert Path(json.loads(ok.stdout)["html"]).resolve().parent == (work / "reports" /
                                                                    "holes").resolve()


def test_read_only_commands_never_create_a_database(logged, tmp_path):
    typo = tmp_path / "typo.db"
    uri = f"sqlite:///{typo}"
    for args in (["eval", "verify", "holes"], ["report", "holes"],
                 ["compare", "a" * 32, "b" * 32]):
        r = _cli(*args, "--tracking-uri", uri)
        assert r.exit_code == 2, (args, r.output)
        assert f"no MLflow tracking database at {typo}" in r.output, r.output
        assert "Traceback" not in r.output
    assert not typo.exists() and not list(tmp_path.iterdir())
    with pytest.raises(TrackingStoreError, match="nothing was created"):
        tracking_client(uri)
    assert mlflow_runs(uri).empty  # the notebooks' reader
    assert not typo.exists()
    # a writer creates it (and only a writer)
    tracking_client(uri, create=True)
    assert typo.is_file()


def test_another_tools_database_is_refused_and_left_as_it_was(
        logged, tmp_path, sample_spec, small_spec, sweep_db, sample_dataset):
    """A sqlite file of another tool given as --tracking-uri: a reader once added MLflow's
    ~60 tables to it, and a sweep, failing to open it as MLflow, took its empty tables for a
    half-made store and removed the file. Both refuse it now, naming it, and change nothing;
    an empty file is no store for a reader either."""
    import sqlite3

    app_db = tmp_path / "app.db"
    con = sqlite3.connect(app_db)
    con.execute("CREATE TABLE runs (id INTEGER, note TEXT)")
    con.execute("CREATE TABLE users (name TEXT, email TEXT)")
    con.commit()
    con.close()
    before = app_db.read_bytes()
    uri = f"sqlite:///{app_db}"
    for args in (["runs"], ["report", "holes"], ["eval", "verify", "holes"]):
        r = _cli(*args, "--tracking-uri", uri)
        assert r.exit_code == 2, (args, r.output)
        assert f"{app_db} is not an MLflow tracking database" in r.output, r.output
        assert "runs, users" in r.output and "Traceback" not in r.output
    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[10], depth=[10])
    with pytest.raises(TrackingStoreError, match="nothing was changed"):
        SweepTracker(uri, "foreign", spec.hash, spec.model_dump(mode="json"))
    assert app_db.read_bytes() == before
    empty = tmp_path / "empty.db"
    empty.touch()
    r = _cli("runs", "--tracking-uri", f"sqlite:///{empty}")
    assert r.exit_code == 2 and "holds no table; nothing was created" in r.output, r.output
    assert empty.stat().st_size == 0
    tracking_client(f"sqlite:///{empty}", create=True)  # a writer makes its store there
    assert empty.stat().st_size > 0
    # MLflow's own store still opens for reading (the module's logged sweep)
    assert _cli("runs", "--tracking-uri", logged["uri"]).exit_code == 0


def test_experiment_artifacts_stay_under_artifacts(tmp_path):
    uri = f"sqlite:///{tmp_path}/m/mlflow.db"
    root = (tmp_path / "m" / "artifacts").resolve().as_uri()
    assert artifact_location(uri, "..") == f"{root}/_.."
    assert artifact_location(uri, "aiblox-sweep/x") == f"{root}/aiblox-sweep_x"
    assert artifact_location(uri, "../../etc") == f"{root}/_.._.._etc"
    assert artifact_location("http://mlflow:5000", "x") is None


def test_a_secret_in_reader_options_is_refused(sample_spec):
    data = sample_spec.model_dump()
    data.update({"grid": {"selection": {"policy": ["R2_POLICY_V1"]}}, "primary": "answer_f1",
                 "reader": "openai", "reader_options": {"api_key": KEY}})
    with pytest.raises(ValueError, match="reader_options.api_key: a secret does not belong"):
        SweepSpec.model_validate(data)


def test_an_api_key_reaches_the_server_and_no_log_run_artifact_or_stage(
        tmp_path, monkeypatch, caplog, capsys, sample_spec, sample_dataset, sweep_db):
    pytest.importorskip("httpx")
    server = ChatServer()
    monkeypatch.setenv("AIBLOX_LLM_BASE_URL", server.url)
    monkeypatch.setenv("AIBLOX_LLM_MODEL", "test-model")
    monkeypatch.setenv("AIBLOX_LLM_API_KEY", KEY)
    data = sample_spec.model_dump()
    data.update({"name": "keyed", "primary": "answer_f1", "query_limit": 2,
                 "metrics": ["ndcg@10"], "base": {**data["base"], "top_k_chunks": 4},
                 "chunk_k": [1, 4],  # 4 chunks returned: k <= 4
                 "grid": {"selection": {"policy": ["R2_POLICY_V1"], "max_chunks": [1, 2]}},
                 "baseline": None, "reader": "openai"})
    spec = SweepSpec.model_validate(data)
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    caplog.set_level(logging.DEBUG)
    try:
        tr = SweepTracker(uri, "keyed", spec.hash, spec.model_dump(mode="json"))
        result = run_sweep(spec, cache_dir=tmp_path / "stages", db=sweep_db, progress=False,
                           dataset=sample_dataset, tracker=tr)
    finally:
        server.close()
    assert result.tracking["logged"] == 2
    assert server.auth and set(server.auth) == {f"Bearer {KEY}"}  # the key was used
    child = MlflowClient(uri).get_run(tr.children()[0].info.run_id)
    assert child.data.params["reader.name"] == "openai"
    out = capsys.readouterr()
    texts = [out.out, out.err, caplog.text]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in files)
    assert any(p.name == "manifest.json" for p in files)  # artifacts
    # the reader stage's cached output (in a pack, as a sweep's points are)
    assert any(p.parent.parent.name == "reader" and p.suffix == ".pack" for p in files)
    for p in files:
        raw = p.read_bytes()
        if p.suffix == ".pack":  # each entry's meta and output, as their own files would be
            for _, meta, out in read_pack(raw):
                texts.append(meta.decode("utf-8"))
                texts.append(gzip.decompress(out).decode("utf-8", "replace")
                             if out.startswith(b"\x1f\x8b") else out.decode("utf-8", "replace"))
            continue
        texts.append(gzip.decompress(raw).decode("utf-8", "replace") if p.suffix == ".gz"
                     else raw.decode("utf-8", "replace"))
    for t in texts:
        assert KEY not in t and KEY[-16:] not in t
