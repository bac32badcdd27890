"""The marimo notebooks: ``marimo check``, a PEP 723 header each, a purpose line in the README,
and a headless run of each on the sample dataset asserting on what it computed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _notebook_runs import (
    NOTEBOOKS,
    NOTEBOOKS_DIR,
    REPO,
    output_text,
    run_notebook,
    run_notebook_once,
)

pytest.importorskip("marimo")

PATHS = [NOTEBOOKS_DIR / f"{n}.py" for n in NOTEBOOKS]


def test_every_notebook_is_listed():
    found = sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.py"))
    assert found == sorted(NOTEBOOKS)


def test_marimo_check_passes():
    proc = subprocess.run([sys.executable, "-m", "marimo", "check", "--strict",
                           *[str(p) for p in PATHS]],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_what_marimo_export_writes_beside_a_notebook_is_ignored(tmp_path):
    """``marimo export html`` leaves its session cache beside the notebook
    (``__marimo__/session/<name>.json``): every file it writes there is ignored by git when
    it lands in notebooks/, so an export leaves nothing untracked (issue 29)."""
    nb = tmp_path / "tiny.py"
    nb.write_text("import marimo\napp = marimo.App()\n\n\n@app.cell\ndef _():\n    x = 1\n"
                  "    return (x,)\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "marimo", "export", "html", str(nb), "-o",
                           str(tmp_path / "out" / "tiny.html")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
               if p.is_file() and p != nb and "out" not in p.relative_to(tmp_path).parts]
    assert written  # marimo's session cache, where this marimo puts it
    for rel in written:
        check = subprocess.run(["git", "check-ignore", "-q", f"notebooks/{rel}"], cwd=REPO)
        assert check.returncode == 0, f"notebooks/{rel} would be left untracked"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_pep723_header_and_readme_line(name):
    source = (NOTEBOOKS_DIR / f"{name}.py").read_text(encoding="utf-8")
    header = re.match(r"# /// script\n((?:#.*\n)+?)# ///\n", source)
    assert header, f"{name}.py lacks a PEP 723 header"
    assert "aiblox" in header.group(1) and "marimo" in header.group(1)
    assert 'if __name__ == "__main__":\n    app.run()' in source  # runnable as a script
    readme = (NOTEBOOKS_DIR / "README.md").read_text(encoding="utf-8")
    assert f"`{name}.py`" in readme


def test_fusion_explorer_computes_metrics_from_cached_signals():
    from aiblox.explore import fusion_prefs, score_point

    d = run_notebook("fusion_explorer")
    ws, point, baseline = d["ws"], d["point"], d["baseline"]
    assert ws.dataset.name == "sample" and ws.embedder.model_id.startswith("hashing")
    assert set(point.metrics) == {"ndcg@10", "recall@100", "mrr@10", "map@100"}
    assert all(0.0 <= v <= 1.0 for v in point.metrics.values())
    assert point.metrics["recall@100"] > 0.9  # the sample's corpus is small: all found
    # the default widgets: linear blend, w_text 0.3, minmax, depth 100
    prefs = fusion_prefs(blend="linear", w_text=0.3, rrf_k=60, normalize="minmax", depth=100)
    assert point.prefs == prefs
    assert point.metrics == score_point(ws, prefs).metrics
    assert point.hashes["run"] != baseline.hashes["run"]  # RRF k=60 ranks differently
    curve = d["curve"]
    assert len(curve) == 21 and curve["value"].between(0, 1).all()
    assert curve.loc[6, "value"] == pytest.approx(point.metrics["ndcg@10"])  # w_text 0.3
    moved = d["moved"]
    assert len(moved) == len(ws.qrels) and (moved["delta"] != 0).any()
    for _, r in moved.iterrows():
        assert r["before"] == round(baseline.per_query["ndcg@10"][r["qid"]], 4)
        assert r["after"] == round(point.per_query["ndcg@10"][r["qid"]], 4)
    assert d["fuse_ms"] < 5000  # re-fusion answers in well under a second on the sample


def _cli_config_hash(ws, **options):
    """The config hash ``aiblox eval <dataset> --mode hybrid`` gives with these options (its
    own prefs builder, every option left out at the CLI's default)."""
    from aiblox.cli.eval import METRICS, _mode_prefs
    from aiblox.engine.evaluate import config_hash

    cli = {"blend": "rrf", "rrf_k": 60, "w_text": 0.35, "w_vec": 0.65, "normalize": "sigmoid",
           "missing": "zero", **options}
    prefs = _mode_prefs("hybrid", list(METRICS), depth=100, top_k=None,
                        ignore_identical_ids=False, **cli)
    return config_hash(prefs, ws.embedder.model_id, ws.store.kind)[0]


def test_fusion_explorer_config_hash_is_the_clis():
    """The config hash the explorer shows is the one ``aiblox eval`` (and a sweep point) gives
    for the same setting: the other blend's settings stay at their defaults (a linear setting
    carried RRF weights 0.6/1.4, an RRF one the linear sliders' normalisation)."""
    from aiblox.explore import fusion_prefs, score_point

    d = run_notebook("fusion_explorer")
    ws, point = d["ws"], d["point"]
    # the default widgets: linear, w_text 0.3, minmax, zero, depth 100 (RRF k slider at 60)
    assert point.hashes["config"] == _cli_config_hash(
        ws, blend="linear", w_text=0.3, w_vec=0.7, normalize="minmax", missing="zero")
    # RRF with the linear widgets moved off their defaults: they do not apply, not hashed
    rrf = score_point(ws, fusion_prefs(blend="rrf", w_text=0.5, rrf_k=10, normalize="minmax",
                                       missing="list_min", depth=100))
    assert rrf.hashes["config"] == _cli_config_hash(ws, blend="rrf", rrf_k=10)
    # a linear setting with the RRF k slider moved: k does not apply either
    linear = score_point(ws, fusion_prefs(blend="linear", w_text=0.6, rrf_k=10,
                                          normalize="zscore", depth=100))
    assert linear.hashes["config"] == _cli_config_hash(
        ws, blend="linear", w_text=0.6, w_vec=0.4, normalize="zscore")


def test_chunking_lab_cuts_and_compares():
    d = run_notebook("chunking_lab")
    doc, tables = d["doc"], d["tables"]
    assert set(tables) == {"headings", "sentences", "token_window"}
    for name, t in tables.items():
        assert len(t) >= 1, name
        for _, r in t.iterrows():
            assert doc.text[r["start"]:r["end"]] == r["text"]
        assert (t["tokens"] <= 128).all()
    assert tables["headings"]["heading_path"].str.len().gt(0).all()
    # the chunk ids are retrieval's: made from the document's content hash (they were made
    # from the sha256 of its text, ids no evidence chunk carries)
    from aiblox.chunking import make_chunker
    from aiblox.contracts.retrieval import ChunkingConfig

    for name, t in tables.items():
        chunker = make_chunker(ChunkingConfig(
            chunker_id=name, max_chunk_tokens=d["max_tokens"].value,
            overlap_tokens=d["overlap"].value, include_headers=d["include_headers"].value))
        ids = [c.chunk_id for c in chunker.chunk(doc.id, doc.text, doc.content_hash)]
        assert list(t["chunk_id"]) == ids, name
    comp = d["comparison"].set_index("chunker")
    assert set(comp.index) == {"headings", "sentences", "token_window"}
    assert (comp["queries"] == 12).all()
    for col in ("answer_recall@1", "answer_recall@5"):
        assert comp[col].between(0, 1).all()
    assert (comp["answer_recall@1"] <= comp["answer_recall@5"]).all()
    assert (comp["tokens_all"] > 0).all()


def test_policy_compare_v1_vs_v2():
    d = run_notebook("policy_compare")
    deltas = d["deltas"].set_index("metric")
    assert {"answered", "answer_f1", "evidence_answer_recall", "status:REFUSED",
            "selected_tokens"} <= set(deltas.index)
    # every query, but citation precision: only the queries that cited something
    assert (deltas.drop(index="citation_precision", errors="ignore")["n"] == 12).all()
    assert (deltas["wins"] + deltas["ties"] + deltas["losses"] == deltas["n"]).all()
    assert deltas["p_value"].between(0, 1).all()
    # V2's larger budget selects more evidence on every query of the sample
    assert deltas.loc["selected_tokens", "B"] > deltas.loc["selected_tokens", "A"]
    assert deltas.loc["selected_chunks", "B"] > deltas.loc["selected_chunks", "A"]
    changes = d["changes"]
    assert len(changes) > 0 and set(changes["qid"]) <= set(d["bundles"])
    assert d["runs"] is not None  # the MLflow part ran (empty store or not)
    # the evidence packs of the first query whose evidence changed, and their diff
    q = changes["qid"].iloc[0]
    pack_a, pack_b, diff = d["pack_a"], d["pack_b"], d["pack_diff"]
    assert d["pack_query"].value == q and pack_a.query == d["ws"].query_text[q]
    assert pack_a.pack_id != pack_b.pack_id
    # the pack `aiblox answer` would store, as the panel says: the query inspector's (equal to
    # the CLI's, tests/notebooks/test_explore.py), with no query id the CLI cannot set and no
    # batch size of the 12 queries retrieved together
    from aiblox.explore import inspect_question

    for pack, policy in ((pack_a, d["policy_a"].value), (pack_b, d["policy_b"].value)):
        assert pack.query_id is None
        assert pack.pack_id == inspect_question(d["ws"], pack.query, policy).pack.pack_id
    assert diff.iloc[0]["field"] == "pack_id" and diff.iloc[0]["B"] == pack_b.pack_id
    assert "tool_calls[llm].inputs.policy_sha256" in set(diff["field"])
    row = changes.set_index("qid").loc[q]
    only_b = {c for c in row["only_B"].split(", ") if c}
    added = set(diff.loc[(diff["field"] == "sources") & (diff["change"] == "added"), "B"])
    assert {a.rsplit("#", 1)[1] for a in added} == only_b  # the chunks only B selected


ONE_POINT_SPEC = """
name = "one_point"
dataset = "sample"
tune_split = "train"
report_split = "test"
backend = "duckdb"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10"]
primary = "ndcg@10"
[base]
top_k_items = 10
scoring = { blend = "rrf" }
fts = { top_k = 20 }
vector = { top_k = 20 }
"""


def test_policy_compare_offers_points_only_and_needs_two(tmp_path, monkeypatch):
    """The MLflow pickers list the points, never a sweep's parent run (which ``aiblox compare``
    refuses): with one logged one-point sweep the notebook says two points are needed (its
    default run B was the parent run, and the cell raised)."""
    pytest.importorskip("mlflow")
    from aiblox.engine.tracking import DEFAULT_TRACKING_URI, SweepTracker
    from aiblox.sweep import load_spec, run_sweep

    monkeypatch.chdir(tmp_path)  # the notebook reads ./mlruns/mlflow.db, as the CLI does
    (tmp_path / "one_point.toml").write_text(ONE_POINT_SPEC, encoding="utf-8")
    spec = load_spec(tmp_path / "one_point.toml")
    tracker = SweepTracker(DEFAULT_TRACKING_URI, "one-point", spec.hash,
                           spec.model_dump(mode="json"))
    run_sweep(spec, cache_dir=tmp_path / "stages", db=":memory:", progress=False,
              tracker=tracker)
    (child,) = tracker.children()
    outputs, d = run_notebook_once("policy_compare")
    runs = d["runs"]
    assert len(runs) == 2 and "sweep" in set(runs["tags.aiblox.kind"])  # parent and point
    assert list(d["run_choices"].values()) == [child.info.run_id]
    assert d["run_metrics"] is None and d["run_per_query"] is None
    assert "1 point run in" in output_text(outputs)
    assert "two are needed to compare" in output_text(outputs)


def test_notebooks_and_the_cli_read_mlflow_tracking_uri(tmp_path, monkeypatch):
    """A store named by MLFLOW_TRACKING_URI (MLflow's own convention) was read by neither the
    notebooks (always ./mlruns/mlflow.db) nor the CLI (always --tracking-uri's default)."""
    pytest.importorskip("mlflow")
    from typer.testing import CliRunner

    from aiblox.cli.main import app
    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep import load_spec, run_sweep

    uri = f"sqlite:///{tmp_path / 'elsewhere' / 'mlflow.db'}"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "one_point.toml").write_text(ONE_POINT_SPEC, encoding="utf-8")
    spec = load_spec(tmp_path / "one_point.toml")
    tracker = SweepTracker(uri, "one-point", spec.hash, spec.model_dump(mode="json"))
    run_sweep(spec, cache_dir=tmp_path / "stages", db=":memory:", progress=False,
              tracker=tracker)
    (child,) = tracker.children()
    monkeypatch.chdir(tmp_path / "stages")  # no ./mlruns here
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    outputs, d = run_notebook_once("policy_compare")
    assert d["tracking_uri"] == uri and list(d["run_choices"].values()) == [child.info.run_id]
    listed = CliRunner().invoke(app, ["runs", "list", spec.name, "--format", "json"],
                                env={"AIBLOX_NO_PROGRESS": "1", "MLFLOW_TRACKING_URI": uri})
    assert listed.exit_code == 0, listed.output
    assert child.info.run_id in listed.stdout
    assert not (tmp_path / "stages" / "mlruns").exists()


