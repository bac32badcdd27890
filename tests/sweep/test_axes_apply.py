"""Per-parameter plots that cannot mislead: a sweep with a known answer, logged to a real MLflow
sqlite store, whose series must use only the points a parameter applies to. RRF points are
given k = 10 as their best value; linear points, which carry the default ``rrf_k = 60``, are
given higher scores still: the ``rrf_k`` series must peak at 10 (taking the best point per value
across blends would put the peak at 60). Likewise a ``whole``-document point, which takes no
token budget, must stay out of the ``max_chunk_tokens`` series."""

from __future__ import annotations

import pytest

pytest.importorskip("mlflow")

from aiblox.engine.applies import setting_applies  # noqa: E402
from aiblox.engine.cache import StageCache  # noqa: E402
from aiblox.engine.tracking import SweepTracker
from aiblox.sweep import SweepSpec, axis_frame, choose_best, load_sweep_report, run_sweep
from aiblox.sweep.frames import point_settings

# (blend, rrf_k or w_text, depth) -> (tune, report) nDCG@10
FUSION_KNOWN = {
    ("rrf", 10, 10): (0.50, 0.45), ("rrf", 10, 20): (0.52, 0.47),
    ("rrf", 60, 10): (0.40, 0.35), ("rrf", 60, 20): (0.42, 0.37),
    ("linear", 0.3, 10): (0.90, 0.80), ("linear", 0.3, 20): (0.91, 0.81),
    ("linear", 0.7, 10): (0.92, 0.82), ("linear", 0.7, 20): (0.93, 0.83),
}


def _known(result, values):
    """``result`` with each point's primary metric set from ``values(point)`` (tune, report)."""
    t, r, m = result.tune_split, result.report_split, result.primary
    points = []
    for p in result.points:
        tune, report = values(p)
        points.append(p.model_copy(update={"metrics": {
            **p.metrics, t: {**p.metrics[t], m: tune}, r: {**p.metrics[r], m: report}}}))
    return result.model_copy(update={"points": points, "best": choose_best(points, t, m)})


def _log(result, spec, uri, cache, experiment):
    """Log ``result``'s points and choice to MLflow through the sweep tracker."""
    tr = SweepTracker(uri, experiment, spec.hash, spec.model_dump(mode="json"))
    done = tr.logged_config_hashes()
    assert done == set()
    for p in result.points:
        tr.log_point(p, StageCache(cache))
    tr.finish(result)
    return tr.parent_id


@pytest.fixture(scope="module")
def fusion(tmp_path_factory, sample_spec, small_spec, sweep_db, sample_dataset):
    root = tmp_path_factory.mktemp("axes-fusion")
    spec = small_spec(sample_spec, blend=["linear", "rrf"], w_text=[0.3, 0.7],
                      normalize=["minmax"], rrf_k=[10, 60], depth=[10, 20])
    spec = SweepSpec.model_validate({**spec.model_dump(), "name": "axes_fusion"})
    real = run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False,
                     dataset=sample_dataset)

    def values(p):
        s = p.scoring
        return FUSION_KNOWN[(s["blend"], s["rrf_k"] if s["blend"] == "rrf" else s["w_text"],
                             p.depth[0])]

    result = _known(real, values)
    uri = f"sqlite:///{root}/mlflow.db"
    parent = _log(result, spec, uri, root / "stages", "axes-fusion")
    return {"result": result, "report": load_sweep_report(parent, uri)}


def test_the_report_series_use_only_the_points_a_parameter_applies_to(fusion):
    axes = fusion["report"].axes
    # normalize varies only through RRF points' unused default: not an axis; w_vec and the
    # vector depth group the points as w_text and the full-text depth do
    assert set(axes) == {"prefs.scoring.blend", "prefs.scoring.rrf_k", "prefs.scoring.w_text",
                         "prefs.fts.top_k"}
    assert axes["prefs.scoring.rrf_k"] == [  # RRF points only: k = 10 is best
        {"series": "rrf", "value": "10", "n": 2, "tune": 0.52, "report": 0.47},
        {"series": "rrf", "value": "60", "n": 2, "tune": 0.42, "report": 0.37}]
    assert axes["prefs.scoring.w_text"] == [
        {"series": "linear", "value": "0.3", "n": 2, "tune": 0.91, "report": 0.81},
        {"series": "linear", "value": "0.7", "n": 2, "tune": 0.93, "report": 0.83}]
    assert axes["prefs.fts.top_k"] == [  # a line per blend
        {"series": "linear", "value": "10", "n": 2, "tune": 0.92, "report": 0.82},
        {"series": "linear", "value": "20", "n": 2, "tune": 0.93, "report": 0.83},
        {"series": "rrf", "value": "10", "n": 2, "tune": 0.50, "report": 0.45},
        {"series": "rrf", "value": "20", "n": 2, "tune": 0.52, "report": 0.47}]
    assert axes["prefs.scoring.blend"] == [
        {"series": "all", "value": "linear", "n": 4, "tune": 0.93, "report": 0.83},
        {"series": "all", "value": "rrf", "n": 4, "tune": 0.52, "report": 0.47}]


