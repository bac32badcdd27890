"""Retrieval pipelines in a sweep, end to end on the sample dataset (a real DuckDB store, the
stage cache on disk): retrieval on the topics keeps the keys of a spec without a pipeline,
stages of their own are planned, cached and recomputed only downstream of a change, stage
parameters are axes, and a point is verified from its manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from aiblox.engine import register_stage
from aiblox.engine.data import Run
from tests.engine.stages_for_tests import CALLS  # registers t_expand and t_flip

HEAD = """
name = "pipe"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10"]
stage_modules = ["tests.engine.stages_for_tests"]
"""
TABLE = """
[base]
top_k_items = 10
fts = { top_k = 20 }
vector = { top_k = 20 }
scoring = { blend = "rrf", rrf_k = 60 }
"""


BASE = HEAD + TABLE


def spec_of(tmp_path, text):
    """A spec from ``text``: HEAD, TABLE and more, with top-level keys (a ``pipeline = ...``
    line) moved above the first table, as TOML needs."""
    from aiblox.sweep import load_spec

    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("["))
    rest = lines[first:]
    top = [line for line in rest if line.startswith("pipeline =")
           and not _in_table(rest, line)]
    body = [line for line in rest if line not in top]
    path = tmp_path / "spec.toml"
    path.write_text("\n".join(lines[:first] + top + body) + "\n")
    return load_spec(path)


def _in_table(lines, line):
    """Whether ``line`` sits in a table that takes a pipeline key (``[stages.X]``, baseline)."""
    i = lines.index(line)
    head = next((x for x in reversed(lines[:i]) if x.startswith("[")), "")
    return head.startswith(("[stages.", "[baseline"))


def sweep(spec, db, cache):
    from aiblox.sweep import run_sweep

    return run_sweep(spec, cache_dir=cache, db=db, progress=False)


def stage_keys(result):
    return {p.label: [s["key"] for sm in p.manifest.splits.values() for s in sm.stages]
            for p in result.points}


def test_bm25_plus_dense_is_the_hybrid_first_stage_with_its_keys(tmp_path, sweep_db):
    plain = spec_of(tmp_path, BASE.replace('stage_modules = ["tests.engine.stages_for_tests"]',
                                           ""))
    piped = spec_of(tmp_path, BASE + 'pipeline = "bm25 + dense"\n')
    a = sweep(plain, sweep_db, tmp_path / "c1")
    b = sweep(piped, sweep_db, tmp_path / "c2")
    (pa,), (pb,) = a.points, b.points
    assert [s["key"] for s in pa.manifest.splits["test"].stages] == \
        [s["key"] for s in pb.manifest.splits["test"].stages]
    assert pa.metrics == pb.metrics
    assert pb.manifest.config["pipeline"] == {"fuse": [
        {"stage": "bm25", "name": "bm25", "params": {}},
        {"stage": "dense", "name": "dense", "params": {}}], "name": "fuse", "params": {}}


def test_stages_of_their_own_run_cached_and_only_downstream_of_a_change(tmp_path, sweep_db):
    text = BASE + """
pipeline = "bm25 >> t_expand >> bm25 >> t_flip"

[stages.t_flip]
top_n = 3

