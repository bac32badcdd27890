"""``aiblox eval verify SWEEP`` checks every number the sweep's parent run concludes with, not
only the best point: the k-fold result (``sweep_summary.json``'s ``cv``, ``cv_folds.json``,
the parent's ``cv.*`` metrics and tags), the bootstrap intervals, the significance table and
the Pareto front, each computed again from the point runs' logged values (QA: each of these
edited passed as "identical", and ``aiblox report`` showed the edited numbers)."""

from __future__ import annotations

import contextlib
import json

import pytest

pytest.importorskip("mlflow")

from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402
from aiblox.engine.bulk_mlflow import local_path  # noqa: E402
from aiblox.engine.tracking import (  # noqa: E402
    SweepTracker,
    cv_metrics,
    find_sweep_run,
    read_per_query,
    tracking_client,
)
from aiblox.sweep import SweepSpec, run_sweep  # noqa: E402
from aiblox.sweep.crossval import cross_validate  # noqa: E402

runner = CliRunner()
NAME = "verify_conclusion"


@pytest.fixture(scope="module")
def logged(tmp_path_factory, mlflow_uri, sample_dataset, sweep_db):
    """A small sweep with everything a conclusion holds: a report split (intervals on both
    splits, a significance table by Fisher's test with the spec's seed), ``[cv]`` against a
    baseline outside the grid, and quality against cost (a Pareto front)."""
    spec = SweepSpec.model_validate({
        "name": NAME, "dataset": "sample", "tune_split": "test", "report_split": "train",
        "embedder": "hashing", "metrics": ["ndcg@10", "recall@10"], "primary": "ndcg@10",
        "stat_test": "fisher", "seed": 7,
        "base": {"mode": "bm25", "top_k_items": 10, "fts": {"top_k": 20}},
        "grid": {"k1": [0.6, 1.2, 2.0], "depth": [10, 20]}, "baseline": {},
        "search": {"objectives": ["ndcg@10", "candidates"]}, "cv": {"folds": 2, "seed": 3}})
    tr = SweepTracker(mlflow_uri, NAME, spec.hash, spec.model_dump(mode="json"))
    result = run_sweep(spec, cache_dir=tmp_path_factory.mktemp("conclusion") / "stages",
                       db=sweep_db, progress=False, dataset=sample_dataset, tracker=tr)
    client = tracking_client(mlflow_uri)
    parent = find_sweep_run(client, NAME)
    children = {c.data.tags["aiblox.config_hash"]: c.info.run_id for c in tr.children()}
    return {"uri": mlflow_uri, "db": sweep_db, "result": result, "client": client,
            "parent": parent, "folder": local_path(parent.info.artifact_uri),
            "children": children}


def _verify(logged) -> tuple[int, dict]:
    res = runner.invoke(app, ["eval", "verify", NAME, "--tracking-uri", logged["uri"], "--db",
                              logged["db"], "--json"], env={"AIBLOX_NO_PROGRESS": "1"})
    return res.exit_code, json.loads(res.stdout)


@contextlib.contextmanager
def _restored(logged):
    """The parent's artifacts, ``cv.*`` metrics and tags put back as they were."""
    folder, client, parent = logged["folder"], logged["client"], logged["parent"]
    files = {n: (folder / n).read_bytes() for n in ("sweep_summary.json", "cv_folds.json")}
    run = client.get_run(parent.info.run_id)
    metrics = dict(run.data.metrics)
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("aiblox.cv.")}
    try:
        yield
    finally:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        now = client.get_run(parent.info.run_id).data
        for k, v in metrics.items():
            if now.metrics.get(k) != v:
                client.log_metric(parent.info.run_id, k, v)
        for k, v in tags.items():
            if now.tags.get(k) != v:
                client.set_tag(parent.info.run_id, k, v)


def _edit(logged, name, change):
    path = logged["folder"] / name
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, sort_keys=True, indent=1))


