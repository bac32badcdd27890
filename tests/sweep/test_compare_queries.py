"""``aiblox compare`` on hand-made runs (per-query values worked out by hand) logged by the one
writer into the session's tmp store: on runs scored on different query sets, means, deltas,
the test and win/tie/loss all over the shared queries, a line saying the sets differ, and a
one-line refusal when no query is shared; and the headline metric of runs that record no
primary (``aiblox eval --mlflow`` runs logged before ``aiblox.primary``), whatever the
argument order."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mlflow")

from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402
from aiblox.engine.tracking import PointLog, log_runs  # noqa: E402

runner = CliRunner()
# the same system on q1-q4 (A) and on q3-q6 (B): equal on the shared q3, q4; the logged means
# (0.5 and 0.8) differ only because the query sets do
A = {"q1": 0.2, "q2": 0.4, "q3": 0.6, "q4": 0.8}
B = {"q3": 0.6, "q4": 0.8, "q5": 0.9, "q6": 0.9}
C = {"q7": 0.5, "q8": 0.7}  # another dataset: no query in common


def _log(uri: str, label: str, values: dict[str, float],
         metrics: tuple[str, ...] = ("ndcg@10",), tags: dict[str, str] | None = None,
         params: dict[str, str] | None = None) -> str:
    mean = sum(values.values()) / len(values)
    log = PointLog(kind="run", label=label, metrics={"test": dict.fromkeys(metrics, mean)},
                   per_query={"test": dict.fromkeys(metrics, values)}, tags=tags or {},
                   params=params or {})
    return log_runs(uri, "compare-queries", [log])[0]


@pytest.fixture(scope="module")
def runs(mlflow_uri):
    return {name: _log(mlflow_uri, name, v) for name, v in (("a", A), ("b", B), ("c", C))}


def _cli(uri: str, *args: str):
    return runner.invoke(app, ["compare", *args, "--tracking-uri", uri],
                         env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "120"})


def test_means_and_delta_are_over_the_shared_queries(runs, mlflow_uri):
    r = _cli(mlflow_uri, runs["a"], runs["b"], "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    (m,) = out["metrics"]
    # (0.6 + 0.8) / 2 for both, not the logged 0.5 and 0.8 (a delta of +0.3 beside 0/2/0)
    assert m["a"] == pytest.approx(0.7) and m["b"] == pytest.approx(0.7)
    assert m["delta"] == 0.0 and (m["wins"], m["ties"], m["losses"]) == (0, 2, 0)
    assert m["p_value"] == 1.0
    assert (out["n_queries"], out["queries_a"], out["queries_b"]) == (2, 4, 4)


def test_differing_query_sets_are_named_in_one_line(runs, mlflow_uri):
    r = _cli(mlflow_uri, runs["a"], runs["b"])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stdout.splitlines() if "query sets differ" in ln]
    assert lines == ["query sets differ: A has 4 queries on test, B has 4, 2 shared; every "
                     "number below is over the 2 shared"]
    same = _cli(mlflow_uri, runs["a"], runs["a"])
    assert same.exit_code == 0 and "query sets differ" not in same.stdout


def test_no_shared_query_is_refused_in_one_line(runs, mlflow_uri):
    for args in ((runs["a"], runs["c"]), (runs["a"], runs["c"], "--json")):
        r = _cli(mlflow_uri, *args)
        assert r.exit_code == 2, r.output
        assert r.stdout == ""  # no table, no JSON
        (line,) = r.output.strip().splitlines()
        assert line == (f"error: runs {runs['a']} and {runs['c']} share no query on test (A "
                        f"has 4, B has 2): nothing to pair; were they scored on different "
                        f"datasets?")


EVAL_METRICS = ("ndcg@10", "recall@100", "mrr@10", "map@100")  # aiblox eval's, in its order


@pytest.fixture(scope="module")
def primaries(mlflow_uri):
    """Two runs that record no primary, one tagged with its eval's first metric, and a sweep
    point whose sweep's primary is mrr@10."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    exp = client.get_experiment_by_name("compare-queries").experiment_id
    sweep = client.create_run(exp, tags={"aiblox.kind": "sweep"}).info.run_id
    client.log_param(sweep, "spec.primary", "mrr@10")
    client.set_terminated(sweep)
    return {"x": _log(mlflow_uri, "x", A, EVAL_METRICS),
            "y": _log(mlflow_uri, "y", A, EVAL_METRICS),
            "tagged": _log(mlflow_uri, "tagged", A, EVAL_METRICS,
                           {"aiblox.primary": "recall@100"}),
            "point": _log(mlflow_uri, "point", A, EVAL_METRICS,
                          {"mlflow.parentRunId": sweep})}


