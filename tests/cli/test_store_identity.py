"""Numbers follow the user's data: each dataset has its own store, a store of another dataset is
refused, re-ingest synchronises (deletes included), a killed ingest is named and completed, and a
sweep never reuses results computed on a store holding other content. Real DuckDB files, real
processes for the kills."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from tests.conftest import shared_dataset

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "datasets" / "sample"
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def _said(r) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(r.output.split())


def _ok(*args: str) -> dict:
    r = _run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _copy_sample(dst: Path) -> Path:
    shutil.copytree(SAMPLE, dst, ignore=shutil.ignore_patterns("*.py", "README.md"))
    return dst


def _eval(ds: str | Path, db: str, mode: str = "bm25") -> dict:
    """The one system of ``aiblox eval --json``."""
    return _ok("eval", str(ds), "--db", db, "--embedder", "hashing", "--mode", mode)["systems"][0]


def _drop_doc(ds: Path, doc_id: str) -> None:
    corpus = ds / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [ln for ln in lines if json.loads(ln)["_id"] != doc_id]
    assert len(kept) == len(lines) - 1
    corpus.write_text("".join(kept), encoding="utf-8")


def test_two_folders_with_one_name_get_two_default_stores(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = _copy_sample(tmp_path / "a" / "mydata")
    b = _copy_sample(tmp_path / "b" / "mydata")
    _drop_doc(b, "d01")  # b's copy lacks the first document
    ra = _ok("eval", str(a), "--embedder", "hashing", "--mode", "bm25")["systems"][0]
    rb = _ok("eval", str(b), "--embedder", "hashing", "--mode", "bm25")["systems"][0]
    stores = sorted(p.name for p in (tmp_path / ".aiblox" / "datasets").glob("*.duckdb"))
    assert len(stores) == 2 and all(s.startswith("mydata-") for s in stores)
    assert ra["hashes"]["run"] != rb["hashes"]["run"]
    # each default store holds its own folder's documents, whatever command opened it
    ingest = _ok("ingest", str(b), "--embedder", "hashing")
    assert ingest["items"]["unchanged"] == 39 and ingest["db"] in [
        f".aiblox/datasets/{s}" for s in stores]
    r = _run("search", "BM25 saturation", "--dataset", str(a), "--mode", "bm25", "--json")
    assert r.exit_code == 0, r.output
    assert "d01" in [c["item_id"] for c in json.loads(r.stdout)["candidates"]]


def test_a_store_of_another_dataset_is_refused_then_replaced(tmp_path):
    db = str(tmp_path / "one.duckdb")
    other = _copy_sample(tmp_path / "other")
    first = _eval(SAMPLE, db)
    r = _run("ingest", str(other), "--db", db, "--embedder", "hashing")
    assert r.exit_code == 2
    assert "holds dataset 'sample'" in _said(r) and "--replace" in _said(r)
    assert "Traceback" not in _said(r)
    assert _eval(SAMPLE, db)["hashes"] == first["hashes"]  # nothing lost
    replaced = _ok("ingest", str(other), "--db", db, "--embedder", "hashing", "--replace")
    assert replaced["items"]["inserted"] == 40
    r = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--mode", "bm25")
    assert r.exit_code == 2 and "holds dataset 'other'" in _said(r)


def test_real_collections_never_overwrite_each_other(tmp_path):
    """The reported defect: vaswani ingested after cranfield into one store overwrote cranfield's
    1400 documents (cranfield's nDCG@10 fell to 0.3687); BM25 here is the reference run's."""
    cranfield, vaswani = shared_dataset("cranfield"), shared_dataset("vaswani")
    db = str(tmp_path / "both.duckdb")
    before = _eval(cranfield, db)
    r = _run("ingest", str(vaswani), "--db", db, "--embedder", "hashing")
    assert r.exit_code == 2 and "holds dataset 'cranfield'" in _said(r)
    after = _eval(cranfield, db)
    assert after["hashes"] == before["hashes"] and after["metrics"] == before["metrics"]
    assert round(after["metrics"]["ndcg@10"], 4) == 0.3695


def test_a_deleted_document_leaves_the_store(tmp_path):
    ds = _copy_sample(tmp_path / "mydata")
    db = str(tmp_path / "s.duckdb")
    stale = _eval(ds, db, "hybrid")
    _drop_doc(ds, "d03")  # judged relevant for q01
    report = _ok("ingest", str(ds), "--db", db, "--embedder", "hashing")
    assert report["items"]["deleted"] == 1 and report["items"]["unchanged"] == 39
    synced = _eval(ds, db, "hybrid")
    fresh = _eval(ds, str(tmp_path / "fresh.duckdb"), "hybrid")
    assert synced["hashes"] == fresh["hashes"] and synced["metrics"] == fresh["metrics"]
    assert synced["hashes"]["run"] != stale["hashes"]["run"]
    again = _ok("ingest", str(ds), "--db", db, "--embedder", "hashing")
    assert again["up_to_date"] is True


def test_a_damaged_store_is_not_up_to_date(tmp_path):
    """Ingest read only the sync record to say "up to date": a truncated copy of a store was
    reported up to date, and the next search failed with DuckDB's IO error. The tables the
    record speaks for are checked to read back: one error line naming the file."""
    import duckdb

    ds = str(SAMPLE)
    db = tmp_path / "s.duckdb"
    assert _ok("ingest", ds, "--db", str(db), "--embedder", "hashing")["up_to_date"] is False
    assert _ok("ingest", ds, "--db", str(db), "--embedder", "hashing")["up_to_date"] is True
    whole = db.read_bytes()
    with duckdb.connect(str(db), read_only=True) as con:
        block = con.execute("SELECT min(block_id) FROM pragma_storage_info('items') "
                            "WHERE persistent AND block_id >= 0").fetchone()[0]
        size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    start = 3 * 4096 + block * size  # DuckDB 1.5's layout: three 4 KiB headers, then blocks
    cut = tmp_path / "cut.duckdb"  # a copy cut short in the middle of a block of items
    cut.write_bytes(whole[: start + size // 2])
    zeroed = tmp_path / "zeroed.duckdb"  # a block of items zeroed: its checksum fails
    zeroed.write_bytes(whole[:start] + bytes(size) + whole[start + size:])
    for damaged, words in ((cut, "past the end of the file"), (zeroed, "checksum")):
        r = _run("ingest", ds, "--db", str(damaged), "--embedder", "hashing")
        assert r.exit_code == 2, r.output
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"error: store {damaged} is damaged: ")
        assert words in lines[0] and "up to date" not in r.output


def test_read_commands_never_create_a_store(tmp_path):
    missing = tmp_path / "nope.duckdb"
    for args in (("search", "x", "--db", str(missing)),
                 ("answer", "x", "--db", str(missing)),
                 ("pack", "show", "pack_0123456789abcdef", "--db", str(missing))):
        r = _run(*args)
        assert r.exit_code == 2 and "no store at" in _said(r), (args, r.output)
        assert not missing.exists()
    r = _run("search", "x")
    assert r.exit_code == 2 and "--db" in _said(r) and "--dataset" in _said(r)


KILL_SCRIPT = r"""
import sys, time
from pathlib import Path
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.data import load_dataset
from aiblox.engine.workspace import prepare_store
from aiblox.stores import DuckDBStore

where, db, flag = sys.argv[1], sys.argv[2], Path(sys.argv[3])

def stall():
    flag.touch()
    time.sleep(600)

class Stalling(HashingEmbedder):
    calls = 0
    def embed(self, texts):
        Stalling.calls += 1
        if where == "embedding" and Stalling.calls == 3:
            stall()
        return super().embed(texts)

upserts = DuckDBStore.upsert_items
def stalling_upsert(self, items):
    out = upserts(self, items)
    if where == "items":
        stall()
    return out
DuckDBStore.upsert_items = stalling_upsert

import aiblox.stores.ingest
aiblox.stores.ingest.COPY_ROWS = 20  # item vectors copied from the cache every two batches

store = DuckDBStore(db)
prepare_store(store, load_dataset(sys.argv[4]), CachedEmbedder(Stalling(), store),
              progress=False, batch_size=10)
"""


@pytest.mark.parametrize("where", ["items", "embedding"])
def test_a_killed_ingest_is_named_then_completed(tmp_path, where):
    db = str(tmp_path / "k.duckdb")
    flag = tmp_path / "stalled"
    script = tmp_path / "ingest.py"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(script), where, db, str(flag), str(SAMPLE)],
                            env=env)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None, "the ingest ended before the kill point"
            assert time.monotonic() < deadline, "the ingest never reached the kill point"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    from aiblox.embedding import HashingEmbedder
    from aiblox.stores import DuckDBStore

    model = HashingEmbedder().model_id
    with DuckDBStore(db) as store:
        items, vectors = store.count_items(), store.vector_count(model)
        assert "syncing" in store.read_meta() and "sync" not in store.read_meta()
    assert (items, vectors) == ((10, 0) if where == "items" else (30, 20))
    for mode in ("dense", "hybrid", "bm25"):
        r = _run("search", "BM25", "--db", db, "--embedder", "hashing", "--mode", mode)
        assert r.exit_code == 2 and "left half-synced" in _said(r), (mode, r.output)
        assert "rerun: aiblox ingest" in _said(r) and "Traceback" not in _said(r)
    report = _ok("ingest", "sample", "--db", db, "--embedder", "hashing")
    assert report["items"]["inserted"] == 40 - items
    assert report["vectors_written"] == 40 - vectors
    with DuckDBStore(db) as store:
        assert (store.count_items(), store.vector_count(model)) == (40, 40)
    resumed = _eval(SAMPLE, db, "hybrid")
    clean = _eval(SAMPLE, str(tmp_path / "clean.duckdb"), "hybrid")
    assert resumed["hashes"] == clean["hashes"] and resumed["metrics"] == clean["metrics"]


def test_ingest_streams_and_bad_input_changes_nothing(tmp_path):
    from aiblox.engine.workspace import ingest_dataset
    from aiblox.stores import DuckDBStore

    ds = _copy_sample(tmp_path / "mydata")
    db = str(tmp_path / "s.duckdb")
    first = _ok("ingest", str(ds), "--db", db, "--embedder", "hashing")
    assert first["items"]["inserted"] == 40
    with (ds / "corpus.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"_id": "new1", "text": "a new document"}\n{"_id": "bad", "text": 5}\n')
    r = _run("ingest", str(ds), "--db", db, "--embedder", "hashing")
    assert r.exit_code == 2 and "corpus.jsonl:42" in _said(r) and "'text'" in _said(r)
    with DuckDBStore(db) as store:  # the good line before the bad one was not written either
        assert store.count_items() == 40 and "syncing" not in store.read_meta()

    # the corpus is written a batch at a time: never more than one batch in flight
    lines = (ds / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (ds / "corpus.jsonl").write_text("".join(lines[:-1]), encoding="utf-8")
    with DuckDBStore(db) as store:
        seen: list[int] = []
        real = store.upsert_items
        store.upsert_items = lambda batch: (seen.append(len(batch)), real(batch))[1]
        report = ingest_dataset(store, ds, None, progress=False, batch_size=7)
    assert report.items.inserted == 1 and report.items.unchanged == 40
    assert max(seen) == 7 and sum(seen) == 41
