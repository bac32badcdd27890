"""``--executor ray``: a sweep's points as Ray tasks on a real two-node cluster (started here
with ``ray start``) give the local executor's results, stage keys and run hashes byte for byte,
also when a worker process is killed while it runs a task."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from aiblox.sweep import SweepSpec, run_sweep

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray(args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run([shutil.which("ray") or "ray", *args], env=env, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, f"ray {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


def _cluster_processes(temp_dir: str, address: str = "") -> list[psutil.Process]:
    """Every process of the cluster under ``temp_dir`` at ``address``: those naming either on
    their command line (GCS, raylets, monitors, the client server) and their descendants
    (agents, workers)."""
    roots = []
    for p in psutil.process_iter(["cmdline"]):
        if any(temp_dir in arg or (address and arg.startswith("--address=")
                                   and arg.endswith(address[address.rindex(":"):]))
               for arg in p.info["cmdline"] or ()):
            roots.append(p)
    found = {p.pid: p for p in roots}
    for p in roots:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.update({c.pid: c for c in p.children(recursive=True)})
    return list(found.values())


def _stop(temp_dir: str, address: str) -> None:
    """Stop this test's cluster by process id (``ray stop`` would stop every Ray cluster on
    the machine, other users' too)."""
    procs = _cluster_processes(temp_dir, address)
    for p in procs:  # killed at once: the cluster is thrown away (some daemons outwait a
        with contextlib.suppress(psutil.NoSuchProcess):  # SIGTERM, 2 s waited for nothing)
            p.kill()
    psutil.wait_procs(procs, timeout=10)


AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _reload_ray_auth() -> None:
    """Ray's token and mode read again from the environment (both are kept once read)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@pytest.fixture(scope="module")
def cluster():
    """A head node and a second node, one CPU each, on this machine, with Ray 2.60's token
    authentication (a token of its own, whatever ~/.ray/auth_token holds); the address and the
    second node's raylet. No log monitors (``--include-log-monitor false``): nothing here reads
    the workers' output in the driver, and each monitor cost 2 s of CPU starting. This process
    has the token where Ray looks for it (``RAY_AUTH_TOKEN``) and no ``RAY_AUTH_MODE``, as a
    user of a default install: aiblox sends the token because the cluster asks for it."""
    temp_dir = tempfile.mkdtemp(prefix="aiblox-ray-", dir="/tmp")  # sockets: short paths
    token = secrets.token_hex(32)
    saved = {k: os.environ.pop(k) for k in AUTH_VARS if k in os.environ}
    os.environ["RAY_AUTH_TOKEN"] = token
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "AIBLOX_NO_PROGRESS": "1", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    address = ""
    try:
        for attempt in (1, 2, 3):  # on a loaded machine a node can time out starting (30 s)
            port = _free_port()
            address = f"127.0.0.1:{port}"
            try:
                _ray(["start", "--head", "--port", str(port), "--num-cpus", "1", "--temp-dir",
                      temp_dir, "--include-dashboard", "false", "--include-log-monitor",
                      "false", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"], env)
                break
            except AssertionError:
                _stop(temp_dir, address)
                if attempt == 3:
                    raise
        raylets = {p.pid for p in _cluster_processes(temp_dir) if p.name() == "raylet"}
        for attempt in (1, 2, 3):
            try:
                _ray(["start", "--address", address, "--num-cpus", "1", "--node-ip-address",
                      "127.0.0.1", "--include-log-monitor", "false"], env)
                break
            except AssertionError:
                if attempt == 3:
                    raise
        second = [p for p in _cluster_processes(temp_dir)
                  if p.name() == "raylet" and p.pid not in raylets]
        assert second, "the second node's raylet was not found"
        yield address, second[0]
    finally:
        import ray

        ray.shutdown()
        _stop(temp_dir, address)
        shutil.rmtree(temp_dir, ignore_errors=True)
        for k in AUTH_VARS:
            os.environ.pop(k, None)
        os.environ.update(saved)
        _reload_ray_auth()


def _fingerprint(result) -> dict:
    """What must not depend on where the points ran."""
    return {
        "points": [(p.label, p.config_hash, p.manifest.manifest_hash, p.metrics,
                    {s: (m.run_hash, [st["key"] for st in m.stages],
                         [st["output_hash"] for st in m.stages])
                     for s, m in p.manifest.splits.items()})
                   for p in result.points],
        "best": result.best.config_hash,
        "baseline": result.baseline.config_hash if result.baseline else None,
        "ci": result.ci, "significance": [c.model_dump() for c in result.significance],
        "computed": result.computed, "reused": result.reused, "trials": result.trials,
    }


def _pipeline_spec(sample_spec) -> SweepSpec:
    data = sample_spec.model_dump()
    data["base"] = {**data["base"], "top_k_chunks": 6}
    data["chunk_k"] = [1, 5]  # 6 chunks returned: answer_recall@k for k <= 6 (issue 25)
    data.update({"grid": {"chunking": {"chunker_id": ["sentences", "token_window"]},
                          "selection": {"policy": ["R2_POLICY_V1", "R2_POLICY_V2"],
                                        "max_chunks": [2, 4]}},
                 "baseline": {"policy": "R2_POLICY_V1", "max_chunks": 2},
                 "primary": "answer_f1", "query_limit": 4, "metrics": ["ndcg@10"],
                 "significance_top": 2})
    return SweepSpec.model_validate(data)


def _chunk_sizes_spec(sample_spec) -> SweepSpec:
    """A pipeline sweep whose every point has chunk stages of its own (so every task opens the
    store to compute them)."""
    data = _pipeline_spec(sample_spec).model_dump()
    data["grid"] = {"chunking": {"chunker_id": ["token_window"],
                                 "max_chunk_tokens": [24, 32, 48, 64, 96, 128]},
                    "selection": {"policy": ["R2_POLICY_V1"], "max_chunks": [2]}}
    data["baseline"] = None
    return SweepSpec.model_validate(data)


def _both(spec, tmp_path, db, dataset, address):
    local = run_sweep(spec, cache_dir=tmp_path / "local", db=db, progress=False,
                      dataset=dataset)
    ray_ = run_sweep(spec, cache_dir=tmp_path / "ray", db=db, progress=False, dataset=dataset,
                     executor="ray", address=address)
    return local, ray_


def test_fusion_sweep_on_two_nodes_is_the_local_sweep(cluster, sample_spec, tmp_path,
                                                       sweep_db, sample_dataset):
    address, _ = cluster
    local, ray_ = _both(sample_spec, tmp_path, sweep_db, sample_dataset, address)
    assert len(ray_.points) == 24
    assert _fingerprint(ray_) == _fingerprint(local)
    assert ray_.computed == {"signals": 4, "fusion": 48, "metrics": 48} and not ray_.reused
    # the workers wrote packs, as the local executor does (a few per task and stage), not
    # two files per entry
    packs = sorted((tmp_path / "ray").glob("metrics/packs/*.pack"))
    assert packs and not list((tmp_path / "ray").glob("metrics/*.meta.json"))
    assert sum(1 for p in (tmp_path / "ray").rglob("*") if p.is_file()) < 48
    again = run_sweep(sample_spec, cache_dir=tmp_path / "ray", db=sweep_db, progress=False,
                      dataset=sample_dataset, executor="ray", address=address)
    assert again.computed == {} and again.reused == {"signals": 4, "fusion": 48,
                                                     "metrics": 48}
    assert _fingerprint(again)["points"] == _fingerprint(local)["points"]
    # a damaged entry a worker finds: computed again, counted, and warned of in the driver
    data = bytearray(packs[0].read_bytes())
    data[-1] ^= 0xFF  # the pack's last entry's output
    packs[0].write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=r"stage cache: metrics/\w+ under .* was damaged"):
        fixed = run_sweep(sample_spec, cache_dir=tmp_path / "ray", db=sweep_db,
                          progress=False, dataset=sample_dataset, executor="ray",
                          address=address)
    assert fixed.repaired == {"metrics": 1} and fixed.computed == {"metrics": 1}
    assert _fingerprint(fixed)["points"] == _fingerprint(local)["points"]


def test_pipeline_sweep_on_two_nodes_is_the_local_sweep(cluster, sample_spec, tmp_path,
                                                         sweep_db, sample_dataset):
    address, _ = cluster
    spec = _pipeline_spec(sample_spec)
    local, ray_ = _both(spec, tmp_path, sweep_db, sample_dataset, address)
    assert len(ray_.points) == 8
    assert _fingerprint(ray_) == _fingerprint(local)
    assert ray_.computed["chunks"] == 4 and ray_.computed["answer_metrics"] == 16


def test_a_retrieval_pipeline_sweep_counts_its_stages_as_the_local_sweep(
        cluster, sample_spec, tmp_path, sweep_db, sample_dataset):
    """The rescore points read the BM25 point's run (its one list cut, counted as ``cut``):
    counted once, on Ray as locally (the local executor counted each read as a reuse; Ray's
    merged counts had none)."""
    from test_pipeline import rescore_spec

    address, _ = cluster
    spec = rescore_spec(sample_spec)
    for _ in ("cold", "warm"):
        local, ray_ = _both(spec, tmp_path, sweep_db, sample_dataset, address)
        assert _fingerprint(ray_) == _fingerprint(local)
    assert ray_.computed == {} and ray_.reused == {"signals": 2, "cut": 2,
                                                   "dense_rescore": 6, "metrics": 8}


def test_a_tpe_search_on_the_cluster_asks_the_local_trials(cluster, sample_spec, tmp_path,
                                                           sweep_db, sample_dataset):
    address, _ = cluster
    data = sample_spec.model_dump()
    data["search"] = {"strategy": "tpe", "n": 12, "seed": 3}
    spec = SweepSpec.model_validate(data)
    local, ray_ = _both(spec, tmp_path, sweep_db, sample_dataset, address)
    assert len(ray_.trials) == 12 and ray_.trials == local.trials
    assert _fingerprint(ray_) == _fingerprint(local)


def test_a_worker_killed_mid_task_is_retried_and_changes_nothing(cluster, sample_spec,
                                                                 tmp_path, sweep_db,
                                                                 sample_dataset):
    address, second = cluster
    spec = _chunk_sizes_spec(sample_spec)
    local = run_sweep(spec, cache_dir=tmp_path / "local", db=sweep_db, progress=False,
                      dataset=sample_dataset)
    got: dict = {}

    def sweep() -> None:
        try:
            got["result"] = run_sweep(spec, cache_dir=tmp_path / "ray", db=sweep_db,
                                      progress=False, dataset=sample_dataset, executor="ray",
                                      address=address)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            got["error"] = exc

    runner = threading.Thread(target=sweep)
    runner.start()
    killed = None
    deadline = time.monotonic() + 90
    while killed is None and runner.is_alive() and time.monotonic() < deadline:
        for w in second.children():  # the second node's workers
            try:  # one with the store open is running a point (a chunk stage not yet cached)
                if any(f.path.startswith(sweep_db) for f in w.open_files()):
                    os.kill(w.pid, signal.SIGKILL)
                    killed = w.pid
                    break
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        time.sleep(0.002)
    runner.join(timeout=120)
    assert killed is not None, "no worker of the second node was seen running a task"
    assert not psutil.pid_exists(killed) or psutil.Process(killed).status() == "zombie"
    assert "error" not in got, got.get("error")
    assert _fingerprint(got["result"])["points"] == _fingerprint(local)["points"]
    assert got["result"].best.config_hash == local.best.config_hash


def test_an_address_where_no_cluster_answers_is_one_clear_error(tmp_path, sample_spec):
    from typer.testing import CliRunner

    from aiblox.cli.main import app

    port = _free_port()
    started = time.monotonic()
    res = CliRunner().invoke(app, ["sweep", str(REPO / "evals/sweeps/sample_fusion.toml"),
                                   "--executor", "ray", "--address", f"127.0.0.1:{port}",
                                   "--cache-dir", str(tmp_path / "stages"), "--no-tracking"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert lines[-1].startswith("error: --address 127.0.0.1:") and "no Ray cluster" in lines[-1]
    assert time.monotonic() - started < 20
    assert not (tmp_path / "stages").exists()  # nothing was opened or written


def test_a_cluster_with_token_authentication_is_reached_with_the_token_ray_finds(
        cluster, monkeypatch):
    from aiblox.cluster import check_address

    address, _ = cluster
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # a default install: no mode set
    check_address(address)  # it asked for the token (RAY_AUTH_TOKEN here) and took it
    assert os.environ["RAY_AUTH_MODE"] == "token"  # ray.init sends it too


@pytest.fixture
def ray_detached(monkeypatch):
    """This process detached from Ray (a wrong token must not reach a live driver); the
    environment and Ray's token and mode put back afterwards."""
    import ray

    ray.shutdown()
    yield monkeypatch
    monkeypatch.undo()
    _reload_ray_auth()


