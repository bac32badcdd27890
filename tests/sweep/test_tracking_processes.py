"""One writer per sweep, in real processes on a real MLflow sqlite store: sweeps started together
on a fresh store, sweeps killed (SIGKILL, SIGTERM) at several points and resumed, a live sweep
that a second process may not touch. Children are counted by config hash, every run's status
is read back (deleted runs too), and the resumed metrics are compared with an uninterrupted
run's.

Each sweep command is a process of its own (its pid, its signals, its exit status), forked from a
process that has imported MLflow and aiblox once (:mod:`tests.preloaded`): ``python -c`` paid
5-8 s of CPU for those imports in each of the module's 22 processes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from mlflow.entities import ViewType  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from aiblox.engine.tracking import SweepBusy, SweepInterrupted, SweepTracker
from aiblox.sweep import load_spec, run_sweep
from tests.mlflow_server import mlflow_server as start_mlflow_server
from tests.preloaded import PRELOAD, ForkServer

REPO = Path(__file__).resolve().parents[2]
SPEC_TEXT = """
name = "{name}"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10", "mrr@10"]
primary = "ndcg@10"

[base]
top_k_items = 10

[grid]
blend = ["linear", "rrf"]
w_text = [0.3, 0.7]
normalize = ["minmax"]
rrf_k = [10, 60]
depth = [10, 20]
"""
N = 8  # linear: 2 weights x 2 depths; rrf: 2 k x 2 depths

# The CLI as `aiblox` runs it, with a test hook that stops the process at a chosen moment.
# Points are written in batches (AIBLOX_TRACKING_BATCH points, set by env() to BATCH); a point
# is logged once its batch is written. KILL=after:K (SIGKILL once K points are logged),
# inflight:K (SIGKILL inside the transaction of the batch holding the K+1th point; through a
# server, while its child run is being written), finish (SIGKILL while the parent's summary is
# written), term:K (SIGTERM once K points are logged), termin:K (SIGTERM inside the transaction
# of the batch holding the K+1th point), hold:K (after K points, write MARKER and sleep).
DRIVER = r"""
import os, signal, sys, time
from pathlib import Path
from sqlalchemy.orm import Session
from aiblox.engine import tracking
mode, _, k = os.environ.get("KILL", "").partition(":")
k = int(k or 0)
logged = [0]
write, finish = tracking.SweepTracker._write_pending, tracking.SweepTracker.finish

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

def patched_write(self):
    n = len(self._pending)
    if mode == "inflight" and logged[0] <= k < logged[0] + n:
        self.client.log_artifacts = killed
        Session.execute = killed
    if mode == "termin" and logged[0] <= k < logged[0] + n:
        execute = Session.execute

        def termed(*args, **kwargs):  # SIGTERM arrives inside the batch's transaction, once
            Session.execute = execute
            os.kill(os.getpid(), signal.SIGTERM)
            return execute(*args, **kwargs)

        Session.execute = termed
    write(self)
    logged[0] += n
    if n and logged[0] == k and mode in ("after", "term", "hold"):
        if mode == "after":
            killed()
        if mode == "term":
            os.kill(os.getpid(), signal.SIGTERM)
        Path(os.environ["MARKER"]).write_text(str(os.getpid()))
        time.sleep(600)

def patched_finish(self, result, *args):
    if mode == "finish":
        self.client.log_text = killed
    return finish(self, result, *args)