def _primary(uri: str, a: str, b: str) -> str:
    r = _cli(uri, a, b, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["primary"]


def test_without_a_recorded_primary_the_headline_is_ndcg_at_10(runs, primaries, mlflow_uri):
    # not map@100, the alphabetically first metric
    assert _primary(mlflow_uri, primaries["x"], primaries["y"]) == "ndcg@10"


@pytest.mark.parametrize(("run", "expected"), [("point", "mrr@10"), ("tagged", "recall@100")])
def test_one_run_s_primary_is_the_headline_in_either_order(runs, primaries, mlflow_uri, run,
                                                          expected):
    assert _primary(mlflow_uri, primaries[run], primaries["x"]) == expected
    assert _primary(mlflow_uri, primaries["x"], primaries[run]) == expected


def test_runs_on_different_datasets_are_refused_unless_asked(mlflow_uri):
    """Numbered query ids (cranfield's, medline's "1", "2", ...) overlap across datasets: runs
    whose dataset hashes differ are refused in one line, not paired by id into a 'significant'
    difference; --across-datasets pairs them and says so."""
    one = _log(mlflow_uri, "ds1", A, tags={"aiblox.dataset_hash": "1" * 64})
    two = _log(mlflow_uri, "ds2", {q: v + 0.1 for q, v in A.items()},
               tags={"aiblox.dataset_hash": "2" * 64})
    same = _log(mlflow_uri, "ds1 again", A, tags={"aiblox.dataset_hash": "1" * 64})
    r = _cli(mlflow_uri, one, two)
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.output.strip().splitlines()
    assert line.startswith(f"error: runs {one} and {two} were scored on different datasets "
                           f"(A on {'1' * 16}, B on {'2' * 16}")
    assert "--across-datasets" in line
    asked = _cli(mlflow_uri, one, two, "--across-datasets")
    assert asked.exit_code == 0, asked.output
    assert (f"different datasets: A was scored on {'1' * 16}, B on {'2' * 16}; their queries "
            f"are paired by id (--across-datasets)") in asked.stdout
    assert "other splits loaded" not in line  # nameless: nothing to say about splits
    # one dataset's name, two hashes: perhaps the same files with other splits loaded (eval's
    # hash covers its split's judgements, a sweep's its tune and report splits': QA 21)
    named = [_log(mlflow_uri, f"named {h}", A, tags={"aiblox.dataset_hash": h * 64},
                  params={"dataset": "sample"}) for h in "34"]
    (line,) = _cli(mlflow_uri, *named).output.strip().splitlines()
    assert "or the same files with other splits loaded: a dataset's hash covers the " \
           "judgements of the splits it loaded" in line
    js = json.loads(_cli(mlflow_uri, one, two, "--across-datasets", "--json").stdout)
    assert js["datasets"] == ["1" * 64, "2" * 64] and js["n_queries"] == 4
    ok = _cli(mlflow_uri, one, same, "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["datasets"] == []


@pytest.fixture(scope="module")
def two_datasets(tmp_path_factory, mlflow_uri):
    """``aiblox eval --mlflow`` of the sample (folder ``alpha``) and of a copy with one grade
    revised (``beta``): the same query ids, the same rankings, other judgments."""
    import re
    import shutil

    from tests.conftest import SAMPLE

    root = tmp_path_factory.mktemp("two-datasets")
    ids = {}
    for name in ("alpha", "beta"):
        folder = root / name
        shutil.copytree(SAMPLE, folder)
        if name == "beta":
            q = folder / "qrels" / "test.tsv"
            q.write_text(q.read_text().replace("q01\td01\t2\n", "q01\td01\t1\n", 1))
        r = runner.invoke(app, ["eval", str(folder), "--mode", "bm25", "--embedder",
                                "hashing", "--db", str(root / f"{name}.duckdb"),
                                "--split", "test", "--mlflow", "--tracking-uri", mlflow_uri,
                                "--experiment", "two-datasets"],
                          env={"AIBLOX_NO_PROGRESS": "1"})
        assert r.exit_code == 0, r.output
        ids[name] = re.search(r"^mlflow: bm25 logged as run (\w+)", r.stderr, re.MULTILINE)[1]
    from aiblox.data import load_dataset

    hashes = {n: load_dataset(root / n, splits=["test"]).hash[:16] for n in ids}
    assert hashes["alpha"] != hashes["beta"]
    return ids, hashes


def test_eval_runs_on_two_datasets_are_refused_naming_both(two_datasets, mlflow_uri):
    """The refusal and the --across-datasets line name each dataset (its manifest's name) and
    its hash, so the one that differs is plain."""
    ids, hashes = two_datasets
    r = _cli(mlflow_uri, ids["alpha"], ids["beta"])
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.output.strip().splitlines()
    assert line.startswith(f"error: runs {ids['alpha']} and {ids['beta']} were scored on "
                           f"different datasets (A on alpha ({hashes['alpha']}), B on beta "
                           f"({hashes['beta']}), ")
    asked = _cli(mlflow_uri, ids["alpha"], ids["beta"], "--across-datasets")
    assert asked.exit_code == 0, asked.output
    assert (f"different datasets: A was scored on alpha ({hashes['alpha']}), B on beta "
            f"({hashes['beta']}); their queries are paired by id (--across-datasets)"
            ) in asked.stdout
    js = json.loads(_cli(mlflow_uri, ids["alpha"], ids["beta"], "--across-datasets",
                         "--json").stdout)
    assert js["dataset_names"] == ["alpha", "beta"]


def test_notebook_comparison_refuses_runs_on_two_datasets(two_datasets, mlflow_uri):
    """The notebooks' compare_mlflow_runs pairs as aiblox compare does: the refusal is raised,
    not passed over as a split with nothing to compare (an empty per-query frame beside the
    logged means' deltas); across_datasets pairs them."""
    from aiblox.explore import compare_mlflow_runs
    from aiblox.sweep.compare import DatasetMismatch

    ids, hashes = two_datasets
    with pytest.raises(DatasetMismatch, match=rf"A on alpha \({hashes['alpha']}\), B on beta"):
        compare_mlflow_runs(ids["alpha"], ids["beta"], mlflow_uri)
    _, per_query = compare_mlflow_runs(ids["alpha"], ids["beta"], mlflow_uri,
                                       across_datasets=True)
    assert "test:ndcg@10" in set(per_query["metric"])


def _log_splits(uri: str, label: str, splits: dict[str, dict[str, float]]) -> str:
    log = PointLog(kind="run", label=label,
                   metrics={s: {"ndcg@10": sum(v.values()) / len(v)} for s, v in splits.items()},
                   per_query={s: {"ndcg@10": v} for s, v in splits.items()})
    return log_runs(uri, "compare-splits", [log])[0]


def test_without_split_the_one_split_both_logged_is_compared(mlflow_uri):
    """`--split` defaulted to test: two points of a sweep tuned on test:0/2 (squad_selection)
    could not be compared without knowing to type it (QA 27)."""
    a = _log_splits(mlflow_uri, "a", {"test:0/2": A, "test:1/2": B})
    b = _log_splits(mlflow_uri, "b", {"test:0/2": {q: v + 0.1 for q, v in A.items()}})
    r = _cli(mlflow_uri, a, b, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["split"] == "test:0/2" and out["metrics"][0]["delta"] == pytest.approx(0.1)
    assert "(A) on test:0/2," in " ".join(_cli(mlflow_uri, a, b).stdout.split())
    # a split one of them lacks: one line naming what each logged
    r = _cli(mlflow_uri, a, b, "--split", "test:1/2")
    (line,) = r.output.strip().splitlines()
    assert r.exit_code != 0 and line == (
        f"error: split 'test:1/2': not logged with per-query values by both runs (A and B "
        f"logged: A ({a}) test:0/2, test:1/2; B ({b}) test:0/2); --split names one both have")
    # several shared and no test among them: which one is asked, not guessed
    c = _log_splits(mlflow_uri, "c", {"train": A, "dev": B})
    d = _log_splits(mlflow_uri, "d", {"train": A, "dev": B})
    r = _cli(mlflow_uri, c, d)
    assert r.exit_code != 0 and "which split? the runs share dev, train" in r.output
    both = {"test": A, "train": B}
    r = _cli(mlflow_uri, _log_splits(mlflow_uri, "e", both), _log_splits(mlflow_uri, "f", both),
             "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["split"] == "test"