[grid.stages.t_flip]
top_n = [2, 5]
"""
    spec = spec_of(tmp_path, text)
    CALLS.clear()
    first = sweep(spec, sweep_db, tmp_path / "cache")
    assert len(first.points) == 2
    names = [s["name"] for s in first.points[0].manifest.splits["test"].stages]
    assert names == ["signals", "fusion", "t_expand", "bm25", "t_flip", "metrics"]
    # t_expand ran once per split for both points; t_flip once per point and split
    assert CALLS.count("t_expand") == 2 and CALLS.count("t_flip") == 4
    labels = sorted(p.label for p in first.points)
    assert labels[0].startswith("bm25 >> t_expand >> bm25 >> t_flip(top_n=2)")
    # a re-run computes nothing
    CALLS.clear()
    again = sweep(spec, sweep_db, tmp_path / "cache")
    assert CALLS == [] and stage_keys(again) == stage_keys(first)
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]
    # a new value of the late stage's axis: only t_flip (and metrics) run
    CALLS.clear()
    wider = spec_of(tmp_path, text.replace("top_n = [2, 5]", "top_n = [2, 5, 7]"))
    sweep(wider, sweep_db, tmp_path / "cache")
    assert CALLS == ["t_flip", "t_flip"]


def test_flipping_the_top_changes_the_metrics_it_should(tmp_path, sweep_db):
    plain = sweep(spec_of(tmp_path, BASE + 'pipeline = "bm25"\n'), sweep_db, tmp_path / "c")
    flipped = sweep(spec_of(tmp_path, BASE + 'pipeline = "bm25 >> t_flip(top_n=10)"\n'),
                    sweep_db, tmp_path / "c")
    # the same documents in the top 10 (recall@10 equal), reversed (nDCG@10 lower)
    for split in ("train", "test"):
        a, b = plain.points[0].metrics[split], flipped.points[0].metrics[split]
        assert a["recall@10"] == pytest.approx(b["recall@10"])
        assert b["ndcg@10"] < a["ndcg@10"]


def test_a_pipeline_axis_a_generic_fusion_and_the_baseline(tmp_path, sweep_db):
    text = BASE + """
pipeline = ["bm25", "(bm25 >> t_flip) + dense"]

