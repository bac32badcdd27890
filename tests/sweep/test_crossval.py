"""Seeded k-fold cross-validation in sweeps (``[cv]``): the fold partition, the choice per fold
made on the other folds only, the margin against the baseline recomputed here independently,
the errors before any work, and ``aiblox sweep`` printing the fold table."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.engine.cache import StageCache
from aiblox.engine.outputs import StageReader
from aiblox.sweep import SweepSpec, SweepSpecError, load_spec, run_sweep
from aiblox.sweep.crossval import check_folds, cross_validate, fold_partition

REPO = Path(__file__).resolve().parents[2]
QIDS = [f"q{i:02d}" for i in range(23)]


def test_folds_are_disjoint_cover_every_query_and_are_balanced():
    folds = fold_partition(QIDS, 5, seed=0)
    assert len(folds) == 5
    flat = [q for f in folds for q in f]
    assert sorted(flat) == sorted(QIDS) and len(flat) == len(set(flat))  # each query once
    assert sorted(len(f) for f in folds) == [4, 4, 5, 5, 5]  # sizes differ by one at most
    assert all(f == sorted(f) for f in folds)


def test_folds_follow_the_documented_recipe_and_the_seed():
    import random

    ids = sorted(QIDS)
    random.Random(7).shuffle(ids)
    assert fold_partition(list(reversed(QIDS)), 4, seed=7) == [sorted(ids[i::4])
                                                               for i in range(4)]
    assert fold_partition(QIDS, 4, seed=7) == fold_partition(QIDS, 4, seed=7)
    assert fold_partition(QIDS, 4, seed=7) != fold_partition(QIDS, 4, seed=8)


def test_folds_are_the_same_in_a_new_process():
    code = ("import json; from aiblox.sweep.crossval import fold_partition; "
            f"print(json.dumps(fold_partition({QIDS!r}, 5, 3)))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == fold_partition(QIDS, 5, 3)


def test_bad_fold_counts_name_the_counts():
    with pytest.raises(ValueError, match="at least 2"):
        check_folds(1, 10, "test")
    with pytest.raises(ValueError, match=r"cv.folds = 11 is more than the 10 queries of tuning "
                                         r"split 'test'"):
        check_folds(11, 10, "test")
    check_folds(10, 10, "test")  # one query a fold is allowed


def _point(name):
    return SimpleNamespace(label=name, config_hash=name)


def _reference(values, qids, folds, seed, base):
    """The k-fold choice computed here, without the module's code."""
    parts = fold_partition(qids, folds, seed)
    rows, held = [], {}
    for fold in parts:
        rest = [q for q in qids if q not in fold]
        scores = {h: np.mean([v[q] for q in rest]) for h, v in values.items()}
        best = sorted(scores, key=lambda h: (-scores[h], h))[0]
        held.update({q: values[best][q] for q in fold})
        rows.append((best, scores[best], np.mean([values[best][q] for q in fold])))
    diff = np.array([held[q] - base[q] for q in sorted(qids)])
    return rows, held, diff


def test_choice_per_fold_uses_only_the_other_folds_and_matches_a_reference():
    rng = np.random.default_rng(1)
    names = ["a", "b", "c", "d"]
    values = {n: {q: float(rng.random()) for q in QIDS} for n in names}
    base = {q: float(rng.random()) for q in QIDS}
    folds = fold_partition(QIDS, 4, seed=3)
    # "leak" is perfect on fold 0's queries and worthless elsewhere: best over all queries of
    # fold 0 ... but never on the other folds, so fold 0 must not choose it
    values["leak"] = {q: (1.0 if q in folds[0] else 0.0) for q in QIDS}
    pts = [_point(n) for n in [*names, "leak"]]
    cv = cross_validate(pts, values, QIDS, folds=4, seed=3, split="test", metric="m",
                        baseline=_point("base"), baseline_values=base)
    assert cv.fold_ids == folds
    assert cv.rows[0].config_hash != "leak"
    assert all(r.config_hash != "leak" for r in cv.rows)
    rows, held, diff = _reference(values, QIDS, 4, 3, base)
    for got, (best, tune, out) in zip(cv.rows, rows, strict=True):
        assert (got.config_hash, got.tune, got.held_out) == (best, pytest.approx(tune),
                                                            pytest.approx(out))
        assert got.gap == pytest.approx(tune - out)
        assert got.n_tune + got.n_held_out == len(QIDS)
    assert cv.per_query == pytest.approx(held)
    assert cv.mean_held_out == pytest.approx(np.mean([r[2] for r in rows]))
    assert cv.pooled_held_out == pytest.approx(np.mean(list(held.values())))
    assert cv.margin == pytest.approx(diff.mean())
    from scipy.stats import ttest_rel

    assert cv.p_value == pytest.approx(ttest_rel([held[q] for q in sorted(QIDS)],
                                                 [base[q] for q in sorted(QIDS)]).pvalue)
    assert cv.margin_low < cv.margin < cv.margin_high
    assert cv.wins == int((diff > 0).sum()) and cv.losses == int((diff < 0).sum())
    # changing held-out fold 0's values changes no choice made for fold 0
    moved = {n: dict(v) for n, v in values.items()}
    for q in folds[0]:
        moved["d"][q] = 50.0
    again = cross_validate(pts, moved, QIDS, folds=4, seed=3, split="test", metric="m")
    assert again.rows[0].config_hash == cv.rows[0].config_hash
    assert {r.config_hash for r in again.rows[1:]} == {"d"}  # the other folds see it


