"""``aiblox eval --run``: a run file scored under the modes' protocol, refused at once when its
score is past a run score's range, never written over through a hard link, and exported as it
was logged; a failed eval leaves nothing it made behind (QA, 2026-11-29, s8). A tiny BEIR
collection whose query ids are document ids (as ArguAna's), BM25 only."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.data import load_dataset
from aiblox.data.trec import RunFileError, read_trec_run
from aiblox.experiment.table import system_from_run
from tests.stages.dense_fixtures import write_beir

runner = CliRunner()
DOCS = {
    "a1": "cats purr and sleep all day in the sun",
    "a2": "dogs bark at cats in the yard",
    "a3": "cats and dogs sleep together in the sun",
    "a4": "the stock market fell today on rate fears",
    "a5": "markets rally as stock prices rise",
    "a6": "sleeping cats dream of fish and sun",
    "a7": "rate fears drive the bond market",
}
QUERIES = {"a1": "cats purr sleep sun", "a4": "stock market rate fears"}
QRELS = [("a1", "a3"), ("a1", "a6"), ("a4", "a5"), ("a4", "a7")]


def _run(*args):
    return runner.invoke(app, [str(a) for a in args], env={"AIBLOX_NO_PROGRESS": "1"})


@pytest.fixture(scope="module")
def own(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The collection's folder, its store, and the BM25 run ``--save-runs`` wrote (without
    ``--ignore-identical-ids``: each query's own document in it)."""
    tmp = tmp_path_factory.mktemp("own_ids")
    root = write_beir(tmp / "own", DOCS, QUERIES, QRELS)
    db, runs = tmp / "own.duckdb", tmp / "runs"
    r = _run("eval", root, "--db", db, "--embedder", "hashing", "--mode", "bm25",
             "--save-runs", runs)
    assert r.exit_code == 0, r.output
    return root, db, runs / "bm25.trec"


def _eval(own, *more):
    root, db, _ = own
    return _run("eval", root, "--db", db, "--embedder", "hashing", *more)


def test_ignore_identical_ids_holds_for_run_files(own):
    """The mode scored without the query's own document and its run file with it, in one
    table: the same run under two protocols, silently (0.4782 and 0.4832 on adi)."""
    run = read_trec_run(own[2])
    assert all(q in [d for d, _ in run[q]] for q in QUERIES)  # the file holds them
    r = _eval(own, "--mode", "bm25", "--run", own[2], "--ignore-identical-ids",
              "--metric", "mrr@5", "--metric", "ndcg@5", "--format", "json")
    assert r.exit_code == 0, r.output
    mode, saved = json.loads(r.stdout)["systems"]
    # BM25 lists every matching document: the mode's list one deeper is the file's, less one
    assert saved["metrics"] == mode["metrics"] and saved["metrics"]["mrr@5"] == 1.0
    assert saved["hashes"]["run"] == mode["hashes"]["run"]  # dropped before the run hash
    ds = load_dataset(own[0])
    kept = system_from_run(ds, "test", run, "kept", ["mrr@5"])
    dropped = system_from_run(ds, "test", run, "dropped", ["mrr@5"], ignore_identical_ids=True)
    assert kept.metrics["mrr@5"] < 1.0 == dropped.metrics["mrr@5"]
    assert all(q not in [d for d, _ in dropped.run[q]] for q in QUERIES)
    assert all(len(dropped.run[q]) == len(run[q]) - 1 for q in QUERIES)


def test_an_output_that_is_a_hard_link_of_an_input_is_refused(own, tmp_path):
    """The guard compared resolved paths only: ``--per-query`` through a hard link of a qrels
    file overwrote the dataset's qrels, ``--save-runs`` one of a ``--run`` file the run."""
    data = tmp_path / "ds"
    shutil.copytree(own[0], data)
    qrels = data / "qrels" / "test.tsv"
    before = qrels.read_bytes()
    link = tmp_path / "pq.csv"
    os.link(qrels, link)
    r = _run("eval", data, "--db", own[1], "--embedder", "hashing", "--run", own[2],
             "--per-query", link)
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and f"--per-query: {link} is {qrels} (the same file, a hard link), " \
        f"inside the folder of the dataset" in said, r.output
    assert qrels.read_bytes() == before
    mine = tmp_path / "mine" / "bm25.trec"
    mine.parent.mkdir()
    shutil.copy(own[2], mine)
    saved = tmp_path / "saved"
    saved.mkdir()
    os.link(mine, saved / "bm25.trec")
    run_bytes = mine.read_bytes()
    r = _eval(own, "--run", mine, "--save-runs", saved)
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and f"--save-runs: {saved / 'bm25.trec'} is a --run file ({mine}: " \
        f"the same file, a hard link)" in said, r.output
    assert mine.read_bytes() == run_bytes
    os.link(mine, tmp_path / "again.trec")  # one file given twice, under two names
    r = _eval(own, "--run", mine, "--run", tmp_path / "again.trec")
    assert r.exit_code == 2 and "given twice" in r.output, r.output


