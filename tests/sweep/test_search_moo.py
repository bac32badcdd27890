"""CMA-ES and GP search (seeded, resumable, every trial a grid point), quality against cost
(``[search] objectives``: directions, the Pareto front, multi-objective search, the report),
and the bad input refused before any work."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("optuna")

from aiblox.metrics.pareto import infer_direction, pareto_front, resolve_objectives  # noqa: E402
from aiblox.sweep import SweepSpec, run_sweep  # noqa: E402
from aiblox.sweep.results import pareto_points  # noqa: E402
from aiblox.sweep.search import study_path  # noqa: E402

MO = ["ndcg@10", "candidates"]


def searched(spec: SweepSpec, strategy: str, n: int | None, seed: int = 0,
             **search) -> SweepSpec:
    data = spec.model_dump()
    data["search"] = {"strategy": strategy, **({} if n is None else {"n": n}), "seed": seed,
                      **search}
    return SweepSpec.model_validate(data)


def run(spec, cache, sweep_db, sample_dataset, **kw):
    return run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False,
                     dataset=sample_dataset, **kw)


def signature(r):
    return (r.trials, [p.config_hash for p in r.points], r.best.config_hash, r.pareto,
            [(p.config_hash, {s: m.run_hash for s, m in p.manifest.splits.items()})
             for p in r.points])


def brute_front(values, directions):
    """Non-dominated rows by the definition, pairwise."""
    sign = [1 if d == "maximize" else -1 for d in directions]
    v = [[s * x for s, x in zip(sign, row, strict=True)] for row in values]

    def dominates(a, b):
        return all(x >= y for x, y in zip(a, b, strict=True)) and a != b

    return [i for i, row in enumerate(v) if not any(dominates(o, row) for o in v)]


# -- the Pareto front, by hand ---------------------------------------------------------------

def test_front_by_hand_with_ties():
    values = [(0.5, 10), (0.6, 20), (0.4, 5), (0.5, 15), (0.6, 20), (0.3, 30)]
    # (0.5, 15) is beaten by (0.5, 10): as good in quality, cheaper; (0.3, 30) by all.
    # (0.6, 20) twice: equal points do not dominate each other, both stay
    assert pareto_front(values, ["maximize", "minimize"]) == [0, 1, 2, 4]
    # the same costs maximised: (0.3, 30) is the most, (0.6, 20) the best quality
    assert pareto_front(values, ["maximize", "maximize"]) == [1, 4, 5]
    # both minimised: (0.4, 5) is the cheapest, (0.3, 30) the lowest first value
    assert pareto_front(values, ["minimize", "minimize"]) == [2, 5]


def test_front_edge_cases():
    assert pareto_front([], ["maximize", "minimize"]) == []
    assert pareto_front([(1.0, 2.0)], ["maximize", "minimize"]) == [0]
    assert pareto_front([(1, 1, 1), (1, 1, 1)], ["maximize"] * 3) == [0, 1]
    assert pareto_front([(1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 0)], ["maximize"] * 3) == [
        0, 1, 2]
    with pytest.raises(ValueError, match="NaN"):
        pareto_front([(float("nan"), 1.0)], ["maximize", "minimize"])
    with pytest.raises(ValueError, match="maximize or minimize"):
        pareto_front([(1.0, 1.0)], ["maximize", "smaller"])
    with pytest.raises(ValueError, match="one column per direction"):
        pareto_front([(1.0, 1.0, 1.0)], ["maximize", "minimize"])


def test_front_matches_the_definition_on_random_values():
    rng = random.Random(7)
    for _ in range(200):
        k = rng.choice([2, 3])
        rows = [tuple(rng.randint(0, 4) for _ in range(k)) for _ in range(rng.randint(1, 25))]
        dirs = [rng.choice(["maximize", "minimize"]) for _ in range(k)]
        assert pareto_front(rows, dirs) == brute_front(rows, dirs)


def test_directions_are_inferred_or_refused():
    assert infer_direction("ndcg@10") == "maximize"
    assert infer_direction("max_passage:ndcg@10") == "maximize"
    assert infer_direction("answer_f1") == infer_direction("status:ANSWERED") == "maximize"
    for cost in ("evidence_tokens", "selected_tokens", "selected_chunks", "candidates"):
        assert infer_direction(cost) == "minimize"
    assert infer_direction("status:REFUSED") is None
    known = ["answer_f1", "status:REFUSED"]
    with pytest.raises(ValueError, match="no direction can be inferred for 'status:REFUSED'"):
        resolve_objectives(["answer_f1", "status:REFUSED"], None, known, "answer_f1")
    assert resolve_objectives(["answer_f1", "status:REFUSED"], ["maximize", "minimize"],
                              known, "answer_f1") == {"answer_f1": "maximize",
                                                      "status:REFUSED": "minimize"}


# -- bad input, refused when the spec loads ----------------------------------------------------

@pytest.mark.parametrize(("search", "message"), [
    ({"strategy": "bayes", "n": 5}, "unknown search strategy 'bayes'; known: grid, random, tpe, "
                                    "cmaes, gp"),
    ({"strategy": "cmaes"}, "needs n"),
    ({"strategy": "gp", "n": 5, "objectives": ["ndcg@10"]}, "at least two distinct"),
    ({"strategy": "tpe", "n": 5, "objectives": ["ndcg@10", "bogus@3"]},
     r"unknown metric\(s\) \['bogus@3'\]"),
    ({"strategy": "tpe", "n": 5, "objectives": ["recall@10", "candidates"]},
     "must include the primary metric 'ndcg@10'"),
    ({"strategy": "cmaes", "n": 5, "objectives": MO}, "'cmaes' optimises one objective"),
    ({"strategy": "tpe", "n": 5, "objectives": MO, "directions": ["maximize"]},
     "one per objective"),
    ({"strategy": "tpe", "n": 5, "directions": ["maximize"]}, "one per objective"),
    ({"strategy": "grid", "objectives": ["ndcg@10", "evidence_tokens"]},
     r"unknown metric\(s\) \['evidence_tokens'\]"),  # a chunk metric: pipeline sweeps only
])
def test_bad_search_refused(sample_spec, search, message):
    with pytest.raises(ValueError, match=message):
        SweepSpec.model_validate({**sample_spec.model_dump(), "search": search})


def test_a_status_objective_needs_a_direction(sample_spec):
    data = sample_spec.model_dump()
    data.update(grid={"selection": {"policy": ["R2_POLICY_V1", "R2_POLICY_V2"]}},
                baseline=None, primary="answer_f1", metrics=["ndcg@10"])
    data["search"] = {"objectives": ["answer_f1", "status:REFUSED"]}
    with pytest.raises(ValueError, match="no direction can be inferred for 'status:REFUSED'"):
        SweepSpec.model_validate(data)
    data["search"]["directions"] = ["maximize", "minimize"]
    assert SweepSpec.model_validate(data).objective_directions() == {
        "answer_f1": "maximize", "status:REFUSED": "minimize"}
    data["search"] = {"objectives": ["answer_f1", "selected_tokens", "evidence_tokens"]}
    assert list(SweepSpec.model_validate(data).objective_directions().values()) == [
        "maximize", "minimize", "minimize"]


@pytest.mark.parametrize("strategy", ["cmaes", "gp"])
def test_numeric_samplers_refuse_a_space_without_numbers(sample_spec, small_spec, strategy):
    words = small_spec(sample_spec, blend=["linear"], w_text=[0.5], normalize=["minmax",
                                                                                "zscore"])
    with pytest.raises(ValueError, match=f"'{strategy}' needs a numeric axis with two or more "
                                         f"values, and the grid varies normalize"):
        searched(words, strategy, 5)
    one = small_spec(sample_spec, rrf_k=[60])  # a grid of one point: nothing varies
    with pytest.raises(ValueError, match="the grid varies nothing"):
        searched(one, strategy, 5)
    with pytest.raises(ValueError, match="needs a search space"):  # no grid axes at all
        searched(small_spec(sample_spec), strategy, 5)
    searched(words, "tpe", 5)  # TPE takes categorical settings


def test_cmaes_needs_two_settings(sample_spec, small_spec):
    one_axis = small_spec(sample_spec, blend=["rrf"], rrf_k=[10, 30, 60])
    with pytest.raises(ValueError, match="'cmaes' needs two or more varying settings"):
        searched(one_axis, "cmaes", 3)
    assert searched(one_axis, "gp", 3).search.strategy == "gp"


def test_a_shipped_tpe_spec_keeps_its_hash_and_study():
    """The new [search] fields, unset, change neither the spec hash (its MLflow parent) nor the
    study key (its study file) of a spec written before them."""
    from pathlib import Path

    from aiblox.sweep import load_spec
    from aiblox.sweep.search import study_key

    spec = load_spec(Path(__file__).resolve().parents[2] / "evals" / "sweeps"
                     / "scifact_fusion_tpe.toml")
    # as written then: its recall@100 and map@100 became @25 when cutoffs above a point's depth
    # (25) were refused (issue 25); not validated, only hashed
    spec = spec.model_copy(update={"metrics": ["ndcg@10", "recall@100", "mrr@10", "map@100"]})
    # both moved once when where the data and the store lie and the description left them, and
    # the metrics were read in canonical order (QA, 2026-11-29; were 9bfe849d..., 367fd722...)
    assert spec.hash == "5b0455cb6605df2140e1d1a9d4d13b6f5b74535fbbf7746368970efa7dde1d96"
    assert study_key(spec, {"dataset_hash": "d"}) == (
        "3510fd0b3796e761f87c196e7e5bf571c7bd1d9d16d121133b083a676887bfff")


def test_objectives_enter_the_hash_only_when_set(sample_spec):
    plain = searched(sample_spec, "tpe", 5)
    data = plain.model_dump(mode="json")
    assert data["search"]["objectives"] is None
    assert SweepSpec.model_validate(data).hash == plain.hash
    multi = searched(sample_spec, "tpe", 5, objectives=MO)
    assert multi.hash != plain.hash
    assert study_path(multi, "c") != study_path(plain, "c")  # another study


# -- CMA-ES and GP: seeded, resumable, trials are grid points -----------------------------------

@pytest.fixture(scope="module", params=["cmaes", "gp"])
def numeric_run(request, tmp_path_factory, sample_spec, sweep_db, sample_dataset):
    cache = tmp_path_factory.mktemp(request.param)
    spec = searched(sample_spec, request.param, 12)
    return spec, run(spec, cache, sweep_db, sample_dataset)


def test_numeric_sampler_same_seed_same_trials(numeric_run, tmp_path, sweep_db, sample_dataset):
    from aiblox.engine.settings import point_config
    from aiblox.sweep.runner import sweep_points

    spec, r = numeric_run
    assert len(r.trials) == 12 and len(set(r.trials)) > 1
    settings, embedder = spec.settings(), r.best.manifest.config["embedder"]
    grid = {point_config(settings, p, embedder, "duckdb")[0] for p in sweep_points(spec)[0]}
    assert len(grid) == 24 and set(r.trials) <= grid  # every trial an ordinary grid point
    again = run(spec, tmp_path / "again", sweep_db, sample_dataset)  # fresh cache and study
    assert signature(again) == signature(r)
    other = run(searched(spec, spec.search.strategy, 6, seed=5), tmp_path / "other", sweep_db,
                sample_dataset)
    assert other.trials != r.trials[:6]


def test_numeric_sampler_resumes(numeric_run, tmp_path, sweep_db, sample_dataset):
    spec, r = numeric_run
    first = run(searched(spec, spec.search.strategy, 5), tmp_path, sweep_db, sample_dataset)
    assert first.trials == r.trials[:5]
    seen = []

    def kill_after_two(point):
        seen.append(point.config_hash)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # killed during the continuation
        run(searched(spec, spec.search.strategy, 9), tmp_path, sweep_db, sample_dataset,
            on_point=kill_after_two)
    resumed = run(spec, tmp_path, sweep_db, sample_dataset)
    assert signature(resumed) == signature(r)


# -- quality against cost ----------------------------------------------------------------------

def test_grid_front_is_the_front_of_every_point(sample_spec, tmp_path, sweep_db, sample_dataset):
    spec = searched(sample_spec, "grid", None, objectives=MO)
    r = run(spec, tmp_path, sweep_db, sample_dataset)
    assert r.objectives == {"ndcg@10": "maximize", "candidates": "minimize"}
    assert len(r.points) == 24  # the baseline (RRF k 60, depth 20) is a grid point
    values = [(p.metrics["train"]["ndcg@10"], sum(p.depth)) for p in r.points]
    expected = {r.points[i].config_hash for i in brute_front(values, list(r.objectives.values()))}
    # on the sample the best point is also among the cheapest (depth 10): a front of 1 or more
    assert set(r.pareto) == expected and len(r.pareto) >= 1
    assert r.best.config_hash == r.pareto[0]
    top = max(p.metrics["train"]["ndcg@10"] for p in r.points)
    assert r.best.metrics["train"]["ndcg@10"] == top  # the front's best by primary: the best
    ndcg = [next(p for p in r.points if p.config_hash == h).metrics["train"]["ndcg@10"]
            for h in r.pareto]
    assert ndcg == sorted(ndcg, reverse=True)  # best first by the primary metric
    plain = run(sample_spec, tmp_path, sweep_db, sample_dataset)
    assert plain.pareto == [] and plain.objectives == {} and plain.computed == {}


def test_candidates_count_the_lists_a_point_retrieves(sample_spec, tmp_path, sweep_db,
                                                     sample_dataset):
    """``candidates`` once added the vector depth to every point: a BM25-only or dense-only
    point cost as much as a hybrid one, and the front leaned against fusion. It counts the
    lists a point fetches: one for bm25 or dense, two for bm25 + dense and for bm25 >> rm3 >>
    bm25 (retrieval twice); a stage's own top_k is its depth."""
    from aiblox.engine.settings import candidate_depth

    data = sample_spec.model_dump()
    data["grid"] = {"depth": [10, 20]}
    data.pop("baseline", None)
    data["pipeline"] = ["bm25", "dense", "bm25 + dense", "bm25 >> rm3 >> bm25",
                        "bm15 + dense"]  # a bm25 held at 15 while depth varies the others
    data["stages"] = {"bm15": {"kind": "bm25", "top_k": 15}}
    data["search"] = {"strategy": "grid", "objectives": MO}
    r = run(SweepSpec.model_validate(data), tmp_path, sweep_db, sample_dataset)
    got = sorted((p.label.split(" @ ")[0], p.depth[0], p.candidates) for p in r.points)
    assert got == sorted([("bm25", 10, 10), ("bm25", 20, 20), ("dense", 10, 10),
                          ("dense", 20, 20), ("bm25 + dense", 10, 20), ("bm25 + dense", 20, 40),
                          ("bm25 >> rm3 >> bm25", 10, 20), ("bm25 >> rm3 >> bm25", 20, 40),
                          ("bm15[bm25](top_k=15) + dense", 10, 25),
                          ("bm15[bm25](top_k=15) + dense", 20, 35)])
    values = [(p.metrics["train"]["ndcg@10"], p.candidates) for p in r.points]
    assert set(r.pareto) == {r.points[i].config_hash
                             for i in brute_front(values, list(r.objectives.values()))}
    hybrid = {"prefs": {"mode": "hybrid", "fts": {"top_k": 30}, "vector": {"top_k": 50}}}
    assert candidate_depth(hybrid) == 80
    assert candidate_depth({"prefs": {**hybrid["prefs"], "mode": "dense"}}) == 50


