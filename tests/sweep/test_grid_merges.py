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

from spec_text import MINIMAL, write

from aiblox.engine.settings import point_config, point_title
from aiblox.sweep import load_spec

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


def test_a_fusion_axis_still_multiplies_what_fuses(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\npipeline = '
                           '["bm25 + dense", "(bm25 >> rm3 >> bm25) + dense"]\n'
                           "[grid]\nrrf_k = [10, 60]\n"))
    assert len(spec.grid_points()) == 4


def test_a_setting_the_fusions_blend_ignores_is_one_point(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                           "pipeline = \"mix(bm25 >> rm3 >> bm25, dense)\"\n"
                           '[stages.mix]\nkind = "fuse"\nblend = "rrf"\n'
                           '[base]\nscoring = { blend = "linear" }\n'
                           '[grid]\nnormalize = ["minmax", "zscore"]\n'))
    assert len(spec.grid_points()) == 1
