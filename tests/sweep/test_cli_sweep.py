"""``aiblox sweep`` through typer's runner on the sample spec (tmp stage cache, tmp MLflow)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from aiblox.cli.main import app

SPEC = str(Path(__file__).resolve().parents[2] / "evals" / "sweeps" / "sample_fusion.toml")
SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "sample"
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def test_sweep_json_then_rerun_costs_nothing(tmp_path, sweep_db, mlflow_uri):
    common = ["sweep", SPEC, "--db", sweep_db, "--cache-dir", str(tmp_path / "stages"),
              "--tracking-uri", mlflow_uri, "--json"]
    r = _run(*common)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["n_points"] == 24 and out["tune_split"] == "train"
    assert out["computed"]["fusion"] == 48 and out["tracking"]["logged"] == 24
    best = out["best"]
    assert best["metrics"]["train"]["ndcg@10"] == max(
        row["metrics"]["train"]["ndcg@10"] for row in out["leaderboard"])
    assert out["baseline"]["is_baseline"]

    again = json.loads(_run(*common).stdout)
    assert again["computed"] == {} and again["tracking"]["logged"] == 0
    assert again["tracking"]["skipped"] == 24
    assert again["best"] == best

    # the parent run names the spec file, and the report's reproduce command reruns it
    from mlflow.tracking import MlflowClient

    from aiblox.sweep import load_sweep_report

    parent = MlflowClient(mlflow_uri).get_run(out["tracking"]["parent_run_id"])
    tagged = parent.data.tags["aiblox.spec_path"]
    assert tagged.endswith("evals/sweeps/sample_fusion.toml")
    assert Path(tagged).resolve() == Path(SPEC).resolve()  # relative to the cwd, or absolute
    rep = load_sweep_report(out["tracking"]["parent_run_id"], mlflow_uri)
    # with the store and stage cache it ran with: a rerun reads the same ones (QA 27)
    assert rep.reproduce == (f"aiblox sweep {tagged} --db {sweep_db} --cache-dir "
                             f"{tmp_path / 'stages'} --tracking-uri {mlflow_uri}")
    assert parent.data.tags["aiblox.rerun_options"] == \
        f"--db {sweep_db} --cache-dir {tmp_path / 'stages'}"


def test_sweep_table_without_tracking(tmp_path, sweep_db):
    r = _run("sweep", SPEC, "--db", sweep_db, "--cache-dir", str(tmp_path), "--no-tracking",
             "--jobs", "1", "--top", "3")
    assert r.exit_code == 0, r.output
    assert "best on train by ndcg@10" in r.output and "MLflow" not in r.output
    # the board marks a difference as every table does: the delta to the baseline, ▲/▼
    # beside it when significant, the adjusted p; never a bare `*`
    js = json.loads(_run("sweep", SPEC, "--db", sweep_db, "--cache-dir", str(tmp_path),
                         "--no-tracking", "--json").stdout)
    lines = r.stdout.splitlines()
    # the p beside a delta is the adjusted one, and the header says so (QA 27)
    head = next(ln for ln in lines if "vs baseline (test" in ln)
    assert [c.strip() for c in head.strip("┃ ").split("┃")] == [
        "point", "train ndcg@10", "test ndcg@10", "vs baseline (test, p Holm-adjusted)",
        "config"]
    best = js["best"]
    row = next(ln for ln in lines if ln.startswith(f"│ {best['label']} "))
    tested = next(c for c in js["significance"]
                  if c["candidate"] == best["label"] and c["metric"] == "ndcg@10")
    assert (f"{tested['delta']:+.4f}{'▲' if tested['significant'] else ''} "
            f"p={tested['p_adjusted']:.4f}") in row
    assert best["config_hash"][:16] in row  # the hash prefix every command shows
    sig = next(ln for ln in lines if "p (adjusted)" in ln)
    assert [c.strip() for c in sig.strip("┃ ").split("┃")] == [
        "point", "metric", "better", "value", "delta", "p", "p (adjusted)", "W/T/L"]
    assert "▲/▼ significantly higher/lower than the baseline (adjusted p <= 0.05)" in r.stdout
    assert " *" not in r.stdout


def test_bad_spec_names_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\ndataset = "sample"\ntune_split = "train"\n'
                   'report_split = "test"\n[grid]\nw_text = { start = 0, stop = 1, step = 0.3 }\n')
    r = _run("sweep", str(bad), "--no-tracking")
    assert r.exit_code == 2
    assert "bad.toml" in r.output and "grid.w_text" in r.output


def test_a_value_refused_against_the_store_names_its_file_line_and_field(tmp_path, sweep_db):
    """QA 25: feedback terms beyond the index's vocabulary, found when the sweep starts (it
    needs the store), was one line without the spec's file, line or field that every refusal
    when the spec loads has."""
    spec = tmp_path / "rm3.toml"
    spec.write_text('name = "rm3big"\ndataset = "sample"\ntune_split = "train"\n'
                    'report_split = "test"\nembedder = "hashing"\nmetrics = ["ndcg@10"]\n'
                    'pipeline = "bm25 >> rm3 >> bm25"\n\n[grid.stages.rm3]\n'
                    'fb_terms = [10, 200000]\n', encoding="utf-8")
    r = _run("sweep", str(spec), "--db", sweep_db, "--cache-dir", str(tmp_path / "st"),
             "--no-tracking")
    assert r.exit_code == 2, r.output
    assert (f"error: {spec}:10: field 'grid.stages.rm3.fb_terms[1]': stage rm3: fb_terms = "
            f"200000 but the index's vocabulary holds") in " ".join(r.output.split()), r.output


def test_a_dataset_or_split_that_is_not_there_names_the_specs_line(tmp_path):
    """A spec naming no dataset, or a split the dataset lacks, failed (without tracking)
    with the dataset's own words only; it names the spec's file, line and field."""
    head = 'name = "x"\nmetrics = ["ndcg@10"]\n'
    for body, line, field, words in (
            ('dataset = "nosuch"\ntune_split = "train"\nreport_split = "test"\n', 3,
             "dataset", "no BEIR dataset here"),
            ('dataset = "sample"\ntune_split = "trian"\nreport_split = "test"\n', 4,
             "tune_split", "no split 'trian'")):
        spec = tmp_path / "s.toml"
        spec.write_text(head + body, encoding="utf-8")
        r = _run("sweep", str(spec), "--no-tracking", "--cache-dir", str(tmp_path / "st"))
        assert r.exit_code == 2, r.output
        said = " ".join(r.output.split())
        assert f"error: {spec}:{line}: field {field!r}: " in said and words in said, said


def test_a_baseline_outside_the_grid_is_counted_as_its_own_point(tmp_path, sweep_db,
                                                                  mlflow_uri):
    """The header said 24 points and the end "25 points logged", unexplained (QA 27)."""
    spec = tmp_path / "outside.toml"
    text = Path(SPEC).read_text(encoding="utf-8")
    assert "rrf_k = 60\n" in text.split("[baseline]", 1)[1]
    spec.write_text(text.replace('name = "sample_fusion"', 'name = "outside"')
                    .replace("[baseline]\nblend = \"rrf\"\nrrf_k = 60",
                             "[baseline]\nblend = \"rrf\"\nrrf_k = 5"), encoding="utf-8")
    r = _run("sweep", str(spec), "--db", sweep_db, "--cache-dir", str(tmp_path / "st"),
             "--tracking-uri", mlflow_uri)
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert "sweep outside: 24 points" in " ".join(r.output.split())
    assert "baseline rrf-k5-d20 (a point of its own, outside the grid): test ndcg@10" in text
    assert "25 points logged (the baseline among them), 0 already logged" in text
    # the per-value tables describe the grid: the baseline's rrf_k 5 is no value of it (QA 18)
    from aiblox.sweep import load_sweep_report
    from aiblox.sweep.runs import resolve_run

    rep = load_sweep_report("outside", mlflow_uri)
    assert [r["value"] for r in rep.axes["prefs.scoring.rrf_k"]] == ["10", "60"]
    assert sum(r["n"] for r in rep.axes["prefs.fts.top_k"]) == 24
    assert resolve_run("outside:baseline", mlflow_uri).label == "rrf-k5-d20"
    inside = " ".join(_run("sweep", SPEC, "--db", sweep_db, "--cache-dir",
                           str(tmp_path / "st"), "--no-tracking").stdout.split())
    assert "baseline rrf-k60-d20: test" in inside and "outside the grid" not in inside


def test_rerun_options_are_the_ones_given_quoted_as_a_shell_takes_them():
    from aiblox.cli._defaults import STAGE_CACHE_DIR
    from aiblox.cli.sweep import _rerun_options

    assert _rerun_options("", STAGE_CACHE_DIR, "") == ""  # the defaults: nothing to repeat
    assert _rerun_options("my store.duckdb", "s3://b/st", "cuda:1") == \
        "--db 'my store.duckdb' --cache-dir s3://b/st --device cuda:1"


def test_a_report_split_judging_the_tuning_queries_is_refused_before_any_work(tmp_path):
    """``train`` and ``test`` from two files that judge the same query ids passed the spec
    check (it compares split names), so the choice was reported on queries it was made on."""
    import shutil

    data = tmp_path / "leaky"
    shutil.copytree(SAMPLE, data, ignore=shutil.ignore_patterns("*.py", "README.md"))
    test = (data / "qrels" / "test.tsv").read_text(encoding="utf-8")
    train = (data / "qrels" / "train.tsv").read_text(encoding="utf-8")
    (data / "qrels" / "train.tsv").write_text(train + test.split("\n", 1)[1], encoding="utf-8")
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "x"\nmetrics = ["ndcg@10"]\ndataset = "{data.as_posix()}"\n'
                    f'tune_split = "train"\nreport_split = "test"\nembedder = "hashing"\n'
                    f'[grid]\nk1 = [0.9, 1.2]\n', encoding="utf-8")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    r = _run("sweep", str(spec), "--tracking-uri", uri, "--cache-dir", str(tmp_path / "st"),
             "--db", str(tmp_path / "s.duckdb"))
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    n = len({line.split("\t")[0] for line in test.splitlines()[1:]})
    assert (f"error: {spec}:5: field 'report_split': report_split = 'test': {n} of its {n} "
            f"scored queries are also scored in tune_split = 'train'") in said, said
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "st").exists()
    assert not (tmp_path / "s.duckdb").exists()
