"""A ``--db`` (or a sweep spec's ``db``) naming no store aiblox opens is refused (QA: ``aiblox
ingest adi --db "mysql://user:hunter2@db.example.com:3306/aiblox"`` made a DuckDB file at
``./mysql:/user:hunter2@db.example.com:3306/aiblox``, the password in a folder's name, and
exited 0; a misspelt ``postgress://`` and ``postgres+psycopg://`` too). Any ``scheme://`` but
a PostgreSQL URL and ``duckdb:///PATH`` is one error line naming the forms a store takes, the
password masked, before anything is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.stores import StoreError, open_store

REPO = Path(__file__).resolve().parents[2]
ENV = {"AIBLOX_NO_PROGRESS": "1"}
URLS = ["mysql://user:hunter2@db.example.com:3306/aiblox", "postgress://me:hunter2@h/aiblox",
        "postgres+psycopg://me:hunter2@h/aiblox", "duckdb://relative.duckdb"]


@pytest.mark.parametrize("url", URLS)
def test_a_url_of_another_scheme_is_refused_before_anything_is_made(url, tmp_path,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="unknown store scheme") as exc:
        open_store(url)
    assert "hunter2" not in str(exc.value)
    for args in (["ingest", "sample", "--db", url, "--embedder", "hashing"],
                 ["sweep", str(REPO / "evals" / "sweeps" / "sample_fusion.toml"), "--db", url],
                 ["search", "bm25", "--mode", "bm25", "--db", url]):
        r = CliRunner().invoke(app, args, env=ENV)
        assert r.exit_code == 2, r.output
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")
        assert "hunter2" not in r.output and "postgresql+psycopg://" in r.output
        assert "duckdb:///PATH" in r.output
    assert list(tmp_path.iterdir()) == []  # no store, no folder, no MLflow store


@pytest.mark.parametrize(("db", "backend"), [
    ("postgresql+psycopg://u:p@h/db", "postgres"), ("postgresql://u@h/db", "postgres"),
    ("postgres://u@h/db", "postgres"), ("duckdb:///data/x.duckdb", "duckdb"),
    ("data/x.duckdb", "duckdb"), (":memory:", "duckdb"), ("/abs/x.duckdb", "duckdb")])
def test_the_forms_a_store_takes_name_their_backend(db, backend):
    from aiblox.stores import store_backend

    assert store_backend(db) == backend


def test_a_spec_whose_db_names_no_store_is_refused_at_its_line(tmp_path):
    from aiblox.sweep import SweepSpecError, load_spec

    text = (REPO / "evals" / "sweeps" / "sample_fusion.toml").read_text().replace(
        'backend = "duckdb"\n', 'db = "mysql://user:hunter2@db.example.com/aiblox"\n')
    line = text.splitlines().index('db = "mysql://user:hunter2@db.example.com/aiblox"') + 1
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(SweepSpecError) as exc:
        load_spec(tmp_path / "s.toml")
    message = str(exc.value)
    assert message.startswith(f"{tmp_path / 's.toml'}:{line}: field 'db': got "
                              f"'mysql://user:***@db.example.com/aiblox': unknown store scheme "
                              f"'mysql://': a store is a DuckDB file path, duckdb:///PATH")
    # a backend that does not match names the URL without its password
    (tmp_path / "s.toml").write_text(text.replace("mysql://", "postgresql://"))
    with pytest.raises(SweepSpecError) as exc:
        load_spec(tmp_path / "s.toml")
    assert "hunter2" not in str(exc.value) and "user:***@" in str(exc.value)