def test_verdict_says_plainly_when_tuning_does_not_beat_the_baseline():
    values = {"a": {q: 0.5 for q in QIDS}}
    tied = cross_validate([_point("a")], values, QIDS, folds=3, seed=0, split="t", metric="m",
                          baseline=_point("base"), baseline_values=dict(values["a"]))
    assert tied.margin == 0 and tied.beats_baseline is False
    assert "did NOT beat the baseline base" in tied.verdict and "includes 0" in tied.verdict
    better = cross_validate([_point("a")], {"a": {q: 0.9 + 0.01 * (i % 3)
                                                  for i, q in enumerate(QIDS)}},
                            QIDS, folds=3, seed=0, split="t", metric="m",
                            baseline=_point("base"), baseline_values=dict(values["a"]))
    assert better.beats_baseline and better.margin_low > 0 and "beats the baseline" in \
        better.verdict
    # the interval decides; the p beside it is the named test's, not the interval's (QA 27:
    # "worse ... [-0.0390, -0.0027] (p 0.0524)" read as a contradiction)
    assert "(paired t-test p " in better.verdict
    fisher = cross_validate([_point("a")], values, QIDS, folds=3, seed=0, split="t", metric="m",
                            baseline=_point("base"), baseline_values=dict(values["a"]),
                            test="fisher")
    assert "(Fisher randomisation test p " in fisher.verdict


def test_a_cost_primary_beats_the_baseline_by_costing_less():
    """``primary = "evidence_tokens"`` with ``[cv]``: each fold chose the cheaper point, but
    the verdict said a point 50 tokens cheaper a query "did NOT beat the baseline ... it is
    worse", W/T/L 0/0/23 (QA)."""
    cheap = {q: 100.0 + i for i, q in enumerate(QIDS)}
    dear = {q: 150.0 + i for i, q in enumerate(QIDS)}
    cv = cross_validate([_point("cheap"), _point("dear")], {"cheap": cheap, "dear": dear},
                        QIDS, folds=3, seed=0, split="t", metric="evidence_tokens",
                        baseline=_point("base"), baseline_values=dear)
    assert {r.config_hash for r in cv.rows} == {"cheap"}
    assert cv.margin == -50.0 and cv.margin_high < 0
    assert cv.beats_baseline is True and (cv.wins, cv.ties, cv.losses) == (len(QIDS), 0, 0)
    assert cv.verdict.startswith("tuning by 3-fold cross-validation beats the baseline base: "
                                 "evidence_tokens (lower is better) -50.0000")
    assert "below 0" in cv.verdict
    worse = cross_validate([_point("dear")], {"dear": dear}, QIDS, folds=3, seed=0, split="t",
                           metric="evidence_tokens", baseline=_point("base"),
                           baseline_values=cheap)
    assert worse.beats_baseline is False and "it is worse" in worse.verdict
    assert (worse.wins, worse.losses) == (0, len(QIDS))


def test_the_fisher_test_of_the_margin_uses_the_spec_s_seed():
    rng = np.random.default_rng(5)
    a = {q: float(rng.random()) for q in QIDS}
    b = {q: float(rng.random()) for q in QIDS}
    from aiblox.metrics import paired_test

    for seed in (0, 7):
        cv = cross_validate([_point("a")], {"a": a}, QIDS, folds=3, seed=seed, split="t",
                            metric="m", baseline=_point("base"), baseline_values=b,
                            test="fisher")
        assert cv.p_value == paired_test(b, a, "fisher", seed=seed).p_value


def _value(v):
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return str(v).lower()
    return json.dumps(v)


