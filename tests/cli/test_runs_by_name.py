"""Runs by name: ``aiblox runs`` lists logged sweeps and points, and ``aiblox compare`` / ``aiblox
eval verify`` take a point as ``SWEEP:LABEL`` or a config-hash prefix as well as a run id; a
cost metric's decrease is a win in compare, the sweep report and the notebooks alike.

The sample fusion sweep, a small selection-policy sweep of the sample dataset (whose per-query
``selected_tokens`` is a cost) and a one-point sweep sharing a config hash with the fusion sweep
are run once per module through the CLI into a tmp sqlite MLflow store."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("matplotlib")

from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "evals" / "sweeps" / "sample_fusion.toml"
DRIVER = "import sys; from aiblox.cli.main import app; app(sys.argv[1:], prog_name='aiblox')"
SELECTION = """
name = "runs_selection"
dataset = "sample"
tune_split = "train"
report_split = "test"
backend = "duckdb"
embedder = "hashing"
metrics = ["ndcg@10"]
primary = "answer_f1"
query_limit = 4
chunk_k = [1, 5]

[base]
top_k_items = 10
top_k_chunks = 6
fts = { top_k = 20 }
vector = { top_k = 20 }

[grid.selection]
policy = ["R2_POLICY_V1", "R2_POLICY_V2"]
max_chunks = [1, 4]

[baseline]
policy = "R2_POLICY_V1"
max_chunks = 4
"""
# the fusion sweep's baseline point again, in a sweep of its own: one config hash, two runs
COPY = """
name = "runs_copy"
dataset = "sample"
tune_split = "train"
report_split = "test"
backend = "duckdb"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10", "mrr@10"]
primary = "ndcg@10"

[base]
top_k_items = 10
fts = { top_k = 20 }
vector = { top_k = 20 }

