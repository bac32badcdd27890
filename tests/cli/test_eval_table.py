"""``aiblox eval`` as an experiment table: modes and external TREC runs in one table, paired
tests against a baseline with a correction, every output format, per-query values, saved runs
and MLflow runs that ``aiblox eval verify`` re-checks. The sample dataset, the hashing embedder
and real DuckDB files throughout."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy.stats import ttest_rel, wilcoxon
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.experiment.table import read_trec_run, trec_run_text
from aiblox.metrics import adjust
from tests.conftest import REPO

runner = CliRunner()
MODES = ["--mode", "bm25", "--mode", "dense", "--mode", "hybrid"]


def _run(*args: str):
    return runner.invoke(app, [str(a) for a in args], env={"AIBLOX_NO_PROGRESS": "1"})


def _ok(*args: str):
    r = _run(*args)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("table") / "sample.duckdb")
    _ok("ingest", "sample", "--db", path, "--embedder", "hashing")
    return path


def _eval(db: str, *more: str):
    return _ok("eval", "sample", "--db", db, "--embedder", "hashing", *more)


def _json(db: str, *more: str) -> dict:
    return json.loads(_eval(db, *more, "--format", "json").stdout)


def test_saved_runs_read_back_score_as_the_modes(db, tmp_path):
    runs = tmp_path / "runs"
    modes = _json(db, *MODES, "--save-runs", runs, "--per-query", tmp_path / "pq.parquet")
    pq = pd.read_parquet(tmp_path / "pq.parquet")
    means = pq.groupby(["system", "metric"], sort=False)["value"].mean()
    for s in modes["systems"]:  # the per-query values average to the table's means
        for m, v in s["metrics"].items():
            assert means[(s["name"], m)] == pytest.approx(v, abs=1e-12)
    assert sorted(p.name for p in runs.iterdir()) == ["bm25.trec", "dense.trec", "hybrid.trec"]
    first = {p.name: p.read_bytes() for p in runs.iterdir()}
    line = first["bm25.trec"].decode().splitlines()[0].split()
    assert len(line) == 6 and line[1] == "Q0" and line[3] == "1" and line[5] == "bm25"

    files = [runs / "bm25.trec", runs / "dense.trec", runs / "hybrid.trec"]
    again = tmp_path / "again"
    external = _json(db, *(a for f in files for a in ("--run", f)), "--save-runs", again)
    assert [s["name"] for s in external["systems"]] == ["bm25", "dense", "hybrid"]
    for m, e in zip(modes["systems"], external["systems"], strict=True):
        assert e["kind"] == "run" and m["kind"] == "mode"
        assert e["metrics"] == m["metrics"]  # the same ranking, the same numbers
        assert e["hashes"]["run"] == m["hashes"]["run"]  # ids, scores and order read back exactly
    # deterministic bytes: the runs read back and written again are the same files
    assert {p.name: p.read_bytes() for p in again.iterdir()} == first
    _json(db, *MODES, "--save-runs", runs)  # a second evaluation writes the same bytes
    assert {p.name: p.read_bytes() for p in runs.iterdir()} == first

    # a run file beside a mode of the same stem is labelled by its file name
    both = _json(db, "--mode", "bm25", "--run", runs / "bm25.trec", "--baseline", "bm25")
    assert [s["name"] for s in both["systems"]] == ["bm25", "bm25.trec"]
    sig = both["systems"][1]["significance"]["ndcg@10"]
    assert sig["delta"] == 0.0 and sig["p"] == 1.0 and sig["significant"] is False
    assert sig["ties"] == 12

    # two run files of one stem in different folders: labelled by the folders that differ
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "bm25.trec").write_bytes(first["bm25.trec"])
    two = _json(db, "--run", tmp_path / "a" / "bm25.trec", "--run", runs / "bm25.trec",
                "--baseline", "a/bm25")
    assert [s["name"] for s in two["systems"]] == ["a/bm25", "runs/bm25"]
    assert two["systems"][0]["metrics"] == two["systems"][1]["metrics"]


def test_json_has_one_shape_for_one_system_or_three(db):
    one = _json(db, "--mode", "bm25")
    three = _json(db, *MODES, "--baseline", "bm25")
    assert set(one) == set(three) == {"dataset", "split", "test", "correction", "alpha",
                                      "baseline", "pairwise", "metrics", "systems"}
    assert len(one["systems"]) == 1 and len(three["systems"]) == 3
    keys = set(one["systems"][0])
    assert all(set(s) == keys for s in three["systems"])
    assert {"name", "kind", "metrics", "hashes", "significance", "pairwise", "chunks"} <= keys
    assert one["pairwise"] is False and three["systems"][1]["pairwise"] == {}
    assert (one["test"], one["correction"], one["baseline"]) == ("t", "holm", None)
    assert one["systems"][0]["significance"] == {}
    assert three["baseline"] == "bm25" and three["systems"][0]["significance"] == {}
    assert one["systems"][0]["metrics"] == three["systems"][0]["metrics"]

    def untimed(data: dict) -> dict:
        for s in data["systems"]:
            assert set(s.pop("timings")) == {"retrieve_s", "score_s", "qps"}
        return data

    legacy = json.loads(_eval(db, "--mode", "bm25", "--json").stdout)
    assert untimed(legacy) == untimed(one)  # --json is --format json


def test_significance_matches_scipy_with_holm_and_bonferroni(db, tmp_path):
    pq = tmp_path / "pq.csv"
    holm = _json(db, *MODES, "--baseline", "bm25", "--per-query", pq)
    frame = pd.read_csv(pq, dtype={"query_id": str})
    assert list(frame.columns) == ["system", "query_id", "metric", "value"]
    assert len(frame) == 3 * 4 * 12  # systems x metrics x queries, long form
    assert frame["system"].unique().tolist() == ["bm25", "dense", "hybrid"]

    def values(system: str, metric: str) -> list[float]:
        rows = frame[(frame.system == system) & (frame.metric == metric)]
        return rows.sort_values("query_id")["value"].tolist()

    by_name = {s["name"]: s for s in holm["systems"]}
    base = values("bm25", "ndcg@10")
    raw = [float(ttest_rel(values(n, "ndcg@10"), base).pvalue) for n in ("dense", "hybrid")]
    ours = [by_name[n]["significance"]["ndcg@10"] for n in ("dense", "hybrid")]
    assert [s["p"] for s in ours] == pytest.approx(raw, rel=1e-9)
    lo, hi = sorted(raw)  # Holm by hand: 2 p and 1 p, made monotone
    expected = {lo: min(1.0, 2 * lo), hi: max(min(1.0, 2 * lo), min(1.0, hi))}
    assert [s["p_adjusted"] for s in ours] == pytest.approx([expected[p] for p in raw])
    for s in holm["systems"][1:]:
        for sig in s["significance"].values():
            assert sig["p_adjusted"] >= sig["p"]
            assert sig["significant"] == (sig["p_adjusted"] <= 0.05)
            assert sig["wins"] + sig["ties"] + sig["losses"] == 12
    assert by_name["dense"]["significance"]["ndcg@10"]["significant"] is True  # 0.47 vs 0.70

    bonf = _json(db, *MODES, "--baseline", "bm25", "--correction", "bonferroni")
    none = _json(db, *MODES, "--baseline", "bm25", "--correction", "none")
    for b, n in zip(bonf["systems"][1:], none["systems"][1:], strict=True):
        for m, sig in b["significance"].items():
            assert sig["p"] == n["significance"][m]["p"] == n["significance"][m]["p_adjusted"]
            assert sig["p_adjusted"] == min(1.0, 2 * sig["p"])

    wil = _json(db, "--mode", "bm25", "--mode", "dense", "--baseline", "bm25", "--test",
                "wilcoxon")
    assert wil["test"] == "wilcoxon"
    expect = float(wilcoxon(values("dense", "ndcg@10"), base).pvalue)
    assert wil["systems"][1]["significance"]["ndcg@10"]["p"] == pytest.approx(expect, rel=1e-9)
    fisher = _json(db, "--mode", "bm25", "--mode", "dense", "--baseline", "bm25", "--test",
                   "fisher")
    p = fisher["systems"][1]["significance"]["ndcg@10"]
    assert 0.0 < p["p"] <= 1.0 and p["p"] == p["p_adjusted"]  # one system: no correction


def test_markdown_latex_csv_name_the_test_and_mark_direction_delta_and_p(db):
    md = _eval(db, "--mode", "bm25", "--mode", "dense", "--baseline", "bm25", "--format",
               "markdown").stdout
    data = _json(db, "--mode", "bm25", "--mode", "dense", "--baseline", "bm25")
    sig = data["systems"][1]["significance"]
    rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| system | ndcg@10 | recall@100 | mrr@10 | map@100 |"
    assert rows[1] == "| bm25 (baseline) | 0.7014 | 1.0000 | 0.7343 | 0.6729 |"
    dense = rows[2].split(" | ")
    # ndcg@10 of dense: significantly below bm25: the value, the signed delta marked ▼ (the
    # way it differs) and the adjusted p, at one precision
    assert sig["ndcg@10"]["significant"] and sig["ndcg@10"]["delta"] < 0
    assert dense[1] == (f"0.4688 ({sig['ndcg@10']['delta']:+.4f}▼, "
                        f"p={sig['ndcg@10']['p_adjusted']:.4f})")
    assert dense[2] == "1.0000 (+0.0000, p=1.0000)"  # recall@100: both 1.0, nothing to mark
    for m, cell in zip(data["metrics"], dense[1:], strict=True):  # marked iff significant
        assert ("▼" in cell) == sig[m]["significant"] and "▲" not in cell
    assert not all(sig[m]["significant"] for m in data["metrics"])
    assert ("(delta, p): the difference from baseline bm25's mean and its adjusted p; ▲/▼ "
            "significantly higher/lower (adjusted p <= 0.05; paired t-test, Holm correction "
            "across the 1 system compared per metric)") in md
    assert "†" not in md and "*" not in md.replace("**", "")

    tex = _eval(db, "--mode", "bm25", "--mode", "dense", "--baseline", "bm25", "--test",
                "wilcoxon", "--correction", "bonferroni", "--format", "latex").stdout
    assert tex.startswith("\\begin{table}") and tex.rstrip().endswith("\\end{table}")
    assert "Wilcoxon signed-rank test, Bonferroni correction" in tex
    assert "bm25 (baseline) & 0.7014 & " in tex and "\\begin{tabular}{lrrrr}" in tex
    dense_tex = next(ln for ln in tex.splitlines() if ln.startswith("dense & "))
    assert "0.4688 {\\scriptsize (-0.2325$\\bigtriangledown$, $p$=" in dense_tex
    assert "$\\bigtriangleup$/$\\bigtriangledown$ significantly higher/lower" in tex

    text = _eval(db, "--mode", "bm25", "--mode", "hybrid", "--baseline", "hybrid", "--format",
                 "csv").stdout
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == 2 * 4
    assert {(r["test"], r["correction"], r["baseline"]) for r in table} == {
        ("t", "holm", "hybrid")}
    bm25 = [r for r in table if r["system"] == "bm25"]
    assert all(float(r["p_adjusted"]) >= float(r["p"]) for r in bm25)
    assert all(r["mark"] == ("" if r["significant"] == "false" else
                             "▲" if float(r["delta"]) > 0 else "▼") for r in bm25)
    assert all(r["p"] == r["mark"] == "" for r in table if r["system"] == "hybrid")

    plain = _eval(db, "--mode", "bm25", "--format", "markdown").stdout
    assert "no significance tests: no baseline given (test: paired t-test, Holm correction)" \
        in plain


def test_pairwise_tests_every_pair_as_ranx_compare(db, tmp_path):
    pq = tmp_path / "pq.csv"
    data = _json(db, *MODES, "--pairwise", "--per-query", pq)
    frame = pd.read_csv(pq, dtype={"query_id": str})

    def values(system: str) -> list[float]:
        rows = frame[(frame.system == system) & (frame.metric == "ndcg@10")]
        return rows.sort_values("query_id")["value"].tolist()

    assert data["pairwise"] is True and data["baseline"] is None
    by_name = {s["name"]: s for s in data["systems"]}
    pairs = [("bm25", "dense"), ("bm25", "hybrid"), ("dense", "hybrid")]
    raw = [float(ttest_rel(values(b), values(a)).pvalue) for a, b in pairs]
    got = [by_name[b]["pairwise"][a]["ndcg@10"] for a, b in pairs]
    assert [g["p"] for g in got] == pytest.approx(raw, rel=1e-9)
    assert [g["p_adjusted"] for g in got] == pytest.approx(adjust(raw, "holm"))  # 3 pairs
    for a, b in pairs:  # both ways round: the delta and the wins turn over
        ab, ba = by_name[b]["pairwise"][a]["ndcg@10"], by_name[a]["pairwise"][b]["ndcg@10"]
        assert ab["delta"] == -ba["delta"] and ab["p_adjusted"] == ba["p_adjusted"]
        assert (ab["wins"], ab["losses"]) == (ba["losses"], ba["wins"])
        assert by_name[a]["significance"] == {}
    md = _eval(db, *MODES, "--pairwise", "--format", "markdown").stdout
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ") for ln in md.splitlines()
            if ln.startswith("| (")}
    assert set(rows) == {"(a) bm25", "(b) dense", "(c) hybrid"}
    dense = by_name["dense"]["pairwise"]
    assert dense["bm25"]["ndcg@10"]["significant"] and dense["bm25"]["ndcg@10"]["delta"] < 0
    assert rows["(b) dense"][1].startswith("0.4688 ▼a")  # below bm25 (a), significantly
    assert rows["(a) bm25"][1].startswith("0.7014 ▲b")
    assert "| ndcg@10 | (c) hybrid | (b) dense | +0.1488" in md  # every pair listed once
    assert ("▲x/▼x: significantly higher/lower than system x with adjusted p <= 0.05 (paired "
            "t-test, Holm correction across the 3 pairs of systems per metric)") in md
    both = _run("eval", "sample", "--db", db, "--embedder", "hashing", *MODES, "--pairwise",
                "--baseline", "bm25")
    assert both.exit_code == 2 and "--baseline bm25 and --pairwise" in both.output


def test_eval_says_what_syncing_changed_as_ingest_does(tmp_path):
    """An edited dataset is synced before it is scored: eval says what changed in the words
    of `aiblox ingest` (issue 29: it printed `ingest: 29/29 doc`), and nothing when in sync."""
    ds, store = tmp_path / "mine", str(tmp_path / "mine.duckdb")
    shutil.copytree(REPO / "datasets" / "sample", ds)
    first = _ok("eval", ds, "--db", store, "--embedder", "hashing", "--mode", "bm25")
    n = len((ds / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
    assert (f"synced mine into {store}: {n} new, 0 updated, 0 deleted, 0 unchanged; 0 vectors "
            f"written (0 embedded, 0 from cache)") in first.stderr
    judged = {ln.split("\t")[1] for f in (ds / "qrels").iterdir()
              for ln in f.read_text(encoding="utf-8").splitlines()[1:]}
    docs = [json.loads(ln) for ln in (ds / "corpus.jsonl").read_text().splitlines()]
    gone = next(d["_id"] for d in reversed(docs) if d["_id"] not in judged)
    docs = [d for d in docs if d["_id"] != gone]
    docs[0]["text"] += " One more sentence."
    (ds / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    again = _ok("eval", ds, "--db", store, "--embedder", "hashing", "--mode", "bm25")
    said = [ln for ln in again.stderr.splitlines() if ln.startswith("synced ")]
    assert said == [f"synced mine into {store}: 0 new, 1 updated, 1 deleted, {n - 2} "
                    f"unchanged; 0 vectors written (0 embedded, 0 from cache)"]
    ingest = _ok("ingest", ds, "--db", store, "--embedder", "hashing")
    assert f"{n - 1} unchanged" in ingest.stdout  # the same words; nothing left to do
    third = _ok("eval", ds, "--db", store, "--embedder", "hashing", "--mode", "bm25")
    assert "synced " not in third.stderr  # in sync: nothing said


def test_table_redirected_to_a_file_holds_the_table(db, tmp_path):
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "PYTHONPATH": str(REPO)}
    out_txt = tmp_path / "out.txt"
    metrics = ["ndcg@10", "ndcg@5", "recall@100", "recall@10", "mrr@10", "map@100",
               "precision@5", "precision@10"]
    wide = " ".join(f"--metric {m}" for m in metrics)
    with out_txt.open("w") as fh:
        proc = subprocess.run(f"{sys.executable} -m aiblox.cli.main eval sample --db {db} "
                              f"--embedder hashing --mode bm25 --mode hybrid --baseline bm25 "
                              f"{wide} > {out_txt}", shell=True, cwd=REPO, env=env, stdout=fh,
                              stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    text = out_txt.read_text(encoding="utf-8")
    assert "sample / test (12 queries)" in text and "bm25 (baseline)" in text
    assert "paired t-test, Holm correction" in text
    assert "┃ system" not in proc.stderr and "Holm" not in proc.stderr
    assert any(ln.startswith("hybrid: run ") for ln in text.splitlines())
    # a file is not folded to 80 columns: every header and value whole, one line per system
    header = next(ln for ln in text.splitlines() if "system" in ln)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == ["system", *metrics, "q/s"]
    row = next(ln for ln in text.splitlines() if "bm25 (baseline)" in ln)
    assert "…" not in text and len(row.split("│")) == len(metrics) + 4


def test_bad_input_is_one_error_line_before_any_work(tmp_path):
    db = tmp_path / "never.duckdb"
    bad = tmp_path / "bad.trec"
    bad.write_text("q01 Q0 d01 1 2.5 x\nq01 Q0 d02 2 1.0\n")
    nan = tmp_path / "nan.trec"
    nan.write_text("q01 Q0 d01 1 nan x\n")
    rank = tmp_path / "rank.trec"
    rank.write_text("q01 Q0 d01 first 2.0 x\n")
    other = tmp_path / "other.trec"
    other.write_text("zz1 Q0 d01 1 2.0 x\n")
    cases = [
        (["--run", bad], f"--run {bad}:2: expected 6 columns 'qid Q0 docid rank score tag', "
                         f"got 5"),
        (["--run", nan], f"--run {nan}:1: score 'nan' is not a finite number"),
        (["--run", rank], f"--run {rank}:1: rank 'first' is not an integer"),
        (["--run", tmp_path / "none.trec"], f"--run {tmp_path / 'none.trec'}: cannot read it"),
        (["--mode", "bm25", "--baseline", "dense"],
         "--baseline 'dense' is not a system; choose one of bm25"),
        (["--mode", "bm25", "--test", "z"], "--test 'z': not one of t, wilcoxon, fisher"),
        (["--mode", "bm25", "--correction", "fdr"],
         "--correction 'fdr': not one of holm, bonferroni, none"),
        (["--mode", "bm25", "--format", "html"],
         "--format 'html': not one of table, markdown, latex, csv, json"),
        (["--mode", "sparse"], "--mode 'sparse': not one of hybrid, bm25, dense"),
        (["--mode", "bm25", "--per-query", tmp_path / "pq.txt"], "suffix picks the format"),
        (["--mode", "bm25", "--mode", "bm25"], "two systems are labelled 'bm25'"),
        # one file twice was one system, silently relabelled
        (["--run", other, "--run", other], f"--run {other}: given twice"),
    ]
    for args, message in cases:
        r = _run("eval", "sample", "--db", db, "--embedder", "hashing", *args)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1, (args, r.output)
        assert lines[0].startswith("error: ") and message in lines[0], (args, lines)
        assert r.stdout == ""
    assert not db.exists()  # refused before the store was opened
    r = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--run", other)
    assert r.exit_code == 2
    assert (f"--run {other}: none of its 1 query ids is a judged query of sample/test "
            f"(e.g. 'zz1')") in r.stderr


def test_read_trec_run_orders_as_trec_eval(tmp_path):
    f = tmp_path / "r.trec"
    f.write_text("q2 Q0 a 1 1.5 t\n\nq1 Q0 b 2 0.5 t\nq1 Q0 c 1 2.0 t\nq1 Q0 d 3 0.5 t\n"
                 "q1 Q0 e 1 0.5 t\n")
    with pytest.warns(UserWarning, match="the rank column orders 1 query otherwise"):
        run = read_trec_run(f)
    assert list(run) == ["q1", "q2"]
    # ties by document id descending, as trec_eval (the rank column is ignored)
    assert run["q1"] == [("c", 2.0), ("e", 0.5), ("d", 0.5), ("b", 0.5)]
    lines = trec_run_text(run, "x").splitlines()
    assert lines[:2] == ["q1 Q0 c 1 2.0 x", "q1 Q0 e 2 0.5 x"]  # ties written decreasing
    assert [float(ln.split()[4]) for ln in lines[1:4]] == [0.5, 0.49999997, 0.49999994]
    assert adjust([0.01, 0.04, 0.03], "holm") == pytest.approx([0.03, 0.06, 0.06])
    assert adjust([0.01, 0.04, 0.5], "bonferroni") == pytest.approx([0.03, 0.12, 1.0])
    assert adjust([0.01, 0.04], "none") == [0.01, 0.04]


def test_mlflow_logs_each_system_and_verify_rechecks_a_mode(db, tmp_path):
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    runs = tmp_path / "runs"
    _eval(db, "--mode", "bm25", "--save-runs", runs)
    r = _eval(db, "--mode", "hybrid", "--run", runs / "bm25.trec", "--baseline", "bm25",
              "--mlflow", "--tracking-uri", uri, "--format", "json")
    table = json.loads(r.stdout)
    ids = dict(re.findall(r"^mlflow: (\S+) logged as run (\w+)", r.stderr, re.MULTILINE))
    assert set(ids) == {"hybrid", "bm25"}

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    hybrid = client.get_run(ids["hybrid"])
    assert hybrid.data.tags["aiblox.kind"] == "point"
    assert hybrid.data.tags["aiblox.config_hash"] == table["systems"][0]["hashes"]["config"]
    # the first metric computed: aiblox compare's headline
    assert hybrid.data.tags["aiblox.primary"] == table["metrics"][0] == "ndcg@10"
    assert hybrid.data.metrics["test.ndcg_at_10"] == table["systems"][0]["metrics"]["ndcg@10"]
    sig = table["systems"][0]["significance"]["ndcg@10"]
    assert hybrid.data.metrics["test.ndcg_at_10.p_adjusted"] == sig["p_adjusted"]
    external = client.get_run(ids["bm25"])
    assert external.data.tags["aiblox.kind"] == "run"
    assert external.data.tags["aiblox.baseline"] == "true"
    assert external.data.params["run_file_sha256"] == table["systems"][1]["hashes"]["file"]
    assert external.data.metrics["test.ndcg_at_10"] == table["systems"][1]["metrics"]["ndcg@10"]
    names = {a.path for a in client.list_artifacts(ids["hybrid"])}
    assert names == {"manifest.json", "run.test.trec", "per_query.test.parquet",
                     "experiment.json"}
    manifest = client.download_artifacts(ids["hybrid"], "manifest.json", str(tmp_path))
    assert json.loads(Path(manifest).read_text())["device"] == "cpu"  # where it embedded
    local = client.download_artifacts(ids["hybrid"], "per_query.test.parquet", str(tmp_path))
    pq = pd.read_parquet(local)
    assert len(pq) == 4 * 12 and list(pq.columns) == ["query_id", "metric", "value"]

    v = _run("eval", "verify", ids["hybrid"], "--tracking-uri", uri, "--db", db, "--json")
    assert v.exit_code == 0, v.output
    report = json.loads(v.stdout)
    assert report["identical"] is True and report["config_hash"] == hybrid.data.tags[
        "aiblox.config_hash"]
    assert any(c["where"] == "test/ndcg@10 (mlflow)" for c in report["checks"])


def test_mlflow_logs_a_pipeline_from_its_one_scoring_and_verify_rechecks_it(db, tmp_path):
    """A --pipeline is logged by the sweep's writer from the result of its one scoring (its
    stage records as its manifest), only the params that apply to it, and verify re-executes
    it to the same bytes."""
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    r = _eval(db, "--mode", "bm25", "--pipeline", "prf=bm25 >> rm3(fb_docs=3) >> bm25",
              "--mlflow", "--tracking-uri", uri, "--format", "json")
    table = json.loads(r.stdout)
    ids = dict(re.findall(r"^mlflow: (\S+) logged as run (\w+)", r.stderr, re.MULTILINE))
    assert set(ids) == {"bm25", "prf"}
    assert "Creating initial MLflow database tables" not in r.stderr

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    prf = client.get_run(ids["prf"])
    system = next(s for s in table["systems"] if s["name"] == "prf")
    assert prf.data.tags["aiblox.kind"] == "point"
    assert prf.data.tags["aiblox.config_hash"] == system["hashes"]["config"]
    assert prf.data.metrics["test.ndcg_at_10"] == system["metrics"]["ndcg@10"]
    assert any(k.startswith("pipeline") and "rm3" in v for k, v in prf.data.params.items()), \
        prf.data.params
    bm25 = client.get_run(ids["bm25"]).data.params
    # what does not apply to a BM25 run on DuckDB is not logged (the manifest keeps it all)
    assert not [k for k in bm25 if k.startswith(("prefs.vector.", "prefs.chunking.",
                                                 "prefs.snippet.", "prefs.cache."))]
    assert "prefs.fts.rank_func" not in bm25 and "prefs.fts.config" not in bm25
    assert "prefs.fts.k1" in bm25 and "embedder" not in bm25

    v = _run("eval", "verify", ids["prf"], "--tracking-uri", uri, "--db", db, "--json")
    assert v.exit_code == 0, v.output
    report = json.loads(v.stdout)
    assert report["identical"] is True
    assert report["config_hash"] == system["hashes"]["config"]
    assert any(c["where"].startswith("test/") and "rm3" in c["where"] for c in report["checks"])


def test_printed_hashes_name_the_logged_run_and_one_point_logged_twice_is_one(db, tmp_path):
    """The ``run`` and ``config`` hashes ``aiblox eval`` prints (16 hex digits) are references
    ``compare`` and ``eval verify`` take; an eval logged twice (one point, two runs) is its
    latest run, not ambiguous; one config scored on two splits is two points, ambiguous."""
    from aiblox.sweep.runs import AmbiguousRun, resolve_run

    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"

    def logged(*more: str) -> tuple[dict[str, str], str]:
        r = _eval(db, "--mode", "bm25", "--mlflow", "--tracking-uri", uri, *more)
        ids = dict(re.findall(r"^mlflow: (\S+) logged as run (\w+)", r.stderr, re.MULTILINE))
        return ids, r.stdout

    first, _ = logged("--mode", "hybrid")
    second, out = logged()
    assert first["bm25"] != second["bm25"]
    run16 = re.search(r"^bm25: run ([0-9a-f]{16})  config ([0-9a-f]{16})", out, re.MULTILINE)
    assert run16 is not None, out
    run_hash, config_hash = run16.groups()
    # both printed hashes name the bm25 point, as its latest run
    assert resolve_run(run_hash, uri).run_id == second["bm25"]
    assert resolve_run(config_hash, uri).run_id == second["bm25"]
    assert resolve_run(config_hash[:6], uri).run_id == second["bm25"]
    v = _run("eval", "verify", run_hash, "--tracking-uri", uri, "--db", db, "--json")
    assert v.exit_code == 0, v.output
    assert json.loads(v.stdout)["source"].startswith(f"run {second['bm25']} ")
    c = _run("compare", first["hybrid"], run_hash, "--tracking-uri", uri, "--json")
    assert c.exit_code == 0, c.output
    assert json.loads(c.stdout)["run_b"] == second["bm25"]
    # the same config on another split is another point: its config prefix is ambiguous
    logged("--split", "train")
    with pytest.raises(AmbiguousRun, match="2 points match its config-hash prefix") as exc:
        resolve_run(config_hash, uri)
    # the listing says what tells them apart: their splits (and the dataset hashes, which
    # cover the judgements of the split scored)
    said = str(exc.value)
    assert f"bm25 ({config_hash}, dataset sample " in said
    assert f", split test, run {second['bm25']})" in said and ", split train, run " in said
    assert resolve_run(run_hash, uri).run_id == second["bm25"]  # the test split's ranking


def test_a_pipeline_label_may_hold_spaces_and_slashes():
    """``LABEL=EXPR``: the label is the text before the first ``=`` unless that text holds an
    expression's characters (the ``=`` of a keyword argument)."""
    from aiblox.cli.eval import _pipelines

    pipes = _pipelines(["rm3 fb/3=bm25 >> rm3(fb_docs=3) >> bm25",
                        'fuse(bm25, dense, blend="linear")', "bm25 % 10",
                        "my\nlabel = bm25\n  >> bo1 >> bm25"])  # over lines: one line
    assert list(pipes) == ["rm3 fb/3", 'fuse(bm25, dense, blend="linear")', "bm25 % 10",
                           "my label"]
    assert "rm3" in repr(pipes["rm3 fb/3"])


