"""``aiblox eval verify RUN``: a logged point re-executed from its manifest alone (real MLflow
sqlite store, real DuckDB file), by point run id, by sweep name, and from a tampered file."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mlflow")

from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402
from aiblox.engine.tracking import SweepTracker
from aiblox.sweep import SweepSpec, run_sweep  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def logged(tmp_path_factory, sample_spec, small_spec, mlflow_uri, sample_dataset, sweep_db):
    spec = small_spec(sample_spec, blend=["linear", "rrf"], w_text=[0.3], normalize=["minmax"],
                      rrf_k=[60], depth=[10])
    spec = SweepSpec.model_validate({**spec.model_dump(), "name": "verify_cli"})
    tr = SweepTracker(mlflow_uri, "verify-cli", spec.hash, spec.model_dump(mode="json"))
    result = run_sweep(spec, cache_dir=tmp_path_factory.mktemp("verify") / "stages",
                       db=sweep_db, progress=False, dataset=sample_dataset, tracker=tr)
    children = {c.data.tags["aiblox.config_hash"]: c.info.run_id for c in tr.children()}
    return {"uri": mlflow_uri, "result": result, "children": children, "db": sweep_db}


def _verify(logged, run, *extra):
    return runner.invoke(app, ["eval", "verify", run, "--tracking-uri", logged["uri"],
                               "--db", logged["db"], *extra],
                         env={"AIBLOX_NO_PROGRESS": "1"})


def _verify_changed(logged, tmp_path, data) -> dict:
    """``aiblox eval verify`` of a changed manifest (written as the logged artifact is): it
    differs (exit 1); its JSON report."""
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data, sort_keys=True))
    res = _verify(logged, str(path), "--json")
    assert res.exit_code == 1
    return json.loads(res.stdout)


def test_a_logged_point_verifies_identical(logged):
    point = logged["result"].points[0]
    res = _verify(logged, logged["children"][point.config_hash], "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["identical"] and out["config_hash"] == point.config_hash
    where = [c["where"] for c in out["checks"]]
    assert where[:3] == ["dataset", "config", "embedder"]  # the model's id: its files
    stages = sorted(w for w in where[3:] if "(" not in w)
    assert stages == [f"{s}/{st}" for s in ("test", "train")
                      for st in ("fusion", "metrics", "signals")]
    values = sorted(w for w in where if "(" in w and " per query" not in w
                    and "run file" not in w)  # every logged value, manifest and MLflow
    assert values == sorted(f"{s}/{m} ({src})" for s in ("test", "train")
                            for m in point.metrics[s] for src in ("manifest", "mlflow"))
    # and every logged per-query value (what aiblox compare tests)
    assert sorted(w for w in where if " per query" in w) == sorted(
        f"{s}/{m} per query (mlflow)" for s in ("test", "train") for m in point.metrics[s])
    assert all(c["identical"] for c in out["checks"])


def test_a_sweep_name_verifies_its_best_point(logged):
    res = _verify(logged, "verify_cli")
    assert res.exit_code == 0, res.output
    assert logged["result"].best.config_hash[:16] in res.output and "identical" in res.output
    # the table is a result: on stdout, whole (issue 29: `> v.txt` left the file empty),
    # values at full precision, hashes by their start as every command shows them
    best = logged["result"].best
    assert "identical:" in res.stdout and "identical:" not in res.stderr
    assert f"point {best.config_hash[:16]} (" in res.stdout
    rows = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[2:4]]
            for ln in res.stdout.splitlines() if ln.startswith("│ ") and ln.count("│") == 5}
    value = best.metrics["test"]["ndcg@10"]
    assert rows["test/ndcg@10 (mlflow)"] == [repr(value)] * 2  # whole, not its last 16
    assert rows["config"] == [best.config_hash[:16]] * 2  # the start, not the end
    key, output = best.manifest.splits["test"].stages[0]["key"], \
        best.manifest.splits["test"].stages[0]["output_hash"]
    assert rows[f"test/{best.manifest.splits['test'].stages[0]['name']}"][0] == \
        f"{key[:16]}:{output[:16]}"


def test_a_tampered_manifest_names_the_first_stage_that_differs(logged, tmp_path):
    data = logged["result"].points[1].manifest.model_dump(mode="json")
    data["splits"]["test"]["stages"][2]["output_hash"] = "f" * 64  # test metrics
    out = _verify_changed(logged, tmp_path, data)
    assert not out["identical"] and out["first_difference"] == "test/metrics"


def test_tampered_logged_values_fail_although_every_hash_matches(logged, tmp_path):
    """The reported defect: halved metrics logged to MLflow, and verify said identical."""
    from aiblox.engine.tracking import tracking_client

    point = logged["result"].points[1]
    data = point.manifest.model_dump(mode="json")
    data["splits"]["test"]["metrics"]["ndcg@10"] /= 2
    out = _verify_changed(logged, tmp_path, data)
    assert out["first_difference"] == "test/ndcg@10 (manifest)"
    bad = next(c for c in out["checks"] if not c["identical"])
    assert float(bad["expected"]) * 2 == float(bad["actual"]) == point.metrics["test"]["ndcg@10"]
    assert all(c["identical"] for c in out["checks"] if "(" not in c["where"])  # hashes agree

    run_id = logged["children"][point.config_hash]
    client = tracking_client(logged["uri"])
    client.log_metric(run_id, "test.ndcg_at_10", point.metrics["test"]["ndcg@10"] / 2)
    try:
        res = _verify(logged, run_id)
        assert res.exit_code == 1
        said = " ".join(res.output.split())
        assert "first at test/ndcg@10 (mlflow)" in said
        assert repr(point.metrics["test"]["ndcg@10"]) in said
    finally:
        client.log_metric(run_id, "test.ndcg_at_10", point.metrics["test"]["ndcg@10"])


def test_changed_per_query_values_and_run_file_are_found_and_compare_refuses_them(logged):
    """The per-query values (``per_query.<split>.parquet``, what ``aiblox compare`` tests) and
    the TREC run file (what ``aiblox runs export`` writes) of a logged point, changed after
    logging: verify once said identical (it checked hashes and means only), and compare
    printed the logged means beside a test of the changed values (a significant gain with
    W/T/L 0/1/11). Verify now names the first query or line that differs; compare refuses."""
    import pandas as pd

    from aiblox.engine.bulk_mlflow import local_path
    from aiblox.engine.tracking import tracking_client

    r = logged["result"]
    best = r.best.config_hash
    other = next(p.config_hash for p in r.points if p.config_hash != best)
    run_id = logged["children"][best]
    folder = local_path(tracking_client(logged["uri"]).get_run(run_id).info.artifact_uri)
    parquet, trec = folder / "per_query.test.parquet", folder / "run.test.trec"
    saved = {f: f.read_bytes() for f in (parquet, trec)}
    try:
        frame = pd.read_parquet(parquet)
        first = sorted(frame.loc[frame.metric == "ndcg@10", "query_id"])[0]
        frame.loc[frame.metric == "ndcg@10", "value"] = 0.0
        frame.to_parquet(parquet)
        res = _verify(logged, run_id)
        assert res.exit_code == 1, res.output
        said = " ".join(res.output.split())
        assert f"first at test/ndcg@10 per query (mlflow) (logged query {first}: 0.0" in said
        cmp = runner.invoke(app, ["compare", logged["children"][other], run_id,
                                  "--tracking-uri", logged["uri"]])
        assert cmp.exit_code == 2, cmp.output
        assert f"run {run_id}: its logged per-query values of ndcg@10 on test average " \
               f"0.000000" in " ".join(cmp.output.split())
        parquet.write_bytes(saved[parquet])
        lines = trec.read_text().splitlines()
        trec.write_text("\n".join(lines[1:]) + "\n")  # the first line gone
        res = _verify(logged, run_id)
        assert res.exit_code == 1, res.output
        said = " ".join(res.output.split())
        assert "first at test/run file (mlflow) (logged line 1: " in said
        assert " ".join(lines[0].split()[:5]) in said  # the recomputed first line
    finally:
        for f, data in saved.items():
            f.write_bytes(data)
    assert _verify(logged, run_id).exit_code == 0


def test_unknown_run_and_missing_file_fail_clearly(logged, tmp_path):
    res = _verify(logged, "no-such-sweep")
    assert res.exit_code == 2 and "no-such-sweep" in res.output
    res = _verify(logged, str(tmp_path / "gone.json"))
    assert res.exit_code == 2 and "gone.json" in res.output


def test_eval_dataset_still_runs_as_the_default_command(sweep_db):
    res = runner.invoke(app, ["eval", "sample", "--db", sweep_db, "--embedder", "hashing",
                              "--mode", "bm25", "--json"], env={"AIBLOX_NO_PROGRESS": "1"})
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["systems"][0]["name"] == "bm25"


def test_dataset_hash_does_not_depend_on_split_order():
    """A manifest's splits come back in any order (the logged JSON sorts its keys); the dataset
    hash verify recomputes must not change with it."""
    from aiblox.data import load_dataset

    a = load_dataset("sample", splits=["train", "test"])
    b = load_dataset("sample", splits=["test", "train"])
    assert a.hash == b.hash and list(a.qrels) == ["train", "test"]
    assert load_dataset("sample", splits=["test"]).hash != a.hash  # what was read still counts


def test_a_difference_on_another_cpu_says_so(logged, tmp_path):
    """The point's stage bytes differ and its manifest names another CPU: the note says why
    (a neural embedder's vectors round differently there); on the same CPU it says nothing."""
    from aiblox.engine.manifest import cpu

    data = logged["result"].points[1].manifest.model_dump(mode="json")
    assert data["environment"]["cpu"] == cpu()  # recorded where it was computed
    data["splits"]["train"]["stages"][0]["output_hash"] = "f" * 64  # train signals
    for where, note in ((cpu(), False), ("AMD EPYC 7B13 (avx2)", True)):
        data["environment"]["cpu"] = where
        out = _verify_changed(logged, tmp_path, data)
        assert out["first_difference"] == "train/signals"
        said = [n for n in out["notes"] if "another CPU" in n]
        assert bool(said) == note
        if note:
            assert "AMD EPYC 7B13 (avx2)" in said[0] and cpu() in said[0]


def test_a_sweep_s_logged_conclusion_is_checked_against_its_points(logged):
    """``verify SWEEP`` re-ran the best point but took the parent run's word for the rest: an
    edited ``best.report.*`` metric (what ``aiblox runs`` shows), a best-point tag moved to
    another point (which then verified identical) or a leaderboard value edited in
    ``sweep_summary.json`` (what ``aiblox report`` reads) all passed."""
    from aiblox.engine.bulk_mlflow import local_path
    from aiblox.engine.tracking import find_sweep_run, tracking_client

    client = tracking_client(logged["uri"])
    parent = find_sweep_run(client, "verify_cli")
    pid = parent.info.run_id
    r = logged["result"]
    res = _verify(logged, "verify_cli", "--json")
    assert res.exit_code == 0, res.output
    checks = {c["where"]: c for c in json.loads(res.stdout)["checks"]}
    assert {"sweep/best", "sweep/best (summary)", "sweep/best.report.ndcg_at_10",
            "sweep/leaderboard values", "sweep/leaderboard order"} <= set(checks)
    assert checks["sweep/best"]["actual"] == r.best.config_hash
    value = r.best.metrics["test"]["ndcg@10"]

    def first_difference() -> str:
        res = _verify(logged, "verify_cli", "--json")
        assert res.exit_code == 1, res.output
        return json.loads(res.stdout)["first_difference"]

    client.log_metric(pid, "best.report.ndcg_at_10", value / 2)
    try:
        assert first_difference() == "sweep/best.report.ndcg_at_10"
    finally:
        client.log_metric(pid, "best.report.ndcg_at_10", value)
    other = next(p.config_hash for p in r.points if p.config_hash != r.best.config_hash)
    client.set_tag(pid, "aiblox.best_config_hash", other)
    try:
        assert first_difference() == "sweep/best (summary)"
    finally:
        client.set_tag(pid, "aiblox.best_config_hash", r.best.config_hash)
    summary = local_path(parent.info.artifact_uri) / "sweep_summary.json"
    saved = summary.read_bytes()
    try:
        data = json.loads(saved)
        data["leaderboard"][-1]["metrics"]["test"]["ndcg@10"] = 1.0
        summary.write_text(json.dumps(data))
        assert first_difference() == "sweep/leaderboard values"
        data = json.loads(saved)
        data["leaderboard"].reverse()
        summary.write_text(json.dumps(data))
        assert first_difference() == "sweep/leaderboard order"
    finally:
        summary.write_bytes(saved)
    assert _verify(logged, "verify_cli").exit_code == 0
