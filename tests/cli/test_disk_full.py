"""A full disk ends a command with one ``error:`` line naming what could not be written and
saying the disk is full (ENOSPC), and leaves nothing unusable once space is freed: an ingest's
store (nothing stored lost; the half-synced ingest is completed by its rerun), a sweep (its
stage cache, its store or its MLflow store: ``--resume`` continues), MLflow's database made on
a full disk (the next command makes it again).

The full disk is real: a small tmpfs mounted for the test (CI runs these tests as root, like
this machine; without the right to mount, the tests fail, they are never skipped), filled by a
ballast file and freed by deleting it.

The commands that run into the full disk, and their reruns, are processes of their own, forked
from one that has imported aiblox and MLflow once (:mod:`tests.preloaded`): eight
``python -m aiblox.cli`` processes spent 5-8 s of CPU each on those imports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from tests.preloaded import AIBLOX_CLI, PRELOAD, ForkServer

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "datasets" / "sample"
runner = CliRunner()
ENV = {**os.environ, "AIBLOX_NO_PROGRESS": "1",
       "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


class Disk:
    """A mounted tmpfs, filled and freed on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ballast = path / "ballast"

    def fill(self, leave: int) -> None:
        """Write a ballast file leaving about ``leave`` bytes free."""
        st = os.statvfs(self.path)
        free = st.f_bavail * st.f_frsize
        with open(self.ballast, "ab") as f:
            f.write(b"\0" * max(0, free - leave))
        st = os.statvfs(self.path)
        assert st.f_bavail * st.f_frsize <= leave + st.f_frsize

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)


@pytest.fixture()
def disk(tmp_path):
    """A 64 MiB tmpfs at ``tmp_path/disk``, unmounted afterwards."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for a real full disk (run as root, as CI does): "
                    f"{done.stderr.strip()}")
    try:
        yield Disk(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _said(r) -> str:
    return " ".join(r.output.split())


@pytest.fixture(scope="module")
def aiblox(tmp_path_factory):
    """``aiblox(*args)``: ``python -m aiblox.cli ARGS`` in a process of its own (a fork of the
    module's :class:`ForkServer`, in ``REPO``), run to its end."""
    with ForkServer(PRELOAD, ENV, REPO, tmp_path_factory.mktemp("forks")) as server:
        def run(*args: str) -> subprocess.CompletedProcess:
            child = server.start(AIBLOX_CLI, list(args), cwd=REPO)
            try:
                return child.completed(timeout=600)
            finally:
                child.kill()

        yield run


def _one_error(err: str) -> str:
    """The one ``error:`` line of a command's stderr (no traceback)."""
    assert "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, err
    return errors[0]


def _grow(ds: Path, n: int) -> None:
    with (ds / "corpus.jsonl").open("a", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"_id": f"extra{i:05d}", "title": f"Extra {i}",
                                "text": f"an added document number {i} " * 20}) + "\n")


def test_a_full_disk_during_ingest_is_one_line_and_loses_nothing(tmp_path, disk, aiblox):
    from aiblox.stores import DuckDBStore
    from aiblox.stores.identity import read_mark

    ds = tmp_path / "mydata"
    shutil.copytree(SAMPLE, ds, ignore=shutil.ignore_patterns("*.py", "README.md"))
    db = str(disk.path / "s.duckdb")
    r = runner.invoke(app, ["ingest", str(ds), "--db", db, "--embedder", "hashing"])
    assert r.exit_code == 0, r.output
    with DuckDBStore(db) as store:
        before = store.item_hashes()
    _grow(ds, 3000)
    disk.fill(leave=256 * 1024)
    done = aiblox("ingest", str(ds), "--db", db, "--embedder", "hashing")
    assert done.returncode == 2, done.stderr
    line = _one_error(done.stderr)
    assert line.startswith(f"error: store {db}: the disk is full (ENOSPC, no space left on the "
                           f"device) writing {db}"), line
    assert "nothing stored was lost" in line and "damaged" not in line

    disk.free()
    with DuckDBStore(db) as store:  # readable, everything stored before still there
        now = store.item_hashes()
        assert {k: now[k] for k in before} == before
        mark = read_mark(store)
    assert mark is not None  # the ingest had begun: readers refuse until it is completed
    r = runner.invoke(app, ["search", "BM25", "--db", db, "--embedder", "hashing"])
    assert r.exit_code == 2 and "left half-synced" in _said(r)
    r = runner.invoke(app, ["ingest", str(ds), "--db", db, "--embedder", "hashing", "--json"])
    assert r.exit_code == 0, r.output
    with DuckDBStore(db) as store:
        assert store.count_items() == 3040 and read_mark(store) is None
    ours = runner.invoke(app, ["eval", str(ds), "--db", db, "--embedder", "hashing", "--json"])
    fresh = runner.invoke(app, ["eval", str(ds), "--db", str(tmp_path / "fresh.duckdb"),
                                "--embedder", "hashing", "--json"])
    assert ours.exit_code == 0 and fresh.exit_code == 0
    assert (json.loads(ours.stdout)["systems"][0]["hashes"]
            == json.loads(fresh.stdout)["systems"][0]["hashes"])


