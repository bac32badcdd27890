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


def _log_metrics(uri: str, label: str, per_query: dict[str, dict[str, float]]) -> str:
    """A run whose metrics have values for different queries, each logged as its mean."""
    log = PointLog(kind="run", label=label,
                   metrics={"test": {m: sum(v.values()) / len(v) for m, v in per_query.items()}},
                   per_query={"test": per_query})
    return log_runs(uri, "compare-partial", [log])[0]


@pytest.fixture(scope="module")
def partial(mlflow_uri):
    """ndcg@10 on q1-q4 in every run; citation_precision (no value for a query answered
    without citations) on q1-q3 in A, on q2, q3 in B and C; D has q3-q6, citation_precision on
    q3 alone."""
    def cited(values: dict[str, float], qids: str) -> dict[str, dict[str, float]]:
        return {"ndcg@10": values, "citation_precision": {f"q{i}": 0.5 for i in qids}}

    a = cited(A, "123")
    a["citation_precision"]["q1"] = 0.2  # A's logged mean (0.4) is not its mean over q2, q3
    runs = {"a": a, "b": cited(A, "23"), "c": cited(A, "23"), "d": cited(B, "3")}
    return {name: _log_metrics(mlflow_uri, name, pq) for name, pq in runs.items()}


def test_a_metric_scored_on_fewer_queries_says_how_many(partial, mlflow_uri):
    """QA: citation_precision paired on the queries both runs cited in (A 3, B 2, 2 shared)
    under a title of 4 queries, with no line saying so, and A's column not A's logged mean;
    --json had no per-metric count."""
    js = json.loads(_cli(mlflow_uri, partial["a"], partial["b"], "--json").stdout)
    rows = {m["metric"]: m for m in js["metrics"]}
    cp, nd = rows["citation_precision"], rows["ndcg@10"]
    assert (cp["n"], cp["n_a"], cp["n_b"]) == (2, 3, 2)
    assert (nd["n"], nd["n_a"], nd["n_b"]) == (4, 4, 4)
    assert cp["a"] == cp["b"] == 0.5 and (cp["wins"], cp["ties"], cp["losses"]) == (0, 2, 0)
    assert (js["n_queries"], js["queries_a"], js["queries_b"], js["queries_shared"]) == \
        (4, 4, 4, 4)
    r = _cli(mlflow_uri, partial["a"], partial["b"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert "on test, 4 queries," in text and "query sets differ" not in text
    assert ("citation_precision has values for fewer queries: A 3, B 2, 2 shared; its A, B, "
            "delta, test and win/tie/loss are over the 2 shared (A's logged mean is over its "
            "3)") in text
    assert "ndcg@10 has values" not in text
    # alike in both runs, yet fewer than the title's: said, with no logged mean to correct
    text = " ".join(_cli(mlflow_uri, partial["b"], partial["c"]).stdout.split())
    assert ("citation_precision has values for fewer queries: A 2, B 2, 2 shared; its A, B, "
            "delta, test and win/tie/loss are over the 2 shared ") in text
    assert "logged mean" not in text
    # query sets that differ, and a metric within them that has fewer still
    text = " ".join(_cli(mlflow_uri, partial["a"], partial["d"]).stdout.split())
    assert ("query sets differ: A has 4 queries on test, B has 4, 2 shared; every number "
            "below is over the 2 shared, but for the metrics named next") in text
    assert ("citation_precision has values for fewer queries: A 3, B 1, 1 shared; its A, B, "
            "delta, test and win/tie/loss are over the 1 shared (A's logged mean is over its "
            "3)") in text


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
    # one run file, scored on both (no config: a kind=run run each)
    run = root / "mine.trec"
    run.write_text("".join(f"q{q:02d} Q0 d{d:02d} {d} {1 / d} mine\n" for q in range(1, 13)
                           for d in (1, 2, 3)))
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
        r = runner.invoke(app, ["eval", str(folder), "--run", str(run), "--split", "test",
                                "--mlflow", "--tracking-uri", mlflow_uri, "--experiment",
                                "two-datasets"], env={"AIBLOX_NO_PROGRESS": "1"})
        assert r.exit_code == 0, r.output
        ids[f"{name} file"] = re.search(r"^mlflow: mine logged as run (\w+)", r.stderr,
                                        re.MULTILINE)[1]
        ids["file run hash"] = re.search(r"^mine: run ([0-9a-f]{16}) ", r.stdout,
                                         re.MULTILINE)[1]
    from aiblox.data import load_dataset

    hashes = {n: load_dataset(root / n, splits=["test"]).hash[:16] for n in ("alpha", "beta")}
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


def test_one_run_file_scored_on_two_datasets_is_named_by_dataset(two_datasets, mlflow_uri):
    """QA: a run file scored on two datasets is two runs with one run hash and no config hash;
    its prefix was refused as ambiguous listing ``mine (, run ...)`` twice, and
    --across-datasets named each dataset by a bare hash (such a run logged no name)."""
    from mlflow.tracking import MlflowClient

    ids, hashes = two_datasets
    client = MlflowClient(tracking_uri=mlflow_uri)
    sha = client.get_run(ids["alpha file"]).data.params["run_file_sha256"][:16]
    r = _cli(mlflow_uri, ids["alpha"], ids["file run hash"])
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.output.strip().splitlines()
    assert line.startswith(f"error: '{ids['file run hash']}' is ambiguous: 2 points match its "
                           f"run-hash prefix: ")
    for name in ("alpha", "beta"):
        assert (f"mine (file {sha}, dataset {name} {hashes[name]}, run {ids[f'{name} file']})"
                in line), line
    asked = _cli(mlflow_uri, ids["alpha file"], ids["beta file"], "--across-datasets")
    assert asked.exit_code == 0, asked.output
    assert (f"different datasets: A was scored on alpha ({hashes['alpha']}), B on beta "
            f"({hashes['beta']})") in asked.stdout
    from aiblox.engine.tracking import read_dataset_name

    for name in ("alpha", "beta"):  # the name is logged, not only read from experiment.json
        run = client.get_run(ids[f"{name} file"])
        assert run.data.tags["aiblox.kind"] == "run" and run.data.params["dataset"] == name
        assert read_dataset_name(client, run) == name


def test_a_run_file_logged_without_its_dataset_name_is_named_from_its_table(mlflow_uri):
    """A run file ``aiblox eval --mlflow`` scored before it logged the ``dataset`` param: the
    name is its ``experiment.json``'s."""
    table = json.dumps({"dataset": "gamma", "systems": []}).encode()
    logs = [PointLog(kind="run", label="old", metrics={"test": {"ndcg@10": 0.5}},
                     per_query={"test": {"ndcg@10": A}}, dataset_hash=h * 64,
                     files={"experiment.json": table} if h == "5" else {}) for h in "56"]
    old, bare = log_runs(mlflow_uri, "old-run-files", logs)
    asked = _cli(mlflow_uri, old, bare, "--across-datasets")
    assert asked.exit_code == 0, asked.output
    assert f"A was scored on gamma ({'5' * 16}), B on {'6' * 16};" in asked.stdout


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