def test_point_run_choices_leave_out_sweeps():
    import pandas as pd

    from aiblox.explore import point_run_choices

    runs = pd.DataFrame({"run_id": ["c" * 32, "b" * 32, "a" * 32, "d" * 32],
                         "tags.mlflow.runName": ["lin-w0.3", "sweep-s", "rrf-k60", None],
                         "tags.aiblox.kind": ["point", "sweep", "point", "notebook"]})
    assert point_run_choices(runs) == {"lin-w0.3 cccccccc": "c" * 32,
                                       "rrf-k60 aaaaaaaa": "a" * 32, "dddddddd": "d" * 32}
    assert point_run_choices(pd.DataFrame()) == {}


def test_query_inspector_traces_one_question():
    d = run_notebook("query_inspector")
    trace = d["trace"]
    assert trace.result.validation.validation_status == "PASSED"
    assert "Okapi" in (trace.result.answer_text or "")
    assert d["prompt_sha256"] == trace.result.prompt.prompt_sha256
    assert len(d["hashes"]) == len(trace.hashes) >= 10
    assert trace.candidates["rank_vec"].notna().all()
    # the evidence pack: intact, and the same id as the question's on a fresh store
    from aiblox.explore import inspect_question, open_notebook_workspace

    pack = d["pack"]
    assert pack is trace.pack and d["pack_problems"] == []
    assert pack.decision.kind == "answer" and len(d["pack_sources"]) == len(pack.sources) > 0
    ws = open_notebook_workspace("sample", "hashing", max_depth=5)
    try:
        again = inspect_question(ws, trace.question, top_k_chunks=12)
    finally:
        ws.close()
    assert again.pack.pack_id == pack.pack_id


