"""The sweep as DataFrames (aiblox.sweep.frames) on the sample fusion sweep: 24 points
(linear 5 weights x 2 normalisations x 2 depths, RRF k 10/60 x 2 depths), baseline RRF k=60."""

from __future__ import annotations

import math

import pytest

from aiblox.sweep import (
    axis_frame,
    choose_best,
    leaderboard,
    manifest_frame,
    run_sweep,
    significance_frame,
    stage_counts,
    swept_axes,
    tune_vs_report,
)
from aiblox.sweep.frames import point_settings


@pytest.fixture(scope="module")
def result(sample_spec, sweep_db, sample_dataset, tmp_path_factory):
    cache = tmp_path_factory.mktemp("frames-stages")
    return run_sweep(sample_spec, cache_dir=cache, db=sweep_db, progress=False,
                     dataset=sample_dataset)


def _with_tune(result, values):
    """``result`` with the tune metric of some points replaced ({config_hash: value})."""
    t, m = result.tune_split, result.primary
    points = [p.model_copy(update={"metrics": {**p.metrics, t: {**p.metrics[t],
                                                                 m: values[p.config_hash]}}})
              if p.config_hash in values else p for p in result.points]
    return result.model_copy(update={"points": points,
                                     "best": choose_best(points, t, m)})


def test_leaderboard_rows_ranks_and_best(result):
    board = leaderboard(result)
    assert len(board) == len(result.points) == 24
    assert board["rank"].tolist() == list(range(1, 25))
    assert board["tune"].is_monotonic_decreasing
    first = board.iloc[0]
    assert first["label"] == result.best.label and bool(first["best"])
    assert first["config"] == result.best.config_hash[:16]  # the prefix every command shows
    assert first["tune"] == result.best.metrics["train"]["ndcg@10"]
    assert first["report"] == result.best.metrics["test"]["ndcg@10"]
    assert board["best"].sum() == 1 and board["baseline"].sum() == 1
    base = board[board["baseline"]].iloc[0]
    assert base["blend"] == "rrf" and base["rrf_k"] == 60 and base["depth"] == 20
    # whole numbers stay whole beside the linear points' empty rrf_k cells (QA 21: 60.0)
    assert type(base["rrf_k"]) is int and "60.0" not in board.to_string()
    assert base["w_text"] is None and base["normalize"] is None  # RRF takes no weight
    linear = board[board["blend"] == "linear"]
    assert len(linear) == 20 and linear["rrf_k"].isna().all()
    assert sorted(set(linear["w_text"])) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert list(board.columns[:9]) == ["rank", "chosen", "label", "blend", "w_text",
                                       "normalize", "missing", "rrf_k", "depth"]
    assert board["chosen"].tolist() == ["★"] + [""] * 23  # the chosen point marked
    # a hybrid point holds BM25 settings (k1, b) the grid does not vary: no column for them
    assert not {"k1", "b", "method", "doc_score"} & set(board.columns)
    assert "vector_depth" not in board.columns  # full-text and vector depth move together
    top = leaderboard(result, top=5)
    assert len(top) == 5 and top.equals(board.head(5))


def test_swept_axes(result):
    # missing is one value ("zero"); vector depth equals the full-text depth
    assert swept_axes(result) == ["blend", "w_text", "normalize", "rrf_k", "depth"]


def test_axis_frame_per_value(result):
    t, r, m = result.tune_split, result.report_split, result.primary
    frame = axis_frame(result, "w_text")
    assert frame["w_text"].tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert (frame["n"] == 4).all()  # 2 normalisations x 2 depths each; RRF points left out
    for _, row in frame.iterrows():
        pts = [p for p in result.points
               if p.scoring["blend"] == "linear" and p.scoring["w_text"] == row["w_text"]]
        top = choose_best(pts, t, m)
        assert row["label"] == top.label and row["config"] == top.config_hash[:16]
        assert row["tune"] == top.metrics[t][m] and row["report"] == top.metrics[r][m]
        assert row["mean_tune"] == pytest.approx(sum(p.metrics[t][m] for p in pts) / 4)
        assert row["mean_report"] == pytest.approx(sum(p.metrics[r][m] for p in pts) / 4)
    # the best point's value holds the sweep's best on tune
    best_w = result.best.scoring["w_text"]
    assert frame.set_index("w_text").loc[best_w, "tune"] == result.best.metrics[t][m]
    blend = axis_frame(result, "blend")
    assert blend["blend"].tolist() == ["linear", "rrf"] and blend["n"].tolist() == [20, 4]
    depth = axis_frame(result, "depth")
    assert depth["depth"].tolist() == [10, 20] and depth["n"].sum() == 24
    with pytest.raises(KeyError, match="chunker_id"):
        axis_frame(result, "chunker_id")