@pytest.mark.parametrize(("env", "message"), [
    ({"RAY_AUTH_TOKEN": None}, "the Ray cluster there needs an authentication token and "
                               "none was found: put the cluster's token"),
    ({"RAY_AUTH_TOKEN": "not-the-token"}, "the Ray cluster there refused this machine's "
                                          "authentication token; put the cluster's token"),
    ({"RAY_AUTH_MODE": "disabled"}, "the Ray cluster there needs token authentication but "
                                    "RAY_AUTH_MODE=disabled; set RAY_AUTH_MODE=token"),
])
def test_a_cluster_wanting_a_token_it_does_not_get_is_one_clear_error(
        cluster, ray_detached, tmp_path, env, message):
    from typer.testing import CliRunner

    from aiblox.cli.main import app

    address, _ = cluster
    ray_detached.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    for name, value in env.items():
        if value is None:
            ray_detached.delenv(name)
        else:
            ray_detached.setenv(name, value)
    res = CliRunner().invoke(app, ["sweep", str(REPO / "evals/sweeps/sample_fusion.toml"),
                                   "--executor", "ray", "--address", address,
                                   "--cache-dir", str(tmp_path / "stages"), "--no-tracking"])
    assert res.exit_code == 2
    line = res.output.strip().splitlines()[-1]
    assert line.startswith(f"error: --address {address}: {message}")
    assert "RAY_AUTH_MODE" in message or line.endswith(
        "(`ray get-auth-token` on its head node prints it) in ~/.ray/auth_token, or set "
        "RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, a file)")
    assert not (tmp_path / "stages").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--executor", "dask"], "error: --executor 'dask': choose one of local, ray"),
    (["--address", "127.0.0.1:6379"], "error: --address 127.0.0.1:6379 needs --executor ray"),
    (["--executor", "ray", "--address", "head"], "error: --address 'head': expected HOST:PORT"),
])
def test_a_bad_executor_or_address_is_refused_before_any_work(tmp_path, args, message):
    from typer.testing import CliRunner

    from aiblox.cli.main import app

    res = CliRunner().invoke(app, ["sweep", str(REPO / "evals/sweeps/sample_fusion.toml"),
                                   *args, "--cache-dir", str(tmp_path / "stages"),
                                   "--no-tracking"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1].startswith(message)
    assert not (tmp_path / "stages").exists()


def test_embedding_on_the_cluster_embeds_each_missing_text_once(cluster):
    from aiblox.embedding import CachedEmbedder, HashingEmbedder, InMemoryEmbeddingCache
    from aiblox.embedding.ray import BATCH, ray_cached_embedder

    address, _ = cluster
    texts = [f"document {i % 700} about topic {i % 700 % 13}" for i in range(900)]  # 700 distinct
    local = CachedEmbedder(HashingEmbedder(), InMemoryEmbeddingCache())
    want = local.embed(texts)
    cache = InMemoryEmbeddingCache()
    remote = ray_cached_embedder("hashing", cache, address, progress=False)
    assert 2 * BATCH < 700  # three tasks
    got = remote.embed(texts)
    assert got.tobytes() == want.tobytes()
    assert remote.misses == 700 and remote.hits == 0
    again = remote.embed(texts[::-1])  # every text now cached: nothing sent out
    assert again.tobytes() == want[::-1].tobytes()
    assert remote.misses == 700 and remote.hits == 700


def test_ingest_on_the_cluster_writes_the_local_vectors(cluster, tmp_path):
    from typer.testing import CliRunner

    from aiblox.cli.main import app
    from aiblox.data import load_dataset
    from aiblox.embedding import get_embedder
    from aiblox.hashing import sha256_text
    from aiblox.stores import DuckDBStore

    address, _ = cluster
    runner = CliRunner()
    for name, extra in (("local", []), ("ray", ["--executor", "ray", "--address", address])):
        res = runner.invoke(app, ["ingest", "sample", "--embedder", "hashing", "--db",
                                  str(tmp_path / f"{name}.duckdb"), "--json", *extra])
        assert res.exit_code == 0, res.output
    ds = load_dataset("sample")
    hashes = sorted({sha256_text(d.embedding_text) for d in ds.corpus.values()})
    vecs = {}
    for name in ("local", "ray"):
        store = DuckDBStore(tmp_path / f"{name}.duckdb")
        try:
            got = store.get_embeddings(get_embedder("hashing").model_id, hashes)
            vecs[name] = {h: got[h].tobytes() for h in hashes}
        finally:
            store.close()
    assert len(vecs["ray"]) == len(hashes) and vecs["ray"] == vecs["local"]


def test_a_cluster_lost_during_an_ingest_is_one_line_and_the_rerun_completes_it(
        cluster, tmp_path, monkeypatch):
    """The cluster stops answering while the ingest's embedding tasks run (the GCS check made
    to say so, as in the sweep's test): one error line, no traceback (it ended in one); the
    store keeps its items, is refused as half-synced, and the ingest run again completes it."""
    import ray
    from typer.testing import CliRunner

    from aiblox import cluster as cl
    from aiblox.cli.main import app

    address, _ = cluster
    runner = CliRunner()
    db = str(tmp_path / "lost.duckdb")
    args = ["ingest", "sample", "--embedder", "hashing", "--db", db, "--executor", "ray",
            "--address", address]
    with monkeypatch.context() as m:
        m.setattr(cl, "WAIT_S", 0.0)
        m.setattr(cl, "_gone", lambda gcs: True)  # as if `ray stop` ran
        res = runner.invoke(app, args)
    ray.shutdown()  # what the lost cluster made this process do; the next command reattaches
    assert res.exit_code == 2, res.output
    said = res.output.strip()
    assert said.startswith("error: the Ray cluster at ") and "\n" not in said, said
    assert "start it again, then run the ingest again (the items written so far are kept" \
        in said and "Traceback" not in said
    refused = runner.invoke(app, ["search", "bm25", "--db", db, "--mode", "bm25"])
    assert refused.exit_code == 2 and "half-synced" in refused.output, refused.output
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert runner.invoke(app, ["search", "bm25", "--db", db, "--mode", "bm25"]).exit_code == 0


def test_a_killed_driver_resumes_on_the_cluster_reusing_every_finished_stage(
        cluster, tmp_path, sweep_db):
    import json

    from test_tracking_processes import (
        N,
        Processes,
        assert_complete,
        child_metrics,
        env,
        sweep_cmd,
        write_spec,
    )

    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep import load_spec
    from tests.preloaded import PRELOAD, ForkServer

    address, _ = cluster
    spec = write_spec(tmp_path, "procs")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cmd = sweep_cmd(spec, uri, tmp_path / "stages", sweep_db, "--executor", "ray",
                    "--address", address)
    # the driver SIGKILLed once 4 points (2 batches) are logged; meanwhile, the reference: the
    # local executor, uninterrupted, in this process on its own store, cache and copy of the
    # sample store (DuckDB: one process has a file open at a time), as test_tracking_processes's
    # reference (a third process importing aiblox took 10-40 s)
    local_db = tmp_path / "local.duckdb"
    shutil.copyfile(sweep_db, local_db)
    # the two drivers: processes forked from one that imported MLflow and aiblox (not Ray) once,
    # with this process's environment (the cluster's token)
    with ForkServer(PRELOAD, env(), REPO, tmp_path / "forks") as server:
        forks = Processes(server)
        first_proc = forks.start(cmd, KILL="after:4")
        try:
            loaded = load_spec(spec)
            local_uri = f"sqlite:///{tmp_path}/local.db"
            run_sweep(loaded, cache_dir=tmp_path / "local", db=str(local_db), progress=False,
                      tracker=SweepTracker(local_uri, "aiblox-sweep/procs", loaded.hash,
                                           loaded.model_dump(mode="json")))
            reference = child_metrics(assert_complete(local_uri, "procs"))
            _, first_err = first_proc.communicate(timeout=400)
        finally:
            first_proc.kill()
            first_proc.wait()
        assert first_proc.returncode == -9, first_err[-3000:]
        resumed = forks.run(cmd + ["--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    c = assert_complete(uri, "procs")  # each point logged once, nothing left RUNNING
    assert child_metrics(c) == reference  # the local executor's metrics
    out = json.loads(resumed.stdout)
    assert out["reused"]["fusion"] >= 4 * 2  # the logged points' stages were not redone
    done = {k: out["computed"].get(k, 0) + out["reused"].get(k, 0) for k in ("fusion",
                                                                             "metrics")}
    assert done == {"fusion": N * 2, "metrics": N * 2}


def test_a_cluster_gone_while_the_driver_waits_is_one_clear_error(cluster, monkeypatch):
    """The driver asks the GCS whether it is still there whenever it has waited a while for a
    task; gone, one error says so and what to do (before Ray's core would end the process a
    minute later, with no word of aiblox's), and this process lets go of the cluster."""
    import ray

    from aiblox import cluster as cl

    address, _ = cluster
    assert not cl._gone(address)  # a cluster answers (it wants a token: an answer too)
    assert cl._gone(f"127.0.0.1:{_free_port()}")  # nothing listens
    cl.connect(address)

    def nap() -> None:
        time.sleep(60)

    ref = ray.remote(nap).options(num_cpus=0).remote()
    monkeypatch.setattr(cl, "WAIT_S", 0.2)
    monkeypatch.setattr(cl, "_gone", lambda gcs: True)  # as if `ray stop` ran
    detached = []
    monkeypatch.setattr(ray, "shutdown", lambda: detached.append(True))
    started = time.monotonic()
    try:
        with pytest.raises(cl.ClusterLost, match=r"^the Ray cluster at \S+ stopped answering "
                           r"while its tasks ran \(stopped or crashed\); start it again, then "
                           r"run it again$"):
            list(cl.completed([ref], "run it again"))
        assert time.monotonic() - started < 5 and detached == [True]
    finally:
        ray.cancel(ref, force=True)


def test_a_failed_task_cancels_the_others_and_ray_prints_none_of_their_errors(
        cluster, sample_spec, tmp_path, sweep_db, sample_dataset, monkeypatch):
    """Every task fails (the cache's ``fusion`` folder is a file): the sweep raises the first
    task's error, and the others, cancelled or failed too, are not printed by Ray as unhandled
    errors afterwards (a flood of tracebacks after aiblox's one error line)."""
    import gc

    import ray._private.worker

    address, _ = cluster
    unhandled: list[Exception] = []  # what Ray would log (ERROR worker.py -- Unhandled error)
    monkeypatch.setattr(ray._private.worker, "_unhandled_error_handler", unhandled.append)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "fusion").write_text("not a folder")
    with pytest.raises(NotADirectoryError):
        run_sweep(sample_spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False,
                  dataset=sample_dataset, executor="ray", address=address)
    gc.collect()  # the refs dropped: Ray reports an error no one took as it frees it
    time.sleep(1)
    assert unhandled == []


def test_connect_to_another_address_leaves_the_attached_cluster(cluster):
    """A process attached to one cluster and given another address goes there (here: no
    cluster answers, one error; it was ignored, the sweep ran on the first cluster)."""
    import ray

    from aiblox.cluster import ExecutorError, connect

    def gcs_address() -> str:
        return ray.get_runtime_context().gcs_address

    address, _ = cluster
    assert connect(address) == 2
    gcs = gcs_address()
    port = address.rpartition(":")[2]
    assert connect(f"localhost:{port}") == 2 and gcs_address() == gcs  # the same cluster
    other = f"127.0.0.1:{_free_port()}"
    with pytest.raises(ExecutorError, match=f"--address {other}: no Ray cluster answers"):
        connect(other)
    assert ray.is_initialized() and gcs_address() == gcs  # checked before letting go


def test_the_workers_get_absolute_local_paths_and_no_private_cache(tmp_path, monkeypatch):
    """A relative ``local://`` cache or ``duckdb:///`` store is the driver's folder (a worker
    runs in a folder of its own); a ``memory://`` cache, private to a process, is refused."""
    from aiblox.cluster import ExecutorError, check_address
    from aiblox.engine.cache import StageCache
    from aiblox.sweep.distributed import _absolute

    monkeypatch.chdir(tmp_path)
    assert StageCache("local://relc").uri == f"local://{tmp_path}/relc"
    assert StageCache("local:///abs/c").uri == "local:///abs/c"
    assert StageCache("file://rel").uri == str(tmp_path / "rel")
    assert _absolute("duckdb:///rel.duckdb") == str(tmp_path / "rel.duckdb")
    assert _absolute("duckdb:////abs/x.duckdb") == "/abs/x.duckdb"
    assert _absolute("postgresql://h/db") == "postgresql://h/db"
    with pytest.raises(ExecutorError, match=r"^--address '127.0.0.1:6390/': expected HOST"):
        check_address("127.0.0.1:6390/")
    assert not (tmp_path / "relc").exists()


def test_a_memory_cache_is_refused_with_ray(cluster, sample_spec, sweep_db, sample_dataset):
    from aiblox.cluster import ExecutorError

    address, _ = cluster
    with pytest.raises(ExecutorError, match=r"^--cache-dir memory://ray-c: a memory:// stage "
                                            r"cache lives in one process"):
        run_sweep(sample_spec, cache_dir="memory://ray-c", db=sweep_db, progress=False,
                  dataset=sample_dataset, executor="ray", address=address)
    import fsspec

    assert not fsspec.filesystem("memory").exists("/ray-c")  # refused before any signals
