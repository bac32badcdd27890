"""Shared fixtures: the project's sample dataset, real DuckDB files, the shared collections."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI (the CI env var) replays the same examples every run, so a red build is reproducible; a
# local run draws new ones and can find new counterexamples (kept in .hypothesis/).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SAMPLE = REPO / "datasets" / "sample"


# Parallel runs (pytest-xdist; `-n auto --dist loadgroup` in pyproject.toml's addopts). The whole
# suite (`python -m pytest`, no paths) runs on one worker per CPU, at least 2: many tests wait on
# the processes they start (kills, leases, servers), so two workers overlap well even on two
# cores. A run of chosen paths stays in this one process, as before, unless `-n N` is given
# (`-n 0`: the whole suite in one process). Each test module runs on one worker (its module
# fixtures are set up once: a Ray cluster, an MLflow or marimo server); modules marked
# `pytest.mark.xdist_group(NAME)` share one worker with the others of that NAME (they share
# something outside tmp_path). Every worker has its own tmp_path root, sample stores, MLflow
# store and throwaway PostgreSQL server (the session fixtures below).
def pytest_xdist_auto_num_workers(config):
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if env:
        return int(env)
    given = any(a == "-n" or a.startswith(("-n", "--numprocesses"))
                for a in config.invocation_params.args)
    if not given and config.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        return 0  # chosen paths: one process, as before
    return max(2, os.cpu_count() or 1)


def pytest_configure(config):
    """The whole suite on workers (the controller, before they start): aiblox's numba kernels
    compiled by one process (:mod:`tests.warm_kernels`) while the workers start and collect;
    each waits for it before its first test (:func:`pytest_runtestloop`). It holds an exclusive
    lock on a file until it has finished, whatever its outcome."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", 0):
        return
    import fcntl
    import subprocess
    import sys
    import tempfile
    import threading
    import time

    lock_path = Path(tempfile.gettempdir()) / f"aiblox-test-kernels-{os.getpid()}.lock"
    lock = open(lock_path, "w")  # noqa: SIM115 - released by the thread below
    fcntl.flock(lock, fcntl.LOCK_EX)
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tests.warm_kernels"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    config.stash[_WARM] = {"lock": str(lock_path)}

    def release() -> None:
        try:
            out, _ = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        config.stash[_WARM].update(rc=proc.returncode, out=out or "",
                                   seconds=time.monotonic() - started)
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()

    config.stash[_WARM]["thread"] = thread = threading.Thread(target=release, daemon=True)
    thread.start()
    os.environ["AIBLOX_TEST_KERNELS_LOCK"] = str(lock_path)  # the workers inherit it


_WARM = pytest.StashKey[dict]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """A worker waits for the kernels to be compiled (:func:`pytest_configure`)."""
    path = os.environ.get("AIBLOX_TEST_KERNELS_LOCK")
    if not hasattr(session.config, "workerinput") or not path or not Path(path).exists():
        return
    import fcntl

    with open(path) as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)


def pytest_terminal_summary(terminalreporter, config):
    warm = config.stash.get(_WARM, None)
    if warm is None:
        return
    warm["thread"].join()
    Path(warm["lock"]).unlink(missing_ok=True)
    if warm.get("rc") == 0:
        terminalreporter.write_line(f"aiblox's numba kernels compiled before the tests in "
                                    f"{warm['seconds']:.1f} s (tests/warm_kernels.py)")
    else:
        terminalreporter.write_line(f"tests/warm_kernels.py failed (exit {warm.get('rc')}), "
                                    f"the tests compiled their kernels themselves:\n"
                                    f"{warm.get('out', '')[-2000:]}", yellow=True)


LONG_MODULES = (
    "tests/sweep/test_ray_executor.py", "tests/sweep/test_tracking_processes.py",
    "tests/test_typing.py", "tests/notebooks/test_browser.py", "tests/sweep/test_finetune.py",
    "tests/sweep/test_shared_state.py", "tests/notebooks/test_notebooks.py",
    "tests/notebooks/test_jupyter.py", "tests/cli/test_disk_full.py",
    "tests/benchmarks/test_fusion_sweep_small.py", "tests/cli/test_half_synced.py",
    "tests/benchmarks/test_scale_small.py", "tests/stages/test_search_terms.py",
    "tests/test_readme_python.py", "tests/sweep/test_shared_cache.py",
    "tests/experiment/test_run_experiment.py")
