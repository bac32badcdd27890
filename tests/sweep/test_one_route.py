"""One route to every number: the notebooks' comparison, ``aiblox compare`` and the sweep's own
significance table give identical p-values and deltas for the same two runs."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mlflow")

from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402
from aiblox.engine.tracking import SweepTracker, tracking_client
from aiblox.explore import compare_mlflow_runs, compare_per_query  # noqa: E402
from aiblox.sweep import SweepSpec, run_sweep
from aiblox.sweep.compare import per_query_metrics

GRID = {"blend": ["linear", "rrf"], "w_text": [0.3, 0.7], "normalize": ["minmax"],
        "rrf_k": [60], "depth": [20], "baseline": {"blend": "rrf", "rrf_k": 5}}


@pytest.fixture(scope="module")
def logged(tmp_path_factory, sample_spec, small_spec, mlflow_uri, sample_dataset, sweep_db):
    root = tmp_path_factory.mktemp("one-route")
    spec = small_spec(sample_spec, **GRID)
    spec = SweepSpec.model_validate({**spec.model_dump(), "name": "one_route", "metrics":
                                     ["ndcg@10", "recall@10", "mrr@10"], "significance_top": 1})
    tracker = SweepTracker(mlflow_uri, "one-route", spec.hash, spec.model_dump(mode="json"))
    result = run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False,
                       dataset=sample_dataset, tracker=tracker)
    runs = {c.data.tags["aiblox.config_hash"]: c.info.run_id for c in tracker.children()}
    return {"uri": mlflow_uri, "result": result, "baseline": runs[result.baseline.config_hash],
            "best": runs[result.best.config_hash]}


def test_notebook_and_compare_give_identical_p_values_and_deltas(logged):
    a, b, uri = logged["baseline"], logged["best"], logged["uri"]
    r = CliRunner().invoke(app, ["compare", a, b, "--tracking-uri", uri, "--split", "test",
                                 "--json"])
    assert r.exit_code == 0, r.output
    cli = {m["metric"]: m for m in json.loads(r.stdout)["metrics"]}
    assert set(cli) == {"ndcg@10", "recall@10", "mrr@10"}
    assert any(m["delta"] != 0 for m in cli.values())  # two different runs

    _, notebook = compare_mlflow_runs(a, b, uri)
    rows = notebook.set_index("metric")
    for name, m in cli.items():
        row = rows.loc[f"test:{name}"]
        assert row["p_value"] == m["p_value"] and row["delta"] == m["delta"], name
        assert (row["wins"], row["ties"], row["losses"]) == (m["wins"], m["ties"], m["losses"])
        # each run's own count beside the pairs (the notebook showed n alone)
        assert (row["n"], row["n_a"], row["n_b"]) == (m["n"], m["n_a"], m["n_b"]), name

    # the per-query comparison of two policies runs the same test on the same values
    client = tracking_client(uri)
    per_query = compare_per_query(per_query_metrics(client, a, "test"),
                                  per_query_metrics(client, b, "test")).set_index("metric")
    for name, m in cli.items():
        assert per_query.loc[name, "p_value"] == m["p_value"], name
        assert per_query.loc[name, "delta"] == m["delta"], name
        # and the same correction over the metrics: the notebook marked by the raw p (QA 21)
        assert per_query.loc[name, "p_adjusted"] == m["p_adjusted"], name
        assert per_query.loc[name, "significant"] == m["significant"], name


def test_the_sweep_s_significance_table_is_the_same_test(logged):
    result, a, b, uri = logged["result"], logged["baseline"], logged["best"], logged["uri"]
    client = tracking_client(uri)
    pq_a = per_query_metrics(client, a, result.report_split)
    pq_b = per_query_metrics(client, b, result.report_split)
    table = compare_per_query(pq_a, pq_b).set_index("metric")
    tested = [c for c in result.significance if c.candidate == result.best.label]
    assert {c.metric for c in tested} == {"ndcg@10", "recall@10", "mrr@10"}
    for c in tested:  # one candidate: Holm leaves its p-values as they are
        assert c.p_value == c.p_adjusted == table.loc[c.metric, "p_value"]
        assert c.delta == table.loc[c.metric, "delta"]