def test_multi_objective_tpe(sample_spec, tmp_path, sweep_db, sample_dataset):
    import optuna

    spec = searched(sample_spec, "tpe", 10, objectives=MO)
    r = run(spec, tmp_path / "a", sweep_db, sample_dataset)
    assert len(r.trials) == 10 and r.pareto
    tried = [p for p in r.points if p.config_hash in set(r.trials)]
    assert [p.config_hash for p in pareto_points(tried, "train", r.objectives, "ndcg@10")] \
        == r.pareto
    assert r.best.config_hash == r.pareto[0]
    (db,) = (tmp_path / "a" / "studies").iterdir()
    (summary,) = optuna.get_all_study_summaries(f"sqlite:///{db}")
    study = optuna.load_study(study_name=summary.study_name, storage=f"sqlite:///{db}")
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    by_hash = {p.config_hash: p for p in r.points}
    assert [t.values for t in study.trials] == [
        [by_hash[h].metrics["train"]["ndcg@10"], float(sum(by_hash[h].depth))]
        for h in r.trials]
    again = run(spec, tmp_path / "b", sweep_db, sample_dataset)
    assert signature(again) == signature(r)
    part = run(searched(spec, "tpe", 4, objectives=MO), tmp_path / "c", sweep_db,
               sample_dataset)
    assert part.trials == r.trials[:4]
    assert signature(run(spec, tmp_path / "c", sweep_db, sample_dataset)) == signature(r)