def test_the_board_frames_agree(fusion):
    r = fusion["result"]
    k = axis_frame(r, "rrf_k")
    assert k["rrf_k"].tolist() == [10, 60] and k["n"].tolist() == [2, 2]
    assert k["tune"].tolist() == [0.52, 0.42] and k["report"].tolist() == [0.47, 0.37]
    w = axis_frame(r, "w_text")
    assert w["tune"].tolist() == [0.91, 0.93] and w["n"].tolist() == [2, 2]


def test_the_report_plots_and_tabulates_each_series(fusion):
    from aiblox.sweep.report import render_html, render_markdown

    html = render_html(fusion["report"])
    assert html.count('<img alt="ndcg@10 by ') == 4
    md = render_markdown(fusion["report"])
    i = md.index("### rrf_k (MLflow param `prefs.scoring.rrf_k`)")
    assert md[i:].split("\n\n")[1].splitlines()[2:] == [
        "| rrf | 10 | 2 | 0.5200 | 0.4700 |", "| rrf | 60 | 2 | 0.4200 | 0.3700 |"]


def test_setting_applies():
    assert setting_applies("rrf_k", blend="rrf") and not setting_applies("rrf_k", blend="linear")
    assert setting_applies("w_text", blend="linear") and not setting_applies("w_text",
                                                                             blend="rrf")
    assert not setting_applies("w_text", mode="bm25", blend="linear")
    assert not setting_applies("max_chunk_tokens", chunker_id="whole")
    assert setting_applies("max_chunk_tokens", chunker_id="sentences")
    assert setting_applies("include_headers", chunker_id="headings")
    assert not setting_applies("include_headers", chunker_id="sentences")
    assert setting_applies("top_k_chunks", chunker_id="whole")
    assert setting_applies("max_chunk_tokens", chunker_id="not-registered")  # cannot tell
    assert setting_applies("depth", blend="rrf") and setting_applies("depth", blend="linear")


@pytest.fixture(scope="module")
def chunking(tmp_path_factory, sample_spec, sweep_db, sample_dataset):
    root = tmp_path_factory.mktemp("axes-chunking")
    data = sample_spec.model_dump()
    data.update({"name": "axes_chunking",
                 "grid": {"chunking": {"chunker_id": ["sentences", "whole"],
                                       "max_chunk_tokens": [32, 96]}},
                 "baseline": None, "primary": "answer_recall@5", "query_limit": 3,
                 "metrics": ["ndcg@10"]})
    spec = SweepSpec.model_validate(data)
    real = run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False,
                     dataset=sample_dataset)
    known = {("sentences", 32): (0.6, 0.5), ("sentences", 96): (0.7, 0.4),
             ("whole", None): (0.99, 0.9)}
    result = _known(real, lambda p: known[(p.chunking["chunker_id"],
                                           p.chunking["max_chunk_tokens"])])
    uri = f"sqlite:///{root}/mlflow.db"
    parent = _log(result, spec, uri, root / "stages", "axes-chunking")
    return {"result": result, "report": load_sweep_report(parent, uri)}


def test_a_chunk_size_series_leaves_out_the_chunker_that_takes_none(chunking):
    r = chunking["result"]
    assert len(r.points) == 3  # sentences x 2 sizes, whole once
    whole = next(p for p in r.points if p.chunking["chunker_id"] == "whole")
    assert point_settings(whole)["max_chunk_tokens"] is None
    assert point_settings(whole)["overlap_tokens"] is None
    frame = axis_frame(r, "max_chunk_tokens")
    assert frame["max_chunk_tokens"].tolist() == [32, 96]
    assert frame["tune"].tolist() == [0.6, 0.7] and frame["n"].tolist() == [1, 1]
    axes = chunking["report"].axes
    assert axes["prefs.chunking.max_chunk_tokens"] == [
        {"series": "rrf", "value": "32", "n": 1, "tune": 0.6, "report": 0.5},
        {"series": "rrf", "value": "96", "n": 1, "tune": 0.7, "report": 0.4}]
    assert axes["prefs.chunking.chunker_id"] == [
        {"series": "rrf", "value": "sentences", "n": 2, "tune": 0.7, "report": 0.4},
        {"series": "rrf", "value": "whole", "n": 1, "tune": 0.99, "report": 0.9}]
