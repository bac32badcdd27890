"""A store is never searched half-synced: an ``aiblox ingest`` killed (SIGKILL, a real
process) while it deletes the items of a ``--replace`` or of documents gone from the corpus
leaves a mark that every reader refuses with one line naming the command that completes it;
that command completes it. A dataset big enough for the deletions to take several batches is
generated and ingested once for the module (7 s of CPU); each case works on a copy of that store.
The killed ingest is a process of its own, forked from one that has imported aiblox once
(:mod:`tests.preloaded`; ``python -m aiblox.cli`` spent 5 s of CPU on the imports)."""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import signal
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.stores import DuckDBStore
from aiblox.stores.identity import read_binding, read_mark, read_sync
from tests.preloaded import AIBLOX_CLI, PRELOAD, ForkServer

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
N_DOCS = 24_000
"""Documents of the big dataset: three batches of deletions (``_drop_items`` deletes 10,000
at a time)."""


def _run(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def _said(r) -> str:
    return " ".join(r.output.split())


def _dataset(folder: Path, prefix: str, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(3000)]
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"_id": f"{prefix}{i:06d}", "title": "",
                                "text": " ".join(rng.choices(words, k=20))}) + "\n")
    queries = [(f"q{i}", " ".join(rng.choices(words, k=4))) for i in range(4)]
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"q{i}\t{prefix}{i:06d}\t1\n" for i in range(4)), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    """A :class:`ForkServer` for ``python -m aiblox.cli`` processes."""
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with ForkServer(PRELOAD, env, REPO, tmp_path_factory.mktemp("forks")) as server:
        yield server


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """The big dataset (``a000000``...) and a store it was ingested into. The ``delete`` case
    cuts the dataset's corpus (the store is bound to this folder); the ``replace`` case does not
    read it."""
    folder = tmp_path_factory.mktemp("big")
    big = _dataset(folder / "big", "a", N_DOCS, seed=1)
    db = folder / "s.duckdb"
    r = _run("ingest", str(big), "--db", str(db), "--embedder", "hashing")
    assert r.exit_code == 0, r.output
    assert not Path(f"{db}.wal").exists()  # closed: the file is the whole store
    return big, db


def _kill_mid_delete(forks: ForkServer, args: list[str], db: str) -> None:
    """Run ``aiblox ARGS`` in a process and SIGKILL it once its first batch of deletions is
    committed: its second is being written to the store's write-ahead log (the mark alone is a
    few hundred bytes there, a batch of 10,000 deletions ~160 kB)."""
    wal = Path(db + ".wal")
    proc = forks.start(AIBLOX_CLI, args, cwd=REPO)
    try:
        deadline = time.monotonic() + 300
        while not (wal.exists() and wal.stat().st_size > 200_000):
            assert proc.poll() is None, "the ingest ended before its deletions were under way"
            assert time.monotonic() < deadline, "the ingest never reached its deletions"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL


def _refused(r, db: str, rerun: str) -> None:
    said = _said(r)
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in said, r.output
    assert said.startswith(f"error: store {db} was left half-synced by an interrupted ingest "
                           f"(started "), said
    assert said.endswith(f"; rerun: {rerun}"), said


@pytest.mark.parametrize("case", ["replace", "delete"])
def test_a_killed_ingest_is_refused_by_every_reader_and_the_rerun_completes_it(tmp_path, case,
                                                                                big_store,
                                                                                forks):
    db = str(tmp_path / "s.duckdb")
    big, big_db = big_store
    shutil.copyfile(big_db, db)  # the big dataset, ingested
    if case == "replace":  # another dataset replaces the big one
        target = _dataset(tmp_path / "small", "b", 40, seed=2)
        args = ["ingest", str(target), "--db", db, "--embedder", "hashing", "--replace"]
    else:  # the big dataset loses most of its documents
        target = big
        lines = (big / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        (big / "corpus.jsonl").write_text("".join(lines[:40]), encoding="utf-8")
        args = ["ingest", str(target), "--db", db, "--embedder", "hashing"]
    _kill_mid_delete(forks, args, db)

    with DuckDBStore(db) as store:  # half-deleted, and marked so
        n = store.count_items()
        mark = read_mark(store)
        assert 40 < n < N_DOCS and mark is not None and read_sync(store) is None
        assert read_binding(store).source == str(target.resolve())
    rerun = f"aiblox ingest {target.resolve()} --db {db} --embedder hashing"
    assert mark.rerun(db) == rerun and mark.pid > 0 and mark.started

    for args in (["search", "w1 w2", "--db", db, "--embedder", "hashing", "--mode", "bm25"],
                 ["search", "w1 w2", "--db", db, "--embedder", "hashing", "--mode", "hybrid"],
                 ["answer", "w1 w2", "--db", db, "--embedder", "hashing"],
                 ["index", "build", "--db", db, "--embedder", "hashing"],
                 ["eval", str(target), "--db", db, "--embedder", "hashing", "--mode", "bm25"],
                 ["eval", str(target), "--db", db, "--embedder", "hashing"]):
        _refused(_run(*args), db, rerun)
    # the sweep's and the notebooks' workspaces open stores the one same way
    from aiblox.data import load_dataset
    from aiblox.engine.workspace import open_workspace
    from aiblox.explore import open_notebook_workspace
    from aiblox.stores import StoreMismatch

    with pytest.raises(StoreMismatch, match="left half-synced"):
        open_workspace(load_dataset(target), db, "hashing", progress=False)
    with pytest.raises(StoreMismatch, match="left half-synced"):
        open_notebook_workspace(str(target), "hashing", db=db)
    with DuckDBStore(db) as store:
        assert store.count_items() == n  # the readers changed nothing

    r = _run(*shlex.split(rerun)[1:])  # the command the hint names
    assert r.exit_code == 0, r.output
    assert f"completing the ingest interrupted, started {mark.started}" in _said(r)
    with DuckDBStore(db) as store:
        assert store.count_items() == 40 and read_mark(store) is None
        assert sorted(store.item_hashes())[0] == ("b000000" if case == "replace" else "a000000")
    done = _run("eval", str(target), "--db", db, "--embedder", "hashing", "--json")
    fresh = _run("eval", str(target), "--db", str(tmp_path / "fresh.duckdb"), "--embedder",
                 "hashing", "--json")
    assert done.exit_code == 0 and fresh.exit_code == 0, done.output + fresh.output
    a, b = json.loads(done.stdout)["systems"][0], json.loads(fresh.stdout)["systems"][0]
    assert a["hashes"] == b["hashes"] and a["metrics"] == b["metrics"]
