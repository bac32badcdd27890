"""Stage cache reads by root: a local folder (the fast path) against the cache before fsspec
URIs (``--baseline-ref``, default ``main``, loaded from git) and against fsspec roots
(``local://`` through fsspec on the same disk, ``memory://``).

A fusion sweep reads thousands of entries back; each row reads every entry of a cache holding
``--entries`` fused-run-sized ``arrays`` entries and as many small JSON (metrics-sized)
entries, checked against their hashes (``StageCache.run`` reusing them), best of
``--repeats``. Ratios are against the baseline folder read::

    python benchmarks/stage_cache.py                  # 1000 + 1000 entries
    python benchmarks/stage_cache.py --entries 200 --markdown
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import types
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import arg_parser, environment_line, err, positive_int, print_table  # noqa: E402

from aiblox.engine.cache import StageCache  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def baseline_class(ref: str) -> type:
    """``StageCache`` as it is at git ``ref`` (its module loaded from ``git show``)."""
    source = subprocess.run(["git", "show", f"{ref}:aiblox/engine/cache.py"], cwd=REPO,
                            check=True, capture_output=True, text=True).stdout
    module = types.ModuleType(f"baseline_cache_{ref}")
    module.__dict__["__name__"] = module.__name__
    sys.modules[module.__name__] = module  # dataclass-free, but keep imports happy
    exec(compile(source, f"{ref}:cache.py", "exec"), module.__dict__)  # noqa: S102
    return module.StageCache


def fill(cache, n: int) -> list[tuple[str, dict, str]]:
    """``n`` arrays entries (a fused run: 300 queries x 20 positions and scores) and ``n``
    JSON entries (a metrics record); returns (name, config, codec) per entry."""
    rng = np.random.default_rng(0)
    entries = []
    for i in range(n):
        run = {"pos": rng.integers(0, 5000, 6000).astype(np.int32),
               "score": rng.random(6000).astype(np.float32)}
        cache.store("fusion", 1, {"i": i}, [], run, codec="arrays")
        cache.store("metrics", 1, {"i": i}, [], {"ndcg@10": float(rng.random()), "q": i})
        entries += [("fusion", {"i": i}, "arrays"), ("metrics", {"i": i}, "json")]
    return entries


def read_all(cache, entries) -> float:
    t0 = time.perf_counter()
    for name, config, codec in entries:
        cache.run(name, 1, config, [], lambda: None, codec=codec)
    return time.perf_counter() - t0


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--entries", type=positive_int, default=1000)
    ap.add_argument("--repeats", type=positive_int, default=5)
    ap.add_argument("--baseline-ref", default="main")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="aiblox-bench-cache-") as tmp:
        folder = Path(tmp) / "stages"
        mem = f"memory://bench-{uuid.uuid4().hex}/stages"
        entries = fill(StageCache(folder), args.entries)
        fill(StageCache(mem), args.entries)
        roots = [(f"folder, {args.baseline_ref} (baseline)",
                  lambda: baseline_class(args.baseline_ref)(folder)),
                 ("folder, this branch", lambda: StageCache(folder)),
                 ("file:// URI, this branch", lambda: StageCache(f"file://{folder}")),
                 ("local:// through fsspec", lambda: StageCache(f"local://{folder}")),
                 ("memory:// (fsspec, in process)", lambda: StageCache(mem))]
        best: dict[str, float] = {}
        for _ in range(args.repeats):  # interleaved, so drift hits every row alike
            for label, make in roots:
                cache = make()
                s = read_all(cache, entries)
                assert sum(cache.reused.values()) == len(entries) and not cache.computed
                best[label] = min(best.get(label, float("inf")), s)
                err.print(f"{label}: {s:.3f} s")
    base = best[roots[0][0]]
    rows = [[label, f"{len(entries):,}", f"{best[label] * 1e3:.0f}",
             f"{len(entries) / best[label]:,.0f}", f"{best[label] / base:.2f}x"]
            for label, _ in roots]
    print_table(f"Stage cache reads ({args.entries:,} fused runs + {args.entries:,} metrics "
                f"entries, hash-checked, best of {args.repeats})",
                ["root", "entries", "ms", "entries/s", "time vs baseline"], rows,
                args.markdown, right=["entries", "ms", "entries/s", "time vs baseline"],
                notes=[f"{environment_line()}; load average at the end "
                       f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1 / 5 / 15 min)"])


if __name__ == "__main__":
    main()
