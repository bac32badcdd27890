"""What a researcher reads after a sweep, ranked as the sweep ranks (the primary's direction,
:func:`aiblox.engine.settings.ranked`) on real sweeps of the sample dataset: ``aiblox sweep``'s
leaderboard and ``--json`` for a cost primary (fewest tokens first; it listed the most expensive
points), the board's Pareto front for a cost primary (it was the most expensive point), a
``[search] objectives`` sweep whose chosen point (the front's best) ranks below others (it went
untested: no p-value in the CLI, report.md or the board), and the board's settings of a bm25
sweep (k1 and b as columns and swept axes; no blend, rrf_k or vector depth it does not read)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.engine.settings import ranked
from aiblox.sweep import (
    SweepSpec,
    axis_frame,
    leaderboard,
    load_spec,
    pareto_frame,
    run_sweep,
    significance_frame,
    swept_axes,
)
from aiblox.sweep.frames import CHOSEN, point_settings
from tests.sweep.spec_text import board_bm25

runner = CliRunner()

SELECTION = """
name = "{name}"
dataset = "sample"
tune_split = "train"
report_split = "test"
backend = "duckdb"
embedder = "hashing"
metrics = ["ndcg@3", "recall@3"]
primary = "{primary}"
chunk_k = [1, 3]
[base]
top_k_items = 3
top_k_chunks = 12
per_item_chunk_cap = 4
chunking = {{ chunker_id = "sentences", max_chunk_tokens = 48, overlap_tokens = 0 }}
[grid.selection]
policy = ["R2_POLICY_V1", "R2_POLICY_V2"]
max_chunks = [2, 4, 6]
[baseline]
policy = "R2_POLICY_V1"
{extra}
"""

BM25 = board_bm25([0.4, 0.9, 2.0])


def _spec(folder, text: str, name: str):
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cost(tmp_path_factory, sweep_db):
    """A selection sweep chosen by ``selected_tokens`` (lower is better), run by the CLI."""
    root = tmp_path_factory.mktemp("board-cost")
    spec = _spec(root, SELECTION.format(name="board_cost", primary="selected_tokens", extra=""),
                 "board_cost")
    common = ["sweep", str(spec), "--db", sweep_db, "--cache-dir", str(root / "stages"),
              "--no-tracking", "--top", "2"]
    js = runner.invoke(app, [*common, "--json"], env={"AIBLOX_NO_PROGRESS": "1"})
    assert js.exit_code == 0, js.output
    table = runner.invoke(app, common, env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    result = run_sweep(load_spec(spec), cache_dir=root / "stages", db=sweep_db, progress=False)
    return {"json": json.loads(js.stdout), "table": table.stdout, "result": result}


def test_cli_leaderboard_ranks_a_cost_fewest_first(cost):
    out, r = cost["json"], cost["result"]
    tokens = [row["metrics"]["train"]["selected_tokens"] for row in out["leaderboard"]]
    cheapest = min(p.metrics["train"]["selected_tokens"] for p in r.points)
    # fewest tokens first, as the sweep chose (it listed the two most expensive points)
    assert tokens == sorted(tokens) and tokens[0] == cheapest
    assert out["best"]["metrics"]["train"]["selected_tokens"] == cheapest
    assert out["leaderboard"][0]["config_hash"] == out["best"]["config_hash"]
    assert [row["config_hash"] for row in out["leaderboard"]] == [
        p.config_hash for p in ranked(r.points, "train", "selected_tokens")[:2]]
    # the table: the chosen point on top, marked; the most expensive point not shown
    lines = [ln for ln in cost["table"].splitlines() if ln.startswith("│ ")]
    assert lines[0].startswith(f"│ {out['best']['label']} (chosen)")
    dearest = max(r.points, key=lambda p: p.metrics["train"]["selected_tokens"])
    assert not any(ln.startswith(f"│ {dearest.label} ") for ln in lines[:2])


def test_cli_json_leaderboard_puts_nan_last(cost):
    from aiblox.cli.sweep import _summary

    r = cost["result"]
    first = ranked(r.points, "train", "selected_tokens")[0]
    t = r.tune_split
    points = [p.model_copy(update={"metrics": {**p.metrics, t: {
        **p.metrics[t], "selected_tokens": math.nan}}}) if p.config_hash == first.config_hash
        else p for p in r.points]
    board = _summary(r.model_copy(update={"points": points}), len(points))["leaderboard"]
    assert board[-1]["config_hash"] == first.config_hash  # a NaN ranks last, whatever the sign
    tokens = [row["metrics"][t]["selected_tokens"] for row in board[:-1]]
    assert tokens == sorted(tokens)


def test_board_front_for_a_cost_primary_is_the_cheapest(cost):
    r = cost["result"]
    front = pareto_frame(r)
    on = front[front["front"]]
    grid = [p for p in r.points if not p.is_baseline]
    cheapest = min(p.metrics["train"]["selected_tokens"] for p in grid)
    # every point retrieves as many documents: the front is the fewest tokens (it was the most)
    assert set(on["selected_tokens"]) == {cheapest}
    assert bool(front.iloc[0]["front"]) and bool(front.iloc[0]["best"])
    assert front.iloc[0]["label"] == r.best.label
    # the order of the front is the sweep's own (pareto_points, the one ranking)
    from aiblox.sweep.results import pareto_points

    expected = pareto_points(grid, "train", {"selected_tokens": "minimize",
                                             "candidates": "minimize"}, "selected_tokens")
    assert on["config_hash"].tolist() == [p.config_hash[:16] for p in expected]


@pytest.fixture(scope="module")
def moo(tmp_path_factory, sweep_db, mlflow_uri):
    """A selection sweep by ``answer_f1`` with ``[search] objectives = [answer_f1,
    selected_tokens]``, logged to MLflow: its chosen point (the front's best) ties others on
    answer_f1 and ranks below them by config hash."""
    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep import write_report

    root = tmp_path_factory.mktemp("board-moo")
    spec = load_spec(_spec(root, SELECTION.format(
        name="board_moo", primary="answer_f1",
        extra='[search]\nobjectives = ["answer_f1", "selected_tokens"]'), "board_moo"))
    tr = SweepTracker(mlflow_uri, "board-moo", spec.hash, spec.model_dump(mode="json"))
    r = run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False, tracker=tr)
    rep = write_report(r.tracking["parent_run_id"], mlflow_uri, root / "report")
    return {"result": r, "md": (root / "report" / "report.md").read_text(encoding="utf-8"),
            "info": rep}


def test_the_chosen_point_is_tested_first(moo):
    r = moo["result"]
    order = ranked(r.points, "train", "answer_f1")
    at = [p.config_hash for p in order].index(r.best.config_hash)
    assert at >= 3  # the situation of the defect: the front's best outside the plain top 3
    tested = list(dict.fromkeys(c.candidate for c in r.significance))
    assert tested[0] == r.best.label and len(tested) == 3  # significance_top in all
    others = [p.label for p in order if p.config_hash not in (r.best.config_hash,
                                                              r.baseline.config_hash)]
    assert tested[1:] == others[:2]  # then the ranking's others
    sig = significance_frame(r)
    assert r.best.label in set(sig.loc[sig["metric"] == "answer_f1", "candidate"])


def test_the_chosen_point_is_marked_where_it_ranks(moo):
    r, md = moo["result"], moo["md"]
    board = leaderboard(r)
    # the order stays the ranking (aiblox eval verify checks it); the chosen point is marked
    assert board["config"].tolist() == [p.config_hash[:16]
                                        for p in ranked(r.points, "train", "answer_f1")]
    row = board[board["chosen"] == CHOSEN]
    assert len(row) == 1 and row.iloc[0]["label"] == r.best.label and row.iloc[0]["rank"] > 1
    assert bool(row.iloc[0]["best"])
    # report.md: the chosen row marked, with its tested delta and p beside it
    escaped = r.best.label.replace("|", "\\|")  # a Markdown cell escapes its bars
    line = next(ln for ln in md.splitlines() if f"| {escaped} (chosen) |" in ln)
    c = next(c for c in r.significance
             if c.candidate == r.best.label and c.metric == "answer_f1")
    assert f"p={c.p_adjusted:.4f}" in line or "p<0.0001" in line
    # the policy axis is named as the spec names it
    assert "### policy (MLflow param `selection.policy`)" in md


def test_cli_table_shows_the_chosen_point_below_its_top(tmp_path, sweep_db):
    spec = _spec(tmp_path, SELECTION.format(
        name="board_moo_cli", primary="answer_f1",
        extra='[search]\nobjectives = ["answer_f1", "selected_tokens"]'), "board_moo_cli")
    r = runner.invoke(app, ["sweep", str(spec), "--db", sweep_db, "--cache-dir",
                            str(tmp_path / "stages"), "--no-tracking", "--top", "2"],
                      env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    best = next(ln for ln in r.stdout.splitlines() if ln.startswith("best on train"))
    label = best.split("answer_f1: ", 1)[1].rsplit(" (config", 1)[0]
    rows = [ln for ln in r.stdout.splitlines()
            if ln.startswith("│ ") and "|R2_POLICY_V" in ln and "train" not in ln]
    chosen = next(ln for ln in rows if ln.startswith(f"│ {label} (chosen, rank "))
    assert "p=" in chosen  # tested: a delta with its adjusted p, not a bare delta
    assert rows.index(chosen) == 2  # after the top 2


@pytest.fixture(scope="module")
def bm25(tmp_path_factory, sweep_db, sample_dataset):
    root = tmp_path_factory.mktemp("board-bm25")
    spec = load_spec(_spec(root, BM25, "board_bm25"))
    return run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False,
                     dataset=sample_dataset)


def test_bm25_board_shows_k1_and_b_not_fusion(bm25):
    settings = point_settings(bm25.points[0])
    # a bm25 point reads no fusion and no vector depth (it showed blend=rrf, rrf_k=60 and
    # vector_depth=100)
    assert settings["blend"] is None and settings["rrf_k"] is None
    assert "vector_depth" not in settings and settings["doc_score"] is None
    assert settings["depth"] == 10 and settings["k1"] in (0.4, 0.9, 2.0)
    board = leaderboard(bm25)
    assert {"k1", "b"} <= set(board.columns)
    assert not {"blend", "rrf_k", "w_text", "vector_depth", "method"} & set(board.columns)
    assert swept_axes(bm25) == ["k1", "b"]  # it was [] and the plot fell back to depth
    along = axis_frame(bm25, "k1")
    assert along["k1"].tolist() == [0.4, 0.9, 2.0] and (along["n"] == 2).all()
    for _, row in along.iterrows():
        pts = [p for p in bm25.points if p.manifest.config["prefs"]["fts"]["k1"] == row["k1"]]
        assert row["config"] == ranked(pts, "train", "ndcg@10")[0].config_hash[:16]


def test_swept_axes_leave_an_outside_grid_baseline_out(sample_spec, small_spec, sweep_db,
                                                       sample_dataset, tmp_path):
    spec = small_spec(sample_spec, blend=["linear"], w_text=[0.2, 0.8], normalize=["minmax"],
                      baseline={"blend": "rrf", "rrf_k": 60})
    assert isinstance(spec, SweepSpec)
    r = run_sweep(spec, cache_dir=tmp_path / "stages", db=sweep_db, progress=False,
                  dataset=sample_dataset)
    assert any(p.outside_grid for p in r.points)
    # the RRF baseline made blend (and rrf_k) look swept
    assert swept_axes(r) == ["w_text"]
    board = leaderboard(r)
    assert board.loc[board["baseline"], "rrf_k"].tolist() == [60]  # still shown on its row


def test_report_axis_names_and_labels(moo, mlflow_uri):
    from aiblox.sweep import load_sweep_report
    from aiblox.sweep.report import spec_axis_name
    from aiblox.sweep.report_plots import axis_figure

    assert spec_axis_name("selection.policy", set()) == "policy"  # as the spec and board say
    assert spec_axis_name("selection.params.max_chunks", set()) == "max_chunks"
    rep = load_sweep_report(moo["result"].tracking["parent_run_id"], mlflow_uri)
    assert rep.axis_name("selection.policy") == "policy"
    fig = axis_figure(rep, "selection.params.max_chunks")
    ax = fig.axes[0]
    # the plot draws the report split too: the axis says both (it said "best on train")
    assert ax.get_ylabel() == "answer_f1 (train / test)"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.endswith("train (tune)") for t in legend)
    assert any(t.endswith("test (report)") for t in legend)
    assert ax.get_title() == "answer_f1 by max_chunks: per value, the point best on train"
