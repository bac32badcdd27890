"""Issue 25: every metric is computed over a run at least as deep as its cutoff, and the options
that set a run (depths, weights, chunk sizes) are checked before any work, each fault one
``error:`` line naming the option as typed, the value and the valid values. Real datasets (the
sample, cranfield), real DuckDB files, the real command group."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from tests.conftest import SAMPLE, shared_dataset

runner = CliRunner()


def _run(*args: object):
    return runner.invoke(app, [str(a) for a in args],
                         env={"AIBLOX_NO_PROGRESS": "1", "AIBLOX_DEBUG": ""})


def _one_error(result) -> str:
    """The single ``error:`` line of a refused command: exit 2, no traceback, nothing else."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def _systems(result) -> dict[str, dict]:
    assert result.exit_code == 0, result.output
    return {s["name"]: s for s in json.loads(result.stdout)["systems"]}


# ------------------------------------------------------- the evaluation depth follows the cutoffs
@pytest.fixture(scope="module")
def cranfield_db(tmp_path_factory):
    """A DuckDB file for cranfield (1,400 documents), synced by the first BM25 eval."""
    return tmp_path_factory.mktemp("cranfield") / "c.duckdb"


def _cranfield(db: Path, *more: object):
    return _run("eval", shared_dataset("cranfield"), "--db", db, "--mode", "bm25", "--json",
                *more)


def test_a_cutoff_above_the_default_depth_is_retrieved_to(cranfield_db):
    # before: both read the same 100-deep run (recall@1000 == recall@100, silently)
    deep = _systems(_cranfield(cranfield_db, "--metric", "recall@100",
                               "--metric", "recall@1000"))["bm25"]
    prefs = deep["config"]["prefs"]
    assert prefs["top_k_items"] == prefs["fts"]["top_k"] == 1000
    assert deep["metrics"]["recall@1000"] > deep["metrics"]["recall@100"] + 0.05
    # exactly what the explicit depths give: same run, same numbers
    explicit = _systems(_cranfield(cranfield_db, "--metric", "recall@100", "--metric",
                                   "recall@1000", "--top-k", "1000", "--depth", "1000"))["bm25"]
    assert explicit["hashes"]["run"] == deep["hashes"]["run"]
    assert explicit["metrics"] == deep["metrics"]
    # the default metrics keep the default depth (100): the run and its hash as before
    plain = _systems(_cranfield(cranfield_db))["bm25"]
    assert plain["config"]["prefs"]["top_k_items"] == plain["config"]["prefs"]["fts"][
        "top_k"] == 100


def test_a_metric_without_a_cutoff_reads_a_1000_deep_run(cranfield_db):
    whole = _systems(_cranfield(cranfield_db, "--metric", "map", "--metric", "ndcg@10"))["bm25"]
    assert whole["config"]["prefs"]["top_k_items"] == 1000
    assert whole["config"]["prefs"]["fts"]["top_k"] == 1000
    at_1000 = _systems(_cranfield(cranfield_db, "--metric", "map@1000"))["bm25"]
    assert whole["metrics"]["map"] == pytest.approx(at_1000["metrics"]["map@1000"], abs=1e-12)
    # set explicitly, the depth is the user's: map over a 100-deep run
    shallow = _systems(_cranfield(cranfield_db, "--metric", "map", "--top-k", "100",
                                  "--depth", "100"))["bm25"]
    assert shallow["config"]["prefs"]["top_k_items"] == 100
    assert shallow["metrics"]["map"] < whole["metrics"]["map"]


def test_a_metric_without_a_cutoff_over_runs_of_different_depths_is_warned_about(cranfield_db):
    """``map`` of a 1,000-deep run beside ``map`` of ``bm25 % 100`` in one table: the second is
    lower for its depth alone (recall 0.95 against 0.74 on cranfield). One warning line names
    the depths and the cutoff to use; with cutoffs, or runs of one depth, none (QA 18)."""
    args = ["--pipeline", "c100=bm25 % 100"]
    r = _cranfield(cranfield_db, *args, "--metric", "map", "--metric", "recall")
    systems = _systems(r)
    assert systems["bm25"]["metrics"]["recall"] > systems["c100"]["metrics"]["recall"] + 0.1
    warned = [ln for ln in r.output.splitlines() if ln.startswith("warning:")]
    assert warned == [
        "warning: map, recall read each run whole, and these runs are not equally deep "
        "(documents per query, at most: bm25 1,000, c100 100): a run cut shallower "
        "scores lower for its depth alone; name a cutoff (map@100, recall@100) to compare "
        "like with like"]
    for more in (["--metric", "map@100", "--metric", "recall@100"],  # like with like
                 ["--metric", "map", "--top-k", "100", "--depth", "100"]):  # one depth
        quiet = _cranfield(cranfield_db, *(args if "map@100" in more else []), *more)
        assert quiet.exit_code == 0, quiet.output
        assert not [ln for ln in quiet.output.splitlines() if ln.startswith("warning:")]


