"""No temporary folder outlives its index build: a build killed (SIGKILL, a real process)
leaves one, which the next build removes; a folder a live builder holds is never removed. The
same for an in-memory store's index root in the system's temporary folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.indexes.store_indexes import BUILD_PREFIX, LOCK_FILE, MEMORY_ROOT_PREFIX
from tests.cli.test_half_synced import _dataset

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
ENV = {**os.environ, "AIBLOX_NO_PROGRESS": "1",
       "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

HOLD = r"""
import sys, tempfile, time
from pathlib import Path
from aiblox.indexes.store_indexes import _hold
folder = tempfile.mkdtemp(prefix=sys.argv[2], dir=sys.argv[1])
_hold(Path(folder))
print(folder, flush=True)
time.sleep(600)
"""

MEMORY_BUILD = r"""
import sys
from aiblox.contracts.retrieval import FtsConfig
from aiblox.contracts import ItemRecord
from aiblox.indexes import StoreIndexes
from aiblox.stores import DuckDBStore
store = DuckDBStore(":memory:")
store.upsert_items([ItemRecord(id=f"d{i}", title="", text=f"word{i % 7} text {i}")
                    for i in range(50)])
ix = StoreIndexes(store)
ix.lexical(FtsConfig())
print(ix.root, flush=True)
import time; time.sleep(600)
"""


def _temp_folders(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(BUILD_PREFIX))


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)


def test_a_killed_build_leaves_nothing_once_the_next_build_ran(tmp_path):
    db = str(tmp_path / "s.duckdb")
    _dataset(tmp_path / "d", "a", 3000, seed=3)
    r = runner.invoke(app, ["ingest", str(tmp_path / "d"), "--db", db, "--embedder", "hashing"],
                      env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    root = Path(db + ".indexes")
    build = [sys.executable, "-m", "aiblox.cli", "index", "build", "--db", db, "--embedder",
             "hashing", "--no-bm25", "--index", "hnsw"]
    proc = subprocess.Popen(build, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:  # killed while it builds the HNSW index in its temporary folder
        deadline = time.monotonic() + 300
        while not (root.is_dir() and any((root / n / LOCK_FILE).exists()
                                         for n in _temp_folders(root))):
            assert proc.poll() is None, "the build ended before it was killed"
            assert time.monotonic() < deadline, "no temporary folder appeared"
            time.sleep(0.005)
    finally:
        _kill(proc)
    left = _temp_folders(root)
    assert len(left) == 1 and left[0].startswith(f"{BUILD_PREFIX}{proc.pid}-knn-")

    # a concurrent builder, alive, holds its own temporary folder
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root), f"{BUILD_PREFIX}"],
                              env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        live = Path(holder.stdout.readline().strip()).name
        assert live.startswith(BUILD_PREFIX)
        r = runner.invoke(app, ["index", "build", "--db", db, "--embedder", "hashing"],
                          env={"AIBLOX_NO_PROGRESS": "1"})
        assert r.exit_code == 0, r.output
        assert _temp_folders(root) == [live]  # the killed build's gone, the live one kept
        r = runner.invoke(app, ["index", "drop", "--db", db], env={"AIBLOX_NO_PROGRESS": "1"})
        assert r.exit_code == 0 and _temp_folders(root) == [live]
    finally:
        _kill(holder)
    r = runner.invoke(app, ["index", "build", "--db", db, "--embedder", "hashing"],
                      env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    assert _temp_folders(root) == []  # its process gone: removed by the next build
    assert sorted(p.name.split("-")[0] for p in root.iterdir()) == ["bm25", "knn"]


def test_an_in_memory_store_s_index_root_of_a_killed_process_is_removed():
    proc = subprocess.Popen([sys.executable, "-c", MEMORY_BUILD], env=ENV,
                            stdout=subprocess.PIPE, text=True)
    try:
        root = Path(proc.stdout.readline().strip())
    finally:
        _kill(proc)
    assert root.name.startswith(f"{MEMORY_ROOT_PREFIX}{proc.pid}-")
    assert root.parent == Path(tempfile.gettempdir()) and root.is_dir()  # left by the kill
    from aiblox.indexes import index_root
    from aiblox.stores import DuckDBStore

    with DuckDBStore(":memory:") as store:
        mine = index_root(store)  # a new in-memory root: the dead process's is removed
        assert mine.is_dir() and not root.exists()
    del store
    import gc

    gc.collect()
    assert not mine.exists()  # this process's own goes with its store