[grid]
blend = ["rrf"]
rrf_k = [60]
depth = [20]
"""
runner = CliRunner()


def _cli(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "100"})


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs_by_name")
    uri = f"sqlite:///{root}/mlflow.db"
    db = str(root / "sample.duckdb")
    common = ["--db", db, "--cache-dir", str(root / "stages"), "--tracking-uri", uri, "--json"]
    sweeps = {}
    for name, spec in (("sample_fusion", SPEC), ("runs_selection", SELECTION),
                       ("runs_copy", COPY)):
        if isinstance(spec, str):
            path = root / f"{name}.toml"
            path.write_text(spec, encoding="utf-8")
            spec = path
        r = _cli("sweep", str(spec), *common)
        assert r.exit_code == 0, r.output
        sweeps[name] = json.loads(r.stdout)
    return {"uri": uri, "db": db, "root": root, "sweeps": sweeps}


def _points(logged, sweep: str) -> list[dict]:
    r = _cli("runs", sweep, "--tracking-uri", logged["uri"], "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _compare(logged, a: str, b: str, *extra: str) -> dict:
    r = _cli("compare", a, b, "--tracking-uri", logged["uri"], "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_runs_lists_the_sweeps_with_their_points_and_best(logged):
    r = _cli("runs", "--tracking-uri", logged["uri"])
    assert r.exit_code == 0, r.output
    fusion = logged["sweeps"]["sample_fusion"]
    for name, out in logged["sweeps"].items():
        assert name in r.stdout
        assert out["tracking"]["parent_run_id"] in r.stdout  # in full
    assert fusion["best"]["label"] in r.stdout
    rows = json.loads(_cli("runs", "--tracking-uri", logged["uri"], "--format", "json").stdout)
    by_name = {s["name"]: s for s in rows}
    assert by_name["sample_fusion"]["points"] == fusion["n_points"] == 24
    assert by_name["sample_fusion"]["best_config_hash"] == fusion["best"]["config_hash"]
    assert by_name["sample_fusion"]["best_tune"] == fusion["best"]["metrics"]["train"]["ndcg@10"]
    assert rows[0]["name"] == "runs_copy"  # newest first


def test_runs_sweep_json_has_every_point_in_full(logged):
    points = _points(logged, "sample_fusion")
    fusion = logged["sweeps"]["sample_fusion"]
    assert len(points) == 24
    from aiblox.engine.tracking import tracking_client

    client = tracking_client(logged["uri"])
    parent = client.get_run(fusion["tracking"]["parent_run_id"])
    children = client.search_runs([parent.info.experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert {(p["label"], p["run_id"], p["config_hash"]) for p in points} == {
        (c.data.tags["aiblox.label"], c.info.run_id, c.data.tags["aiblox.config_hash"])
        for c in children}
    assert all(len(p["config_hash"]) == 64 and len(p["run_id"]) == 32 for p in points)
    tune = [p["tune"] for p in points]
    assert tune == sorted(tune, reverse=True)  # best first on the tune split
    best = [p for p in points if p["best"]]
    assert [b["config_hash"] for b in best] == [fusion["best"]["config_hash"]]
    assert best[0]["report"] == fusion["best"]["metrics"]["test"]["ndcg@10"]
    assert sum(p["baseline"] for p in points) == 1
    # csv: the same rows, full hashes
    csv = _cli("runs", "sample_fusion", "--tracking-uri", logged["uri"], "--format", "csv")
    lines = csv.stdout.splitlines()
    assert lines[0].startswith("sweep,label,config_hash,run_id") and len(lines) == 25
    assert all(p["config_hash"] in csv.stdout and p["run_id"] in csv.stdout for p in points)


def test_runs_table_redirected_to_a_file_holds_full_labels(logged, tmp_path):
    out = tmp_path / "runs.txt"
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    cmd = (f"{shlex.quote(sys.executable)} -c {shlex.quote(DRIVER)} runs sample_fusion "
           f"--tracking-uri {shlex.quote(logged['uri'])} > {shlex.quote(str(out))}")
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # the table went to the file
    text = out.read_text(encoding="utf-8")
    for p in _points(logged, "sample_fusion"):
        row = next(line for line in text.splitlines() if f" {p['label']} " in line)
        assert p["run_id"] in row and p["config_hash"][:12] in row  # never cut
    assert "…" not in text


def test_compare_by_label_and_by_hash_prefix_is_compare_by_run_id(logged):
    points = {p["label"]: p for p in _points(logged, "sample_fusion")}
    a, b = points["rrf-k60-d20"], points[logged["sweeps"]["sample_fusion"]["best"]["label"]]
    by_id = _compare(logged, a["run_id"], b["run_id"])
    by_label = _compare(logged, "sample_fusion:rrf-k60-d20", f"sample_fusion:{b['label']}")
    by_prefix = _compare(logged, "sample_fusion:rrf-k60-d2", b["config_hash"][:8])
    assert by_id == by_label == by_prefix
    assert by_id["run_a"] == a["run_id"] and by_id["run_b"] == b["run_id"]
    assert by_id["name_b"] == f"sample_fusion:{b['label']}"
    assert by_id["test"] == "student" and by_id["correction"] == "holm"
    # the metrics in the spec's order (primary first), not by name
    assert [m["metric"] for m in by_id["metrics"]] == ["ndcg@10", "recall@10", "mrr@10"]
    # the queries that moved, with A and B values, for a fusion run too
    assert by_id["moved"] and all(m["b"] - m["a"] == m["delta"] != 0 for m in by_id["moved"])
    deltas = [abs(m["delta"]) for m in by_id["moved"]]
    assert deltas == sorted(deltas, reverse=True)
    table = _cli("compare", "sample_fusion:rrf-k60-d20", b["config_hash"][:8],
                 "--tracking-uri", logged["uri"], "--changed", "2")
    assert table.exit_code == 0, table.output
    assert "paired t-test, holm-corrected over 3 metrics" in table.stdout
    top = by_id["moved"][0]
    assert f"{top['a']:.4f}" in table.stdout and f"{top['delta']:+.4f}" in table.stdout


def test_compare_test_and_correction_choices(logged):
    a, b = "sample_fusion:rrf-k60-d20", logged["sweeps"]["sample_fusion"]["best"]["config_hash"]
    t = _compare(logged, a, b, "--correction", "none")
    w = _compare(logged, a, b, "--test", "wilcoxon", "--correction", "bonferroni")
    assert w["test"] == "wilcoxon" and w["correction"] == "bonferroni"
    assert w["test_name"] == "Wilcoxon signed-rank test"
    n = len(w["metrics"])
    for mt, mw in zip(t["metrics"], w["metrics"], strict=True):
        assert mt["p_adjusted"] == mt["p_value"]  # none: as they are
        assert mw["p_adjusted"] == min(1.0, n * mw["p_value"])
        assert (mt["wins"], mt["losses"], mt["delta"]) == (mw["wins"], mw["losses"], mw["delta"])
    assert [m["p_value"] for m in t["metrics"]] != [m["p_value"] for m in w["metrics"]]
    bad = _cli("compare", a, b, "--tracking-uri", logged["uri"], "--test", "z")
    # one error line, as every command's bad choice (QA 27: a multi-line usage box)
    assert bad.exit_code == 2 and bad.output == "error: --test 'z': not one of t, wilcoxon, " \
        "fisher\n"
    bad = _cli("runs", "sample_fusion", "--tracking-uri", logged["uri"], "--format", "yaml")
    assert bad.exit_code == 2 and bad.output == "error: --format 'yaml': not one of table, " \
        "json, csv\n"


def test_ambiguous_references_are_one_line_errors_listing_the_candidates(logged):
    uri = logged["uri"]
    points = {p["label"]: p for p in _points(logged, "sample_fusion")}
    r = _cli("compare", "sample_fusion:rrf-k60", "sample_fusion:rrf-k10-d20",
             "--tracking-uri", uri)
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 'sample_fusion:rrf-k60' is ambiguous")
    for label in ("rrf-k60-d20", "rrf-k60-d10"):
        assert f"sample_fusion:{label}" in lines[0] and points[label]["run_id"] in lines[0]
    # one config hash logged by two sweeps: its prefix names two runs
    shared = points["rrf-k60-d20"]["config_hash"]
    copy = _points(logged, "runs_copy")
    assert [p["config_hash"] for p in copy] == [shared]
    r = _cli("compare", shared[:10], "sample_fusion:rrf-k10-d20", "--tracking-uri", uri)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "ambiguous" in r.output and "runs_copy:" in r.output
    assert "sample_fusion:rrf-k60-d20" in r.output
    # qualified by its sweep, the prefix is one point again
    one = _compare(logged, f"runs_copy:{shared[:10]}", "sample_fusion:rrf-k10-d20")
    assert one["run_a"] == copy[0]["run_id"]
    nothing = _cli("compare", "sample_fusion:nope", "ffff0000", "--tracking-uri", uri)
    assert nothing.exit_code == 2 and "has no point labelled 'nope'" in nothing.output
    assert "sample_fusion:best and sample_fusion:baseline" in nothing.output
    # a typo: the nearest labels first, not the first eight of 24 (QA 27)
    typo = _cli("compare", "sample_fusion:linear-w0.75-minmax-zero-d02", "ffff0000",
                "--tracking-uri", uri)
    shown = " ".join(typo.output.split()).split("its points: ", 1)[1]
    assert shown.startswith("nearest linear-w0.75-minmax-zero-d20, linear-w0.75-minmax-zero-d10")
    assert shown.endswith("... (24 in all)")


def test_best_and_baseline_name_the_sweep_s_points(logged):
    from aiblox.sweep.runs import resolve_run

    uri = logged["uri"]
    points = _points(logged, "sample_fusion")
    best = resolve_run("sample_fusion:best", uri)
    assert best == resolve_run("sample_fusion", uri, sweep_best=True)  # the sweep's best point
    assert best.config_hash == next(p for p in points if p["best"])["config_hash"]
    base = resolve_run("sample_fusion:baseline", uri)
    assert base.config_hash == next(p for p in points if p["baseline"])["config_hash"]
    assert base.config_hash != best.config_hash


def test_verify_by_sweep_and_label(logged):
    points = {p["label"]: p for p in _points(logged, "sample_fusion")}
    r = _cli("eval", "verify", "sample_fusion:rrf-k10-d20", "--tracking-uri", logged["uri"],
             "--db", logged["db"], "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["identical"] and out["config_hash"] == points["rrf-k10-d20"]["config_hash"]
    assert out["source"].startswith(f"run {points['rrf-k10-d20']['run_id']} ")
    prefix = _cli("eval", "verify", points["rrf-k10-d20"]["config_hash"][:8], "--tracking-uri",
                  logged["uri"], "--db", logged["db"], "--json")
    assert prefix.exit_code == 0, prefix.output
    assert json.loads(prefix.stdout)["source"] == out["source"]


def _selection_runs(logged):
    points = _points(logged, "runs_selection")
    sweep = logged["sweeps"]["runs_selection"]
    base = next(p for p in points if p["baseline"])
    return sweep, points, base


def test_a_cost_metric_decrease_is_a_win(logged):
    from aiblox.engine.tracking import tracking_client
    from aiblox.sweep.compare import per_query_metrics

    sweep, points, base = _selection_runs(logged)
    # V1 with one chunk at most against V1 with four (the baseline): fewer selected tokens
    fewer = next(p for p in points if p["label"] != base["label"]
                 and "R2_POLICY_V1" in p["label"])
    out = _compare(logged, f"runs_selection:{base['label']}", f"runs_selection:{fewer['label']}")
    row = next(m for m in out["metrics"] if m["metric"] == "selected_tokens")
    client = tracking_client(logged["uri"])
    a = per_query_metrics(client, base["run_id"], "test")["selected_tokens"]
    b = per_query_metrics(client, fewer["run_id"], "test")["selected_tokens"]
    lower = sum(b[q] < a[q] for q in a)
    assert row["direction"] == "lower" and row["delta"] < 0 and lower > 0
    assert (row["wins"], row["losses"]) == (lower, sum(b[q] > a[q] for q in a))
    f1 = next(m for m in out["metrics"] if m["metric"] == "answer_f1")
    assert f1["direction"] == "higher"
    table = _cli("compare", f"runs_selection:{base['label']}",
                 f"runs_selection:{fewer['label']}", "--tracking-uri", logged["uri"])
    line = next(x for x in table.stdout.splitlines() if "selected_tokens" in x)
    assert "lower" in line


def test_report_compare_and_notebook_agree_on_a_cost_metric(logged):
    """The sweep's significance table (its --json, the report read from MLflow), ``aiblox
    compare`` and the notebooks' per-query comparison classify the same queries as wins and
    losses of selected_tokens, and give the same p-value and delta."""
    from aiblox.engine.tracking import tracking_client
    from aiblox.explore import compare_per_query
    from aiblox.sweep import load_sweep_report
    from aiblox.sweep.compare import per_query_metrics

    sweep, points, base = _selection_runs(logged)
    by_label = {p["label"]: p for p in points}
    rep = load_sweep_report("runs_selection", logged["uri"])
    rows = [c for c in rep.significance if c["metric"] == "selected_tokens"]
    assert rows and rows == [c for c in sweep["significance"]
                             if c["metric"] == "selected_tokens"]
    assert any(c["wins"] != c["losses"] for c in rows)
    client = tracking_client(logged["uri"])
    for c in rows:
        cand = by_label[c["candidate"]]
        cmp = _compare(logged, base["run_id"], f"runs_selection:{c['candidate']}")
        m = next(m for m in cmp["metrics"] if m["metric"] == "selected_tokens")
        assert c["direction"] == m["direction"] == "lower"
        assert (c["wins"], c["ties"], c["losses"]) == (m["wins"], m["ties"], m["losses"])
        assert (c["p_value"], c["delta"]) == (m["p_value"], m["delta"])
        nb = compare_per_query(per_query_metrics(client, base["run_id"], "test"),
                               per_query_metrics(client, cand["run_id"], "test"))
        nb = nb.set_index("metric").loc["selected_tokens"]
        assert nb["better"] == "lower"
        assert (nb["wins"], nb["ties"], nb["losses"]) == (c["wins"], c["ties"], c["losses"])
        assert nb["p_value"] == c["p_value"]
    md = (Path(logged["root"]) / "rep").as_posix()
    r = _cli("report", "runs_selection", "--tracking-uri", logged["uri"], "--out", md,
             "--no-log")
    assert r.exit_code == 0, r.output
    text = (Path(md) / "report.md").read_text(encoding="utf-8")
    c = rows[0]
    label = c["candidate"].replace("|", "\\|")  # Markdown escapes the label's bars
    assert (f"| {label} | selected_tokens | lower |" in text
            and f"{c['wins']}/{c['ties']}/{c['losses']} |" in text)
    assert "W/T/L under the metric's direction" in text


def test_missing_or_empty_store_is_one_line_and_creates_nothing(tmp_path):
    from aiblox.engine.tracking import tracking_client

    typo = tmp_path / "typo.db"
    for args in (["runs"], ["runs", "sample_fusion"]):
        r = _cli(*args, "--tracking-uri", f"sqlite:///{typo}")
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
        assert f"no MLflow tracking database at {typo}" in r.output
    assert not typo.exists() and not list(tmp_path.iterdir())
    empty = tmp_path / "empty.db"
    tracking_client(f"sqlite:///{empty}", create=True)
    r = _cli("runs", "--tracking-uri", f"sqlite:///{empty}")
    assert r.exit_code == 2 and r.output.startswith("error: no sweeps logged in")
    r = _cli("runs", "nope", "--tracking-uri", f"sqlite:///{empty}")
    assert r.exit_code == 2 and "no sweep run with id or name 'nope' (aiblox runs lists them)" \
        in r.output


def test_runs_export_writes_any_points_run_as_the_sweep_scored_it(logged, tmp_path):
    """A sweep logs the TREC run files of the points its conclusion names only; any other
    point's run is written from the stage cache by the keys its manifest records: the same
    text as a logged one (the best point's, both ways), and its metrics recomputed from it are
    the logged ones."""
    from aiblox.data import load_dataset
    from aiblox.data.trec import read_trec_run
    from aiblox.engine.tracking import artifact_bytes, run_file, tracking_client
    from aiblox.metrics import evaluate_run

    fusion = logged["sweeps"]["sample_fusion"]
    points = _points(logged, "sample_fusion")
    client = tracking_client(logged["uri"])
    named = {p["label"] for p in points
             if artifact_bytes(client, p["run_id"], run_file("test")) is not None}
    assert fusion["best"]["label"] in named and len(named) < len(points)
    common = ["--cache-dir", str(logged["root"] / "stages"), "--tracking-uri", logged["uri"]]
    best = fusion["best"]["label"]
    r = _cli("runs", "export", f"sample_fusion:{best}", "--trec", str(tmp_path / "a"), *common)
    assert r.exit_code == 0, r.output
    best_id = next(p["run_id"] for p in points if p["label"] == best)
    assert (tmp_path / "a" / f"{best}.test.trec").read_bytes() == artifact_bytes(
        client, best_id, run_file("test"))
    # a point whose run was not logged: written from the cache
    other = next(p for p in points if p["label"] not in named)
    r = _cli("runs", "export", other["run_id"], "--trec", str(tmp_path / "b"), "--split",
             "test", *common)
    assert r.exit_code == 0, r.output
    written = tmp_path / "b" / f"{other['label']}.test.trec"
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [written.name]
    ds = load_dataset("sample", splits=["test"])
    means, _ = evaluate_run(ds.qrels["test"], read_trec_run(written), ["ndcg@10"])
    assert means["ndcg@10"] == pytest.approx(other["report"], abs=1e-12)
    # without the cache the run cannot be written: one line saying so
    r = _cli("runs", "export", other["run_id"], "--trec", str(tmp_path / "c"), "--cache-dir",
             str(tmp_path / "none"), "--tracking-uri", logged["uri"])
    assert r.exit_code == 2
    assert "logged no run file of split" in r.output and "--cache-dir" in r.output
    assert not (tmp_path / "c").exists()  # the folder it made for nothing is gone (QA 20)
    # a cache that is there but never held the run: absent, not "damaged" (QA 27)
    (tmp_path / "empty").mkdir()
    r = _cli("runs", "export", other["run_id"], "--trec", str(tmp_path / "c"), "--cache-dir",
             str(tmp_path / "empty"), "--tracking-uri", logged["uri"])
    line = " ".join(r.output.split())
    assert r.exit_code == 2 and "its run is not in the stage cache" in line
    assert re.search(r"\(no entry fusion/[0-9a-f]{16}\); rerun the sweep", line), line
    assert "damaged" not in line
    r = _cli("runs", "export", "no_such_sweep", "--trec", str(tmp_path / "d" / "e"), *common)
    assert r.exit_code == 2 and not (tmp_path / "d").exists()
    (tmp_path / "f").mkdir()  # a folder that was there stays
    r = _cli("runs", "export", "no_such_sweep", "--trec", str(tmp_path / "f"), *common)
    assert r.exit_code == 2 and (tmp_path / "f").is_dir()


def test_a_deleted_best_point_is_named_by_runs_compare_and_report(logged, tmp_path):
    """A point run deleted in MLflow (``mlflow runs delete``) after the sweep: ``runs`` still
    called it the best with no word of the deletion, ``runs SWEEP`` marked no point best,
    ``compare SWEEP:best`` said the best point "has no child run", and the report gave no sign.
    Each now names the deleted run and the command that restores it."""
    import shutil

    import mlflow

    db = tmp_path / "mlflow.db"
    shutil.copy(logged["root"] / "mlflow.db", db)
    uri = f"sqlite:///{db}"
    best = next(p for p in _points(logged, "sample_fusion") if p["best"])
    mlflow.MlflowClient(uri).delete_run(best["run_id"])

    rows = json.loads(_cli("runs", "--tracking-uri", uri, "--format", "json").stdout)
    fusion = next(s for s in rows if s["name"] == "sample_fusion")
    assert (fusion["points"], fusion["deleted"]) == (23, 1)
    assert fusion["best_deleted_run_id"] == best["run_id"]
    assert all(s["deleted"] == 0 for s in rows if s["name"] != "sample_fusion")
    restore = f"mlflow runs restore --run-id {best['run_id']}"
    r = _cli("runs", "sample_fusion", "--tracking-uri", uri)
    assert r.exit_code == 0 and restore in " ".join(r.stdout.split()), r.output
    r = _cli("compare", "sample_fusion:best", "sample_fusion:baseline", "--tracking-uri", uri)
    assert r.exit_code != 0 and "was deleted" in r.output and restore in r.output, r.output
    r = _cli("report", "sample_fusion", "--tracking-uri", uri, "--no-log",
             "--out", str(tmp_path / "rep"))
    assert r.exit_code == 0, r.output
    assert restore in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert restore in (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    # named by its run id or by a prefix of its config hash, the deleted run is said to be
    # deleted (QA 20: exported with no note; a prefix said "no point")
    for ref in (best["run_id"], best["config_hash"][:16]):
        r = _cli("runs", "export", ref, "--trec", str(tmp_path / "x"), "--tracking-uri", uri,
                 "--cache-dir", str(logged["root"] / "stages"))
        assert r.exit_code == 2, r.output
        assert "deleted from the tracking store" in r.output and restore in r.output, r.output
        assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("label, stem", [
    ("bm25 >> rm3(orig_weight=0.5) >> bm25 @ bm25-d100",
     "bm25_then_rm3_orig_weight-0.5_then_bm25_at_bm25-d100"),
    ("(bm25 + dense) % 5 @ rrf-k60-d100", "bm25_plus_dense_cut_5_at_rrf-k60-d100"),
    ("mix(bm25, dense; blend='linear',weights=[0.3, 0.7])",
     "mix_bm25_dense_blend-_linear_weights-_0.3_0.7"),
    ("linear-w0.35-minmax-zero-d100", "linear-w0.35-minmax-zero-d100"),  # as it was
    ("--x", "x"),
    ("", "run"),
])
def test_runs_export_file_names_are_safe_in_a_shell(label, stem):
    """QA13d #10: ``runs export`` wrote ``bm25_>>_rm3(orig_weight=0.5)_>>_bm25_@_bm25-d100
    .test-1of2.trec``; ``>``, ``(``, ``=`` and ``@`` need quoting in a shell."""
    from aiblox.cli.runs import export_stem

    assert export_stem(label) == stem
    long = export_stem("bm25 >> " * 40 + "bm25")
    assert len(long) <= 133 and long != export_stem("bm25 >> " * 41 + "bm25")


def test_verify_says_only_what_it_checked_and_report_refuses_no_rows(logged, tmp_path):
    """QA 27: a point whose run files were not logged verified "the logged run files line by
    line"; `report --top 0` wrote "the first 0 of 24 points"."""
    from aiblox.engine.tracking import artifact_bytes, run_file, tracking_client

    client = tracking_client(logged["uri"])
    points = _points(logged, "sample_fusion")
    bare = next(p for p in points if artifact_bytes(client, p["run_id"], run_file("test")) is None)
    r = _cli("eval", "verify", bare["run_id"], "--tracking-uri", logged["uri"])
    said = " ".join(r.output.split())
    assert r.exit_code == 0 and "recomputed exactly (per query)" in said, r.output
    assert "run files" not in said
    r = _cli("report", "sample_fusion", "--tracking-uri", logged["uri"], "--top", "0",
             "--no-log", "--out", str(tmp_path / "rep"))
    assert r.exit_code == 2 and "--top 0: out of range" in r.output
    assert not (tmp_path / "rep").exists()
