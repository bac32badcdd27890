"""Determinism of a sweep across fresh processes: run the same spec twice, each time in a new
Python process with its own empty stage cache and a different ``PYTHONHASHSEED``, and compare
every point's config hash, run hashes (per split), stage keys and manifest hash.

    python benchmarks/sweep_determinism.py [--spec evals/sweeps/sample_fusion.toml] [--markdown]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import arg_parser, environment_line, err, print_table  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys
from aiblox.sweep import load_spec, run_sweep
spec = load_spec(sys.argv[1])
r = run_sweep(spec, cache_dir=sys.argv[2], db=sys.argv[3] or None, progress=False)
print(json.dumps({p.config_hash: {
    "manifest": p.manifest.manifest_hash,
    "runs": {s: m.run_hash for s, m in p.manifest.splits.items()},
    "stages": {s: [st["key"] for st in m.stages] for s, m in p.manifest.splits.items()},
} for p in r.points}, sort_keys=True))
"""


def run_once(spec: str, db: str, seed: str) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONHASHSEED": seed, "AIBLOX_NO_PROGRESS": "1"}
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, spec, str(Path(tmp) / "stages"), db],
                             capture_output=True, text=True, env=env, cwd=REPO, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1]), time.perf_counter() - t0


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--spec", default=str(REPO / "evals" / "sweeps" / "sample_fusion.toml"))
    ap.add_argument("--db", default="", help="store path (default: the spec's)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    err.print("run 1 ...")
    a, ta = run_once(args.spec, args.db, "1")
    err.print("run 2 ...")
    b, tb = run_once(args.spec, args.db, "2")
    rows = []
    labels = {"config": "config hashes", "manifest": "manifest hashes",
              "runs": "run hashes (per split)", "stages": "stage keys (per split)"}
    for what in labels:
        if what == "config":
            same, total = len(set(a) & set(b)), max(len(a), len(b))
        else:
            same = sum(1 for k in a if k in b and a[k][what] == b[k][what])
            total = len(a)
        rows.append([labels[what], str(total), str(same),
                     f"{100.0 * same / total:.1f}%" if total else "-"])
    print_table(f"Sweep determinism, two fresh processes ({Path(args.spec).name})",
                ["hash", "points", "identical", "share"], rows, args.markdown,
                right=["points", "identical", "share"],
                notes=[f"wall {ta:.1f} s and {tb:.1f} s (each with an empty stage cache); "
                       f"{environment_line()}"])


if __name__ == "__main__":
    main()