[baseline]
pipeline = "bm25"
"""
    result = sweep(spec_of(tmp_path, text), sweep_db, tmp_path / "c")
    assert len(result.points) == 2
    fused = next(p for p in result.points if "t_flip" in p.label)
    names = [s["name"] for s in fused.manifest.splits["test"].stages]
    assert names[-2:] == ["fuse", "metrics"] and "t_flip" in names
    assert result.baseline is not None
    assert result.baseline.label.startswith("bm25 @")


@pytest.mark.parametrize("extra, message", [
    ('pipeline = "t_flip >> bm25"', "bm25 takes queries but follows t_flip"),
    ('pipeline = "t_flip"', "nothing to rerank"),
    ('pipeline = "bm25 >> nope"', "unknown stage 'nope'"),
    ('pipeline = "bm25 >> t_flip"\n[stages.unused]\nkind = "bm25"', "stages.unused.*no pipeline"),
    ('pipeline = "bm25"\n[grid.stages.t_flip]\ntop_n = [1]', "grid.stages.t_flip.*no stage"),
    ('pipeline = "bm25 >> t_flip"\n[grid.stages.t_flip]\ntop_n = [0]',
     "field 'grid.stages.t_flip.top_n': got 0: stage t_flip"),
    ('pipeline = "(a)"\n[stages.a]\npipeline = "b"\n[stages.b]\npipeline = "a"',
     "refers to itself"),
    ('[stages.x]\nkind = "bm25"', "set pipeline"),
])
def test_a_bad_pipeline_is_refused_when_the_spec_loads(tmp_path, extra, message):
    from aiblox.sweep import SweepSpecError

    with pytest.raises(SweepSpecError, match=message):
        spec_of(tmp_path, BASE + extra + "\n")


@pytest.mark.parametrize("extra, message", [
    ('pipeline = "bm25 % 5"', r"pipeline'?: bm25 % 5: ndcg@10, recall@10 read 10 documents per "
                              r"query, but its depth \(a % cut-off, or its last stage's "
                              r"top_k\) = 5 cuts the run at 5"),
    ('pipeline = "(bm25 + dense) % 5"', r"pipeline'?: \(bm25 \+ dense\) % 5: .* = 5 cuts"),
    ('pipeline = ["bm25", "bm25 >> t_expand >> bm25 % 5"]',
     r"pipeline\[1\]'?: ndcg@10, recall@10 read 10 documents per query, but the pipeline "
     r"bm25 >> t_expand >> bm25 % 5 gives 5: deepen"),
    ('pipeline = "bm25 >> cutoff"\n[grid.stages.cutoff]\nk = [20, 5]',
     r"pipeline'?: ndcg@10, recall@10 read 10 .* the pipeline bm25 >> cutoff\(k=5\) gives 5"),
    ('pipeline = "bm25"\n[baseline]\npipeline = "bm25(top_k=5)"',
     r"baseline.pipeline'?: bm25\(top_k=5\): ndcg@10, recall@10 read 10 .* = 5 cuts"),
])
def test_a_pipeline_shallower_than_a_metric_is_refused_when_the_spec_loads(tmp_path, extra,
                                                                           message):
    """QA13d #3: ``aiblox eval`` refused ``bm25 % 5`` scored by ndcg@10 (computed over 5
    documents under the name @10); a sweep ran it. Now refused when the spec loads, in eval's
    words, naming the pipeline (each stage-axis value, the baseline's too)."""
    from aiblox.sweep import SweepSpecError

    with pytest.raises(SweepSpecError, match=message):
        spec_of(tmp_path, BASE + extra + "\n")


@pytest.mark.parametrize("extra, message", [
    ('pipeline = "bm25(k1=0.9) >> t_expand >> bm25"\n[grid]\nk1 = [1.2, 1.5]',
     r"field 'grid.k1': pipeline sets bm25's k1 = 0.9 inline, and the axis sweeps the default "
     r"it overrides .*leave it out of the expression, or hold it in a \[stages\] table of a "
     r"stage named apart \(\[stages.NAME\] kind = \"bm25\", k1 = 0.9\)"),
    ('pipeline = ["bm25", "bm25(k1=0.9) >> t_expand >> bm25(k1=0.9)"]\n'
     '[grid.stages.bm25]\nk1 = [1.2, 1.5]',
     r"field 'grid.stages.bm25.k1': pipeline\[1\] sets bm25's k1 = 0.9 inline, and the axis "
     r"would override it: set k1 in one place"),
    ('pipeline = "prf"\n[stages.prf]\npipeline = "bm25 >> t_expand >> bm25(top_k=30)"\n'
     '[grid]\ndepth = [20, 40]', r"'grid.depth': pipeline sets bm25's top_k = 30 inline"),
    ('pipeline = "fuse(bm25, dense, weights=[1, 2])"\n[grid]\nblend = ["linear"]\n'
     'w_text = [0.2, 0.4]', r"'grid.w_text': pipeline sets fuse's weights = \[1, 2\] inline"),
])
def test_a_parameter_written_in_a_pipeline_and_swept_is_refused(tmp_path, extra, message):
    """QA13d #5: an inline ``bm25(k1=0.9)`` silently beat a ``[grid] k1`` axis (points
    labelled k1=1.5 ran 0.9, scored and tested twice), and a ``[grid.stages.bm25] k1`` axis
    silently beat it; now one error naming the stage and the parameter."""
    from aiblox.sweep import SweepSpecError

    with pytest.raises(SweepSpecError, match=message):
        spec_of(tmp_path, BASE + extra + "\n")


def test_a_stage_table_is_the_default_its_axis_sweeps_and_identical_points_run_once(
        tmp_path, sweep_db):
    """A ``[stages]`` table's value is what ``[grid.stages]`` overrides (the documented form),
    and a named stage's own against a ``[grid]`` axis; points that compute the same run
    (``retrieve`` and ``(bm25 + dense) % 10`` are ``bm25 + dense`` here, ``dense`` is one run
    whatever ``k1``) are scored once (QA13d #5, #10)."""
    table = spec_of(tmp_path, BASE + 'pipeline = "bm25 >> t_flip"\n[stages.t_flip]\n'
                    'top_n = 3\n[grid.stages.t_flip]\ntop_n = [2, 5]\n')
    assert [str(p.pipeline) for p in table.grid_points()] == [
        "bm25 >> t_flip(top_n=2)", "bm25 >> t_flip(top_n=5)"]
    held = spec_of(tmp_path, BASE + 'pipeline = "first >> t_expand >> bm25"\n'
                   '[stages.first]\nkind = "bm25"\nk1 = 0.9\n[grid]\nk1 = [1.2, 1.5]\n')
    assert [[s.config(dict(p.prefs.fts)).k1 for s in p.pipeline.stages()  # type: ignore
             if s.kind == "bm25"] for p in held.grid_points()] == [[0.9, 1.2], [0.9, 1.5]]
    spec = spec_of(tmp_path, BASE + 'pipeline = ["bm25 + dense", "retrieve", '
                   '"(bm25 + dense) % 10", "dense"]\n[grid]\nk1 = [0.9, 1.2]\n')
    points = spec.grid_points()
    assert [(str(p.pipeline), p.prefs.fts.k1) for p in points] == [
        ("bm25 + dense", 0.9), ("dense", 0.9), ("bm25 + dense", 1.2)]
    result = sweep(spec, sweep_db, tmp_path / "c")
    assert len(result.points) == 3
    assert len({p.manifest.splits["test"].run_hash for p in result.points}) == 3


def test_a_stage_that_cannot_work_here_is_refused_before_any_work(tmp_path, sweep_db):
    from aiblox.engine import PipelineError
    from aiblox.sweep import SweepSpecError, run_sweep

    CALLS.clear()
    with pytest.raises(SweepSpecError, match=r":\d+: field 'pipeline': bm25 % 4 >> "
                                             r"t_flip\(top_n=5\): stage t_flip: top_n = 5 but "
                                             r"its input run holds at most 4"):
        spec_of(tmp_path, BASE + 'pipeline = "bm25 % 4 >> t_flip(top_n=5)"\n')
    # the runner's own check, for a spec whose pipeline was set after it loaded
    spec = spec_of(tmp_path, BASE + 'pipeline = "bm25"\n').model_copy(
        update={"pipeline": "bm25 % 4 >> t_flip(top_n=5)"})
    with pytest.raises(PipelineError, match="t_flip: top_n = 5 but its input run holds at "
                                            "most 4"):
        run_sweep(spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False)
    assert CALLS == [] and not (tmp_path / "c" / "signals").exists()


def test_a_pipeline_point_verifies_from_its_manifest(tmp_path, sweep_db):
    from aiblox.sweep.verify import verify_point

    result = sweep(spec_of(tmp_path, BASE + 'pipeline = "bm25 >> t_expand >> bm25"\n'),
                   sweep_db, tmp_path / "c")
    report = verify_point(result.points[0].manifest, db=sweep_db)
    assert report.identical, report.first_difference
    wheres = [c.where for c in report.checks]
    assert {"train/t_expand", "train/bm25", "test/t_expand", "test/bm25"} <= set(wheres), wheres


class _NoCfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


def test_a_stage_returning_the_wrong_type_is_an_error_naming_it(tmp_path, sweep_db):
    @register_stage("t_wrong", version="1", takes="run", gives="run", config=_NoCfg)
    def wrong(cfg, inputs, ctx):
        return inputs.queries

    from aiblox.sweep import run_sweep

    spec = spec_of(tmp_path, BASE.replace('stage_modules = ["tests.engine.stages_for_tests"]',
                                          "") + 'pipeline = "bm25 >> t_wrong"\n')
    with pytest.raises(TypeError, match="t_wrong gives run but returned Queries"):
        run_sweep(spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False)
    assert Run  # the type a run stage returns


def test_a_tracked_pipeline_point_logs_its_final_run_and_verifies_from_mlflow(
        tmp_path, sweep_db, mlflow_uri):
    from aiblox.engine.tracking import SweepTracker, tracking_client
    from aiblox.sweep.verify import logged_manifest, verify_point

    spec = spec_of(tmp_path, BASE + 'pipeline = "bm25 >> t_flip(top_n=3)"\n')
    tracker = SweepTracker(mlflow_uri, "pipelines", spec.hash, spec.model_dump(mode="json"))
    result = run_sweep_tracked(spec, sweep_db, tmp_path / "c", tracker)
    (point,) = result.points
    client = tracking_client(mlflow_uri)
    child = next(r for r in client.search_runs([result.tracking["experiment_id"]])
                 if r.data.tags.get("aiblox.config_hash") == point.config_hash)
    trec = (tmp_path / "dl")
    trec.mkdir()
    path = client.download_artifacts(child.info.run_id, "run.test.trec", str(trec))
    logged: dict[str, list[str]] = {}
    for line in Path(path).read_text().splitlines():
        q, _, d, _, _, _ = line.split()
        logged.setdefault(q, []).append(d)
    # the logged run is t_flip's (the run the metrics scored): bm25's top 3 reversed
    from aiblox.engine.cache import StageCache
    from aiblox.engine.outputs import StageReader

    plain = sweep(spec_of(tmp_path, BASE + 'pipeline = "bm25"\n'), sweep_db, tmp_path / "c")
    stages = {s["name"]: s["key"] for s in plain.points[0].manifest.splits["test"].stages}
    bm25 = StageReader(StageCache(tmp_path / "c")).fused_run(stages["signals"], stages["fusion"])
    assert logged and all(logged[q][:3] == [d for d, _ in bm25[q][:3]][::-1] for q in logged)
    # the pipeline is logged as its shape and its stages' parameters, not as JSON
    assert child.data.params["pipeline"] == "bm25 >> t_flip"
    assert child.data.params["pipeline.t_flip.top_n"] == "3"
    assert not [v for v in child.data.params.values() if v.startswith(("[{", '{"'))]
    manifest, _ = logged_manifest(child.info.run_id, mlflow_uri)
    assert verify_point(manifest, db=sweep_db).identical


def test_a_pipeline_sweeps_report_and_leaderboard_group_by_shape_and_stage_parameter(
        tmp_path, sweep_db, mlflow_uri):
    """A report's swept parameters and the notebooks' leaderboard show a pipeline as its shape
    (one row per shape, the plain pipeline too) and each stage parameter as an axis of its
    own, one line per shape; they once showed one row per point of the pipeline's JSON and
    left the plain pipeline out."""
    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep.frames import axis_frame, leaderboard
    from aiblox.sweep.report import load_sweep_report, render_markdown

    spec = spec_of(tmp_path, BASE + 'pipeline = ["bm25", "bm25 >> t_flip"]\n'
                   "[grid.stages.t_flip]\ntop_n = [2, 5]\n")
    tracker = SweepTracker(mlflow_uri, "shapes", spec.hash, spec.model_dump(mode="json"))
    result = run_sweep_tracked(spec, sweep_db, tmp_path / "c", tracker)
    assert len(result.points) == 3
    rep = load_sweep_report(spec.name, mlflow_uri)
    assert sorted(rep.axes) == ["pipeline", "pipeline.t_flip.top_n"]
    assert [(r["value"], r["n"]) for r in rep.axes["pipeline"]] == [
        ("bm25", 1), ("bm25 >> t_flip", 2)]
    assert [(r["series"], r["value"]) for r in rep.axes["pipeline.t_flip.top_n"]] == [
        ("bm25 >> t_flip", "2"), ("bm25 >> t_flip", "5")]
    text = render_markdown(rep)
    assert "### t_flip.top_n (MLflow param `pipeline.t_flip.top_n`)" in text
    assert '"params"' not in text
    board = leaderboard(result)
    assert set(board["pipeline"]) == {"bm25", "bm25 >> t_flip"}
    assert sorted(board["t_flip.top_n"].dropna()) == [2, 5]
    assert list(axis_frame(result, "t_flip.top_n")["t_flip.top_n"]) == [2, 5]
    assert list(axis_frame(result, "pipeline")["n"]) == [1, 2]


def run_sweep_tracked(spec, db, cache, tracker):
    from aiblox.sweep import run_sweep

    return run_sweep(spec, cache_dir=cache, db=db, progress=False, tracker=tracker)


def test_a_pipeline_run_with_ties_is_written_as_trec_eval_reads_it(tmp_path):
    """A pipeline stage's run (feedback, a reranker) written as TREC text for MLflow and ``aiblox
    runs export``: tied scores strictly decreasing, as every TREC file aiblox writes, so
    trec_eval scores the order the metrics scored (equal scores were once written as they
    were, and trec_eval re-sorted them by document id: another MAP than the one logged)."""
    import warnings

    from aiblox.data.trec import read_trec_run
    from aiblox.engine.cache import StageCache
    from aiblox.engine.outputs import StageReader

    cache = StageCache(tmp_path / "c")
    run = Run.from_lists(["q1", "q2"], [[("a", 2.0), ("b", 1.0), ("c", 1.0)],
                                         [("z", 0.5), ("y", 0.5)]])
    rec = cache.store("t_flip", "1", {}, ["k"], run.to_arrays(), codec="arrays")
    metrics = {"name": "metrics", "key": "m", "inputs": [rec.key]}
    text = StageReader(cache).point_trec([rec.as_dict(), metrics], "my run")
    assert text == ("q1 Q0 a 1 2.0 my_run\nq1 Q0 b 2 1.0 my_run\nq1 Q0 c 3 0.99999994 my_run\n"
                    "q2 Q0 z 1 0.5 my_run\nq2 Q0 y 2 0.49999997 my_run\n")
    path = tmp_path / "run.trec"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "orders otherwise than trec_eval" warning
        back = read_trec_run(path)
    assert {q: [d for d, _ in hits] for q, hits in back.items()} == \
        {"q1": ["a", "b", "c"], "q2": ["z", "y"]}


def test_a_fusions_weights_are_a_sweep_axis(tmp_path, sweep_db, mlflow_uri):
    """QA13d #2: ``[grid.stages.NAME] weights = [[...], [...]]`` (a list per value) failed with
    ``internal error (TypeError: unhashable type: 'list')`` when the spec loaded; a weight
    vector of the wrong length is refused then, per fusion."""
    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep import SweepSpecError
    from aiblox.sweep.frames import leaderboard
    from aiblox.sweep.report import load_sweep_report, render_markdown

    text = BASE + """
pipeline = "mix(bm25 % 20, dense % 20)"
[stages.mix]
kind = "fuse"
blend = "linear"
normalize = "minmax"
[grid.stages.mix]
weights = [[0.3, 0.7], [0.5, 0.5], [0.3, 0.7], [1, 0]]
"""
    spec = spec_of(tmp_path, text)
    assert spec.grid_size() == 3 and len(spec.grid_points()) == 3  # the repeat counted once
    tracker = SweepTracker(mlflow_uri, "weights", spec.hash, spec.model_dump(mode="json"))
    result = run_sweep_tracked(spec, sweep_db, tmp_path / "c", tracker)
    assert [p.label.split(" @ ")[0] for p in result.points] == [
        f"mix(bm25 % 20, dense % 20; blend='linear',normalize='minmax',weights={w})"
        for w in ("[0.3, 0.7]", "[0.5, 0.5]", "[1, 0]")]
    assert len({p.metrics["test"]["ndcg@10"] for p in result.points}) > 1
    assert "mix.weights" in render_markdown(load_sweep_report(spec.name, mlflow_uri))
    assert len(leaderboard(result)["mix.weights"]) == 3
    for pipeline, tables, bad in (
            ("mix(bm25 % 20, dense % 20)", '[stages.mix]\nkind = "fuse"\n[grid.stages.mix]',
             "[0.3, 0.7, 0.1]"),
            ("bm25 + dense + (bm25 >> t_flip)", "[grid.stages.fuse]", "[0.3, 0.7]")):
        with pytest.raises(SweepSpecError, match=r"weights needs one weight per fused run, in "
                                                 r"order \((2|3): .*\), got "
                                                 + bad.replace("[", r"\[")):
            spec_of(tmp_path, BASE + f'pipeline = "{pipeline}"\n{tables}\nweights = [{bad}]\n')
