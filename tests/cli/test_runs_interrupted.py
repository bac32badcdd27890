"""``aiblox runs`` on a sweep whose process was killed (SIGKILL: MLflow still says RUNNING): it
is shown as interrupted, with why and the command that finishes it (it showed RUNNING with no
hint its process was gone); a live sweep and a finished one are not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("mlflow")

from aiblox.cli.main import app  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SPEC = """
name = "{name}"
dataset = "sample"
tune_split = "train"
report_split = "test"
backend = "duckdb"
embedder = "hashing"
metrics = ["ndcg@10"]
primary = "ndcg@10"
[base]
top_k_items = 10
[grid]
rrf_k = [10, 60]
"""
# opens the sweep's parent run as `aiblox sweep` does, then dies without a word (SIGKILL)
KILLED = """
import os, signal, sys
from aiblox.engine.tracking import SweepTracker
from aiblox.sweep import load_spec
spec = load_spec(sys.argv[1])
SweepTracker(sys.argv[2], "runs-interrupted", spec.hash, spec.model_dump(mode="json"),
             spec_path=sys.argv[1], rerun_options="--db my.duckdb")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_sweep_is_shown_interrupted_with_how_to_resume(tmp_path):
    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep import load_spec

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    killed = tmp_path / "killed.toml"
    killed.write_text(SPEC.format(name="killed"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", KILLED, str(killed), uri], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-3000:]
    # a sweep this process is writing now: live, never "interrupted"
    live = load_spec(_write(tmp_path, "live"))
    with SweepTracker(uri, "runs-live", live.hash, live.model_dump(mode="json")):
        _check(uri, killed)


def _check(uri: str, killed: Path) -> None:
    from aiblox.sweep.runs import list_sweeps

    rows = {r.name: r for r in list_sweeps(uri)}
    assert rows["killed"].status == rows["live"].status == "RUNNING"  # MLflow's status
    assert rows["live"].interrupted is None and rows["live"].resume is None
    assert "which ran it, has exited" in (rows["killed"].interrupted or "")
    resume = f"aiblox sweep {killed} --resume --db my.duckdb --tracking-uri {uri}"
    assert rows["killed"].resume == resume

    runner = CliRunner()
    table = runner.invoke(app, ["runs", "--tracking-uri", uri],
                          env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    line = next(ln for ln in table.stdout.splitlines() if ln.startswith("│ killed "))
    assert "RUNNING, interrupted" in line
    live_line = next(ln for ln in table.stdout.splitlines() if ln.startswith("│ live "))
    assert "interrupted" not in live_line
    note = f"sweep 'killed' (parent run {rows['killed'].parent_run_id}) was interrupted: "
    assert note in table.stdout and f"`{resume}` finishes it" in table.stdout
    assert "sweep 'live'" not in table.stdout
    points = runner.invoke(app, ["runs", "killed", "--tracking-uri", uri],
                           env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "400"})
    assert points.exit_code == 0, points.output
    assert f"`{resume}` finishes it" in points.stdout
    js = json.loads(runner.invoke(app, ["runs", "--tracking-uri", uri, "--format", "json"],
                                  env={"AIBLOX_NO_PROGRESS": "1"}).stdout)
    assert {r["name"]: r["resume"] for r in js} == {"killed": resume, "live": None}


def _write(folder: Path, name: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(SPEC.format(name=name), encoding="utf-8")
    return path