def _toml(data):
    """A spec dict as TOML: scalars first, then one table per dict (None left out)."""
    data = {k: v for k, v in data.items() if v is not None}
    lines = [f"{k} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for k, v in data.items():
        if isinstance(v, dict):
            lines += [f"[{k}]", *(f"{a} = {_value(x)}" for a, x in v.items() if x is not None)]
    return "\n".join(lines) + "\n"


def _spec(**over):
    data = {"name": "cv_sample", "dataset": "sample", "tune_split": "test",
            "embedder": "hashing", "metrics": ["ndcg@10", "recall@10"], "primary": "ndcg@10",
            "base": {"mode": "bm25", "top_k_items": 10, "fts": {"top_k": 20}},
            "grid": {"k1": [0.6, 1.2, 2.0], "b": [0.3, 0.75]}, "baseline": {},
            "cv": {"folds": 3, "seed": 0}}
    data.update(over)
    return SweepSpec.model_validate({k: v for k, v in data.items() if v is not None})


def test_spec_errors_before_any_work(tmp_path):
    for bad, field in (({"cv": {"folds": 1}}, "cv.folds"),
                       ({"cv": None}, "field 'report_split': required"),
                       ({"search": {"strategy": "tpe", "n": 3}}, "field 'cv': k-fold")):
        path = tmp_path / "bad.toml"
        data = _spec().model_dump(mode="json", exclude_none=True)
        data.update(bad)
        path.write_text(_toml(data))
        with pytest.raises(SweepSpecError, match=field.replace(".", r"\.")):
            load_spec(path)
    assert _spec(search={"strategy": "random", "n": 4, "seed": 1}).cv.folds == 3


def test_spec_without_cv_keeps_its_hash():
    spec = load_spec(REPO / "evals" / "sweeps" / "sample_fusion.toml")
    data = spec.model_dump(mode="json")
    assert "cv" not in json.dumps(data) or data["cv"] is None
    with_cv = SweepSpec.model_validate({**data, "cv": {"folds": 2}})
    assert with_cv.hash != spec.hash
    assert SweepSpec.model_validate({**data, "cv": None}).hash == spec.hash


@pytest.fixture(scope="module")
def cv_run(tmp_path_factory, sweep_db, sample_dataset):
    cache = tmp_path_factory.mktemp("cvstages")
    spec = _spec()
    return spec, cache, run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False,
                                  dataset=sample_dataset, jobs=1)


def test_sweep_cross_validates_the_grid_on_its_per_query_values(cv_run, sample_dataset):
    spec, cache, r = cv_run
    assert r.report_split is None and r.splits == ["test"] and r.significance == []
    cv = r.cv
    qids = sorted(sample_dataset.qrels["test"])
    assert cv.n_queries == len(qids) and sorted(q for f in cv.fold_ids for q in f) == qids
    reader = StageReader(StageCache(cache))
    values = {p.config_hash: reader.per_query(p.manifest.splits["test"].stages)["ndcg@10"]
              for p in r.points}
    # per-query values average to the logged metric (so a fold's mean is the metric on it)
    for p in r.points:
        assert np.mean([values[p.config_hash][q] for q in qids]) == pytest.approx(
            p.metrics["test"]["ndcg@10"])
    base = values[r.baseline.config_hash]
    rows, held, diff = _reference(values, qids, 3, 0, base)
    assert [(x.config_hash, x.tune, x.held_out) for x in cv.rows] == [
        (b, pytest.approx(t), pytest.approx(o)) for b, t, o in rows]
    assert cv.margin == pytest.approx(diff.mean())
    assert cv.baseline_mean == pytest.approx(r.baseline.metrics["test"]["ndcg@10"])
    assert (cv.beats_baseline is True) == (cv.margin_low > 0)


def test_sweep_is_deterministic(cv_run, sweep_db, sample_dataset):
    spec, cache, r = cv_run
    again = run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False,
                      dataset=sample_dataset, jobs=1)
    assert again.cv == r.cv and again.best.config_hash == r.best.config_hash


def test_cv_with_a_report_split_keeps_the_train_test_choice(tmp_path, sweep_db,
                                                            sample_dataset):
    spec = _spec(tune_split="test", report_split="train", cv={"folds": 2, "seed": 4})
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                  dataset=sample_dataset, jobs=1)
    assert r.splits == ["test", "train"] and r.cv.folds == 2 and r.significance
    best = r.best.metrics
    assert r.gap == pytest.approx(best["test"]["ndcg@10"] - best["train"]["ndcg@10"])


runner = CliRunner()


def _write(path, spec):
    path.write_text(_toml(spec.model_dump(mode="json", exclude_none=True)))
    return str(path)


