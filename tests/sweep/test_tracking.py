"""MLflow logging on a real sqlite store in a tmp dir: parent and child runs, dedupe, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from aiblox.engine.tracking import SweepInterrupted, SweepTracker, flatten, metric_key, trec_run  # noqa: E402
from aiblox.sweep import run_sweep

GRID = {"blend": ["linear", "rrf"], "w_text": [0.3, 0.7], "normalize": ["minmax"],
        "rrf_k": [60], "depth": [20], "baseline": {"blend": "rrf", "rrf_k": 10}}
N = 2 + 1 + 1  # linear weights, rrf, baseline


@pytest.fixture(scope="module")
def env(tmp_path_factory, sample_spec, small_spec, mlflow_uri):
    root = tmp_path_factory.mktemp("tracking")
    return {"uri": mlflow_uri, "root": root,
            "spec": small_spec(sample_spec, **GRID), "cache": root / "stages"}


def tracker(env, spec=None, resume=False, experiment="exp"):
    spec = spec or env["spec"]
    return SweepTracker(env["uri"], experiment, spec.hash, spec.model_dump(mode="json"),
                        resume=resume)


def sweep(env, sample_dataset, sweep_db, tr, **kw):
    return run_sweep(env["spec"], cache_dir=env["cache"], db=sweep_db, progress=False,
                     dataset=sample_dataset, tracker=tr, **kw)


def test_flatten_and_names():
    assert flatten({"a": {"b": 1, "c": None}, "f": {}, "l": [1, 2]}) == \
        {"a.b": "1", "a.c": "None", "f": "{}", "l": "[1, 2]"}
    assert metric_key("test", "ndcg@10") == "test.ndcg_at_10"
    assert trec_run({"q2": [["d1", 0.5]], "q1": [["d3", 2.0], ["d1", 1.0]]}, "t") == \
        "q1 Q0 d3 1 2.0 t\nq1 Q0 d1 2 1.0 t\nq2 Q0 d1 1 0.5 t\n"


def test_parent_and_children_logged_once(env, sample_dataset, sweep_db):
    tr = tracker(env)
    r = sweep(env, sample_dataset, sweep_db, tr)
    info = r.tracking
    assert info["logged"] == N and info["skipped"] == 0 and not info["resumed"]
    client = tr.client
    parent = client.get_run(info["parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["aiblox.sweep_hash"] == env["spec"].hash
    assert parent.data.tags["aiblox.best_config_hash"] == r.best.config_hash
    assert parent.data.metrics["best.tune.ndcg_at_10"] == r.best.metrics["train"]["ndcg@10"]
    assert parent.data.metrics["best.report.ndcg_at_10"] == r.best.metrics["test"]["ndcg@10"]
    children = tr.children()
    assert len(children) == N
    by_hash = {c.data.tags["aiblox.config_hash"]: c for c in children}
    assert set(by_hash) == {p.config_hash for p in r.points}
    point = r.points[0]
    child = by_hash[point.config_hash]
    assert child.info.status == "FINISHED"
    assert child.data.params["prefs.scoring.w_text"] == repr(point.scoring["w_text"])
    assert child.data.params["embedder"] == point.manifest.config["embedder"]
    assert child.data.metrics["train.ndcg_at_10"] == point.metrics["train"]["ndcg@10"]
    assert child.data.metrics["test.mrr_at_10"] == point.metrics["test"]["mrr@10"]
    assert child.data.tags["aiblox.run_hash.test"] == point.manifest.splits["test"].run_hash
    assert child.data.tags["aiblox.manifest_hash"] == point.manifest.manifest_hash
    arts = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {"manifest.json", "run.train.trec", "run.test.trec", "per_query.train.parquet",
            "per_query.test.parquet"} <= arts
    local = client.download_artifacts(child.info.run_id, "manifest.json", str(env["root"]))
    assert json.loads(Path(local).read_text())["config_hash"] == point.config_hash
    # the TREC file is written from the compact run: the text trec_run gives of the decoded run
    from aiblox.engine.cache import StageCache
    from aiblox.engine.outputs import load_fused_run

    stages = {s["name"]: s["key"] for s in point.manifest.splits["test"].stages}
    trec = client.download_artifacts(child.info.run_id, "run.test.trec", str(env["root"]))
    run = load_fused_run(StageCache(env["cache"]), stages["signals"], stages["fusion"])
    assert any(run.values())
    assert Path(trec).read_text() == trec_run(run, f"aiblox-{point.config_hash[:12]}")


def test_rerun_logs_nothing_twice(env, sample_dataset, sweep_db):
    tr = tracker(env)
    r = sweep(env, sample_dataset, sweep_db, tr)
    assert r.tracking["logged"] == 0 and r.tracking["skipped"] == N and r.tracking["resumed"]
    assert r.computed == {}
    assert len(tr.children()) == N
    runs = tr.client.search_runs([tr.experiment_id], max_results=100)
    assert len(runs) == N + 1  # one parent, no second parent


def test_killed_sweep_needs_resume_and_finishes_only_the_rest(env, sample_dataset, sweep_db,
                                                             small_spec, sample_spec):
    spec = small_spec(sample_spec, **{**GRID, "w_text": [0.3, 0.5, 0.7]})
    e2 = {**env, "spec": spec}
    count = []

    def kill(point):
        count.append(point)
        if len(count) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(e2, sample_dataset, sweep_db, tracker(e2, experiment="killed"), on_point=kill)
    with pytest.raises(SweepInterrupted, match="--resume"):
        tracker(e2, experiment="killed")
    tr = tracker(e2, resume=True, experiment="killed")
    r = sweep(e2, sample_dataset, sweep_db, tr)
    assert r.tracking["skipped"] == 2 and r.tracking["logged"] == len(r.points) - 2
    children = tr.children()
    assert len(children) == len(r.points) == 5
    assert len({c.data.tags["aiblox.config_hash"] for c in children}) == 5
    assert tr.client.get_run(r.tracking["parent_run_id"]).info.status == "FINISHED"


def test_a_finished_sweep_missing_a_point_is_completed_and_cleaned(env, sample_dataset, sweep_db,
                                                                  small_spec, sample_spec):
    """A FINISHED parent that lost a child and holds a stray unfinished one (left by an older
    version): running the spec again owns the parent for as long as it logs the missing point,
    terminates and deletes the stray child, and ends FINISHED with each point once."""
    from mlflow.entities import ViewType

    e2 = {**env, "spec": small_spec(sample_spec, **{**GRID, "w_text": [0.4, 0.6]})}
    first = sweep(e2, sample_dataset, sweep_db, tracker(e2, experiment="holes"))
    tr = tracker(e2, experiment="holes")
    children = tr.children()
    lost = children[0]
    tr.client.delete_run(lost.info.run_id)
    stray = tr.client.create_run(tr.experiment_id, tags={
        "mlflow.parentRunId": tr.parent_id, "aiblox.config_hash":
            children[1].data.tags["aiblox.config_hash"], "aiblox.kind": "point"})
    # the re-run's one SQL query sees what MLflow's search_runs sees: not the deleted child,
    # the stray (RUNNING) with its repeated config hash, every finished one
    rows = tr.child_rows()
    assert rows == sorted(((c.info.run_id, c.info.status, c.info.start_time,
                            c.data.tags.get("aiblox.config_hash")) for c in tr.children()),
                          key=lambda x: (x[2], x[0]))
    assert len(rows) == len(children) and lost.info.run_id not in {x[0] for x in rows}
    assert (stray.info.run_id, "RUNNING") in {x[:2] for x in rows}
    r = sweep(e2, sample_dataset, sweep_db, tracker(e2, experiment="holes"))
    assert r.tracking["logged"] == 1 and r.tracking["parent_run_id"] == \
        first.tracking["parent_run_id"]
    now = tr.children()
    assert sorted(c.data.tags["aiblox.config_hash"] for c in now) == \
        sorted(p.config_hash for p in r.points)
    assert all(c.info.status == "FINISHED" for c in now)
    assert tr.client.get_run(tr.parent_id).info.status == "FINISHED"
    gone = tr.client.get_run(stray.info.run_id)
    assert gone.info.lifecycle_stage == "deleted" and gone.info.status == "KILLED"
    every = tr.client.search_runs([tr.experiment_id], run_view_type=ViewType.ALL)
    assert "RUNNING" not in {x.info.status for x in every}


@pytest.mark.parametrize("variable", ["AIBLOX_SWEEP_HEARTBEAT_S", "AIBLOX_SWEEP_LEASE_S",
                                      "AIBLOX_TRACKING_SETTLE_S"])
def test_a_malformed_duration_variable_stops_the_tracker_before_any_work(tmp_path, monkeypatch,
                                                                          variable):
    """Once read at import and silently replaced by its default; now one error naming it, before
    the tracking database is even created."""
    from aiblox.inputs import EnvVarError

    monkeypatch.setenv(variable, "abc")
    db = tmp_path / "ml" / "mlflow.db"
    with pytest.raises(EnvVarError) as err:
        SweepTracker(f"sqlite:///{db}", "exp", "h" * 64, {"name": "x"})
    assert str(err.value).startswith(f"environment variable {variable}='abc': expected a "
                                     f"finite number of seconds > 0")
    assert not db.exists()


def test_sweep_cli_names_a_malformed_variable_in_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from aiblox.cli.main import app

    monkeypatch.chdir(tmp_path)
    spec = Path(__file__).resolve().parents[2] / "evals" / "sweeps" / "sample_fusion.toml"
    r = CliRunner().invoke(app, ["sweep", str(spec), "--tracking-uri", "http://127.0.0.1:9",
                                 "--cache-dir", str(tmp_path / "stages")],
                           env={"AIBLOX_NO_PROGRESS": "1", "AIBLOX_TRACKING_CONNECT_S": "-3"})
    assert r.exit_code == 2
    assert [ln for ln in r.stderr.splitlines() if ln.startswith(("error", "warning"))] == [
        "error: environment variable AIBLOX_TRACKING_CONNECT_S='-3': expected a finite number "
        "of seconds > 0 (unset: 10)"]
    assert not any((tmp_path / "stages").rglob("*"))  # no stage computed


def test_a_sweep_over_changed_data_is_a_new_parent_not_a_resumed_one(env, sample_dataset,
                                                                      sweep_db, tmp_path):
    """The spec's hash alone named the parent: run again after one judgement changed, the
    sweep computed new numbers, logged none ("resumed", every point "skipped") and MLflow kept
    the old data's (QA 20). The parent now records its data; other data is another parent."""
    from dataclasses import replace

    experiment = "changed-data"
    first = sweep(env, sample_dataset, sweep_db,
                  SweepTracker(env["uri"], experiment, env["spec"].hash,
                               env["spec"].model_dump(mode="json"),
                               dataset_hash=sample_dataset.hash))
    q = sorted(sample_dataset.qrels["test"])[0]
    qrels = {**sample_dataset.qrels["test"],
             q: {d: g + 1 for d, g in sample_dataset.qrels["test"][q].items()}}
    changed = replace(sample_dataset, qrels={**sample_dataset.qrels, "test": qrels})
    changed._hash = ""  # noqa: SLF001 - computed again from the changed judgements
    assert changed.hash != sample_dataset.hash
    tr = SweepTracker(env["uri"], experiment, env["spec"].hash,
                      env["spec"].model_dump(mode="json"), dataset_hash=changed.hash)
    assert tr.other_data == 1 and not tr.resumed
    again = sweep(env, changed, sweep_db, tr)
    assert again.tracking["logged"] == N and not again.tracking["resumed"]
    assert again.tracking["parent_run_id"] != first.tracking["parent_run_id"]
    parent = tr.client.get_run(again.tracking["parent_run_id"])
    assert parent.data.tags["aiblox.dataset_hash"] == changed.hash
    # the same data again: that parent, resumed, nothing logged twice
    same = SweepTracker(env["uri"], experiment, env["spec"].hash,
                        env["spec"].model_dump(mode="json"), dataset_hash=changed.hash)
    assert same.resumed and same.parent_id == again.tracking["parent_run_id"]
    assert sweep(env, changed, sweep_db, same).tracking["logged"] == 0
    # a tracker opened for other data is refused before any point is logged
    wrong = SweepTracker(env["uri"], experiment, env["spec"].hash,
                         env["spec"].model_dump(mode="json"), dataset_hash=changed.hash)
    with pytest.raises(ValueError, match="the tracker's parent run is for dataset"):
        sweep(env, sample_dataset, sweep_db, wrong)


