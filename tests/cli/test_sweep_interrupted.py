"""Ctrl-C during ``aiblox sweep``: one line saying that the finished points are kept and how to
go on (it printed nothing after the plan line, QA 22), exit status 130, and the points packed
before it are read back by the next run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ctrl_c_keeps_the_finished_points_and_says_how_to_go_on(tmp_path, sweep_db):
    spec = tmp_path / "dense.toml"
    spec.write_text((REPO / "evals" / "sweeps" / "sample_fusion.toml").read_text().replace(
        'name = "sample_fusion"', 'name = "dense_sample"').replace(
        # 4,004 points: the first pack is written at 1,024 of them, seconds before the end
        # even on an idle machine (at 1,608 points 0.9 s, which a loaded one's Ctrl-C missed)
        "step = 0.25", "step = 0.001"), encoding="utf-8")
    assert "step = 0.001" in spec.read_text()
    cache = tmp_path / "stages"
    cmd = [sys.executable, "-m", "aiblox.cli", "sweep", str(spec), "--no-tracking",
           "--cache-dir", str(cache), "--db", sweep_db, "--json"]
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1"}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (cache / "metrics" / "packs").is_dir():  # some points packed: mid-sweep
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no points packed in 240 s"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("stopped: interrupted: the finished points are kept (stage cache "), err
    # the command as said, with the options that say where (it named the spec alone, and
    # following it used the default store and cache: a fresh sweep elsewhere)
    said = f"aiblox sweep dense.toml --db {sweep_db} --cache-dir {cache} --no-tracking"
    assert f"`{said}` again reads them back" in last, last  # the spec relative to the cwd
    assert "Traceback" not in err
    import shlex

    again = subprocess.run([sys.executable, "-m", "aiblox.cli", *shlex.split(said)[1:],
                            "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    reused = json.loads(again.stdout)["reused"]
    assert reused.get("metrics", 0) >= 2048 // 2  # the first pack's points were not redone