def test_a_score_past_single_precision_is_refused_when_the_file_is_read(own, tmp_path):
    """``1e39`` was read, then failed after the coverage warnings with no file or line,
    leaving an empty --save-runs folder behind."""
    over = tmp_path / "over.trec"
    over.write_text("a1 Q0 a3 1 1e39 x\na1 Q0 a6 2 1 x\n")
    with pytest.raises(RunFileError, match=re.escape(
            f"--run {over}:1: score '1e39' is past the largest run score 3.4028235e+38")):
        read_trec_run(over)
    low = tmp_path / "low.trec"
    low.write_text("a1 Q0 a3 1 1 x\na1 Q0 a6 2 -3.5e38 x\n")
    with pytest.raises(RunFileError, match="low.trec:2: score '-3.5e38' is past the lowest"):
        read_trec_run(low)
    edge = tmp_path / "edge.trec"  # rounds to the largest 32-bit float: a score
    edge.write_text("a1 Q0 a3 1 3.40282356e38 x\n")
    assert read_trec_run(edge)["a1"] == [("a3", 3.40282356e38)]
    out = tmp_path / "deep" / "runs"
    r = _eval(own, "--run", over, "--save-runs", out)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith(
        f"error: --run {over}:1: score '1e39'"), r.output
    assert not (tmp_path / "deep").exists()


def test_a_failed_eval_leaves_no_folder_or_tracking_store_it_made(own, tmp_path):
    """A run refused after the outputs were made (none of its queries judged) left the
    --save-runs and --per-query folders and a new MLflow database behind."""
    other = tmp_path / "other.trec"
    other.write_text("zz1 Q0 a1 1 2.0 x\n")
    uri = f"sqlite:///{tmp_path / 'ml' / 'x' / 'mlflow.db'}"
    r = _eval(own, "--run", other, "--save-runs", tmp_path / "sr" / "deep", "--per-query",
              tmp_path / "pq" / "a" / "pq.csv", "--mlflow", "--tracking-uri", uri)
    assert r.exit_code == 2 and "none of its 1 query ids is a judged query" in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.trec"]
    kept = tmp_path / "kept"  # a folder there before is kept, and what a success wrote
    kept.mkdir()
    ok = _eval(own, "--run", own[2], "--mlflow", "--tracking-uri", uri)
    assert ok.exit_code == 0, ok.output
    r = _eval(own, "--run", other, "--save-runs", kept, "--mlflow", "--tracking-uri", uri)
    assert r.exit_code == 2 and kept.is_dir() and (tmp_path / "ml" / "x" / "mlflow.db").is_file()


def test_runs_export_writes_a_scored_run_file_as_it_was_logged(own, tmp_path):
    """``aiblox runs export`` refused a run ``aiblox eval --run X --mlflow`` logged ("has no
    manifest.json artifact"), though it logged its TREC file."""
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    r = _eval(own, "--run", own[2], "--mlflow", "--tracking-uri", uri)
    assert r.exit_code == 0, r.output
    rid = re.search(r"mlflow: bm25 logged as run (\w+)", r.stderr).group(1)
    logged = next((tmp_path / "ml").rglob("run.test.trec"))
    r = _run("runs", "export", rid, "--trec", tmp_path / "out", "--tracking-uri", uri)
    assert r.exit_code == 0, r.output
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["bm25.test.trec"]
    assert (tmp_path / "out" / "bm25.test.trec").read_bytes() == logged.read_bytes()
    r = _run("runs", "export", rid, "--trec", tmp_path / "none", "--split", "dev",
             "--tracking-uri", uri)
    assert r.exit_code == 2 and f"run {rid} is a scored run file" in r.output and \
        "none of split 'dev' (its splits: test)" in " ".join(r.output.split()), r.output
    assert not (tmp_path / "none").exists()