@pytest.fixture(scope="module")
def train_only_root(tmp_path_factory):
    """A dataset root whose ``sample`` is the project's with its ``train`` qrels only."""
    root = tmp_path_factory.mktemp("train-only")
    shutil.copytree(REPO / "datasets" / "sample", root / "sample",
                    ignore=shutil.ignore_patterns("test.*"))
    return root


def test_split_choices_prefer_test_else_the_first(train_only_root, monkeypatch):
    from aiblox.explore import split_choices

    assert split_choices("sample") == (["test", "train"], "test")
    monkeypatch.setenv("AIBLOX_DATASETS", str(train_only_root))
    assert split_choices("sample") == (["train"], "train")
    dev = train_only_root / "dev_first"
    shutil.copytree(train_only_root / "sample", dev)
    shutil.copy(dev / "qrels" / "train.tsv", dev / "qrels" / "dev.tsv")
    assert split_choices(str(dev)) == (["dev", "train"], "dev")  # sorted: deterministic


@pytest.mark.parametrize("name", ["query_inspector", "chunking_lab", "policy_compare"])
def test_a_dataset_without_a_test_split_opens_its_first_split(name, train_only_root,
                                                              monkeypatch):
    """A dataset with no ``test`` qrels opens on its first split, with a split picker as the
    fusion explorer's (the notebook asked for ``test`` and raised DatasetError)."""
    monkeypatch.setenv("AIBLOX_DATASETS", str(train_only_root))
    _, d = run_notebook_once(name)
    ws = d["ws"]
    assert ws.dataset.path.parent == train_only_root  # the train-only copy, not the sample
    assert d["split"].value == ws.split == "train" and set(ws.dataset.qrels) == {"train"}
    assert len(ws.queries) == len(ws.qrels) > 0


