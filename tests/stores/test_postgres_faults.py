"""Faults on a real PostgreSQL: a connection dropped mid-ingest leaves no half-written batch and
a re-run resumes; a server that is down is a clear error naming the URL, password masked."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.contracts import ItemRecord
from aiblox.stores import StoreError, ingest_items, open_store
from aiblox.stores.postgres import mask_url

DOCS = [ItemRecord(id=f"d{i}", title=f"doc {i}", text=f"text number {i} about foxes")
        for i in range(6)]
BOOM = ItemRecord(id="d4", title="doc 4", text="text number 4 about foxes")


def test_dropped_connection_mid_ingest_leaves_no_half_batch_and_rerun_resumes(pg_store):
    # A trigger kills the inserting backend itself while it writes d4: a real dropped
    # connection in the middle of the second batch's transaction (d3 was written before it).
    with pg_store.engine.begin() as conn:
        conn.execute(text("""
            CREATE FUNCTION aiblox_test_drop() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.id = 'd4' THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
                RETURN NEW;
            END $$"""))
        conn.execute(text("CREATE TRIGGER aiblox_test_drop BEFORE INSERT ON items FOR EACH ROW "
                          "EXECUTE FUNCTION aiblox_test_drop()"))
    try:
        with pytest.raises(StoreError, match="dropped the connection|unreachable") as err:
            ingest_items(pg_store, DOCS, None, batch_size=3, progress=False)
        assert pg_store.location in str(err.value)
        assert sorted(pg_store.item_hashes()) == ["d0", "d1", "d2"]  # batch 1 only, whole
    finally:
        with pg_store.engine.begin() as conn:
            conn.execute(text("DROP TRIGGER aiblox_test_drop ON items"))
            conn.execute(text("DROP FUNCTION aiblox_test_drop()"))
    report = ingest_items(pg_store, DOCS, None, batch_size=3, progress=False)
    assert (report.items.unchanged, report.items.inserted) == (3, 3)
    assert sorted(pg_store.item_hashes()) == [d.id for d in DOCS]
    assert pg_store.fts_search_many(["number 4"], 1)[0][0][0] == "d4"


DOWN = "postgresql+psycopg://alice:s3cr3t-pw@127.0.0.1:1/aiblox"


def test_server_down_is_a_clear_error_with_the_password_masked():
    with pytest.raises(StoreError) as err:
        open_store(DOWN)
    message = str(err.value)
    assert "postgresql+psycopg://alice:***@127.0.0.1:1/aiblox" in message
    assert "s3cr3t-pw" not in message and "unreachable" in message
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_mask_url_hides_passwords():
    assert mask_url("postgresql://u:p%40ss@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"


def test_cli_ingest_against_a_down_server_is_one_line_not_a_traceback():
    r = CliRunner().invoke(app, ["ingest", "sample", "--db", DOWN, "--embedder", "hashing"],
                           env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "200"})
    assert r.exit_code == 2
    assert "alice:***@127.0.0.1:1" in r.output and "s3cr3t-pw" not in r.output
    assert "Traceback" not in r.output


def test_cli_ingest_and_eval_on_postgres(pg_store):
    url = pg_store.url.render_as_string(hide_password=False)
    env = {"AIBLOX_NO_PROGRESS": "1"}
    runner = CliRunner()
    r = runner.invoke(app, ["ingest", "sample", "--db", url, "--embedder", "hashing", "--json"],
                      env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["items"]["inserted"] == 40
    r = runner.invoke(app, ["eval", "sample", "--db", url, "--embedder", "hashing", "--json",
                            "--mode", "bm25", "--mode", "dense", "--mode", "hybrid",
                            "--metric", "ndcg@10"], env=env)
    assert r.exit_code == 0, r.output
    by_mode = {o["name"]: o["metrics"]["ndcg@10"] for o in json.loads(r.stdout)["systems"]}
    assert set(by_mode) == {"bm25", "dense", "hybrid"} and by_mode["hybrid"] > 0.5, by_mode
