"""Same inputs, same bytes: hashes from fresh processes with different PYTHONHASHSEED agree."""

import json
import os
import subprocess
import sys

from tests.conftest import REPO


def _eval_in_fresh_process(db, seed):
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "AIBLOX_NO_PROGRESS": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "aiblox.cli.main", "eval", "sample", "--db", str(db),
         "--embedder", "hashing", "--mode", "bm25", "--mode", "dense", "--mode", "hybrid",
         "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return [r["hashes"] for r in json.loads(out.stdout)["systems"]]


def test_hashes_identical_across_processes_and_hash_seeds(tmp_path):
    first = _eval_in_fresh_process(tmp_path / "a.duckdb", 1)
    second = _eval_in_fresh_process(tmp_path / "b.duckdb", 4242)  # separate store, built anew
    assert first == second
    assert len({h["run"] for h in first}) == 3  # the three modes rank differently
