"""A role granted only ``SELECT`` opens a populated PostgreSQL store and searches and scores it
(QA: every open ran ``create_all`` and an ``INSERT ... ON CONFLICT DO NOTHING`` into
``aiblox_meta``, so ``aiblox search --db postgresql+psycopg://readonly@.../aiblox`` failed with
``failed to create the schema: permission denied for table aiblox_meta``, after a stray
``error ignored terminating <psycopg.Pipeline [INERROR ...]>: pipeline aborted`` line).

A current schema is only read; the caches a search writes through (the query's vector, the
documents' chunks) are used and not kept, said in a warning; a command that writes the store
fails with one ``error:`` line naming what it wrote; the driver's own log never reaches stderr.
A real read-only role, created in the test's own database."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from aiblox.cli.main import app

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "sample"
QUERY = "BM25 ranking function"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def _url(url) -> str:
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def stores(pg_admin_url, tmp_path_factory):
    """``(admin URL, read-only URL)`` of a database holding the sample dataset (hashing
    vectors), the read-only role granted ``SELECT`` on its tables and nothing else."""
    from aiblox.stores.postgres import scratch_database

    role = f"aiblox_ro_{uuid.uuid4().hex[:8]}"
    with scratch_database(pg_admin_url) as url:
        res = _cli("ingest", str(SAMPLE), "--db", _url(url), "--embedder", "hashing")
        assert res.exit_code == 0, res.output
        engine = create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD 'ro-pw'"))
            conn.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"))
        try:
            yield _url(url), _url(url.set(username=role, password="ro-pw"))
        finally:
            engine.dispose()
    admin = create_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # its database dropped: nothing of it is left to own
        conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
    admin.dispose()


def _counts(db: str) -> dict[str, int]:
    engine = create_engine(db)
    with engine.connect() as conn:
        out = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
               for t in ("aiblox_meta", "embedding_cache", "chunk_cache")}
    engine.dispose()
    return out


def test_a_select_only_role_opens_a_populated_store_and_writes_nothing(stores):
    from aiblox.stores import open_store

    admin, readonly = stores
    with open_store(admin) as rw:
        meta = rw.meta
    with open_store(readonly, dim=None) as ro:
        assert ro.meta == meta and ro.count_items() == 40


def test_a_select_only_role_searches_and_scores_with_the_same_results(stores, tmp_path,
                                                                      monkeypatch):
    admin, readonly = stores
    monkeypatch.chdir(tmp_path)
    before = _counts(admin)
    got = {}
    for who, db in (("ro", readonly), ("rw", admin)):
        for mode in ("bm25", "hybrid"):
            res = _cli("search", QUERY, "--db", db, "--mode", mode, "--embedder", "hashing",
                       "--json")
            assert res.exit_code == 0, res.output
            out = json.loads(res.stdout)
            got[who, mode] = ([(c["item_id"], c["score"]) for c in out["candidates"]],
                              [e["chunk_id"] for e in out["evidence"]])
            if who == "ro":  # the caches it could not write, said; no error
                assert "error" not in res.stderr
                assert "failed to write the chunk cache: permission denied" in res.stderr
                assert "not kept" in res.stderr
        res = _cli("eval", str(SAMPLE), "--db", db, "--embedder", "hashing", "--json")
        assert res.exit_code == 0, res.output
        got[who, "eval"] = [(s["hashes"], s["metrics"]) for s in
                            json.loads(res.stdout)["systems"]]
    assert got["ro", "bm25"][0] and got["ro", "hybrid"][1] and got["ro", "eval"]
    assert {k[1]: v for k, v in got.items() if k[0] == "ro"} == \
        {k[1]: v for k, v in got.items() if k[0] == "rw"}
    assert _counts(admin)["aiblox_meta"] == before["aiblox_meta"]


def test_a_write_by_a_select_only_role_is_one_error_line_naming_it(stores, tmp_path):
    _, readonly = stores
    copy = tmp_path / "sample"
    shutil.copytree(SAMPLE, copy)
    with (copy / "corpus.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "new", "title": "new", "text": "a new document"}) + "\n")
    res = _cli("ingest", str(copy), "--db", readonly, "--embedder", "hashing", "--replace")
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: PostgreSQL at "), res.stderr
    assert "failed to write" in lines[0] and "permission denied for table" in lines[0]
    assert "ro-pw" not in res.stderr


_FAILING_READ = """
import sys

from aiblox.stores.postgres import PostgresStore


def failing(self):
    with self.db_errors("read the store metadata"), self.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO aiblox_meta (key, value) VALUES (%(k)s, %(v)s)",
                             [{"k": "schema_version", "v": str(i)} for i in range(200)])


PostgresStore.read_meta = failing
sys.argv = ["aiblox", *sys.argv[1:]]
from aiblox.cli.main import main

main()
"""


def test_the_drivers_log_is_not_shown_the_error_is_one_line(stores, tmp_path):
    """psycopg logs ``error ignored terminating <psycopg.Pipeline ...>`` when a batch of
    statements it pipelines fails (a real one here: 200 rows, the first a duplicate key), and
    Python's last-resort handler printed it; the command's error is its one line. A real
    process: pytest's own log handlers would take the record in this one."""
    import os
    import subprocess
    import sys

    admin, _ = stores
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    env.pop("AIBLOX_DEBUG", None)
    res = subprocess.run([sys.executable, "-c", _FAILING_READ, "search", QUERY, "--db", admin,
                          "--mode", "bm25"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: PostgreSQL at "), res.stderr
    assert "failed to read the store metadata: duplicate key" in lines[0]
    assert "psycopg.Pipeline" not in res.stderr
