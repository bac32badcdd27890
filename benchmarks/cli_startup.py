"""Whole-command times of the ``aiblox`` CLI: its help, each command's own startup (``aiblox
CMD --help``) and a few real commands on the sample dataset, against the code at
``--baseline-ref`` (default ``main``, exported from git into a temporary folder), both run in
fresh processes, interleaved so that a load that comes and goes hits both alike.

The setup (in a temporary working folder, not timed) ingests ``datasets/sample`` with the
default embedder (MiniLM) and runs ``evals/sweeps/sample_fusion.toml`` into a local MLflow
store, so ``aiblox search``, ``aiblox runs`` and ``aiblox compare`` have something to read;
every command then runs once untimed (warm file cache, numba cache, model files) before the
``--repeats`` timed runs, whose median is shown (and the minimum, the least disturbed run)::

    python benchmarks/cli_startup.py                       # against main, 5 runs each
    python benchmarks/cli_startup.py --baseline-ref HEAD~3 --markdown
    python benchmarks/cli_startup.py --no-baseline --only help   # the startup rows alone

Note the machine's load average (printed under the table): on 2 busy CPUs every number grows.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import arg_parser, environment_line, err, positive_int, print_table  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
QUERY = "how does BM25 saturate term frequency?"
STARTUP = ["quickstart", "ingest", "search", "chunk", "answer", "sweep", "report", "compare",
           "runs", "eval run", "eval verify", "pack show", "cache", "index build"]
"""Commands whose own ``--help`` is timed: what a command costs before its work starts."""


def export_tree(ref: str, into: Path) -> Path:
    """The ``aiblox`` package as it is at git ``ref``, written under ``into``."""
    archive = into / "baseline.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "archive", ref, "aiblox"], cwd=REPO, check=True, stdout=f)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def run(tree: Path, args: list[str], cwd: Path, check: bool = True) -> float:
    """Seconds ``aiblox ARGS`` takes as a fresh process importing the package from ``tree``
    (as the installed ``aiblox`` script does: ``aiblox.cli.main:app``)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "AIBLOX_NO_PROGRESS": "1",
           "AIBLOX_DATASETS": str(REPO / "datasets")}
    code = "import sys; from aiblox.cli.main import app; sys.argv[0] = 'aiblox'; app()"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    took = time.perf_counter() - t0
    if check and proc.returncode != 0:
        raise SystemExit(f"aiblox {' '.join(args)} failed ({proc.returncode}) with "
                         f"PYTHONPATH={tree}:\n{proc.stderr[-2000:]}")
    return took


def interpreter(cwd: Path) -> float:
    """Seconds ``python -c pass`` takes: the floor under every row."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], cwd=cwd, check=True)
    return time.perf_counter() - t0


def setup(tree: Path, work: Path) -> list[tuple[str, list[str]]]:
    """Build the sample store and a logged sweep in ``work``; the whole commands timed."""
    uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    err.print("setup: aiblox ingest sample, aiblox sweep sample_fusion (not timed)")
    run(tree, ["ingest", "sample"], work)
    run(tree, ["sweep", str(REPO / "evals/sweeps/sample_fusion.toml"), "--tracking-uri", uri,
               "--cache-dir", str(work / "stages")], work)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    listed = subprocess.run([sys.executable, "-m", "aiblox.cli", "runs", "sample_fusion",
                             "--tracking-uri", uri, "--format", "json"], cwd=work, env=env,
                            check=True, capture_output=True, text=True).stdout
    points = json.loads(listed)
    a, b = points[0]["run_id"], points[-1]["run_id"]
    return [
        (f"search {QUERY[:12]}... --dataset sample", ["search", QUERY, "--dataset", "sample"]),
        ("search ... --dataset sample --mode bm25",
         ["search", QUERY, "--dataset", "sample", "--mode", "bm25"]),
        ("eval sample --mode bm25", ["eval", "sample", "--mode", "bm25"]),
        ("runs", ["runs", "--tracking-uri", uri]),
        ("runs sample_fusion", ["runs", "sample_fusion", "--tracking-uri", uri]),
        ("compare RUN_A RUN_B", ["compare", a, b, "--tracking-uri", uri]),
    ]


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--baseline-ref", default="main", help="git ref compared against")
    ap.add_argument("--no-baseline", action="store_true", help="time this tree alone")
    ap.add_argument("--repeats", type=positive_int, default=5)
    ap.add_argument("--only", choices=("all", "help"), default="all",
                    help="help: only the help and startup rows (no setup)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="aiblox-bench-cli-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        trees = {"now": REPO}
        if not args.no_baseline:
            trees = {"baseline": export_tree(args.baseline_ref, Path(tmp)), "now": REPO}
        rows_spec: list[tuple[str, list[str]]] = [("--help", ["--help"]),
                                                  ("eval --help", ["eval", "--help"])]
        rows_spec += [(f"{c} --help", [*c.split(), "--help"]) for c in STARTUP]
        if args.only == "all":
            rows_spec += setup(REPO, work)
        times: dict[tuple[str, str], list[float]] = {}
        floor: list[float] = []
        for label, argv in rows_spec:
            err.print(f"aiblox {label}")
            for tree in trees.values():  # warm: file cache, numba cache, model files
                run(tree, argv, work)
            for _ in range(args.repeats):
                floor.append(interpreter(work))
                for name, tree in trees.items():
                    times.setdefault((label, name), []).append(run(tree, argv, work))
    columns = ["aiblox ...", *[f"{n} median (min) s" for n in trees]]
    if len(trees) == 2:
        columns.append("now / baseline")
    rows = []
    for label, _ in rows_spec:
        cells = [f"{statistics.median(times[label, n]):.2f} ({min(times[label, n]):.2f})"
                 for n in trees]
        if len(trees) == 2:
            ratio = (statistics.median(times[label, "now"])
                     / statistics.median(times[label, "baseline"]))
            cells.append(f"{ratio:.2f}")
        rows.append([label, *cells])
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    base = "" if args.no_baseline else f"; baseline: git {args.baseline_ref}"
    print_table("aiblox whole-command times (fresh processes)", columns, rows, args.markdown,
                right=columns[1:],
                notes=[f"Measured {environment_line()}; load average {load} (1, 5, 15 min); "
                       f"median (min) of {args.repeats} runs after one warm run{base}; "
                       f"`python -c pass` {statistics.median(floor):.2f} s."])


if __name__ == "__main__":
    main()