def test_cli_prints_and_logs_the_fold_table(tmp_path, sweep_db, mlflow_uri, monkeypatch):
    path = _write(tmp_path / "cv.toml", _spec(name="cv_cli"))
    common = ["sweep", path, "--db", sweep_db, "--cache-dir", str(tmp_path / "st")]
    r = runner.invoke(app, [*common, "--tracking-uri", mlflow_uri],
                      env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    assert "3-fold cross-validation over test" in r.output and "verdict:" in r.output
    assert "held-out" in r.output and "margin" in r.output
    out = json.loads(runner.invoke(app, [*common, "--no-tracking", "--json"],
                                   env={"AIBLOX_NO_PROGRESS": "1"}).stdout)
    assert len(out["cv"]["rows"]) == 3 and out["report_split"] is None
    from mlflow.tracking import MlflowClient

    from aiblox.sweep import load_sweep_report
    from aiblox.sweep.report import render_html, render_markdown

    rep = load_sweep_report("cv_cli", mlflow_uri)
    parent = MlflowClient(mlflow_uri).get_run(rep.parent_run_id)
    assert parent.data.metrics["cv.mean_held_out"] == pytest.approx(out["cv"]["mean_held_out"])
    assert parent.data.tags["aiblox.cv.fold0.config_hash"] == out["cv"]["rows"][0]["config_hash"]
    md = render_markdown(rep)
    assert rep.report_split is None and "3-fold cross-validation over test" in md
    assert out["cv"]["verdict"] in md
    assert html.escape(out["cv"]["verdict"]) in render_html(rep)  # the HTML too (QA 27)
    # the fold table's mean row is a mean over the folds in every cell, the baseline's too (it
    # showed the baseline's mean over queries beside the held-out mean over folds: QA 21)
    mean_row = next(ln for ln in md.splitlines() if ln.startswith("| mean (over folds) |"))
    folds = [row["baseline_held_out"] for row in out["cv"]["rows"]]
    assert mean_row.rstrip(" |").endswith(f"{sum(folds) / len(folds):.4f}")
    assert f"{out['cv']['mean_held_out']:.4f}" in mean_row
    # no point is tested under [cv] alone (the margin is): the board's deltas say so, as
    # the report's, not leaving a missing p=... to be guessed at
    head = next(ln for ln in md.splitlines() if ln.startswith("| # | label |"))
    assert head.endswith("| vs baseline (test ndcg@10, untested: see the cross-validated "
                         "margin) |")
    assert "untested: see the cross-validated" in " ".join(r.output.split())
    # verify: the chosen point's stages, and the fold table from the logged per-query values;
    # the sweep's children are listed once for the k-fold and the summary checks (twice before)
    import aiblox.engine.tracking as tracking

    listed = []

    def counted(*args, **kwargs):
        listed.append(1)
        return child_runs(*args, **kwargs)

    child_runs = tracking.child_runs
    monkeypatch.setattr(tracking, "child_runs", counted)
    v = runner.invoke(app, ["eval", "verify", "cv_cli", "--tracking-uri", mlflow_uri, "--db",
                            sweep_db, "--json"], env={"AIBLOX_NO_PROGRESS": "1"})
    assert v.exit_code == 0, v.output
    checks = {c["where"]: c for c in json.loads(v.stdout)["checks"]}
    assert {"test/fusion", "cv/fold_ids (cv_folds.json)", "cv/rows[2] (cv_folds.json)",
            "cv/margin (cv_folds.json)", "cv/verdict (summary)", "sweep/cv.margin"} <= set(checks)
    assert {"sweep/best", "sweep/best (summary)"} <= set(checks)
    assert all(c["identical"] for c in checks.values())
    assert len(listed) == 1


def test_cli_refuses_more_folds_than_queries_before_any_work(tmp_path, sweep_db,
                                                            sample_dataset):
    n = len(sample_dataset.qrels["train"])  # 4 judged queries
    path = _write(tmp_path / "cv.toml", _spec(tune_split="train", cv={"folds": n + 1}))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    r = runner.invoke(app, ["sweep", path, "--db", sweep_db, "--cache-dir",
                            str(tmp_path / "st"), "--tracking-uri", uri],
                      env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code != 0
    assert f"cv.folds = {n + 1} is more than the {n} queries of tuning split 'train'" in r.output
    # at the line that writes it, not the dataset's (QA 27)
    line = next(i for i, t in enumerate(Path(path).read_text().splitlines(), 1)
                if t.startswith("folds"))
    assert f"cv.toml:{line}: field 'cv.folds': cv.folds" in r.output
    assert not (tmp_path / "mlflow.db").exists()  # nothing logged, no store made
    assert not any((tmp_path / "st").rglob("*.json.gz"))  # no stage computed


def test_random_draw_is_cross_validated_over_the_points_drawn(tmp_path, sweep_db,
                                                              sample_dataset):
    spec = _spec(search={"strategy": "random", "n": 3, "seed": 2})
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                  dataset=sample_dataset, jobs=1)
    drawn = [p.config_hash for p in r.points[:3]]
    assert r.cv.candidates == drawn  # the baseline is not among them unless drawn
    assert {row.config_hash for row in r.cv.rows} <= set(drawn)