def test_an_untouched_conclusion_verifies_field_by_field(logged):
    code, out = _verify(logged)
    assert code == 0, [c for c in out["checks"] if not c["identical"]]
    where = {c["where"] for c in out["checks"]}
    assert {"cv/pooled_held_out (summary)", "cv/pooled_held_out (cv_folds.json)",
            "cv/candidates (cv_folds.json)", "cv/per_query (cv_folds.json)",
            "cv/rows[1] (cv_folds.json)", "sweep/cv.margin", "sweep/aiblox.cv.verdict",
            "sweep/ci.test (summary)", "sweep/ci.train (summary)",
            "sweep/significance[0] (summary)", "sweep/pareto.front (summary)",
            "sweep/pareto.points[0] (summary)", "sweep/gap (summary)"} <= where
    r = logged["result"]
    # the values the sweep computed, recomputed from the point runs (not read back)
    checks = {c["where"]: c for c in out["checks"]}
    assert checks["cv/margin (summary)"]["actual"] == repr(r.cv.margin)
    assert checks["sweep/pareto.front (summary)"]["actual"] == json.dumps(r.pareto)
    assert len([w for w in where if w.startswith("sweep/significance[")]) \
        == len(r.significance) > 0


def test_every_edited_number_of_the_conclusion_is_a_located_difference(logged):
    r = logged["result"]
    pid = logged["parent"].info.run_id
    front = set(r.pareto)
    off = next(i for i, p in enumerate(r.points) if p.config_hash not in front)
    cost = next(i for i, p in enumerate(r.points) if i != off)
    qid = sorted(r.cv.per_query)[1]

    def summary(d):
        d["cv"].update(pooled_held_out=0.55, margin=0.05, margin_low=0.01, beats_baseline=True)
        d["ci"]["train"][1] = 0.1
        d["significance"][0]["p_value"] = 0.001
        d["significance"][1]["p_adjusted"] = 0.001
        d["significance"][2]["significant"] = not d["significance"][2]["significant"]
        d["pareto"]["front"].append(r.points[off].config_hash)  # a dominated point
        d["pareto"]["points"][cost]["tune"][1] = 5.0  # its candidates

    def folds(d):
        d.update(pooled_held_out=0.55, mean_held_out=0.56, baseline_mean=0.1,
                 wins=d["wins"] + 1)
        d["per_query"][qid] = 0.999
        d["rows"][0]["gap"] = 0.0
        d["rows"][1]["baseline_held_out"] = 0.9

    expected = {
        "cv/pooled_held_out (summary)": "0.55", "cv/margin (summary)": "0.05",
        "cv/margin_low (summary)": "0.01", "cv/beats_baseline (summary)": "True",
        "sweep/ci.train (summary)": "[1]: 0.1",
        "sweep/significance[0] (summary)": "p_value: 0.001",
        "sweep/significance[1] (summary)": "p_adjusted: 0.001",
        "sweep/significance[2] (summary)": "significant: ",
        "sweep/pareto.front (summary)": f"[{len(r.pareto)}]: {r.points[off].config_hash}",
        f"sweep/pareto.points[{cost}] (summary)": "tune[1]: 5.0",
        "cv/pooled_held_out (cv_folds.json)": "0.55",
        "cv/mean_held_out (cv_folds.json)": "0.56",
        "cv/baseline_mean (cv_folds.json)": "0.1", "cv/wins (cv_folds.json)": str(r.cv.wins + 1),
        "cv/per_query (cv_folds.json)": f"[{qid}]: 0.999" if not qid.isidentifier()
        else f"{qid}: 0.999",
        "cv/rows[0] (cv_folds.json)": "gap: 0.0",
        "cv/rows[1] (cv_folds.json)": "baseline_held_out: 0.9",
        "sweep/cv.margin": "0.25", "sweep/cv.pooled_held_out": "0.75",
        "sweep/aiblox.cv.verdict": "tuning beats the baseline"}
    with _restored(logged):
        _edit(logged, "sweep_summary.json", summary)
        _edit(logged, "cv_folds.json", folds)
        client = logged["client"]
        client.log_metric(pid, "cv.margin", 0.25)
        client.log_metric(pid, "cv.pooled_held_out", 0.75)
        client.set_tag(pid, "aiblox.cv.verdict", "tuning beats the baseline")
        code, out = _verify(logged)
    assert code == 1
    bad = {c["where"]: c for c in out["checks"] if not c["identical"]}
    assert set(bad) == set(expected), sorted(set(bad) ^ set(expected))
    for where, said in expected.items():  # the field, and the logged value, named
        assert bad[where]["expected"].startswith(said), (where, bad[where])
    # the recomputed side is the sweep's own number
    assert bad["cv/margin (summary)"]["actual"] == repr(r.cv.margin)
    assert bad["sweep/cv.pooled_held_out"]["actual"] == repr(r.cv.pooled_held_out)
    assert bad["cv/rows[0] (cv_folds.json)"]["actual"] == f"gap: {r.cv.rows[0].gap!r}"
    assert out["first_difference"] in expected
    assert _verify(logged)[0] == 0  # put back: identical again


