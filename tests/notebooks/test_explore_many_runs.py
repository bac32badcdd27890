"""A store of more runs than the notebooks list (500): two runs compared by reference are read
themselves (``compare_mlflow_runs`` raised KeyError for a run older than the newest 500, though
``resolve_run`` found it), and the policy-compare notebook says that its lists hold the newest
runs only and that an older one can be typed."""

from __future__ import annotations

import pytest

pytest.importorskip("mlflow")

from _notebook_runs import log_two_points, output_text, run_notebook_once  # noqa: E402

from aiblox.explore import compare_mlflow_runs, mlflow_runs  # noqa: E402

FILLERS = 500


def _store(folder) -> tuple[str, dict[str, str]]:
    """A sqlite MLflow store: two runs logged as ``aiblox sweep`` logs a point (metrics and
    per-query values), then :data:`FILLERS` newer runs."""
    import mlflow

    uri = f"sqlite:///{folder / 'mlruns' / 'mlflow.db'}"
    (folder / "mlruns").mkdir()
    client = mlflow.MlflowClient(uri)
    exp = client.create_experiment("old", artifact_location=(folder / "art").as_uri())
    ids = log_two_points(client, exp, folder)
    newer = client.create_experiment("newer")
    for i in range(FILLERS):
        client.create_run(newer, run_name=f"filler-{i}")
    return uri, ids


def test_runs_older_than_the_listing_are_compared(tmp_path):
    uri, ids = _store(tmp_path)
    logged, per_query = compare_mlflow_runs(ids["a"], ids["b"], uri)
    row = logged.set_index("metric").loc["test.ndcg_at_10"]
    assert (row["A"], row["B"]) == pytest.approx((0.5, 5 / 6))
    assert row["delta"] == pytest.approx(1 / 3)
    pq = per_query.set_index("metric").loc["test:ndcg@10"]
    assert (pq["n"], pq["wins"], pq["ties"], pq["losses"]) == (3, 1, 2, 0)
    # the other way round: B against A
    back, _ = compare_mlflow_runs(ids["b"], ids["a"], uri)
    assert back.set_index("metric").loc["test.ndcg_at_10", "delta"] == pytest.approx(-1 / 3)
    listed = mlflow_runs(uri)
    assert len(listed) == FILLERS and listed.attrs["truncated"]  # the two are not listed
    assert not set(ids.values()) & set(listed["run_id"])
    assert not mlflow_runs(uri, max_results=FILLERS + 2).attrs["truncated"]


def test_policy_compare_says_older_runs_can_be_typed(tmp_path, monkeypatch):
    uri, _ = _store(tmp_path)
    # the store the notebook reads (an absolute URI: MLflow keeps one store per URI string in
    # a process, and the relative default may name another test's store)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    outputs, d = run_notebook_once("policy_compare")
    assert d["tracking_uri"] == uri
    assert d["runs"].attrs["truncated"] and len(d["run_choices"]) == FILLERS
    text = output_text(outputs)  # Markdown as HTML: `code` is <code>
    assert f"The lists hold the newest {FILLERS} runs of the store; an older run: type its " \
           "run id, <code>SWEEP:LABEL</code> or config-hash prefix" in text
    assert d["ref_a"].value == "" and d["picked_a"] == d["run_a"].value  # the list's choice
