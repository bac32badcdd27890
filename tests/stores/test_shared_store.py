"""A DuckDB store opened shared (:mod:`aiblox.stores.duckdb_lock`): a notebook's workspace left
open and a command in a terminal read one file side by side; a write holds the file alone for
its time only, waits for another process's write, and says which process holds it past the
wait. Before, the second process failed at once on DuckDB's lock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.contracts.items import ItemRecord
from aiblox.stores import DuckDBStore, StoreBusy

REPO = Path(__file__).resolve().parents[2]


def _item(i: int) -> ItemRecord:
    return ItemRecord(id=f"d{i}", source="t", title=f"doc {i}",
                      text=f"text number {i} about retrieval")


class Other:
    """Another process holding ``db``: ``shared`` (reading) or ``write_s`` seconds writing."""

    def __init__(self, db: Path, how: str) -> None:
        code = textwrap.dedent(f"""
            import sys, time
            from aiblox.stores import DuckDBStore
            store = DuckDBStore({str(db)!r}, dim=4, shared={how != "alone"})
            if {how!r} == "writing":
                with store.writable():
                    print("ready", flush=True)
                    time.sleep(1.5)
            else:
                print("ready", flush=True)
                sys.stdin.readline()
            store.close()
        """)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def end(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "s.duckdb"
    with DuckDBStore(path, dim=4) as store:
        store.upsert_items([_item(i) for i in range(3)])
    return path


def test_two_processes_read_one_store_and_a_write_waits_for_the_other(db, monkeypatch):
    other = Other(db, "shared")
    try:
        with DuckDBStore(db, dim=4, shared=True) as store:  # it used to fail on the lock
            assert store.count_items() == 3
            monkeypatch.setenv("AIBLOX_STORE_WAIT", "0.3")
            with pytest.raises(StoreBusy, match=rf"in use by process {other.proc.pid}: .*"
                               r"\(this needs to write it\)"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                store.upsert_items([_item(9)])
            assert store.count_items() == 3  # reading goes on; nothing half written
            # a cache write does not wait: dropped, with one warning
            with pytest.warns(UserWarning, match="new embeddings are used but not cached"):
                assert store.put_embeddings("m", [("h1", np.ones(4))]) == 0
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # said once
                assert store.put_embeddings("m", [("h2", np.ones(4))]) == 0
            other.end()
            assert store.upsert_items([_item(9)]).inserted == 1  # alone now: written
            assert store.put_embeddings("m", [("h1", np.ones(4))]) == 1
            assert store.count_items() == 4
            with pytest.raises(Exception, match="read-only"):  # the file is shared again
                store.con.execute("DELETE FROM items")
    finally:
        if other.proc.poll() is None:
            other.proc.kill()
    with DuckDBStore(db, dim=4) as again:
        assert again.count_items() == 4 and again.get_embeddings("m", ["h1"])


def test_opening_waits_for_another_process_s_write(db, monkeypatch):
    monkeypatch.setenv("AIBLOX_STORE_WAIT", "20")
    other = Other(db, "writing")
    with pytest.warns(UserWarning, match=f"in use by process {other.proc.pid}: waiting up to"):
        store = DuckDBStore(db, dim=4, shared=True)
    with store:
        assert store.count_items() == 3
    other.end()


def test_a_store_held_alone_elsewhere_names_the_process(db, monkeypatch):
    monkeypatch.setenv("AIBLOX_STORE_WAIT", "0")
    other = Other(db, "alone")  # e.g. an older aiblox, or DuckDB's own CLI
    try:
        with pytest.raises(StoreBusy, match=f"is in use by process {other.proc.pid}: DuckDB "
                           "lets one process write a file, or several read it; close"):
            DuckDBStore(db, dim=4, shared=True)
    finally:
        other.end()


def test_a_new_shared_store_is_made_then_shared(tmp_path):
    path = tmp_path / "new.duckdb"
    with DuckDBStore(path, dim=4, shared=True) as store:
        assert store.count_items() == 0 and store.dim == 4
        store.upsert_items([_item(1)])
        other = Other(path, "shared")  # the file is not held alone between writes
        assert store.count_items() == 1
        other.end()


def test_aiblox_search_reads_a_store_a_notebook_holds_open(tmp_path):
    db = tmp_path / "nb.duckdb"
    runner = CliRunner()
    env = {"AIBLOX_NO_PROGRESS": "1"}
    r = runner.invoke(app, ["ingest", "sample", "--db", str(db), "--embedder", "hashing"],
                      env=env)
    assert r.exit_code == 0, r.output
    code = textwrap.dedent(f"""
        import sys
        from aiblox.data import load_dataset
        from aiblox.engine.workspace import open_workspace
        ws = open_workspace(load_dataset("sample"), {str(db)!r}, "hashing", progress=False)
        print("ready", flush=True)
        sys.stdin.readline()
        ws.close()
    """)
    search = ["search", "who developed BM25", "--db", str(db), "--embedder", "hashing",
              "--mode", "hybrid", "--json"]
    nb = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert nb.stdout is not None and nb.stdout.readline().strip() == "ready"
        r = runner.invoke(app, search, env=env)
        assert r.exit_code == 0, r.output  # it failed on DuckDB's lock
        beside = [c["item_id"] for c in json.loads(r.stdout)["candidates"]]
    finally:
        nb.communicate("\n", timeout=60)
    assert nb.returncode == 0
    alone = runner.invoke(app, search, env=env)
    assert beside and beside == [c["item_id"] for c in json.loads(alone.stdout)["candidates"]]


def test_two_shared_stores_of_one_file_in_one_process_write_and_read(tmp_path):
    """In one process DuckDB opens a file to read or to write, not both: a second workspace on
    a store (a notebook cell run again) made every write of either fail ("a different
    configuration"), and the failed switch closed the store."""
    path = tmp_path / "one.duckdb"
    a = DuckDBStore(path, dim=4, shared=True)
    b = DuckDBStore(path, dim=4, shared=True)
    assert b.put_embeddings("m", [("h", np.ones(4))]) == 1
    assert b.upsert_items([_item(1)]).inserted == 1
    assert a.count_items() == b.count_items() == 1  # one connection: each sees the other's
    b.close()
    b.close()  # closing twice closes nothing of a's
    assert a.count_items() == 1 and a.get_embeddings("m", ["h"])
    a.close()
    with DuckDBStore(path, dim=4) as alone:  # the file is free once both are closed
        assert alone.count_items() == 1