def _sweep(aiblox, tmp: Path, cache: Path, uri: str, *extra: str) -> subprocess.CompletedProcess:
    return aiblox("sweep", "evals/sweeps/sample_fusion.toml", "--cache-dir", str(cache), "--db",
                  str(tmp / "sweep.duckdb"), "--tracking-uri", uri, "--json", *extra)


def _best(done: subprocess.CompletedProcess) -> list:
    """The leaderboard: label, config hash and metrics of each point, best first."""
    out = json.loads(done.stdout)
    return [(p["label"], p["config_hash"], p["metrics"])
            for p in [out["best"], *out["leaderboard"]]]


@pytest.fixture(scope="module")
def clean_sweep(tmp_path_factory, aiblox):
    """What the sample sweep gives with room to spare."""
    tmp = tmp_path_factory.mktemp("clean")
    done = _sweep(aiblox, tmp, tmp / "stages", f"sqlite:///{tmp}/mlruns/mlflow.db")
    assert done.returncode == 0, done.stderr
    return _best(done)


@pytest.mark.parametrize("where", ["stage cache", "MLflow store"])
def test_a_full_disk_mid_sweep_is_one_line_and_resume_continues(tmp_path, disk, where,
                                                                   clean_sweep, aiblox):
    cache = (disk.path if where == "stage cache" else tmp_path) / "stages"
    folder = disk.path if where == "MLflow store" else tmp_path
    uri = f"sqlite:///{folder}/mlruns/mlflow.db"
    if where == "MLflow store":  # made with room to spare; the points' runs fill the disk
        from aiblox.engine.tracking import tracking_client

        tracking_client(uri, create=True)
    # the sample sweep's stage cache takes ~100 kB, a third of it its points' packs (written
    # when the points end); its MLflow store ~1 MB
    disk.fill(leave=(80 if where == "stage cache" else 200) * 1024)
    done = _sweep(aiblox, tmp_path, cache, uri)
    assert done.returncode == 2, done.stderr
    line = _one_error(done.stderr)
    named = f"the stage cache ({cache})" if where == "stage cache" else f"the MLflow store ({uri})"
    assert line.startswith(f"error: cannot write {named}"), line
    assert "the disk is full (ENOSPC" in line
    # the command with the options that say where (the spec alone resumed nothing: a fresh
    # sweep in the default cache and MLflow store)
    assert f"`aiblox sweep evals/sweeps/sample_fusion.toml --db {tmp_path / 'sweep.duckdb'} " \
           f"--cache-dir {cache} --tracking-uri {uri} --resume` continues where it " \
           "stopped" in line, line
    assert len(done.stderr.splitlines()) <= 4, done.stderr  # the plan, MLflow's notes, error

    disk.free()
    again = _sweep(aiblox, tmp_path, cache, uri, "--resume")
    assert again.returncode == 0, again.stderr
    assert _best(again) == clean_sweep
    tracking = json.loads(again.stdout)["tracking"]
    assert tracking["logged"] + tracking["skipped"] == 24


def test_mlflow_s_database_made_on_a_full_disk_is_made_again_once_space_frees(tmp_path, disk,
                                                                              aiblox):
    db = disk.path / "mlruns" / "mlflow.db"
    uri = f"sqlite:///{db}"
    disk.fill(leave=100 * 1024)  # MLflow's schema takes ~900 kB
    done = _sweep(aiblox, tmp_path, tmp_path / "stages", uri)
    assert done.returncode == 2, done.stderr
    line = _one_error(done.stderr)
    assert line.startswith(f"error: cannot open the MLflow store {uri}: "), line
    assert "database or disk is full" in line and "ENOSPC" in line
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db.lock"]  # no half-made db
    disk.free()
    again = _sweep(aiblox, tmp_path, tmp_path / "stages", uri)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["tracking"]["logged"] == 24


def test_a_half_made_mlflow_database_of_an_older_version_is_made_again(tmp_path, disk):
    """MLflow itself (as aiblox did before) leaves a half-made schema on a full disk, which it
    cannot open afterwards ('table ... already exists'); holding nothing, it is made again."""
    import logging

    from mlflow.tracking import MlflowClient

    from aiblox.engine.tracking import tracking_client

    db = disk.path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    uri = f"sqlite:///{db}"
    disk.fill(leave=300 * 1024)
    logging.getLogger("mlflow").setLevel(logging.CRITICAL)
    try:
        with pytest.raises(Exception, match="database or disk is full"):
            MlflowClient(tracking_uri=f"sqlite:///{db.parent}/../mlruns/mlflow.db"
                         ).search_experiments()
    finally:
        logging.getLogger("mlflow").setLevel(logging.NOTSET)
    disk.free()
    with pytest.raises(Exception, match="already exists"):  # what MLflow makes of it
        MlflowClient(tracking_uri=f"sqlite:///{db.parent}/./mlflow.db").search_experiments()
    client = tracking_client(uri, create=True)
    eid = client.create_experiment("after")
    run = client.create_run(eid)
    client.set_terminated(run.info.run_id)
    assert client.get_run(run.info.run_id).info.status == "FINISHED"
    # a database holding runs is never touched, even when it cannot be opened
    from aiblox.engine.tracking.mlflow_store import _holds_nothing

    assert not _holds_nothing(db)
