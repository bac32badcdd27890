"""The sweep board on a bm25 sweep: its swept settings (k1, b) are the axes to plot, its
leaderboard shows no fusion it does not read, and the chosen point is marked (it offered no
axis, plotted depth, and showed blend=rrf, rrf_k=60 on every bm25 point)."""

from __future__ import annotations

from _notebook_runs import output_text, run_notebook_once

from tests.sweep.spec_text import board_bm25

BM25_SPEC = board_bm25([0.4, 2.0], baseline=True)


def test_sweep_board_plots_a_bm25_sweep_by_its_own_settings(tmp_path, monkeypatch):
    from aiblox.sweep import axis_frame

    sweeps = tmp_path / "evals" / "sweeps"
    sweeps.mkdir(parents=True)
    (sweeps / "sample_fusion.toml").write_text(BM25_SPEC, encoding="utf-8")  # the default pick
    monkeypatch.chdir(tmp_path)  # the checkout: the first folder up holding evals/sweeps
    outputs, d = run_notebook_once("sweep_board")
    result, board = d["result"], d["board"]
    assert result.name == "board_bm25" and any(p.outside_grid for p in result.points)
    assert d["axes"] == ["k1", "b"] and d["axis"].value == "k1"
    assert d["along"].equals(axis_frame(result, "k1")) and d["along"]["k1"].tolist() == [0.4, 2.0]
    assert d["chosen_value"] == result.best.manifest.config["prefs"]["fts"]["k1"]
    assert not {"blend", "rrf_k", "vector_depth"} & set(board.columns)
    assert board.loc[board["chosen"] == "★", "label"].tolist() == [result.best.label]
    assert "`rank` is by" not in output_text(outputs)  # Markdown: code is <code>
    assert "<code>chosen</code> ★ marks it" in output_text(outputs)
