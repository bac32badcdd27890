"""``aiblox report``'s reproduce command works from the folder the report is made in.

QA: the parent run recorded the spec path relative to the folder the sweep ran in, and never
that folder, so the command ``aiblox report`` printed (``aiblox sweep specs/s.toml ...``) worked
only from there ("no such sweep spec" elsewhere), and the spec's own relative paths (its
``dataset``, ``db``; the ``--cache-dir`` given) resolve against the working folder too. The
parent now records the folder (tag ``aiblox.workdir``); from elsewhere the command goes there
first, naming a local tracking store by its absolute path."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from typer.testing import CliRunner

from aiblox.cli.main import app

REPO = Path(__file__).resolve().parents[2]
SPEC = """
name = "reproduced"
dataset = "data/sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10"]
[base]
top_k_items = 10
fts = { top_k = 10 }
vector = { top_k = 10 }
[grid]
blend = ["rrf"]
rrf_k = [10, 60]
"""


def _run(*args: str):
    return CliRunner().invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def test_the_reproduce_command_works_from_any_folder(tmp_path, monkeypatch, sweep_db):
    from aiblox.sweep import load_sweep_report

    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "data" / "sample").symlink_to(REPO / "datasets" / "sample")
    (project / "specs" / "s.toml").write_text(SPEC)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(project)
    r = _run("sweep", "specs/s.toml", "--db", sweep_db, "--cache-dir", "stages",
             "--tracking-uri", "sqlite:///mlruns/mlflow.db", "--json")
    assert r.exit_code == 0, r.output
    parent = json.loads(r.stdout)["tracking"]["parent_run_id"]
    store = (project.resolve() / "mlruns" / "mlflow.db").as_posix()
    tail = f"aiblox sweep specs/s.toml --db {sweep_db} --cache-dir stages --tracking-uri "
    here = load_sweep_report(parent, "sqlite:///mlruns/mlflow.db").reproduce
    assert here == tail + "sqlite:///mlruns/mlflow.db"  # where it ran: as it was typed
    monkeypatch.chdir(tmp_path)
    above = load_sweep_report(parent, "sqlite:///project/mlruns/mlflow.db").reproduce
    assert above == f"cd project && {tail}sqlite:///{store}"
    monkeypatch.chdir(tmp_path / "elsewhere")
    command = load_sweep_report(parent, f"sqlite:///{store}").reproduce
    assert command == f"cd {project.resolve().as_posix()} && {tail}sqlite:///{store}"
    # and it runs: the spec, its dataset and the stage cache found, the same parent resumed
    folder, _, sweep = command.partition(" && ")
    monkeypatch.chdir(shlex.split(folder)[1])
    again = _run(*shlex.split(sweep)[1:], "--json")
    assert again.exit_code == 0, again.output
    out = json.loads(again.stdout)
    assert out["tracking"]["parent_run_id"] == parent and out["tracking"]["logged"] == 0
    assert out["computed"] == {}
