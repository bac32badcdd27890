"""Model-based search (``[search] strategy = "tpe"``): seeded, resumable, every trial an
ordinary grid point with its hashes, cached stages reused, bad input refused up front."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from aiblox.sweep import SweepSpec, run_sweep  # noqa: E402
from aiblox.sweep.search import study_path
from aiblox.sweep.space import SearchSpace  # noqa: E402


def tpe(spec: SweepSpec, n: int | None, seed: int = 0, **search) -> SweepSpec:
    data = spec.model_dump()
    data["search"] = {"strategy": "tpe", "n": n, "seed": seed, **search}
    return SweepSpec.model_validate(data)


def run(spec, cache, sweep_db, sample_dataset, **kw):
    return run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False,
                     dataset=sample_dataset, **kw)


def signature(r):
    return (r.trials, [p.config_hash for p in r.points], r.best.config_hash,
            [(p.config_hash, {s: m.run_hash for s, m in p.manifest.splits.items()})
             for p in r.points])


@pytest.fixture(scope="module")
def fourteen(tmp_path_factory, sample_spec, sweep_db, sample_dataset):
    """A 14-trial TPE study of the sample grid (24 points), run once."""
    cache = tmp_path_factory.mktemp("tpe")
    spec = tpe(sample_spec, 14)
    return spec, cache, run(spec, cache, sweep_db, sample_dataset)


def test_trials_are_grid_points_and_conclude_as_usual(fourteen, sample_spec, sweep_db,
                                                      sample_dataset):
    spec, cache, r = fourteen
    assert len(r.trials) == 14
    tried = list(dict.fromkeys(r.trials))
    baseline = [p for p in r.points if p.is_baseline]
    assert len(baseline) == 1
    assert [p.config_hash for p in r.points if p.config_hash in tried] == tried
    assert len(r.points) == len(tried) + (baseline[0].config_hash not in tried)
    assert r.best.config_hash in tried  # chosen among the trials only
    best_score = max(p.metrics["train"]["ndcg@10"] for p in r.points if p.config_hash in tried)
    assert r.best.metrics["train"]["ndcg@10"] == best_score
    assert r.ci and r.significance  # conclude ran unchanged
    assert [f.name for f in (cache / "studies").iterdir()] == [study_path(spec, cache, {
        "dataset_hash": sample_dataset.hash, "embedder": r.best.manifest.config["embedder"],
        "backend": "duckdb"}).name]
    # the plain grid over the same cache: the trials are its points, their stages its stages
    grid = run(sample_spec, cache, sweep_db, sample_dataset)
    by_hash = {p.config_hash: p for p in grid.points}
    assert set(r.trials) <= set(by_hash)
    for p in r.points:
        assert p.manifest.splits == by_hash[p.config_hash].manifest.splits
    assert grid.reused["fusion"] == 2 * len(r.points)


def test_same_spec_and_seed_same_trials_and_hashes(fourteen, tmp_path, sweep_db,
                                                   sample_dataset):
    spec, _, r = fourteen
    again = run(spec, tmp_path, sweep_db, sample_dataset)  # a fresh cache and study
    assert signature(again) == signature(r)
    other = run(tpe(spec, 14, seed=1), tmp_path, sweep_db, sample_dataset)
    assert other.trials != r.trials


def test_rerun_reuses_every_stage(fourteen, sweep_db, sample_dataset):
    spec, cache, r = fourteen
    again = run(spec, cache, sweep_db, sample_dataset)  # the same study: nothing asked again
    assert again.computed == {}
    assert signature(again) == signature(r)


def test_resume_continues_the_study(fourteen, tmp_path, sweep_db, sample_dataset):
    spec, _, r = fourteen
    first = run(tpe(spec, 6), tmp_path, sweep_db, sample_dataset)
    assert first.trials == r.trials[:6]
    resumed = run(tpe(spec, 14), tmp_path, sweep_db, sample_dataset)
    assert signature(resumed) == signature(r)
    assert study_path(tpe(spec, 6), tmp_path) == study_path(spec, tmp_path)
    assert study_path(spec, tmp_path, {"dataset_hash": "x"}) != study_path(spec, tmp_path)
    assert study_path(tpe(spec, 14, seed=1), tmp_path) != study_path(spec, tmp_path)


def test_killed_study_resumes(fourteen, tmp_path, sweep_db, sample_dataset):
    spec, _, r = fourteen
    seen = []

    def kill_after_five(point):
        seen.append(point.config_hash)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(spec, tmp_path, sweep_db, sample_dataset, on_point=kill_after_five)
    resumed = run(spec, tmp_path, sweep_db, sample_dataset)
    assert signature(resumed) == signature(r)


def test_n_above_the_grid_is_capped(small_spec, sample_spec, tmp_path, sweep_db,
                                    sample_dataset):
    spec = tpe(small_spec(sample_spec, blend=["rrf"], rrf_k=[10, 60, 100]), 50)
    with pytest.warns(UserWarning, match="3 trials are run"):
        r = run(spec, tmp_path, sweep_db, sample_dataset)
    assert len(r.trials) == 3 and len(r.points) == len(set(r.trials))


def test_progress_ends_at_n_of_n_when_the_baseline_is_a_trial(small_spec, sample_spec, tmp_path,
                                                              sweep_db, sample_dataset, capsys,
                                                              monkeypatch):
    from aiblox import progress

    monkeypatch.delenv("AIBLOX_NO_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "MIN_LINE_S", 0.0)  # the closing line of a short sweep
    spec = tpe(small_spec(sample_spec, blend=["rrf"], rrf_k=[10, 60, 100],
                          baseline={"blend": "rrf", "rrf_k": 60}), 3)
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=True, dataset=sample_dataset)
    assert r.baseline is not None and r.baseline.config_hash in r.trials  # ticked as a trial
    closing = [ln for ln in capsys.readouterr().err.splitlines()
               if ln.startswith(f"sweep {spec.name}: ")]
    assert closing and closing[-1].split(" in ")[0] == f"sweep {spec.name}: 3/3 pt"  # not 3/4


def test_search_space_is_the_grid(sample_spec):
    from aiblox.sweep.runner import sweep_points

    grid, _ = sweep_points(tpe(sample_spec, 5))
    space = SearchSpace(grid)
    assert set(space.dimensions) >= {"blend", "w_text", "normalize", "rrf_k", "depth"}
    from optuna.trial import FixedTrial

    i = space.point(FixedTrial({"blend": "rrf", "rrf_k": 1, "depth": 0}))
    p = grid[i].prefs
    assert (p.scoring.blend, p.scoring.rrf_k, p.fts.top_k) == ("rrf", 60, 10)


def test_stage_axes_are_dimensions_of_the_search_space(sample_spec, tmp_path, sweep_db,
                                                       sample_dataset):
    """QA13d #7: a pipeline's stage axes (``[grid.stages.rm3] orig_weight``) were no part of
    the space: ``gp`` was refused ("the grid varies nothing (not numbers)") and TPE chose such
    points by an opaque position."""
    from optuna.trial import FixedTrial

    data = sample_spec.model_dump()
    data.pop("baseline", None)
    data.update({"grid": {"stages": {"rm3": {"orig_weight": [0.7, 0.3, 0.5]}}},
                 "pipeline": "bm25 >> rm3 >> bm25",
                 "search": {"strategy": "gp", "n": 2, "seed": 0}})
    spec = SweepSpec.model_validate(data)  # was refused
    space = SearchSpace(spec.grid_points())
    assert space.dimensions == space.numeric_dimensions == ["rm3.orig_weight"]
    i = space.point(FixedTrial({"rm3.orig_weight": 0}))  # the smallest value, as a number
    assert spec.grid_points()[i].pipeline.expression() == "bm25 >> rm3(orig_weight=0.3) >> bm25"
    data["pipeline"] = ["bm25", "bm25 >> rm3 >> bm25"]
    data["search"] = {"strategy": "tpe", "n": 2, "seed": 0}
    both = SweepSpec.model_validate(data)
    points = both.grid_points()
    assert SearchSpace(points).dimensions == ["pipeline", "rm3.orig_weight"]
    # every point told apart by its settings (FixedTrial refuses a parameter it is not given:
    # no opaque "point|..." position asked)
    i = SearchSpace(points, flat=True).point(FixedTrial({"pipeline": "bm25 >> rm3 >> bm25",
                                                         "rm3.orig_weight": 0.5}))
    assert points[i].pipeline.expression() == "bm25 >> rm3(orig_weight=0.5) >> bm25"
    assert len(run(both, tmp_path / "c", sweep_db, sample_dataset).points) == 2


@pytest.mark.parametrize(("search", "message"), [
    ({"strategy": "bayes", "n": 5}, "unknown search strategy 'bayes'"),
    ({"strategy": "cmaes"}, "needs n"),
    ({"strategy": "tpe"}, "needs n"),
    ({"strategy": "tpe", "n": 0}, "greater than or equal to 1"),
])
def test_bad_search_refused(sample_spec, search, message):
    data = {**sample_spec.model_dump(), "search": search}
    with pytest.raises(ValueError, match=message):
        SweepSpec.model_validate(data)


def test_empty_search_space_refused(sample_spec, small_spec):
    data = {**small_spec(sample_spec).model_dump(), "search": {"strategy": "tpe", "n": 3}}
    with pytest.raises(ValueError, match="needs a search space"):
        SweepSpec.model_validate(data)
    one = tpe(small_spec(sample_spec, rrf_k=[60]), 3)  # one axis with one value: fine
    assert one.grid_size() == 1


def test_every_trial_logged_to_mlflow(sample_spec, small_spec, tmp_path, sweep_db,
                                      sample_dataset, mlflow_uri):
    from aiblox.engine.tracking import SweepTracker

    spec = tpe(small_spec(sample_spec, blend=["linear", "rrf"], w_text=[0.2, 0.5, 0.8],
                          normalize=["minmax"], rrf_k=[10, 60], depth=[20],
                          baseline={"blend": "rrf", "rrf_k": 30}), 4)

    def tracker():
        return SweepTracker(mlflow_uri, "tpe", spec.hash, spec.model_dump(mode="json"),
                            resume=True)

    tr = tracker()
    r = run(spec, tmp_path, sweep_db, sample_dataset, tracker=tr)
    logged = {c.data.tags["aiblox.config_hash"] for c in tr.children()}
    assert logged == {p.config_hash for p in r.points} >= set(r.trials)
    assert r.tracking["logged"] == len(r.points)
    local = tr.client.download_artifacts(r.tracking["parent_run_id"], "sweep_summary.json",
                                         str(tmp_path))
    assert json.loads(Path(local).read_text())["trials"] == r.trials
    again = run(spec, tmp_path, sweep_db, sample_dataset, tracker=tracker())
    assert again.tracking["logged"] == 0 and again.computed == {}
    assert again.trials == r.trials


def test_cli_runs_a_tpe_spec(tmp_path, sweep_db):
    from typer.testing import CliRunner

    from aiblox.cli.main import app

    src = Path(__file__).resolve().parents[2] / "evals" / "sweeps" / "sample_fusion.toml"
    spec = tmp_path / "tpe.toml"
    spec.write_text(src.read_text() + '\n[search]\nstrategy = "tpe"\nn = 12\nseed = 3\n')
    args = ["sweep", str(spec), "--db", sweep_db, "--cache-dir", str(tmp_path / "stages"),
            "--no-tracking"]
    runner = CliRunner()
    r = runner.invoke(app, args, env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    assert "searched by tpe (seed 3): 12 trials" in r.output
    out = json.loads(runner.invoke(app, [*args, "--json"],
                                   env={"AIBLOX_NO_PROGRESS": "1"}).stdout)
    assert len(out["trials"]) == 12 and out["computed"] == {}


def test_a_stale_study_is_refused(fourteen, tmp_path, sweep_db, sample_dataset):
    """A study whose trials no longer score what they scored (code or data changed) stops
    with its path instead of steering TPE by stale values."""
    import sqlite3

    spec, _, r = fourteen
    run(tpe(spec, 3), tmp_path, sweep_db, sample_dataset)
    (db,) = (tmp_path / "studies").iterdir()
    with sqlite3.connect(db) as con:
        con.execute("UPDATE trial_values SET value = value + 1")
    with pytest.raises(RuntimeError, match="remove the file"):
        run(spec, tmp_path, sweep_db, sample_dataset)


def test_pipeline_sweep_tpe(sample_spec, small_spec, tmp_path, sweep_db, sample_dataset):
    """Chunkers that take sizes and one that does not: every trial is a pipeline grid point,
    and the same seed gives the same trials."""
    from aiblox.sweep.runner import sweep_points

    data = sample_spec.model_dump()
    data.update(grid={"blend": ["rrf"], "rrf_k": [10, 60],
                      "chunking": {"chunker_id": ["token_window", "whole"],
                                   "max_chunk_tokens": [32, 64], "overlap_tokens": [0, 40]}},
                baseline=None, base={**data["base"], "top_k_chunks": 4}, query_limit=4,
                metrics=["ndcg@10"], primary="answer_recall@4", chunk_k=[1, 4],
                search={"strategy": "tpe", "n": 8, "seed": 0})
    spec = SweepSpec.model_validate(data)
    grid, _ = sweep_points(spec)
    assert len(grid) == 2 * (3 + 1)  # (32, 40) is refused by token_window; whole takes no sizes
    a = run(spec, tmp_path / "a", sweep_db, sample_dataset)
    b = run(spec, tmp_path / "b", sweep_db, sample_dataset)
    assert len(a.trials) == 8 and signature(a) == signature(b)
    assert all(p.chunking is not None for p in a.points)