def test_report_shows_the_front(sample_spec, small_spec, tmp_path, sweep_db, sample_dataset,
                                mlflow_uri):
    pytest.importorskip("matplotlib")
    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep import load_sweep_report, write_report

    spec = small_spec(sample_spec, blend=["linear", "rrf"], w_text=[0.25, 0.75],
                      normalize=["minmax"], rrf_k=[60], depth=[10, 20],
                      baseline={"blend": "rrf", "rrf_k": 10})
    spec = SweepSpec.model_validate({**spec.model_dump(), "name": "pareto_report",
                                     "search": {"objectives": MO}})
    tr = SweepTracker(mlflow_uri, "pareto-report", spec.hash, spec.model_dump(mode="json"))
    r = run(spec, tmp_path / "stages", sweep_db, sample_dataset, tracker=tr)
    rep = load_sweep_report(r.tracking["parent_run_id"], mlflow_uri)
    assert rep.pareto["front"] == r.pareto
    assert rep.pareto["objectives"] == [["ndcg@10", "maximize"], ["candidates", "minimize"]]
    assert [p["config_hash"] for p in rep.pareto["points"]] == [p.config_hash for p in r.points]
    # verify SWEEP chooses the best again from the front of the points' logged values
    from aiblox.sweep.verify_summary import verify_summary

    checks = {c.where: c for c in verify_summary(r.tracking["parent_run_id"], mlflow_uri)}
    assert all(c.identical for c in checks.values()), checks
    assert checks["sweep/best"].actual == r.best.config_hash
    assert {f"sweep/pareto.points[{i}] (summary)" for i in range(len(r.points))} \
        | {"sweep/pareto.front (summary)", "sweep/pareto.objectives (summary)"} <= set(checks)
    out = tmp_path / "rep"
    write_report(r.tracking["parent_run_id"], mlflow_uri, out, log_artifacts=False)
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert html.count('<img alt="ndcg@10 against candidates"') == 1
    section = md.split("## Pareto front")[1].split("\n## ")[0]
    head = next(line for line in section.splitlines() if line.startswith("| #"))
    assert head.split(" | ")[3:] == ["train ndcg@10 (max)", "train candidates (min)",
                                     "test ndcg@10 (max)", "test candidates (min) |"]
    rows = [line for line in section.splitlines() if line.startswith("| ") and
            not line.startswith("| #")]
    assert [row.split(" | ")[2] for row in rows] == [h[:16] for h in r.pareto]
    by_hash = {p.config_hash: p for p in r.points}
    for row, h in zip(rows, r.pareto, strict=True):  # each value under its own column
        p = by_hash[h]
        assert row.split(" | ")[3:] == [
            f"{p.metrics['train']['ndcg@10']:.4f}", str(sum(p.depth)),
            f"{p.metrics['test']['ndcg@10']:.4f}", f"{sum(p.depth)} |"]