tracking.SweepTracker._write_pending = patched_write
tracking.SweepTracker.finish = patched_finish
from aiblox.cli.main import app
app(sys.argv[1:], prog_name="aiblox")
"""
BATCH = 2


def write_spec(folder: Path, name: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(SPEC_TEXT.format(name=name), encoding="utf-8")
    return path


def env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    # COLUMNS: rich wraps a line at 80 columns when stderr is a pipe; the message is one line
    return {**os.environ, "AIBLOX_NO_PROGRESS": "1", "PYTHONPATH": path, "COLUMNS": "500",
            "AIBLOX_TRACKING_BATCH": str(BATCH), "AIBLOX_TRACKING_BATCH_S": "600", **extra}


def sweep_cmd(spec: Path, uri: str, cache: Path, db: str, *extra: str) -> list[str]:
    return [sys.executable, "-c", DRIVER, "sweep", str(spec), "--db", db, "--cache-dir",
            str(cache), "--tracking-uri", uri, "--jobs", "1", "--json", *extra]


class Processes:
    """Starts ``python -c DRIVER ARGS`` commands (:func:`sweep_cmd`) as forks of one
    :class:`ForkServer` (the environment of :func:`env`, the folder ``REPO``); the variables
    given to :meth:`start` and :meth:`run` are added to a child's environment."""

    def __init__(self, server: ForkServer) -> None:
        self.server = server

    def start(self, cmd: list[str], **extra: str):
        assert cmd[1] == "-c", cmd
        return self.server.start(cmd[2], cmd[3:], env=extra, cwd=REPO)

    def run(self, cmd: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
        child = self.start(cmd, **extra)
        try:
            return child.completed(timeout=400)
        finally:
            child.kill()


@pytest.fixture(scope="module")
def forks(tmp_path_factory):
    with ForkServer(PRELOAD, env(), REPO, tmp_path_factory.mktemp("forks")) as server:
        yield Processes(server)


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The refused process's stderr: exit 2, no traceback, the last line its one error line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


def parents(client: MlflowClient, name: str) -> list:
    """The sweep's parent runs (a parent withdrawn by the loser of a race is deleted)."""
    return client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string=f"tags.`aiblox.kind` = 'sweep' and tags.`aiblox.sweep_name` = '{name}'")


def census(uri: str, name: str) -> dict:
    """The sweep's one parent, its live children by config hash, every run of its experiment
    (deleted ones too) by status."""
    client = MlflowClient(uri)
    (parent,) = parents(client, name)
    exp = parent.info.experiment_id
    everything = client.search_runs([exp], run_view_type=ViewType.ALL, max_results=1000)
    live = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
                              max_results=1000)
    by_hash: dict[str, list] = {}
    for c in live:
        by_hash.setdefault(c.data.tags["aiblox.config_hash"], []).append(c)
    return {"parent": parent, "by_hash": by_hash,
            "statuses": sorted(r.info.status for r in everything),
            "deleted": [r for r in everything if r.info.lifecycle_stage == "deleted"]}


def assert_complete(uri: str, name: str) -> dict:
    """Exactly one FINISHED child per config hash, the parent FINISHED, no run RUNNING."""
    c = census(uri, name)
    assert c["parent"].info.status == "FINISHED"
    assert len(c["by_hash"]) == N
    assert all(len(runs) == 1 for runs in c["by_hash"].values()), \
        {h: len(r) for h, r in c["by_hash"].items()}
    assert all(runs[0].info.status == "FINISHED" for runs in c["by_hash"].values())
    assert "RUNNING" not in c["statuses"], c["statuses"]
    return c


def child_metrics(c: dict) -> dict[str, dict[str, float]]:
    return {h: runs[0].data.metrics for h, runs in c["by_hash"].items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, sweep_db, sample_dataset):
    """The same sweep uninterrupted, in this process, on its own store and cache."""
    root = tmp_path_factory.mktemp("reference")
    spec = load_spec(write_spec(root, "procs"))
    uri = f"sqlite:///{root}/mlflow.db"
    tr = SweepTracker(uri, "reference", spec.hash, spec.model_dump(mode="json"))
    run_sweep(spec, cache_dir=root / "stages", db=sweep_db, progress=False,
              dataset=sample_dataset, tracker=tr)
    return child_metrics(assert_complete(uri, "procs"))


