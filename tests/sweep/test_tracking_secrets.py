"""A store's password never reaches MLflow or a report (QA: a sweep on PostgreSQL logged the
parent param ``spec.db = postgresql+psycopg://postgres:secret@...`` and the tag
``aiblox.rerun_options = --db postgresql+psycopg://postgres:x@...``, and ``aiblox report``
printed that URL and wrote it into report.md and report.html, uploaded to MLflow too).

The param and the tag hold the URL with its password masked; a command that reruns the sweep
(the report's reproduce line, ``aiblox runs``' resume command) reads the password from an
environment variable, ``--db "$AIBLOX_DB"`` as docs/distributed.md writes it, a comment at its
end saying what the variable holds."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app

pytest.importorskip("mlflow")

REPO = Path(__file__).resolve().parents[2]
SECRET = "S3CRETPW"
SPEC = """
name = "{name}"
dataset = "{dataset}"
tune_split = "train"
report_split = "test"
{db}
embedder = "hashing"
metrics = ["ndcg@10"]
[base]
top_k_items = 10
fts = {{ top_k = 10 }}
vector = {{ top_k = 10 }}
[grid]
blend = ["rrf"]
rrf_k = [10, 60]
"""


def _cli(*args: str) -> str:
    r = CliRunner().invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return r.stdout


def _logged_text(uri: str) -> list[str]:
    """Every param, tag and artifact (as text) of every run in the store."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    out = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=1000):
            out += [f"{k}={v}" for k, v in {**run.data.params, **run.data.tags}.items()]
            todo = [a for a in client.list_artifacts(run.info.run_id)]
            while todo:
                a = todo.pop()
                if a.is_dir:
                    todo += client.list_artifacts(run.info.run_id, a.path)
                else:
                    path = client.download_artifacts(run.info.run_id, a.path)
                    out.append(Path(path).read_bytes().decode("utf-8", "replace"))
    return out


def test_no_password_is_logged_to_mlflow_or_written_into_a_report(
        tmp_path, monkeypatch, pg_admin_url):
    from aiblox.stores.postgres import scratch_database

    with scratch_database(pg_admin_url) as url:
        secret = url.password or SECRET  # a server that checks passwords: its own
        db = url.set(password=secret).render_as_string(hide_password=False)
        monkeypatch.chdir(tmp_path)
        data = (REPO / "datasets" / "sample").as_posix()
        in_spec = f"backend = 'postgres'\ndb = {json.dumps(db)}"
        Path("in_spec.toml").write_text(SPEC.format(name="in_spec", dataset=data, db=in_spec))
        Path("by_option.toml").write_text(SPEC.format(name="by_option", dataset=data, db=""))
        uri = "sqlite:///mlruns/mlflow.db"
        printed = [_cli("sweep", "in_spec.toml", "--cache-dir", "stages", "--tracking-uri", uri,
                        "--json"),
                   _cli("sweep", "by_option.toml", "--db", db, "--cache-dir", "stages",
                        "--tracking-uri", uri, "--json")]
        printed += [_cli("report", name, "--tracking-uri", uri, *json_)
                    for name in ("in_spec", "by_option") for json_ in ((), ("--json",))]
        printed.append(_cli("runs", "--tracking-uri", uri))
        logged = _logged_text(uri)
        assert "spec.db=" + db.replace(f":{secret}@", ":***@") in logged  # the host is named
        written = {p: p.read_bytes().decode("utf-8", "replace")
                   for p in Path(".").rglob("*") if p.is_file() and p.suffix != ".toml"}
        assert any(p.name == "report.md" for p in written)  # reports, stage metas, MLflow
        assert not [t for t in logged if secret in t]
        assert not [o for o in printed if secret in o]
        assert not [p for p, t in written.items() if secret in t]
        # the reproduce line runs as written once AIBLOX_DB is set, and says what it holds
        command = json.loads(printed[5])["reproduce"]
        assert command == ('aiblox sweep by_option.toml --db "$AIBLOX_DB" --cache-dir stages '
                           f'--tracking-uri {uri}  # AIBLOX_DB: '
                           f'{db.replace(f":{secret}@", ":***@")} with its password')
        md = Path("reports/by_option/report.md").read_text()
        assert command in md
        words = shlex.split(os.path.expandvars(command.replace('"$AIBLOX_DB"', shlex.quote(db))),
                            comments=True)
        assert words[words.index("--db") + 1] == db


def test_a_rerun_command_reads_every_password_from_the_environment():
    """A tag logged before tags were masked (the password in clear) and a masked one give the
    same command; an option without a password is written as given."""
    from aiblox.engine.tracking.layout import rerun_command, rerun_options

    clear = shlex.join(["--db", "postgresql+psycopg://me:pw1@db.internal/aiblox",
                        "--cache-dir", "ftp://me:pw2@files/stages", "--device", "cpu"])
    masked = rerun_options([("--db", "postgresql+psycopg://me:pw1@db.internal/aiblox"),
                            ("--cache-dir", "ftp://me:pw2@files/stages"), ("--device", "cpu")])
    assert "pw1" not in masked and "pw2" not in masked and "me:***@db.internal" in masked
    expected = ('aiblox sweep s.toml --db "$AIBLOX_DB" --cache-dir "$AIBLOX_CACHE" --device cpu '
                '--tracking-uri "$AIBLOX_TRACKING"  # AIBLOX_DB: '
                'postgresql+psycopg://me:***@db.internal/aiblox with its password; '
                'AIBLOX_CACHE: ftp://me:***@files/stages with its password; '
                'AIBLOX_TRACKING: postgresql://ml:***@h/mlflow with its password')
    for options in (clear, masked):
        assert rerun_command("aiblox sweep s.toml", options, "--tracking-uri",
                             "postgresql://ml:pw3@h/mlflow") == expected
    assert rerun_command("aiblox sweep s.toml --resume", "--db 'my store.duckdb'",
                         "--tracking-uri", "sqlite:///mlruns/mlflow.db") == (
        "aiblox sweep s.toml --resume --db 'my store.duckdb' --tracking-uri "
        "sqlite:///mlruns/mlflow.db")


def test_an_interrupted_sweeps_resume_command_names_no_password():
    """``aiblox runs`` shows how to finish an interrupted sweep, from its tags."""
    from aiblox.sweep.runs import _resume_command

    tags = {"aiblox.spec_path": "s.toml",
            "aiblox.rerun_options": "--db postgresql+psycopg://me:pw1@h/aiblox"}
    command = _resume_command("s", tags, "sqlite:///mlruns/mlflow.db")
    assert "pw1" not in command
    assert command.startswith('aiblox sweep s.toml --resume --db "$AIBLOX_DB" --tracking-uri')