def test_cli_prints_the_front(tmp_path, sweep_db):
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from aiblox.cli.main import app

    src = Path(__file__).resolve().parents[2] / "evals" / "sweeps" / "sample_fusion.toml"
    spec = tmp_path / "front.toml"
    spec.write_text(src.read_text() + '\n[search]\nobjectives = ["ndcg@10", "candidates"]\n')
    args = ["sweep", str(spec), "--db", sweep_db, "--cache-dir", str(tmp_path / "stages"),
            "--no-tracking"]
    runner = CliRunner()
    r = runner.invoke(app, args, env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "Pareto front on train: ndcg@10 (max), candidates (min)" in r.output
    assert "(chosen)" in r.output
    out = json.loads(runner.invoke(app, [*args, "--json"],
                                   env={"AIBLOX_NO_PROGRESS": "1"}).stdout)
    assert out["objectives"] == [["ndcg@10", "maximize"], ["candidates", "minimize"]]
    assert out["pareto"][0] == out["best"]["config_hash"]
    bad = tmp_path / "bad.toml"
    bad.write_text(src.read_text() + '\n[search]\nstrategy = "gp"\nn = 4\n'
                   'objectives = ["ndcg@10", "latency"]\n')
    r = runner.invoke(app, ["sweep", str(bad), "--no-tracking"],
                      env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code != 0 and "unknown metric(s) ['latency']" in r.output
    assert "Traceback" not in r.output