def test_sweep_board_shows_the_sample_sweep(tmp_path):
    """The default spec (sample_fusion) run through the repository's stage cache gives what a
    fresh sweep in an empty cache gives, and every table and plot is drawn from that result."""
    from aiblox.sweep import axis_frame, choose_best, load_spec, pareto_frame, run_sweep
    from aiblox.sweep.results import pareto_points

    d = run_notebook("sweep_board")
    result, spec = d["result"], d["spec"]
    assert d["spec_path"] == "evals/sweeps/sample_fusion.toml" and result.name == "sample_fusion"
    assert d["cache_dir"] == REPO / ".aiblox" / "stages"
    assert len(result.points) == 24 and result.baseline is not None
    counts = d["counts"].set_index("stage")
    # every stage output either computed now or read back (a warm cache reads all)
    assert (counts["computed"] + counts["reused"]).to_dict() == {
        "signals": 4, "fusion": 48, "metrics": 48}
    fresh = run_sweep(load_spec(REPO / "evals" / "sweeps" / "sample_fusion.toml"),
                      cache_dir=tmp_path, db=":memory:", progress=False)
    assert fresh.best.config_hash == result.best.config_hash
    assert [p.metrics for p in fresh.points] == [p.metrics for p in result.points]
    assert result.best == choose_best(result.points, spec.tune_split, spec.primary)
    board = d["board"]
    assert len(board) == 24 and board.iloc[0]["label"] == result.best.label
    assert bool(board.iloc[0]["best"]) and board["baseline"].sum() == 1
    assert d["axes"] == ["blend", "w_text", "normalize", "rrf_k", "depth"]
    assert d["axis"].value == "w_text" and d["chosen_value"] == result.best.scoring["w_text"]
    assert d["along"].equals(axis_frame(result, "w_text")) and len(d["along"]) == 5
    scatter = d["scatter"]
    assert len(scatter) == 24 and scatter["best"].sum() == scatter["baseline"].sum() == 1
    front = d["front"]  # sample_fusion sets no objectives: ndcg@10 against candidates
    assert d["cost"] == "candidates" and front.equals(pareto_frame(result))
    on = front[front["front"]]
    expected = pareto_points([p for p in result.points if not p.is_baseline], "train",
                             {"ndcg@10": "maximize", "candidates": "minimize"}, "ndcg@10")
    assert on["label"].tolist() == [p.label for p in expected] == front["label"][:len(on)].tolist()
    assert bool(on.iloc[0]["best"]) and not on["baseline"].any()
    assert on["candidates"].is_monotonic_decreasing  # the front: better only at a higher cost
    sig = d["significance"]
    assert len(sig) == 9 and sig.iloc[0]["candidate"] == result.best.label
    assert (sig["p_adjusted"] >= sig["p_value"]).all()
    hashes = d["hashes"]
    assert set(hashes.loc[hashes["stage"] == "run", "output_hash"]) == {
        sm.run_hash for sm in result.best.manifest.splits.values()}
    assert d["reproduce"] == "aiblox sweep evals/sweeps/sample_fusion.toml"
    assert d["verify"] == "aiblox eval verify sample_fusion"