def test_sweeps_started_together_on_a_fresh_store(tmp_path, sweep_db, forks):
    """Three processes at once on a store that does not exist yet: two of one spec, one of
    another. No traceback (MLflow's schema is made once, under the lock); the other spec's
    sweep succeeds; of the two same-spec sweeps each succeeds or is refused in one line; every
    point is logged once."""
    uri = f"sqlite:///{tmp_path}/fresh/mlflow.db"
    a, b = write_spec(tmp_path, "together_a"), write_spec(tmp_path, "together_b")
    dbs = []  # a store each: DuckDB lets one process write a file at a time
    for i in range(3):
        dbs.append(tmp_path / f"s{i}.duckdb")
        shutil.copyfile(sweep_db, dbs[-1])
    cmds = [sweep_cmd(spec, uri, tmp_path / f"c{i}", str(dbs[i]))
            for i, spec in enumerate((a, a, b))]
    procs = [forks.start(c) for c in cmds]
    done = [p.completed(timeout=400) for p in procs]
    for d in done:
        assert "Traceback" not in d.stderr, d.stderr[-3000:]
    assert done[2].returncode == 0, done[2].stderr[-3000:]
    codes = sorted(d.returncode for d in done[:2])
    assert codes in ([0, 0], [0, 2]), codes
    for d in done[:2]:
        if d.returncode == 2:
            line = error_line(d)
            assert line.startswith("error: sweep together_a (") and " is running it;" in line
    assert_complete(uri, "together_a")
    assert_complete(uri, "together_b")


