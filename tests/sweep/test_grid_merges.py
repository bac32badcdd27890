"""Grid points that compute the same run are scored once, and the sweep says how many it
merged and why.

A first stage of one signal (``bm25``, ``dense``) cuts its one list and fuses nothing, yet the
planner's identity of a run (``plan.run_form``) held the base's scoring: under a ``[grid] rrf_k``
axis ``bm25`` was two points with one label, computed, logged and tested twice. So was a
fusion under a setting its blend ignores (RRF's ``normalize``). The identity now holds only
what is read; no stage key, config hash or label of a point kept changes. And the points
merged were dropped without a word: ``aiblox sweep`` now says how many, and why, on stderr
(``--json``: ``merged``), and nothing under ``-q``."""

from __future__ import annotations

import json

from spec_text import MINIMAL, write
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.engine.settings import point_config, point_title
from aiblox.sweep import load_spec
from aiblox.sweep.points import merged_why

SINGLE = ('metrics = ["ndcg@10"]\npipeline = ["bm25", "bm25 >> rm3 >> bm25", "dense"]\n'
          "[grid]\nrrf_k = [10, 60]\n")


def _titles(spec):
    settings = spec.settings()
    return [point_title(settings, p) for p in spec.grid_points()]


def test_single_signal_pipelines_under_a_fusion_axis_are_one_point_each(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + SINGLE))
    titles = _titles(spec)
    assert titles == ["bm25 @ bm25-d100", "bm25 >> rm3 >> bm25 @ bm25-d100", "dense @ dense-d100"]
    # the point kept is the first in grid order, with the config hash it always had
    first = load_spec(write(tmp_path, MINIMAL + SINGLE.replace("[10, 60]", "[10]")))
    settings = spec.settings()
    assert [point_config(settings, p, "e", "duckdb")[0] for p in spec.grid_points()] == [
        point_config(settings, p, "e", "duckdb")[0] for p in first.grid_points()]
    assert len(spec.merged_points()) == 3
    assert merged_why(spec.merged_points()) == ("they differ only in scoring.rrf_k, which "
                                                 "their stages do not read")


def test_a_fusion_axis_still_multiplies_what_fuses(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\npipeline = '
                           '["bm25 + dense", "(bm25 >> rm3 >> bm25) + dense"]\n'
                           "[grid]\nrrf_k = [10, 60]\n"))
    assert len(spec.grid_points()) == 4 and not spec.merged_points()


def test_a_setting_the_fusions_blend_ignores_is_one_point(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                           "pipeline = \"mix(bm25 >> rm3 >> bm25, dense)\"\n"
                           '[stages.mix]\nkind = "fuse"\nblend = "rrf"\n'
                           '[base]\nscoring = { blend = "linear" }\n'
                           '[grid]\nnormalize = ["minmax", "zscore"]\n'))
    assert len(spec.grid_points()) == 1
    assert "scoring.normalize" in merged_why(spec.merged_points())


def test_the_sweep_says_how_many_points_it_merged_and_why(tmp_path, sweep_db):
    path = write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\npipeline = ["retrieve", '
                 '"bm25 + dense", "dense"]\n[grid]\nk1 = [0.9, 1.2]\n')
    args = ["sweep", str(path), "--db", sweep_db, "--cache-dir", str(tmp_path / "stages"),
            "--no-tracking"]
    runner = CliRunner()
    r = runner.invoke(app, [*args, "--json"], env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    why = ("they differ only in fts.k1, which their stages do not read, or in how the "
           "pipeline is written (bm25 + dense is retrieve)")
    assert out["n_points"] == 3 and out["merged"] == {"points": 3, "why": why}
    said = [ln for ln in r.stderr.splitlines() if "merged" in ln]
    assert said == ["3 more grid points merged into these: each computes the same run as one "
                    f"of them, scored once; {why}"]
    quiet = runner.invoke(app, ["-q", *args], env={"AIBLOX_NO_PROGRESS": "1"})
    assert quiet.exit_code == 0 and "merged" not in quiet.stderr


def _why(spec):
    from aiblox.sweep.points import repeated_values

    return merged_why(spec.merged_points(), repeated_values(spec.grid, spec.pipelines()))


def test_a_value_listed_twice_in_an_axis_is_counted_with_its_reason(tmp_path):
    """``fusion_points`` dropped the points of a value listed twice (``rrf_k = [60, 10, 60]``)
    without a word: the sweep's count of merged points left them out. They are counted now,
    each point with itself, and the reason names the axis and the value."""
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                           "[grid]\nrrf_k = [60, 10, 60]\nk1 = [0.9, 1.2]\n"))
    assert len(spec.grid_points()) == 4
    merged = spec.merged_points()
    assert len(merged) == 2 and all(left == kept for left, kept in merged)
    assert _why(spec) == "2 are points listed again (grid.rrf_k lists 60 twice)"


def test_values_listed_again_in_any_axis_and_merges_are_counted_together(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                           'pipeline = ["bm25", "bm25 >> rm3 >> bm25", "bm25"]\n'
                           "[grid]\nrrf_k = [10, 60]\n[grid.stages.rm3]\n"
                           "fb_docs = [5, 10, 5, 5]\n"))
    # kept: bm25, rm3 at 5 and 10 (rrf_k is not read); written: 2 x (1 + 4 + 1) = 12, of
    # which 3 repeat a point kept (under rrf_k 10) and 6 one kept under the other rrf_k
    assert len(spec.grid_points()) == 3 and len(spec.merged_points()) == 9
    assert _why(spec) == (
        "they differ only in scoring.rrf_k, which their stages do not read; 3 are points "
        "listed again (pipeline lists 'bm25' twice, grid.stages.rm3.fb_docs lists 5 3 times)")
    chunked = load_spec(write(tmp_path, MINIMAL + "[grid]\nrrf_k = [60, 60]\n[grid.chunking]\n"
                              'chunker_id = ["whole", "sentences"]\n'
                              "max_chunk_tokens = [64, 128, 64]\n"))
    # whole takes no sizes (one point, not a repeat); sentences 64 twice: 2 x 4 - 3 written
    assert len(chunked.grid_points()) == 3 and len(chunked.merged_points()) == 5
    assert _why(chunked) == ("5 are points listed again (grid.rrf_k lists 60 twice, "
                             "grid.chunking.max_chunk_tokens lists 64 twice)")


def test_the_sweep_counts_a_point_listed_twice_among_the_merged(tmp_path, sweep_db):
    path = write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n[grid]\nrrf_k = [60, 60]\n')
    r = CliRunner().invoke(app, ["sweep", str(path), "--db", sweep_db, "--cache-dir",
                                 str(tmp_path / "stages"), "--no-tracking", "--json"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    why = "1 is a point listed again (grid.rrf_k lists 60 twice)"
    assert json.loads(r.stdout)["merged"] == {"points": 1, "why": why}
    assert [ln for ln in r.stderr.splitlines() if "merged" in ln] == [
        f"1 more grid point merged into these: each computes the same run as one of them, "
        f"scored once; {why}"]
