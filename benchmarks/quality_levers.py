"""Quality levers on scifact: each lever's effect on nDCG@10, chosen on train, reported on test.

Runs the lever specs under ``evals/sweeps/`` (every stage read back from the stage cache when
it is there; no MLflow) and prints one row per lever:

- ``chosen``: the lever's value at the point best on train (the spec's other axes, the linear
  blend's weight among them, chosen with it on train), its train and test nDCG@10;
- ``default``: the best point on train among those at the lever's default value (the project's
  default: ``FtsConfig``'s k1 1.2, b 0.75, lucene, no field weighting; depth 100 per signal;
  RRF k 60; ``ScoringConfig``'s sigmoid normalisation, a missing document scoring zero), its
  train and test nDCG@10;
- ``delta test``: chosen minus default on test (what choosing the lever on train bought);
- ``test optimum``: the best test nDCG@10 over the lever's points and its value, for reference
  only (chosen on test, so optimistic).

A last row chooses the levers together (``scifact_levers_combined.toml``) against its baseline,
the best configuration known before them (linear, w_text 0.45, min-max, depth 200).

    python benchmarks/quality_levers.py [--markdown] [--jobs N]

scifact has 809 train and 300 test queries: a test difference of 0.005 is within noise (the
sweeps' paired tests; ``aiblox sweep SPEC`` prints them).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import arg_parser, environment_line, err, nonnegative_int, print_table  # noqa: E402

from aiblox.contracts.retrieval import RetrievalPrefs  # noqa: E402
from aiblox.data import load_dataset  # noqa: E402
from aiblox.engine.settings import (
    point_label,  # noqa: E402
    ranking_order,  # noqa: E402
)
from aiblox.metrics import setup_numba_cache  # noqa: E402
from aiblox.sweep import load_spec, run_sweep  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "evals" / "sweeps" / "levers"
METRIC = "ndcg@10"
COMBINED = "scifact_levers_combined"
"""The levers chosen together; its default is its baseline (issue 17's best before them)."""


@dataclass(frozen=True)
class Lever:
    """One quality lever: the specs that sweep it, its value at a point, its default."""

    name: str
    specs: tuple[str, ...]
    value: Callable[[RetrievalPrefs], Any]
    default: Any
    keep: Callable[[RetrievalPrefs], bool] = lambda p: True


def _fields(p: RetrievalPrefs) -> Any:
    return (p.fts.title_weight, p.fts.title_b)


LEVERS = (
    Lever("BM25 k1, b, variant", ("scifact_bm25_hybrid",),
          lambda p: (p.fts.k1, p.fts.b, p.fts.method), (1.2, 0.75, "lucene")),
    Lever("title weight (one b)", ("scifact_fields",), lambda p: p.fts.title_weight, 1.0),
    Lever("title weight, title b (BM25F)", ("scifact_fields", "scifact_bm25f"), _fields,
          (1.0, None), keep=lambda p: p.fts.title_weight >= 1.0),
    Lever("title weight (one b), BM25 alone", ("scifact_fields_bm25",),
          lambda p: p.fts.title_weight, 1.0),
    Lever("title weight, title b (BM25F), BM25 alone",
          ("scifact_fields_bm25", "scifact_bm25f_bm25"), _fields, (1.0, None),
          keep=lambda p: p.fts.title_weight >= 1.0),
    Lever("depth (full-text, vector)", ("scifact_depth",),
          lambda p: (p.fts.top_k, p.vector.top_k), (100, 100)),
    Lever("RRF k (depth 200)", ("scifact_fusion_levers",), lambda p: p.scoring.rrf_k, 60,
          keep=lambda p: p.scoring.blend == "rrf"),
    Lever("normalisation, missing (linear, depth 200)", ("scifact_fusion_levers",),
          lambda p: (p.scoring.normalize, p.scoring.missing), ("sigmoid", "zero"),
          keep=lambda p: p.scoring.blend == "linear"),
)


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_show(x) for x in v) + ")"
    return "-" if v is None else (f"{v:g}" if isinstance(v, float) else str(v))