def test_a_baseline_outside_the_grid_is_no_value_of_an_axis(result):
    """A baseline scored as a point of its own (rrf_k 5, no grid point's) made a value of its
    own on the rrf_k axis and counted among the depth-20 points (QA 18)."""
    base = next(p for p in result.points if p.is_baseline)
    outside = base.model_copy(update={"outside_grid": True, "label": "rrf-k5-d20",
                                      "config_hash": "f" * 64,
                                      "scoring": {**base.scoring, "rrf_k": 5}})
    swollen = result.model_copy(update={"points": [*result.points, outside]})
    assert axis_frame(swollen, "rrf_k")["rrf_k"].tolist() == [10, 60]
    assert axis_frame(swollen, "depth")["n"].sum() == 24
    assert leaderboard(swollen)["label"].tolist().count("rrf-k5-d20") == 1  # still shown


def test_ties_break_by_config_hash(result):
    # every w_text = 0.5 point gets the same tune value: the lowest config hash wins its row
    half = [p for p in result.points
            if p.scoring["blend"] == "linear" and p.scoring["w_text"] == 0.5]
    tied = _with_tune(result, {p.config_hash: 0.99 for p in half})
    row = axis_frame(tied, "w_text").set_index("w_text").loc[0.5]
    winner = min(half, key=lambda p: p.config_hash)
    assert row["config"] == winner.config_hash[:16] and row["tune"] == 0.99
    # and the leaderboard ranks the tied points by config hash, the first being result.best
    board = leaderboard(tied)
    assert tied.best.config_hash == winner.config_hash
    top4 = board.head(4)
    assert (top4["tune"] == 0.99).all() and bool(top4.iloc[0]["best"])
    assert top4["config"].tolist() == sorted(p.config_hash[:16] for p in half)
    assert result.best.config_hash not in {p.config_hash for p in half}  # a real change


def test_tune_vs_report(result):
    frame = tune_vs_report(result)
    assert len(frame) == 24 and frame["label"].tolist() == [p.label for p in result.points]
    assert frame["best"].sum() == 1 and frame["baseline"].sum() == 1
    best = frame[frame["best"]].iloc[0]
    assert best["tune"] == result.best.metrics["train"]["ndcg@10"]
    assert best["report"] == result.best.metrics["test"]["ndcg@10"]
    assert frame[["tune", "report"]].apply(lambda c: c.between(0, 1)).all().all()


def test_stage_counts_significance_and_manifest(result):
    counts = stage_counts(result).set_index("stage")
    # 2 splits x 2 depths of signals; fusion and metrics per point and split
    assert counts.loc["signals"].sum() == 4
    assert counts.loc["fusion"].sum() == counts.loc["metrics"].sum() == 48
    sig = significance_frame(result)
    assert len(sig) == len(result.significance) == 3 * 3  # 3 top points x 3 metrics
    assert sig["p_adjusted"].ge(sig["p_value"]).all() and sig["p_adjusted"].le(1).all()
    assert sig.iloc[0]["candidate"] == result.best.label
    assert (sig["mark"] == [("" if not r.significant else "▲" if r.delta > 0 else "▼")
                            for r in sig.itertuples()]).all()  # as every table marks it
    no_base = result.model_copy(update={"significance": []})
    assert significance_frame(no_base).empty and "p_adjusted" in significance_frame(no_base)
    hashes = manifest_frame(result.best)
    assert set(hashes["split"]) == {"train", "test"}
    assert hashes["stage"].tolist().count("run") == 2
    run = hashes[(hashes["split"] == "test") & (hashes["stage"] == "run")].iloc[0]
    assert run["output_hash"] == result.best.manifest.splits["test"].run_hash
    fusion = hashes[(hashes["split"] == "test") & (hashes["stage"] == "fusion")].iloc[0]
    assert fusion["output_hash"] == run["output_hash"]  # the run hash is fusion's output


def test_pipeline_settings_columns(result):
    point = result.points[0].model_copy(update={
        "chunking": {"chunker_id": "sentences", "max_chunk_tokens": 128, "overlap_tokens": 16,
                     "top_k_chunks": 10, "per_item_chunk_cap": 3, "chunker": "sentences"},
        "selection": {"policy": "R2_POLICY_V2", "policy_sha256": "x" * 64,
                      "params": {"max_chunks": 4}, "overrides": {"max_chunks": 4}}})
    row = point_settings(point)
    assert row["chunker_id"] == "sentences" and row["max_chunk_tokens"] == 128
    assert row["policy"] == "R2_POLICY_V2" and row["max_chunks"] == 4
    assert "chunker" not in row and "policy_sha256" not in row
    other = result.points[1].model_copy(update={
        "chunking": {**point.chunking, "chunker_id": "whole", "max_chunk_tokens": None},
        "selection": {**point.selection, "params": {"max_chunks": 6}}})
    mixed = result.model_copy(update={"points": [point, other]})
    axes = swept_axes(mixed)
    assert {"chunker_id", "max_chunks"} <= set(axes) and "policy" not in axes
    frame = axis_frame(mixed, "max_chunk_tokens")
    assert frame["max_chunk_tokens"].tolist() == [128] and frame["n"].tolist() == [1]
    assert not math.isnan(frame["tune"].iloc[0])
