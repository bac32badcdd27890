"""``rocchio`` and ``dense_rescore`` in a sweep on the sample dataset (a real DuckDB store, the
stage cache on disk): a stage parameter as an axis, ``beta = 0`` scoring as plain dense, a
point verified from its manifest, and a setting that cannot work refused before any work."""

from __future__ import annotations

import pytest

SPEC = """
name = "dense_stages"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10"]
pipeline = {pipeline}

[base]
top_k_items = 10
fts = {{ top_k = 20 }}
vector = {{ top_k = 20 }}
{extra}
"""


def spec_of(tmp_path, pipeline, extra=""):
    from aiblox.sweep import load_spec

    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(pipeline=pipeline, extra=extra))
    return load_spec(path)


def sweep(spec, db, cache):
    from aiblox.sweep import run_sweep

    return run_sweep(spec, cache_dir=cache, db=db, progress=False)


def test_stage_parameters_are_axes_and_beta_zero_is_plain_dense(tmp_path, sweep_db):
    spec = spec_of(tmp_path, '["dense >> rocchio >> dense", "bm25 >> dense_rescore"]', """
[stages.rocchio]
alpha = 1.0
k = 3

[stages.dense_rescore]
top_n = 10

[grid.stages.rocchio]
beta = [0.0, 0.5]

[grid.stages.dense_rescore]
alpha = [1.0, 0.5]

[baseline]
pipeline = "dense"
""")
    result = sweep(spec, sweep_db, tmp_path / "c")
    points = [p for p in result.points if not p.is_baseline]
    assert len(points) == 4
    params = {}
    for p in points:
        steps = p.manifest.config["pipeline"]["then"]
        params[(steps[1]["stage"], tuple(sorted(steps[1]["params"].items())))] = p
    rocchio0 = params[("rocchio", (("alpha", 1.0), ("beta", 0.0), ("k", 3)))]
    rocchio5 = params[("rocchio", (("alpha", 1.0), ("beta", 0.5), ("k", 3)))]
    names = [s["name"] for s in rocchio5.manifest.splits["test"].stages]
    assert names == ["signals", "fusion", "rocchio", "dense", "metrics"]
    # beta 0 gives the query's own vector back: the plain dense run's metrics, exactly
    assert rocchio0.metrics == result.baseline.metrics
    assert rocchio5.metrics != rocchio0.metrics
    rescored = [p for (kind, _), p in params.items() if kind == "dense_rescore"]
    assert len(rescored) == 2
    assert [s["name"] for s in rescored[0].manifest.splits["test"].stages] == \
        ["signals", "fusion", "dense_rescore", "metrics"]
    # rescoring reorders BM25's top ten: recall@10 stays, nDCG@10 moves
    a, b = (p.metrics["test"] for p in rescored)
    assert a["recall@10"] == pytest.approx(b["recall@10"]) and a["ndcg@10"] != b["ndcg@10"]

    from aiblox.sweep.verify import verify_point

    report = verify_point(rocchio5.manifest, db=sweep_db)
    assert report.identical, report.first_difference
    assert {"test/rocchio", "test/dense"} <= {c.where for c in report.checks}


@pytest.mark.parametrize("pipeline, message", [
    ('"dense % 3 >> rocchio(k=5) >> dense"',
     "rocchio: k = 5 feedback documents but its input run holds at most 3"),
    ('"bm25 % 5 >> dense_rescore(top_n=10)"',
     "dense_rescore: top_n = 10 but its input run holds at most 5"),
])
def test_a_setting_that_cannot_work_is_refused_before_any_work(tmp_path, sweep_db, pipeline,
                                                               message):
    """Refused when the spec loads (the depths alone decide it), and by the runner before any
    stage computes for a spec whose pipeline was set after it loaded."""
    from aiblox.engine import PipelineError
    from aiblox.sweep import SweepSpecError

    with pytest.raises(SweepSpecError, match=r":\d+: field 'pipeline': .*stage " + message):
        spec_of(tmp_path, pipeline)
    spec = spec_of(tmp_path, '"bm25"').model_copy(update={"pipeline": pipeline.strip('"')})
    with pytest.raises(PipelineError, match=message):
        sweep(spec, sweep_db, tmp_path / "c")
    assert not (tmp_path / "c" / "signals").exists()