def _best(pool: dict[str, tuple[Any, float, float]], hashes: list[str], col: int) -> str:
    """The hash best by column ``col`` (1: train, 2: test), ties by config hash."""
    return min(hashes, key=lambda h: ranking_order(pool[h][col], h))


def _run(name: str, cache_dir: Path, jobs: int, datasets: dict[str, Any]
         ) -> tuple[list[tuple[RetrievalPrefs, Any]], Any]:
    """(prefs, point result) of every grid point of one spec, and the sweep's result."""
    spec = load_spec(SPECS / f"{name}.toml")
    if spec.dataset not in datasets:
        datasets[spec.dataset] = load_dataset(spec.dataset,
                                              splits=[spec.tune_split, spec.report_split])
    t0 = time.perf_counter()
    result = run_sweep(spec, cache_dir=cache_dir, jobs=jobs, progress=False,
                       dataset=datasets[spec.dataset])
    err.print(f"{name}: {len(result.points)} points in {time.perf_counter() - t0:.0f} s, "
              f"computed {result.computed or 'nothing'}")
    prefs = spec.points()
    points = result.points[:len(prefs)]  # grid order; the baseline last when not a grid point
    assert [point_label(p) for p in prefs] == [r.label for r in points], name
    return list(zip(prefs, points, strict=True)), result


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--cache-dir", default=str(REPO / ".aiblox" / "stages"))
    ap.add_argument("--jobs", type=nonnegative_int, default=0, help="numba threads (0: all cores)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    setup_numba_cache()
    datasets: dict[str, Any] = {}
    results = {name: _run(name, Path(args.cache_dir), args.jobs, datasets)
               for name in (*dict.fromkeys(s for lever in LEVERS for s in lever.specs),
                            COMBINED)}
    runs = {name: pairs for name, (pairs, _) in results.items()}
    rows = []
    for lever in LEVERS:
        pool: dict[str, tuple[Any, float, float]] = {}
        for name in lever.specs:
            for prefs, pt in runs[name]:
                if lever.keep(prefs):
                    pool[pt.config_hash] = (lever.value(prefs), pt.metrics["train"][METRIC],
                                            pt.metrics["test"][METRIC])
        chosen = _best(pool, list(pool), 1)
        default = _best(pool, [h for h in pool if pool[h][0] == lever.default], 1)
        top_test = _best(pool, list(pool), 2)
        values = len({repr(v) for v, _, _ in pool.values()})
        c, d, t = pool[chosen], pool[default], pool[top_test]
        rows.append([lever.name, str(values), _show(c[0]), f"{c[1]:.4f}", f"{c[2]:.4f}",
                     _show(d[0]), f"{d[1]:.4f}", f"{d[2]:.4f}", f"{c[2] - d[2]:+.4f}",
                     f"{t[2]:.4f} {_show(t[0])}"])
    combined = results[COMBINED][1]
    best, base = combined.best, combined.baseline
    top_test = max(p.metrics["test"][METRIC] for p in combined.points if not p.is_baseline)
    rows.append(["all of the above together", str(len(runs[COMBINED])), best.label,
                 f"{best.metrics['train'][METRIC]:.4f}", f"{best.metrics['test'][METRIC]:.4f}",
                 base.label, f"{base.metrics['train'][METRIC]:.4f}",
                 f"{base.metrics['test'][METRIC]:.4f}",
                 f"{best.metrics['test'][METRIC] - base.metrics['test'][METRIC]:+.4f}",
                 f"{top_test:.4f}"])
    print_table("Quality levers on scifact (nDCG@10; chosen on train, reported on test)",
                ["lever", "values", "chosen on train", "train", "test", "default", "train",
                 "test", "delta test", "test optimum (reference)"], rows, args.markdown,
                right=["values", "train", "test", "delta test"],
                notes=[f"specs: {', '.join(runs)} (evals/sweeps/levers/); each lever's other axes "
                       f"(the linear weight w_text among them) chosen with it on train",
                       environment_line()])


if __name__ == "__main__":
    main()