def _sweep_board_cells():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sweep_board_cells",
                                                  NOTEBOOKS_DIR / "sweep_board.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sweep_board_outside_the_checkout_uses_the_working_folders_cache(tmp_path,
                                                                       monkeypatch):
    """Run from a folder outside the checkout, the board used the checkout's stage cache
    while ``aiblox sweep`` there uses the folder's, and its rerun command named the spec
    relative to the checkout, which failed there (QA): the cache is the working folder's and
    the spec's path is one the command finds from there."""
    from types import SimpleNamespace

    import marimo as mo

    import aiblox
    from aiblox.explore import default_db
    from aiblox.sweep import load_spec
    from aiblox.sweep.runner import DEFAULT_CACHE_DIR

    module = _sweep_board_cells()
    monkeypatch.chdir(tmp_path)
    _, folders = module.sweep_folders.run(DEFAULT_CACHE_DIR=DEFAULT_CACHE_DIR, Path=Path,
                                          aiblox=aiblox)
    assert folders["cache_dir"] == tmp_path / ".aiblox" / "stages"
    assert folders["specs_dir"] == REPO / "evals" / "sweeps"
    swept = {}
    _, defs = module.sweep_of_the_picked_spec.run(
        Path=Path, default_db=default_db, load_spec=load_spec, mo=mo,
        run_button=SimpleNamespace(value=False),
        run_sweep=lambda s, **kw: swept.update(kw) or "swept",
        spec_file=SimpleNamespace(value="sample_fusion.toml"), **folders)
    assert swept["cache_dir"] == tmp_path / ".aiblox" / "stages"
    spec_path = Path(defs["spec_path"])
    assert spec_path == REPO / "evals" / "sweeps" / "sample_fusion.toml"  # absolute
    assert load_spec(spec_path).name == "sample_fusion"
    # under the working folder, the path is relative to it, as before
    monkeypatch.chdir(REPO / "evals")
    _, defs = module.sweep_of_the_picked_spec.run(
        Path=Path, default_db=default_db, load_spec=load_spec, mo=mo,
        run_button=SimpleNamespace(value=False), run_sweep=lambda s, **kw: "swept",
        spec_file=SimpleNamespace(value="sample_fusion.toml"), **folders)
    assert defs["spec_path"] == "sweeps/sample_fusion.toml"