def test_systems_never_replace_one_another(db, tmp_path):
    """QA 25: two --pipeline of one label showed one row (the other dropped silently), and two
    labels of one file name wrote one --save-runs file (the later over the earlier)."""
    r = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--pipeline", "a=bm25",
             "--pipeline", "a=bm25 >> rm3 >> bm25")
    assert r.exit_code == 2 and "two systems are labelled 'a'" in r.output, r.output
    out = tmp_path / "runs"
    r = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--pipeline", "a:b=bm25",
             "--pipeline", "a#b=dense", "--save-runs", out)
    assert r.exit_code == 2 and "'a:b' and 'a#b' would both be written to a_b.trec" in \
        " ".join(r.output.split()), r.output
    assert not out.exists()  # refused before any work
    ok = _json(db, "--pipeline", "a:b=bm25", "--pipeline", "a_c=dense", "--save-runs", out)
    assert [s["name"] for s in ok["systems"]] == ["a:b", "a_c"]
    assert sorted(p.name for p in out.iterdir()) == ["a_b.trec", "a_c.trec"]


def test_top_k_unread_by_a_pipeline_without_fusion_is_said(db):
    """QA 25: --top-k changed nothing of a pipeline without fusion, silently."""
    r = _eval(db, "--top-k", "150", "--pipeline", "p=bm25 >> rm3 >> bm25", "--pipeline",
              "bm25 + dense", "--pipeline", "r=retrieve >> rm3 >> bm25", "--format", "json")
    said = " ".join(r.stderr.split())
    assert "warning: --top-k 150: only a fusion reads it, and 'p' fuses nothing" in said, said
    assert "'r'" not in said and "'bm25 + dense'" not in said
    quiet = _eval(db, "--pipeline", "p=bm25 >> rm3 >> bm25", "--format", "json")
    assert "warning" not in quiet.stderr