def test_a_fold_table_chosen_without_the_best_point_is_found(logged):
    """``candidates`` without the grid's best point, every number of the k-fold result
    recomputed from the rest (consistently: in ``cv_folds.json``, the summary and the
    parent's metrics) passed, as only the listed candidates were checked."""
    r, client = logged["result"], logged["client"]
    pid = logged["parent"].info.run_id

    def values(p):
        run = logged["children"][p.config_hash]
        return read_per_query(client, run, "test")["ndcg@10"]

    best = values(r.best)  # left out with its twin of another depth (the same ndcg@10)
    rest = [p for p in r.points if not p.outside_grid and values(p) != best]
    cv = cross_validate(rest, {p.config_hash: values(p) for p in rest}, sorted(r.cv.per_query),
                        folds=2, seed=3, split="test", metric="ndcg@10", baseline=r.baseline,
                        baseline_values=values(r.baseline), test="fisher")
    assert r.best.config_hash not in cv.candidates and cv.margin != r.cv.margin
    whole = cv.model_dump(mode="json")
    with _restored(logged):
        (logged["folder"] / "cv_folds.json").write_text(json.dumps(whole))
        _edit(logged, "sweep_summary.json", lambda d: d.update(cv={
            k: v for k, v in whole.items() if k not in ("per_query", "fold_ids", "candidates")}))
        for k, v in cv_metrics(cv).items():
            client.log_metric(pid, k, float(v))
        for row in cv.rows:
            client.set_tag(pid, f"aiblox.cv.fold{row.fold}.config_hash", row.config_hash)
        client.set_tag(pid, "aiblox.cv.verdict", cv.verdict)
        code, out = _verify(logged)
    assert code == 1
    bad = {c["where"]: c for c in out["checks"] if not c["identical"]}
    assert "cv/candidates (cv_folds.json)" in bad
    assert {"cv/margin (cv_folds.json)", "cv/margin (summary)", "sweep/cv.margin"} <= set(bad)
    assert bad["sweep/cv.margin"]["actual"] == repr(r.cv.margin)


def test_a_conclusion_logged_before_a_field_was_added_still_verifies(logged):
    """A field a table lacks reads as its default, as ``aiblox report`` reads it: a summary
    logged before ``dropped`` (and with ``p_holm``, ``p_adjusted``'s former name) or a fold
    table logged before its ``candidates`` were listed is no difference."""

    def old_rows(d):
        for row in d["significance"]:
            row.pop("dropped")
            row["p_holm"] = row.pop("p_adjusted")
        d["cv"].pop("ci_method")

    with _restored(logged):
        _edit(logged, "sweep_summary.json", old_rows)
        _edit(logged, "cv_folds.json", lambda d: d.pop("candidates"))
        code, out = _verify(logged)
    assert code == 0, [c for c in out["checks"] if not c["identical"]]
    assert "cv/candidates (cv_folds.json)" not in {c["where"] for c in out["checks"]}


def test_a_metric_the_sweep_never_logs_is_a_difference(logged):
    """Last: MLflow deletes no metric, so this one stays on the module's parent run."""
    logged["client"].log_metric(logged["parent"].info.run_id, "cv.margin_p", 0.01)
    code, out = _verify(logged)
    assert code == 1
    bad = [c for c in out["checks"] if not c["identical"]]
    assert [(c["where"], c["actual"]) for c in bad] == [
        ("sweep/cv.margin_p", "not a metric of the k-fold result")]