# -------------------------------------------------- refused before any work, naming the option
E_RANGE = "out of range; valid: a whole number >= 1"
EVAL_CASES = [
    (["--top-k", "0"], f"error: --top-k 0: {E_RANGE}"),
    (["--depth", "0"], f"error: --depth 0: {E_RANGE}"),
    (["--depth", "-5"], f"error: --depth -5: {E_RANGE}"),
    (["--w-text", "nan"], "error: --w-text nan: not a finite number; valid: a finite number >= 0"),
    (["--w-vec", "inf"], "error: --w-vec inf: not a finite number; valid: a finite number >= 0"),
    (["--w-text", "-0.5"], "error: --w-text -0.5: out of range; valid: a finite number >= 0"),
    (["--rrf-k", "-1"], "error: --rrf-k -1: out of range; valid: a whole number >= 0"),
    (["--blend", "linear", "--w-text", "0", "--w-vec", "0"],
     "error: linear fusion's weights sum to 0 (--w-text 0, --w-vec 0): every document would "
     "score 0 and come back in id order; give --w-text or --w-vec a positive weight"),
    (["--top-k", "50"],
     "error: recall@100, map@100 read 100 documents per query, but --top-k 50 cuts the run at "
     "50: they would be computed over 50 documents under the name @100; give --top-k 100 or "
     "more, or leave it out (the evaluation then retrieves as deep as its deepest cutoff), or "
     "use cutoffs of at most 50"),
    (["--mode", "bm25", "--depth", "50", "--metric", "ndcg@10", "--metric", "recall@100"],
     "error: recall@100 reads 100 documents per query, but --depth 50 cuts the run at 50"),
    (["--metric", "recall@1000", "--depth", "500"],
     "error: recall@1000 reads 1000 documents per query, but --depth 500 retrieves at most 500 "
     "candidates per list (a hybrid run is as deep as its deeper list)"),
    (["--metric", "recall@1000", "--top-k", "1000", "--depth", "100", "--mode", "dense"],
     "error: recall@1000 reads 1000 documents per query, but --depth 100 cuts the run at 100"),
    (["--chunks", "--chunk-items", "0"], f"error: --chunk-items 0: {E_RANGE}"),
    (["--chunks", "--per-item-chunk-cap", "0"], f"error: --per-item-chunk-cap 0: {E_RANGE}"),
    (["--chunks", "--top-k-chunks", "-1"],
     "error: --top-k-chunks -1: out of range; valid: a whole number >= 0"),
    (["--chunks", "--max-chunk-tokens", "0"],
     "error: --max-chunk-tokens 0: out of range; valid: a whole number >= 1, or none"),
    (["--chunks", "--max-chunk-tokens", "10", "--overlap-tokens", "20"],
     "error: sentences: --overlap-tokens (20) must be smaller than --max-chunk-tokens (10)"),
    (["--chunks", "--chunk-limit", "0"], f"error: --chunk-limit 0: {E_RANGE}"),
    # out of range: the one error line, without the warning that no fusion reads it
    (["--pipeline", "bm25", "--top-k", "-1"], f"error: --top-k -1: {E_RANGE} (at most"),
    # what only a sweep spec's [finetune_reranker] trains: refused before the index is built
    (["--pipeline", 'bm25 >> cross_encoder(model="finetune")'],
     "error: --pipeline bm25 >> cross_encoder(model=\"finetune\"): stage cross_encoder: "
     "model = 'finetune' is the model a sweep spec's [finetune_reranker] trains, and one "
     "evaluation trains none"),
    # without --chunks too: a bad value is refused, never silently unused
    (["--chunk-strategy", "foo"], "error: --chunk-strategy foo: Input should be 'late'"),
    (["--max-chunk-tokens", "10", "--overlap-tokens", "20"],
     "error: sentences: --overlap-tokens (20) must be smaller than --max-chunk-tokens (10)"),
]


@pytest.mark.parametrize(("args", "line"), EVAL_CASES, ids=[" ".join(a) for a, _ in EVAL_CASES])
def test_eval_options_are_refused_before_any_work(tmp_path, args, line):
    db = tmp_path / "never.duckdb"
    result = _run("eval", SAMPLE, "--embedder", "hashing", "--db", db, *args)
    err = _one_error(result)
    assert err.startswith(line), err
    assert "warning:" not in result.output, result.output  # the error alone
    assert "fts.top_k" not in err and "scoring." not in err and "top_k_items" not in err
    assert not db.exists() and not (tmp_path / ".aiblox").exists()  # no store made or synced


def test_search_and_answer_options_name_the_option(tmp_path):
    db = tmp_path / "never.duckdb"
    for args, line in [
        (["search", "bm25", "--db", db, "--top-k", "0"],
         f"error: --top-k 0: {E_RANGE} (at most 2147483647)"),
        (["search", "bm25", "--db", db, "-k", "-2"],
         f"error: --top-k -2: {E_RANGE} (at most 2147483647)"),
        (["search", "bm25", "--db", db, "-k", "99999999999999999999"],
         f"error: --top-k 99999999999999999999: {E_RANGE} (at most 2147483647)"),
        (["answer", "What is BM25?", "--db", db, "--top-k-chunks", "0"],
         f"error: --top-k-chunks 0: {E_RANGE} (at most 2147483647)")]:  # 0: a refusal
        assert _one_error(_run(*args)) == line  # before the store is looked for
    assert not db.exists()


