"""A selection-policy sweep of the sample dataset logged to a tmp sqlite MLflow store: the
report's leaderboard and axis plots, and ``aiblox compare`` with the evidence that entered or
left per query."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("matplotlib")

from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402
from aiblox.engine.tracking import SweepTracker
from aiblox.sweep import SweepSpec, compare_runs, load_sweep_report, run_sweep, write_report
from aiblox.sweep.compare import (
    per_query_evidence,  # noqa: E402
    per_query_metrics,
)

runner = CliRunner()


@pytest.fixture(scope="module")
def logged(tmp_path_factory, sample_spec, mlflow_uri, sample_dataset, sweep_db):
    root = tmp_path_factory.mktemp("pipeline-report")
    data = sample_spec.model_dump()
    data.update({"name": "report_selection", "primary": "answer_f1", "query_limit": 4,
                 "metrics": ["ndcg@10"], "base": {**data["base"], "top_k_chunks": 6},
                 "chunk_k": [1, 5],  # 6 chunks returned: k <= 6
                 "grid": {"selection": {"policy": ["R2_POLICY_V1", "R2_POLICY_V2"],
                                        "max_chunks": [1, 4]}},
                 "baseline": {"policy": "R2_POLICY_V1", "max_chunks": 4}})
    spec = SweepSpec.model_validate(data)
    tr = SweepTracker(mlflow_uri, "pipeline-report", spec.hash, spec.model_dump(mode="json"))
    result = run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False,
                       dataset=sample_dataset, tracker=tr)
    children = {c.data.tags["aiblox.config_hash"]: c for c in tr.children()}
    return {"uri": mlflow_uri, "root": root, "result": result, "tracker": tr,
            "children": children}


def test_report_shows_the_answer_metric_and_selection_axes(logged):
    r = logged["result"]
    out = logged["root"] / "rep"
    info = write_report(r.tracking["parent_run_id"], logged["uri"], out)
    rep = load_sweep_report(r.tracking["parent_run_id"], logged["uri"])
    assert set(rep.axes) == {"selection.policy", "selection.params.max_chunks"}
    assert not any("policy_sha256" in a for a in rep.axes)
    md = (out / "report.md").read_text()
    assert "train answer_f1 | train ndcg@10" in md  # the primary leads the leaderboard
    assert f"{r.best.metrics['test']['answer_f1']:.4f}" in md
    html = (out / "report.html").read_text()
    assert html.count('<img alt="') == len(info["axes"]) == 2
    # verify SWEEP's check of the conclusion holds for a pipeline sweep's metrics too (answer,
    # chunk and status metrics, a baseline outside the grid)
    from aiblox.sweep.verify_summary import verify_summary

    checks = verify_summary(r.tracking["parent_run_id"], logged["uri"])
    assert checks and all(c.identical for c in checks), [c for c in checks if not c.identical]
    assert next(c for c in checks if c.where == "sweep/best").actual == r.best.config_hash


def _run_of(logged, policy, max_chunks):
    r = logged["result"]
    p = next(p for p in r.points if p.selection["policy"] == policy
             and p.selection["params"]["max_chunks"] == max_chunks)
    return p, logged["children"][p.config_hash].info.run_id


def _selected(logged, point, split):
    from aiblox.engine.cache import StageCache

    cache = StageCache(logged["root"] / "stages")
    st = next(s for s in point.manifest.splits[split].stages if s["name"] == "selection")
    return {q: v["selected"] for q, v in cache.load("selection", st["key"])["queries"].items()}


def test_points_log_chunk_and_answer_metrics_per_query_and_their_evidence(logged):
    point, rid = _run_of(logged, "R2_POLICY_V1", 4)
    client = logged["tracker"].client
    per_query = per_query_metrics(client, rid, "test")
    assert {"ndcg@10", "answer_f1", "answer_recall@5", "max_passage:ndcg@10",
            "evidence_answer_recall", "status:ANSWERED"} <= set(per_query)
    mean = sum(per_query["selected_chunks"].values()) / len(per_query["selected_chunks"])
    assert mean == pytest.approx(point.metrics["test"]["selected_chunks"])
    evidence = per_query_evidence(client, rid, "test")
    assert evidence == _selected(logged, point, "test")
    arts = {a.path for a in client.list_artifacts(rid)}
    assert {"evidence.train.parquet", "evidence.test.parquet"} <= arts


def test_compare_lists_the_evidence_that_entered_or_left(logged):
    pa, a = _run_of(logged, "R2_POLICY_V1", 1)
    pb, b = _run_of(logged, "R2_POLICY_V1", 4)
    cmp = compare_runs(a, b, logged["uri"], split="test")
    sa, sb = _selected(logged, pa, "test"), _selected(logged, pb, "test")
    entered = sum(len([c for c in sb[q] if c not in sa[q]]) for q in sa)
    left = sum(len([c for c in sa[q] if c not in sb[q]]) for q in sa)
    assert cmp.evidence_summary["entered"] == entered > 0
    assert cmp.evidence_summary["left"] == left
    assert cmp.evidence_summary["queries"] == len(sa) == 4
    assert {c.query_id for c in cmp.evidence} == {q for q in sa if sa[q] != sb[q]}
    assert "answer_f1" in {m.metric for m in cmp.metrics}
    # the notebooks' comparison of the same runs: evidence.<split>.parquet holds chunks, not
    # metrics, and the numbers are aiblox compare's
    from aiblox.explore import compare_mlflow_runs

    _, per_query = compare_mlflow_runs(a, b, logged["uri"])
    rows = per_query.set_index("metric")
    assert "test:answer_f1" in rows.index
    assert not [k for k in rows.index if "evidence." in k]
    f1 = next(m for m in cmp.metrics if m.metric == "answer_f1")
    assert (rows.loc["test:answer_f1", "p_value"], rows.loc["test:answer_f1", "delta"]) == \
        (f1.p_value, f1.delta)

    r = runner.invoke(app, ["compare", a, b, "--tracking-uri", logged["uri"], "--split",
                            "test", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["evidence_summary"]["entered"] == entered
    assert out["evidence"][0]["entered"]  # per-query rows, largest change first
    text = runner.invoke(app, ["compare", a, b, "--tracking-uri", logged["uri"], "--split",
                               "test"], env={"COLUMNS": "200"}).output
    assert f"{entered} chunks entered" in text
    assert "queries whose evidence changed most" in text


def test_derived_splits_are_logged_under_safe_file_names(tmp_path, sample_spec, mlflow_uri,
                                                          sweep_db):
    from aiblox.engine.tracking import split_file

    assert split_file("test:0/2") == "test-0of2" and split_file("train") == "train"
    data = sample_spec.model_dump()
    data.update({"name": "derived_selection", "tune_split": "test:0/2",
                 "report_split": "test:1/2", "primary": "answered", "query_limit": 3,
                 "metrics": ["ndcg@10"], "baseline": None,
                 "grid": {"selection": {"policy": ["R2_POLICY_V1"]}}})
    spec = SweepSpec.model_validate(data)
    tr = SweepTracker(mlflow_uri, "pipeline-derived", spec.hash, spec.model_dump(mode="json"))
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, tracker=tr)
    rid = tr.children()[0].info.run_id
    arts = {a.path for a in tr.client.list_artifacts(rid)}
    assert {"per_query.test-0of2.parquet", "evidence.test-1of2.parquet",
            "run.test-1of2.trec"} <= arts
    cmp = compare_runs(rid, rid, mlflow_uri, split="test:1/2")
    assert cmp.evidence_summary["changed"] == 0
    assert cmp.evidence_summary["queries"] == r.points[0].manifest.splits["test:1/2"].n_queries