@pytest.mark.parametrize("kill", ["after:4", "inflight:4", "finish", "term:2", "termin:2"])
def test_a_killed_sweep_resumes_to_each_point_once(kill, tmp_path, sweep_db, reference,
                                                    forks):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    spec = write_spec(tmp_path, "procs")
    cmd = sweep_cmd(spec, uri, tmp_path / "stages", sweep_db)
    first = forks.run(cmd, KILL=kill, MARKER=str(tmp_path / "marker"))
    mode, _, k = kill.partition(":")
    term = mode in ("term", "termin")
    if term:
        assert first.returncode == 143, first.stderr[-3000:]
        # a SIGTERM inside a batch's transaction waits for it: the lock is released, the run
        # given up (it once printed "database is locked" and raw SQL, and stayed RUNNING)
        assert "could not" not in first.stderr and "[SQL" not in first.stderr, first.stderr
    else:
        assert first.returncode == -9, first.stderr[-3000:]
    c = census(uri, "procs")
    parent_id = c["parent"].info.run_id
    # SIGTERM gives the run up (KILLED); a SIGKILLed process leaves it RUNNING
    assert c["parent"].info.status == ("KILLED" if term else "RUNNING")
    logged = N if mode == "finish" else int(k) + (BATCH if mode == "termin" else 0)
    assert sum(r.info.status == "FINISHED" for rs in c["by_hash"].values() for r in rs) == logged
    # the batch being written when the process died left nothing: its transaction never
    # committed (its artifacts, written first, belong to no run)
    assert "RUNNING" not in [r.info.status for rs in c["by_hash"].values() for r in rs]

    # its process is gone: a plain rerun is told to resume (asked here in this process; the
    # command's exit 2 and one error line for it: test_a_remote_server_has_one_writer_too)
    loaded = load_spec(spec)
    with pytest.raises(SweepInterrupted) as refused:
        SweepTracker(uri, "aiblox-sweep/procs", loaded.hash, loaded.model_dump(mode="json"))
    line = str(refused.value)
    assert line.startswith(f"sweep procs ({loaded.hash[:16]}), MLflow run {parent_id} is "
                           f"unfinished (")
    assert line.endswith("pass --resume to finish it")
    assert ("which ran it, has exited" if not term else "its process gave it up") in line

    resumed = forks.run(cmd + ["--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    c = assert_complete(uri, "procs")
    assert c["parent"].info.run_id == parent_id  # adopted, not a second parent
    assert child_metrics(c) == reference
    assert c["deleted"] == []


def test_a_live_sweep_refuses_a_second_process_until_it_is_gone(tmp_path, sweep_db,
                                                                 reference, forks):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    spec_path = write_spec(tmp_path, "procs")
    cmd = sweep_cmd(spec_path, uri, tmp_path / "stages", sweep_db)
    marker = tmp_path / "marker"
    holder = forks.start(cmd, KILL="hold:2", MARKER=str(marker),
                         AIBLOX_SWEEP_HEARTBEAT_S="0.3")
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert holder.poll() is None, holder.communicate()[1][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        before = census(uri, "procs")
        # the holder's heartbeat goes on while it sleeps (what another machine would read)
        beat = float(before["parent"].data.tags["aiblox.heartbeat"])
        time.sleep(1.5)
        later = MlflowClient(uri).get_run(before["parent"].info.run_id)
        assert float(later.data.tags["aiblox.heartbeat"]) > beat
        host = socket.gethostname()
        line = error_line(forks.run(cmd))
        assert line.startswith("error: sweep procs ")
        assert f": pid {holder.pid} on {host} is running it; wait for it" in line
        # --resume is refused too (asked from this process: another pid on the same host)
        spec = load_spec(spec_path)
        with pytest.raises(SweepBusy, match=f"pid {holder.pid}"):
            SweepTracker(uri, "aiblox-sweep/procs", spec.hash, spec.model_dump(mode="json"),
                         resume=True)
        after = census(uri, "procs")  # nothing was touched
        assert [r.info.run_id for rs in after["by_hash"].values() for r in rs] == \
            [r.info.run_id for rs in before["by_hash"].values() for r in rs]
        assert after["parent"].info.status == "RUNNING" and after["deleted"] == []
    finally:
        holder.kill()
        holder.communicate()
    with pytest.raises(SweepInterrupted, match="which ran it, has exited"):
        SweepTracker(uri, "aiblox-sweep/procs", spec.hash, spec.model_dump(mode="json"))
    resumed = forks.run(cmd + ["--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert child_metrics(assert_complete(uri, "procs")) == reference


def test_an_owner_on_another_machine_is_live_while_its_heartbeat_is(tmp_path, sample_spec):
    """Another host's pid cannot be checked: its heartbeat's age against the lease decides."""
    from aiblox.engine.tracking import LEASE_S
    from aiblox.engine.tracking.owner import TAG_HEARTBEAT, TAG_OWNER, Owner

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    spec = sample_spec
    tr = SweepTracker(uri, "remote", spec.hash, spec.model_dump(mode="json"))
    tr._withdraw()  # this process lets go; the parent now names a process elsewhere
    other = Owner(host="elsewhere.example", boot="b", pid=1, started="1", token="t")
    tr.client.set_tag(tr.parent_id, TAG_OWNER, other.tag())
    tr.client.set_tag(tr.parent_id, TAG_HEARTBEAT, f"{time.time():.3f}")
    with pytest.raises(SweepBusy, match=r"elsewhere.example is running it \(heartbeat"):
        SweepTracker(uri, "remote", spec.hash, spec.model_dump(mode="json"), resume=True)
    tr.client.set_tag(tr.parent_id, TAG_HEARTBEAT, f"{time.time() - LEASE_S - 5:.3f}")
    with pytest.raises(SweepInterrupted, match="silent for"):
        SweepTracker(uri, "remote", spec.hash, spec.model_dump(mode="json"))
    adopted = SweepTracker(uri, "remote", spec.hash, spec.model_dump(mode="json"), resume=True)
    assert adopted.owned and adopted.parent_id == tr.parent_id
    owner = Owner.parse(adopted.client.get_run(tr.parent_id).data.tags[TAG_OWNER])
    assert owner is not None and owner.pid == os.getpid() and owner.token == adopted.token
    adopted.release(KeyboardInterrupt())
    assert adopted.client.get_run(tr.parent_id).info.status == "KILLED"


def test_a_tracker_of_this_process_owns_its_sweep_until_released_or_collected(tmp_path,
                                                                              sample_spec):
    import gc

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    spec, doc = sample_spec, sample_spec.model_dump(mode="json")
    tr = SweepTracker(uri, "self", spec.hash, doc)
    parent = tr.parent_id
    with pytest.raises(SweepBusy, match=f"pid {os.getpid()} on .* is running it"):
        SweepTracker(uri, "self", spec.hash, doc, resume=True)
    del tr  # e.g. a notebook cell run again: the old tracker owns nothing once collected
    gc.collect()
    with SweepTracker(uri, "self", spec.hash, doc, resume=True) as again:
        assert again.parent_id == parent and again.owned
    # leaving the block without finishing gives the parent up
    assert MlflowClient(uri).get_run(parent).info.status == "KILLED"
    with pytest.raises(SweepInterrupted, match=r"\(KILLED\): its process gave it up"):
        SweepTracker(uri, "self", spec.hash, doc)


def test_a_ctrl_c_numba_wrapped_gives_the_sweep_up_as_interrupted(tmp_path, sample_spec):
    """Ctrl-C while numba loads a kernel reaches the sweep as a SystemError caused by the
    KeyboardInterrupt: the parent ended FAILED and the CLI said "internal error" (CI)."""
    from aiblox.engine.tracking import release_on_error

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tr = SweepTracker(uri, "wrapped", sample_spec.hash, sample_spec.model_dump(mode="json"))

    @release_on_error
    def sweep(tracker):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise SystemError("returned a result with an exception set") from stop

    with pytest.raises(KeyboardInterrupt) as got:
        sweep(tracker=tr)
    assert isinstance(got.value.__cause__, SystemError)  # the original, for AIBLOX_DEBUG
    assert MlflowClient(uri).get_run(tr.parent_id).info.status == "KILLED"


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """A real MLflow tracking server on 127.0.0.1 (a remote store: no file lock applies)."""
    root = tmp_path_factory.mktemp("mlflow-server")
    with start_mlflow_server(root, "--default-artifact-root", str(root / "artifacts"),
                             env=env()) as url:
        yield url


def test_a_remote_server_has_one_writer_too(mlflow_server, tmp_path, sweep_db, reference,
                                            forks):
    """Against a tracking server there is no file lock: a claim is written, read back after
    the settle time, and the earliest parent wins. Two sweeps started together: one writes,
    the other withdraws in one line; a killed one is resumed over HTTP."""
    uri = mlflow_server
    spec = write_spec(tmp_path, "remote")
    cmds = []
    for i in range(2):
        shutil.copyfile(sweep_db, tmp_path / f"s{i}.duckdb")
        cmds.append(sweep_cmd(spec, uri, tmp_path / f"c{i}", str(tmp_path / f"s{i}.duckdb")))
    procs = [forks.start(c, AIBLOX_TRACKING_SETTLE_S="1") for c in cmds]
    done = [p.completed(timeout=400) for p in procs]
    assert sorted(d.returncode for d in done) in ([0, 0], [0, 2]), [d.stderr[-2000:]
                                                                    for d in done]
    for d in done:
        if d.returncode == 2:
            line = error_line(d)
            assert line.startswith("error: sweep remote (") and (
                "started at the same time" in line or " is running it;" in line), line
    assert child_metrics(assert_complete(uri, "remote")) == reference

    killed = write_spec(tmp_path, "remote_killed")
    cmd = sweep_cmd(killed, uri, tmp_path / "c0", str(tmp_path / "s0.duckdb"))
    first = forks.run(cmd, KILL="after:4", AIBLOX_TRACKING_SETTLE_S="1")
    assert first.returncode == -9, first.stderr[-3000:]
    assert "which ran it, has exited" in error_line(forks.run(cmd))
    resumed = forks.run(cmd + ["--resume"], AIBLOX_TRACKING_SETTLE_S="1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert child_metrics(assert_complete(uri, "remote_killed")) == reference