def test_a_sweep_spec_with_a_depth_below_a_cutoff_is_one_line(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text((SAMPLE.parents[1] / "evals" / "sweeps" / "sample_fusion.toml").read_text()
                    .replace("depth = [10, 20]", "depth = [5, 20]"))
    err = _one_error(_run("sweep", spec, "--cache-dir", tmp_path / "stages",
                          "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"))
    line = next(n for n, text in enumerate(spec.read_text().splitlines(), 1)
                if text.startswith("depth = [5, 20]"))  # where the key is written
    assert err == (f"error: {spec}:{line}: field 'grid.depth': ndcg@10, recall@10, mrr@10 read 10 "
                   f"documents per query, but grid.depth = 5 retrieves at most 5 candidates per "
                   f"list (a hybrid run is as deep as its deeper list): they would be computed "
                   f"over 5 documents under the name @10; drop the values below 10 from "
                   f"grid.depth, or use cutoffs of at most 5")
    assert not (tmp_path / "stages").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_sweep_of_depths_scored_without_a_cutoff_is_warned_about(tmp_path):
    """A depth axis scored by ``map``: the board compares points that differ by depth alone,
    said once when the spec loads (QA 18); with cutoffs (the shipped spec) nothing."""
    from aiblox.sweep import load_spec

    shipped = (SAMPLE.parents[1] / "evals" / "sweeps" / "sample_fusion.toml").read_text()
    spec = tmp_path / "spec.toml"
    spec.write_text(shipped.replace('metrics = ["ndcg@10", "recall@10", "mrr@10"]',
                                    'metrics = ["ndcg@10", "map"]')
                    .replace("top_k_items = 10", "top_k_items = 20"))
    with pytest.warns(UserWarning) as caught:
        load_spec(spec)
    assert [str(w.message) for w in caught] == [
        "map reads each run whole, and the grid's points are cut at 10, 20 documents per "
        "query: a shallower point scores lower for its depth alone; name a cutoff (map@10) "
        "to compare like with like"]
    spec.write_text(shipped)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_spec(spec)


# ---------------------------------------------------------------------- queries with no text
def test_a_query_with_empty_text_is_warned_about_and_scores_0(tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(SAMPLE, ds)
    lines = (ds / "queries.jsonl").read_text().splitlines()
    judged = {ln.split("\t")[0] for ln in (ds / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    blank = [json.loads(ln)["_id"] for ln in lines if json.loads(ln)["_id"] in judged][:2]
    out = []
    for ln in lines:
        q = json.loads(ln)
        if q["_id"] in blank:
            q["text"] = "" if q["_id"] == blank[0] else "  \t "
        out.append(json.dumps(q))
    (ds / "queries.jsonl").write_text("\n".join(out) + "\n")
    runs, per_query = tmp_path / "runs", tmp_path / "pq.csv"
    r = _run("eval", ds, "--embedder", "hashing", "--db", tmp_path / "s.duckdb", "--mode",
             "hybrid", "--mode", "bm25", "--save-runs", runs, "--per-query", per_query,
             "--json")
    assert r.exit_code == 0, r.output
    warned = [ln for ln in r.stderr.splitlines() if "empty text" in ln]
    assert warned == [f"warning: {ds / 'queries.jsonl'}: 2 judged queries have empty text "
                      f"({', '.join(sorted(blank))}): kept, they retrieve nothing and score 0 "
                      f"in every metric (as trec_eval scores a judged query with no run lines)"]
    import pandas as pd

    values = pd.read_csv(per_query, dtype={"query_id": str})
    mine = values[values["query_id"].isin(blank)]
    assert len(mine) == 2 * 2 * 4 and (mine["value"] == 0).all()  # 2 systems x 4 metrics
    others = values[~values["query_id"].isin(blank)]
    assert others["value"].gt(0).any()
    for name in ("hybrid", "bm25"):  # nothing retrieved: no run lines (not the empty string's
        qids = {ln.split()[0] for ln in (runs / f"{name}.trec").read_text().splitlines()}
        assert not qids & set(blank) and qids  # vector neighbours)
    n = {s["name"]: s["n_queries"] for s in json.loads(r.stdout)["systems"]}
    assert n["hybrid"] == n["bm25"] == len(judged)  # kept in every mean


def test_an_empty_derived_split_part_scores_0_in_every_mode(tmp_path):
    """A part of a derived split holding no judged query is a warning and every metric 0, in
    hybrid mode too: the batch fusion of no query crashed the compiled sort (``error: out of
    memory``)."""
    r = _run("eval", SAMPLE, "--embedder", "hashing", "--db", tmp_path / "s.duckdb",
             "--split", "test:0/50", "--mode", "hybrid", "--mode", "bm25", "--metric",
             "ndcg@10", "--json")
    assert r.exit_code == 0, r.output
    assert "holds no judged query" in r.stderr
    systems = json.loads(r.stdout)["systems"]
    assert [s["metrics"]["ndcg@10"] for s in systems] == [0.0, 0.0]