"""The modules that take longest, longest first: handed out first, so that no long module
starts last while the other worker idles (``--durations`` of a whole run, 2026-11-28, after the
sweep, disk-full and half-synced processes were forked from a preloaded server; the type check
and numba's kernels where a clean clone compiles them from nothing: ``test_typing`` runs mypy
for 20-25 s there, 3 s with its cache). A one-test module of 20 s or more belongs here too, or
it is handed out last by its size."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup``, a test without an ``xdist_group`` mark is grouped with its
    module, and the groups are handed out in the order of the collection (``addopts``:
    ``--no-loadscope-reorder``), which this orders: :data:`LONG_MODULES` first, then the other
    groups, most tests first (ties in collection order), each group's tests in their order."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers
        return
    group_of = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            mark = pytest.mark.xdist_group(item.nodeid.split("::", 1)[0])
            item.add_marker(mark)
        group_of[item.nodeid] = mark.args[0] if mark.args else mark.kwargs.get("name", "")
    size: dict[str, int] = {}
    for g in group_of.values():
        size[g] = size.get(g, 0) + 1
    first = {g: i for i, g in enumerate(dict.fromkeys(group_of.values()))}
    long = {m: i for i, m in enumerate(LONG_MODULES)}

    def key(item):
        g = group_of[item.nodeid]
        return (long.get(g, len(long)), -size[g], first[g])

    items.sort(key=key)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """A worker ends with a large heap (loaded corpora, compiled kernels, ranx's typed dicts),
    and pytest's unraisable-exception check collects it five times after this hook. That
    took 5-10 s at the end of a worker (with xdist interrupting it by SIGINT after 5 s, the
    ``KeyboardInterrupt`` in a gc callback some runs printed), while the other worker and the
    run waited. One collection here (a ``__del__`` that raises is still reported), then what
    survives is frozen: the later passes, and the interpreter's at exit, have nothing old to
    scan."""
    import gc

    gc.collect()
    gc.freeze()


def shared_dataset(name: str) -> Path:
    path = SHARED / "datasets" / name
    if not path.exists():
        pytest.fail(f"shared dataset {name} missing at {path}: CI runs with ../shared beside "
                    f"the checkout")
    return path


@pytest.fixture(scope="session")
def sample_dataset():
    from aiblox.data import load_dataset

    return load_dataset(SAMPLE)


@pytest.fixture()
def sample_store(tmp_path, sample_dataset):
    """A real DuckDB file holding the sample dataset with hashing-embedder vectors."""
    from aiblox.embedding import CachedEmbedder, HashingEmbedder
    from aiblox.engine.workspace import prepare_store
    from aiblox.stores import DuckDBStore

    store = DuckDBStore(tmp_path / "sample.duckdb")
    emb = CachedEmbedder(HashingEmbedder(), store)
    prepare_store(store, sample_dataset, emb, progress=False)
    yield store, emb
    store.close()


@pytest.fixture(scope="session")
def sweep_db(tmp_path_factory, sample_dataset):
    """Path of a DuckDB file holding the sample dataset with hashing vectors."""
    from aiblox.embedding import CachedEmbedder, HashingEmbedder
    from aiblox.engine.workspace import prepare_store
    from aiblox.stores import DuckDBStore

    path = tmp_path_factory.mktemp("sweepdb") / "sample.duckdb"
    store = DuckDBStore(path)
    prepare_store(store, sample_dataset, CachedEmbedder(HashingEmbedder(), store), progress=False)
    store.close()
    return str(path)


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory):
    """One tmp sqlite MLflow store per session (creating its tables takes seconds); tests keep
    apart by experiment name."""
    pytest.importorskip("mlflow")
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


# PostgreSQL, for the store contract suite (tests/stores) and the evidence bundle tables
# (tests/bundles): the server at ``AIBLOX_PG_URL`` when set (an admin URL: the tests create and
# drop their own databases), else a throwaway PostgreSQL 16 + pgvector from the ``pgserver``
# wheel, started once per session and deleted afterwards. Never skipped.
@pytest.fixture(scope="session")
def pg_admin_url():
    """Admin URL of a PostgreSQL server with pgvector."""
    from aiblox.stores.postgres import ThrowawayPostgres, normalize_url

    env = os.environ.get("AIBLOX_PG_URL")
    if env:
        yield normalize_url(env)
        return
    with ThrowawayPostgres() as url:
        yield url


@pytest.fixture(scope="session")
def pg_url(pg_admin_url):
    """A scratch database for this session, dropped at the end."""
    from aiblox.stores.postgres import scratch_database

    with scratch_database(pg_admin_url) as url:
        yield url
