"""Sweep wall time, local executor against Ray (``--executor ray``) with one and two worker
nodes on this machine, side by side in one run.

The spec (``--spec``, default scifact_fusion: 268 points, both splits) is run with retrieval
cached (the signals stage copied into each fresh stage cache, so every run computes the fusion
and metrics stages of every point and nothing else):

1. local, one numba thread (the baseline of the ratios), and local on every core;
2. a Ray cluster started here (``ray start``: a head node with no CPUs, then worker nodes of
   one CPU each, added one at a time): per node count, a first run (cold: the workers start,
   import aiblox, read the sweep's job and signals) and a second (warm workers);

each run's points checked equal to the local run's (config hashes, run hashes, metrics).
Ray's overhead per point: (wall - local one-thread wall / CPUs) / points, the time a point
costs beyond its share of the single-thread work.

    python benchmarks/distributed.py [--spec SPEC] [--nodes 2] [--markdown]
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import arg_parser, environment_line, err, positive_int, print_table  # noqa: E402

from aiblox.data import load_dataset  # noqa: E402
from aiblox.metrics import setup_numba_cache  # noqa: E402
from aiblox.sweep import load_spec, run_sweep  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / ".aiblox" / "bench" / "distributed"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A Ray cluster on this machine under its own temp folder, stopped by process id (``ray
    stop`` would stop every Ray cluster on the machine).

    Every node runs with token authentication and a token of the cluster's own: Ray 2.60 turns
    it on for a head node wherever ``~/.ray/auth_token`` exists, and refuses a node that joins
    without the token, so the nodes are not left to guess. This process (the driver) has the
    token as ``RAY_AUTH_TOKEN`` and no ``RAY_AUTH_MODE``, as a default install: aiblox sends the
    token because the cluster asks for it."""

    def __init__(self) -> None:
        self.temp_dir = tempfile.mkdtemp(prefix="aiblox-ray-", dir="/tmp")
        self.address = f"127.0.0.1:{_free_port()}"
        token = secrets.token_hex(32)
        os.environ.pop("RAY_AUTH_MODE", None)
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
        os.environ["RAY_AUTH_TOKEN"] = token
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "AIBLOX_NO_PROGRESS": "1", "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "token"}

    def _ray(self, *args: str) -> None:
        proc = subprocess.run([shutil.which("ray") or "ray", *args], env=self.env,
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"ray {' '.join(args)}: {proc.stderr[-2000:]}")

    def start_head(self) -> None:
        """The head node (no CPUs), tried twice: on a loaded machine it can time out."""
        for attempt in (1, 2, 3):
            self.address = f"127.0.0.1:{_free_port()}"
            try:
                self._ray("start", "--head", "--port", self.address.rsplit(":", 1)[1],
                          "--num-cpus", "0", "--temp-dir", self.temp_dir, "--include-dashboard",
                          "false", "--node-ip-address", "127.0.0.1", "--disable-usage-stats")
                return
            except RuntimeError as exc:
                err.print(f"the head node did not start (attempt {attempt}): {exc}"[-400:])
                self.stop(keep=True)
                if attempt == 3:
                    raise

    def add_node(self) -> None:
        """One more worker node (one CPU), tried up to three times."""
        for attempt in (1, 2, 3):
            try:
                self._ray("start", "--address", self.address, "--num-cpus", "1",
                          "--node-ip-address", "127.0.0.1")
                return
            except RuntimeError:
                if attempt == 3:
                    raise

    def stop(self, keep: bool = False) -> None:
        """Every process of the cluster ended; its temp folder removed unless ``keep``."""
        import psutil

        port = self.address[self.address.rindex(":"):]
        roots = [p for p in psutil.process_iter(["cmdline"])
                 if any(self.temp_dir in a or (a.startswith("--address=") and a.endswith(port))
                        for a in p.info["cmdline"] or ())]
        procs = {p.pid: p for p in roots}
        for p in roots:
            with contextlib.suppress(psutil.NoSuchProcess):
                procs.update({c.pid: c for c in p.children(recursive=True)})
        for p in procs.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.terminate()
        _, alive = psutil.wait_procs(list(procs.values()), timeout=10)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        if not keep:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def _points(r) -> list:
    return [(p.config_hash, p.metrics, {s: m.run_hash for s, m in p.manifest.splits.items()})
            for p in r.points]


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--spec", default=str(REPO / "evals" / "sweeps" / "scifact_fusion.toml"))
    ap.add_argument("--db", default=str(BENCH / "scifact.duckdb"))
    ap.add_argument("--cache-dir", default=str(BENCH / "stages"))
    ap.add_argument("--nodes", type=positive_int, default=2,
                    help="worker nodes added, one at a time")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    setup_numba_cache()
    spec = load_spec(args.spec)
    ds = load_dataset(spec.dataset, splits=spec.splits)
    base = Path(args.cache_dir)
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    err.print(f"signals of {spec.name} (computed once, then copied into each run's cache)")
    run_sweep(spec, cache_dir=base / "base", db=args.db, dataset=ds, progress=False, jobs=0)

    def fresh(name: str) -> Path:
        path = base / name
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(base / "base" / "signals", path / "signals")
        return path

    runs: list[tuple[str, str, int, float, float, int, str]] = []
    ref = None

    def record(label: str, workers: str, cpus: int, wall: float, r) -> None:
        nonlocal ref
        same = "reference" if ref is None else ("equal" if _points(r) == ref else "DIFFERENT")
        ref = ref if ref is not None else _points(r)
        runs.append((label, workers, cpus, wall, r.timings["points_s"], len(r.points), same))
        err.print(f"{label} ({workers}): {wall:.2f} s, {same}")

    def local(label: str, jobs: int) -> None:
        cache = fresh("local")
        t0 = time.perf_counter()
        r = run_sweep(spec, cache_dir=cache, db=args.db, dataset=ds, progress=False, jobs=jobs)
        record(label, f"{jobs or os.cpu_count()} thread(s) in the driver", 0,
               time.perf_counter() - t0, r)

    local("local, 1 thread", 1)
    local("local, all cores", 0)

    cluster = Cluster()
    try:
        err.print("starting a Ray head node (no CPUs)")
        cluster.start_head()
        import ray

        for nodes in range(1, args.nodes + 1):
            err.print(f"adding worker node {nodes}")
            cluster.add_node()
            if ray.is_initialized():  # the new node's workers start with the next job
                ray.shutdown()
            for run in ("cold", "warm"):
                cache = fresh("ray")
                t0 = time.perf_counter()
                r = run_sweep(spec, cache_dir=cache, db=args.db, dataset=ds, progress=False,
                              executor="ray", address=cluster.address)
                wall = time.perf_counter() - t0
                record(f"ray, {run} workers", f"{nodes} node(s) x 1 CPU", nodes, wall, r)
    finally:
        import ray

        ray.shutdown()
        cluster.stop()
    local("local, 1 thread, again", 1)  # the machine is shared: the baseline before and after
    shutil.rmtree(base / "local", ignore_errors=True)
    shutil.rmtree(base / "ray", ignore_errors=True)
    local1 = (runs[0][3] + runs[-1][3]) / 2
    rows = [[label, workers, str(n), f"{wall:.2f}", f"{points_s:.2f}",
             f"{wall / n * 1000:.1f}", f"{local1 / wall:.2f}",
             "" if cpus == 0 else f"{(wall - local1 / cpus) / n * 1000:.1f}", same]
            for label, workers, cpus, wall, points_s, n, same in runs]

    print_table(f"Sweep wall time, local against Ray on this machine ({spec.name}, retrieval "
                f"cached)",
                ["executor", "workers", "points", "wall s", "points s", "ms/point",
                 "speed vs local 1 thread", "Ray overhead ms/point", "results"],
                rows, args.markdown,
                right=["points", "wall s", "points s", "ms/point", "speed vs local 1 thread",
                       "Ray overhead ms/point"],
                notes=["wall: run_sweep from call to result (signals read back, points, "
                       "conclusion); points s: its points phase as the driver sees it",
                       "local 1-thread wall: the mean of the runs before and after "
                       f"({runs[0][3]:.2f} s, {runs[-1][3]:.2f} s)",
                       "Ray overhead per point: (wall - local 1-thread wall / CPUs) / points",
                       "cold: the first sweep of a new driver (workers start, import, read "
                       "the job and signals); warm: a second sweep on the same workers",
                       environment_line()])


if __name__ == "__main__":
    main()
