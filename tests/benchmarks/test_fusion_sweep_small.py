"""``benchmarks/fusion_sweep.py``'s default mode (the scoring table) on the sample sweep at its
smallest size, as a smoke test (no timings checked): every route runs, the check row finds
aiblox's metrics equal to ranx's, and the table is printed. About 20 s with numba's cache warm
(ranx's kernels compile on a cold cache)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_scoring_table_runs_on_the_sample_sweep(tmp_path):
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "fusion_sweep.py"),
         "--spec", str(REPO / "evals" / "sweeps" / "sample_fusion.toml"),
         "--db", str(tmp_path / "fs.duckdb"), "--cache-dir", str(tmp_path / "stages"),
         "--repeat", "1", "--depth", "10", "--markdown"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "**Fusion scoring on sample test (10-deep runs)**" in out
    for route in ("| aiblox: fuse + rank + metrics |",
                  "| aiblox fusion + ranx's metric kernels (the route before) |",
                  "| ranx: fuse (min-max wsum / rrf) + evaluate |",
                  "| aiblox sweep, 10-deep, --no-tracking, train + test |",
                  "| aiblox sweep sample_fusion (depth 10-20, top 10), --no-tracking, train + "
                  "test |"):
        assert route in out, out
    assert re.search(r"\| (\d+)/\1 points equal to ranx per query \|", out), out