def test_sweep_board_runs_a_picked_spec_only_when_asked():
    """Picking a spec started its sweep at once (a fine-tuning spec: half an hour, with no way
    to look first, QA 27): another spec than the sample waits for the run button."""
    from types import SimpleNamespace

    import marimo as mo

    from aiblox.explore import default_db
    from aiblox.sweep import load_spec

    module = _sweep_board_cells()
    started: list[str] = []

    def cell(pick: str, pressed: bool):
        return module.sweep_of_the_picked_spec.run(
            Path=Path, cache_dir=REPO / ".aiblox" / "stages", default_db=default_db,
            load_spec=load_spec, mo=mo, run_button=SimpleNamespace(value=pressed),
            run_sweep=lambda s, **_: started.append(s.name) or "swept",
            spec_file=SimpleNamespace(value=pick), specs_dir=REPO / "evals" / "sweeps")

    shown, defs = cell("scifact_finetune.toml", pressed=False)
    assert started == [] and "result" not in defs
    assert "Press <strong>run sweep</strong>" in shown.text and "scifact_finetune" in shown.text
    _, defs = cell("scifact_finetune.toml", pressed=True)
    assert started == ["scifact_finetune"] and defs["result"] == "swept"
    _, defs = cell("sample_fusion.toml", pressed=False)  # seconds long: at once
    assert started[-1] == "sample_fusion" and defs["result"] == "swept"


CV_SPEC = """
name = "sample_cv"
description = "RRF k on datasets/sample, 3-fold cross-validated over test."
dataset = "sample"
tune_split = "test"
backend = "duckdb"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10"]
primary = "ndcg@10"
[base]
top_k_items = 10
fts = { top_k = 20 }
vector = { top_k = 20 }
[grid]
rrf_k = [10, 60]
[baseline]
rrf_k = 5
[cv]
folds = 3
seed = 0
"""


def test_sweep_board_reports_a_cross_validated_sweep(tmp_path, monkeypatch):
    """A ``[cv]`` spec has no report split: the board says what it reports instead (the k-fold
    held-out score, in ``aiblox report``'s words) and the cross-validated verdict against the
    baseline, and no text or plot label names a report split (it said "reported on `None`")."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from aiblox.sweep.frames import folds_frame

    sweeps = tmp_path / "evals" / "sweeps"
    sweeps.mkdir(parents=True)
    (sweeps / "sample_fusion.toml").write_text(CV_SPEC, encoding="utf-8")  # the default pick
    monkeypatch.chdir(tmp_path)  # the checkout: the first folder up holding evals/sweeps
    outputs, d = run_notebook_once("sweep_board")
    result = d["result"]
    assert result.name == "sample_cv" and result.report_split is None and result.cv is not None
    cv = result.cv
    text = output_text(outputs)
    labels = [t.get_text() for o in outputs if isinstance(o, Figure) for t in o.findobj(Text)]
    assert "None" not in text and not [t for t in labels if "None" in t or "report" in t]
    assert (f"reported by 3-fold cross-validation over `test` ({cv.n_queries} queries, "
            f"seed 0)") in d["reported"]
    assert f"cross-validated ndcg@10 {cv.pooled_held_out:.4f}" in text
    assert "Cross-validated choice against the baseline rrf-k5-d20" in text
    assert cv.verdict in text
    assert d["folds"].equals(folds_frame(result)) and len(d["folds"]) == 3


@pytest.mark.parametrize("name", ["policy_compare", "query_inspector", "sweep_board"])
def test_runs_as_a_plain_script(name, tmp_path):
    """``python notebooks/<name>.py`` from another folder: datasets and policies are found
    through the installed package's checkout."""
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(NOTEBOOKS_DIR / f"{name}.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    if name == "sweep_board":  # the stage cache `aiblox sweep` run there uses
        assert (tmp_path / ".aiblox" / "stages").is_dir()