def test_a_tracker_opened_without_the_data_hash_never_mixes_two_datas_points(
        env, sample_dataset, sweep_db):
    """A spec's hash leaves out where its data lies (``dataset``), so a spec pointed at other
    data has the hash of the first; a tracker opened without a dataset hash (a notebook's)
    found the first data's parent and the sweep skipped every point it had logged there: the
    other data's scores were never logged, the first data's shown for them. The runner binds
    the tracker to its data: the parent records it, and a parent of other data is refused."""
    from dataclasses import replace

    experiment = "unbound-data"
    spec = env["spec"]
    first = sweep(env, sample_dataset, sweep_db,
                  SweepTracker(env["uri"], experiment, spec.hash, spec.model_dump(mode="json")))
    parent = first.tracking["parent_run_id"]
    from mlflow.tracking import MlflowClient

    tags = MlflowClient(env["uri"]).get_run(parent).data.tags
    assert tags["aiblox.dataset_hash"] == sample_dataset.hash
    q = sorted(sample_dataset.qrels["test"])[0]
    other = replace(sample_dataset, qrels={**sample_dataset.qrels, "test": {
        **sample_dataset.qrels["test"], q: {}}})
    other._hash = ""  # noqa: SLF001 - computed again from the changed judgements
    assert other.hash != sample_dataset.hash
    unbound = SweepTracker(env["uri"], experiment, spec.hash, spec.model_dump(mode="json"))
    assert unbound.parent_id == parent
    with pytest.raises(ValueError, match="the tracker's parent run is for dataset"):
        sweep(env, other, sweep_db, unbound)
    # the same data through a tracker without its hash: that parent, nothing logged twice
    same = SweepTracker(env["uri"], experiment, spec.hash, spec.model_dump(mode="json"))
    assert sweep(env, sample_dataset, sweep_db, same).tracking["logged"] == 0
