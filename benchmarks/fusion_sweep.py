"""Fusion sweep speed on scifact: first run, re-run, one-axis change, and ranx.optimize_fusion.

The sweep is ``evals/sweeps/scifact_fusion.toml``: 21 linear weights x 3 normalisations x 4
candidate depths, plus 4 RRF k values x 4 depths and the RRF baseline, each point scored on
train (tune) and test (report). Phases, each timed end to end (no MLflow):

1. first run on an empty stage cache (retrieval once per depth and split, then every point);
2. the same sweep again (every stage read back);
3. the sweep with one fusion axis changed (``normalize``: sigmoid replaced by none);
4. every point's fusion and metrics again (their cache entries removed, retrieval cached) on one
   numba thread, against the first run's ``--jobs`` threads;
5. ``ranx.optimize_fusion`` (wsum, min-max, step 0.05) over the same cached train-split runs
   at depth 100, next to the sweep's own best linear/min-max/depth-100 point on train.

Goals (issue 5): at least 50 fusion points per second after retrieval is cached, metrics
included; a re-run under 5% of the first run.

    python benchmarks/fusion_sweep.py [--markdown] [--jobs N]   # N threads; 0: all cores
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment_line, err, print_table  # noqa: E402

from aiblox.eval.datasets import load_dataset  # noqa: E402
from aiblox.eval.metrics import setup_numba_cache  # noqa: E402
from aiblox.eval.sweep import (  # noqa: E402
    StageCache,
    SweepSpec,
    choose_best,
    default_jobs,
    load_spec,
    run_sweep,
)

REPO = Path(__file__).resolve().parents[1]


def _counts(r) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(r.computed.items())) or "none"


def _row(phase: str, r, wall: float) -> list[str]:
    return [phase, str(len(r.points)), _counts(r), f"{r.timings['signals_s']:.2f}",
            f"{r.timings['points_s']:.2f}", f"{wall:.2f}", f"{r.timings['points_per_s']:.1f}"]


def _ranx_optimize(spec: SweepSpec, ds, cache: StageCache, result) -> dict:
    """ranx.optimize_fusion over the cached depth-100 train signals (the signals stage a
    depth-100 point of ``result`` recorded)."""
    from ranx import Qrels, Run, optimize_fusion

    point = next(p for p in result.points if p.depth == (100, 100))
    key = point.manifest.splits[spec.tune_split].stages[0]["key"]
    sig = cache.load("signals", key)
    qrels = {q: {d: int(g) for d, g in docs.items()} for q, docs in
             ds.qrels[spec.tune_split].items()}
    # ranx needs every run to hold every judged query: an empty list becomes a zero-score dummy
    text = {q: ({d: s for d, s in hits} or {"__none__": 0.0})
            for q, hits in zip(sig["qids"], sig["text"], strict=True)}
    vec = {q: ({d: s for d, s in hits} or {"__none__": 0.0})
           for q, hits in zip(sig["qids"], sig["vec"], strict=True)}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = optimize_fusion(Qrels.from_dict(qrels),
                               [Run.from_dict(text, name="bm25"), Run.from_dict(vec, name="vec")],
                               norm="min-max", method="wsum", metric=spec.primary,
                               show_progress=False, step=0.05)
    weights = best.get("weights", best)
    return {"seconds": time.perf_counter() - t0,
            "weights": tuple(float(w) for w in weights) if isinstance(weights, list | tuple)
            else weights}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(REPO / "evals" / "sweeps" / "scifact_fusion.toml"))
    ap.add_argument("--db", default=str(REPO / ".aiblox" / "bench" / "fusion_sweep" /
                                        "scifact.duckdb"))
    ap.add_argument("--cache-dir", default=str(REPO / ".aiblox" / "bench" / "fusion_sweep" /
                                               "stages"))
    ap.add_argument("--jobs", type=int, default=0, help="numba threads (0: all cores)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    setup_numba_cache()
    jobs = default_jobs() if args.jobs <= 0 else args.jobs

    spec = load_spec(args.spec)
    ds = load_dataset(spec.dataset, splits=[spec.tune_split, spec.report_split])
    cache_dir = Path(args.cache_dir)
    shutil.rmtree(cache_dir, ignore_errors=True)  # the first run starts from an empty cache
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)

    err.print("warming up: store, embeddings and ranx's numba kernels (not timed)")
    warm = spec.model_copy(update={"grid": spec.grid.model_copy(update={
        "blend": ["rrf"], "rrf_k": [60], "depth": [100]}), "baseline": None})
    run_sweep(warm, cache_dir=cache_dir / "_warm", db=args.db, dataset=ds, progress=False)
    shutil.rmtree(cache_dir / "_warm", ignore_errors=True)

    rows, results = [], {}
    changed = spec.model_copy(update={"grid": spec.grid.model_copy(update={
        "normalize": ["minmax", "zscore", "none"]})})
    for phase, s in (("first run (empty cache)", spec), ("re-run (same spec)", spec),
                     ("one axis changed (normalize)", changed)):
        err.print(f"{phase} ...")
        t0 = time.perf_counter()
        r = run_sweep(s, cache_dir=cache_dir, db=args.db, dataset=ds, jobs=jobs,
                      progress=False)
        wall = time.perf_counter() - t0
        results[phase] = (r, wall)
        rows.append(_row(phase, r, wall))
    err.print("fusion and metrics again on one thread ...")
    for stage in ("fusion", "metrics"):
        shutil.rmtree(cache_dir / stage)
    # each sweep builds its split indexes and normalised lists afresh, as the first run did
    t0 = time.perf_counter()
    r1 = run_sweep(spec, cache_dir=cache_dir, db=args.db, dataset=ds, jobs=1, progress=False)
    rows.append(_row("fusion + metrics again, 1 thread (retrieval cached)", r1,
                     time.perf_counter() - t0))

    first_wall = results["first run (empty cache)"][1]
    rerun_wall = results["re-run (same spec)"][1]
    r_first = results["first run (empty cache)"][0]
    err.print("ranx.optimize_fusion ...")
    ranx = _ranx_optimize(spec, ds, StageCache(cache_dir), r_first)
    n_ranx = 21  # two runs at step 0.05 keep the 21 pairs (w, 1 - w) that sum to 1.0 in float
    rows.append(["ranx.optimize_fusion (wsum, min-max, depth 100, train only)", str(n_ranx),
                 "fusion + metrics", "cached", f"{ranx['seconds']:.2f}", f"{ranx['seconds']:.2f}",
                 f"{n_ranx / ranx['seconds']:.1f}"])
    ours = [p for p in r_first.points if p.scoring["blend"] == "linear"
            and p.scoring["normalize"] == "minmax" and p.depth == (100, 100)]
    ours_best = choose_best(ours, spec.tune_split, spec.primary)
    b = r_first.best
    notes = [
        f"re-run / first run: {100 * rerun_wall / first_wall:.1f}% (goal < 5%)",
        f"fusion points per second with retrieval cached, metrics on both splits included: "
        f"{r_first.timings['points_per_s']:.1f} on {jobs} threads, "
        f"{r1.timings['points_per_s']:.1f} on one (goal >= 50)",
        f"best on {spec.tune_split}: {b.label}, {spec.primary} "
        f"{b.metrics[spec.tune_split][spec.primary]:.4f}; on {spec.report_split}: "
        f"{b.metrics[spec.report_split][spec.primary]:.4f}",
        f"linear/min-max/depth 100: sweep's best w_text {ours_best.scoring['w_text']!r} "
        f"({spec.primary} {ours_best.metrics[spec.tune_split][spec.primary]:.4f} on "
        f"{spec.tune_split}); ranx.optimize_fusion weights {ranx['weights']}",
        f"{len(ds.qrels[spec.tune_split])} {spec.tune_split} + {len(ds.qrels[spec.report_split])}"
        f" {spec.report_split} queries; {environment_line()}",
    ]
    print_table(f"Fusion sweep on {ds.name} ({spec.name})",
                ["phase", "points", "stages computed", "signals s", "points s", "wall s",
                 "points/s"], rows, args.markdown,
                right=["points", "signals s", "points s", "wall s", "points/s"], notes=notes)


if __name__ == "__main__":
    main()