def test_an_output_that_is_an_input_is_refused_before_any_work(db, tmp_path):
    """``--save-runs runs/`` beside ``--run runs/bm25.trec`` replaced the user's run with
    aiblox's rewrite (or, beside ``--mode bm25``, with that mode's run); ``--per-query`` over a
    dataset file destroyed it: exit 0, nothing said (QA, 2026-11-29)."""
    runs = tmp_path / "runs"
    _eval(db, "--mode", "dense", "--save-runs", runs)
    mine = runs / "bm25.trec"
    (runs / "dense.trec").rename(mine)  # a run of the user's that a mode's label would take
    before = mine.read_bytes()
    for extra in (["--run", str(mine)], ["--mode", "bm25", "--run", str(mine)]):
        r = _run("eval", "sample", "--db", db, "--embedder", "hashing", *extra,
                 "--save-runs", runs)
        assert r.exit_code == 2, r.output
        assert f"--save-runs: {mine} is a --run file, which this command reads" in r.output
        assert mine.read_bytes() == before
    data = tmp_path / "ds"
    shutil.copytree(REPO / "datasets" / "sample", data)
    qrels = data / "qrels" / "test.tsv"
    before = qrels.read_bytes()
    for target in (qrels.with_suffix(".csv"), data / "pq.csv"):
        r = _run("eval", str(data), "--db", str(tmp_path / "d.duckdb"), "--embedder",
                 "hashing", "--mode", "bm25", "--per-query", target)
        assert r.exit_code == 2 and "is inside the folder of the dataset" in r.output, r.output
        assert not target.exists()
    assert qrels.read_bytes() == before
    _ok("eval", str(data), "--db", str(tmp_path / "d.duckdb"), "--embedder", "hashing",
        "--mode", "bm25", "--per-query", tmp_path / "pq.csv")
    assert (tmp_path / "pq.csv").stat().st_size > 0
