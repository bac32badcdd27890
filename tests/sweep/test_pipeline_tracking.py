"""A selection-policy sweep of the sample dataset logged to a tmp sqlite MLflow store: the
report's leaderboard and axis plots, and ``aiblox compare`` with the evidence that entered or
left per query."""

from __future__ import annotations

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("matplotlib")

from aiblox.eval.sweep import (  # noqa: E402
    SweepSpec,
    SweepTracker,
    load_sweep_report,
    run_sweep,
    write_report,
)


@pytest.fixture(scope="module")
def logged(tmp_path_factory, sample_spec, mlflow_uri, sample_dataset, sweep_db):
    root = tmp_path_factory.mktemp("pipeline-report")
    data = sample_spec.model_dump()
    data.update({"name": "report_selection", "primary": "answer_f1", "query_limit": 4,
                 "metrics": ["ndcg@10"], "base": {**data["base"], "top_k_chunks": 6},
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
