"""Search strategies against the full grid: the same spec's grid searched by ``random``, TPE,
CMA-ES and the GP sampler (``n`` trials, one seed each), and every point of the grid; the best
point each finds on the tune split and what it scores on the report split, against the grid's
best (ratio). Also the quality-against-cost front (``[search] objectives = [primary,
"candidates"]``) of the whole grid and of a multi-objective TPE search.

The stage cache is shared, so the signals are retrieved once (the first strategy pays for
them; its time is not comparable) and every trial after that is fusion and metrics only.

    python benchmarks/search_strategies.py [--spec evals/sweeps/scifact_fusion.toml] [--n 60]
        [--seeds 0] [--cache-dir .aiblox/stages] [--markdown]
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import arg_parser, environment_line, err, nonnegative_int, positive_int, print_table  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    from aiblox.data import load_dataset
    from aiblox.sweep import SweepSpec, load_spec, run_sweep

    ap = arg_parser(__doc__)
    ap.add_argument("--spec", default=str(REPO / "evals" / "sweeps" / "scifact_fusion.toml"))
    ap.add_argument("--n", type=positive_int, default=60, help="trials per search")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--cache-dir", default=str(REPO / ".aiblox" / "stages"))
    ap.add_argument("--numeric-n", type=nonnegative_int, default=0,
                    help="also search a numeric-only grid (linear blend, zscore) with n trials")
    ap.add_argument("--skip-main", action="store_true", help="only the numeric-only grid")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    base = load_spec(args.spec)
    ds = load_dataset(base.dataset, splits=[base.tune_split, base.report_split])
    studies = Path(args.cache_dir) / "studies"

    def run(strategy: str, seed: int, objectives: list[str] | None = None):
        data = base.model_dump()
        data["search"] = {"strategy": strategy, "seed": seed,
                          **({} if strategy == "grid" else {"n": args.n}),
                          **({"objectives": objectives} if objectives else {})}
        spec = SweepSpec.model_validate(data)
        shutil.rmtree(studies, ignore_errors=True)  # every search starts its study afresh
        t0 = time.perf_counter()
        r = run_sweep(spec, cache_dir=args.cache_dir, progress=False, dataset=ds)
        return r, time.perf_counter() - t0

    if not args.skip_main:
        main_tables(args, base, ds, run)
    if args.numeric_n:
        numeric_table(args, base, ds, studies)
    if not args.skip_main:
        front_tables(args, base, run)


def main_tables(args, base, ds, run) -> None:
    tune, report, primary = base.tune_split, base.report_split, base.primary
    err.print("grid ...")
    grid, grid_s = run("grid", 0)
    top = grid.best.metrics
    rows = [["grid", str(base.grid_size()), "-",
             grid.best.label, f"{top[tune][primary]:.4f}", f"{top[report][primary]:.4f}",
             "1.000", f"{grid_s:.1f}"]]
    for strategy in ("random", "tpe", "cmaes", "gp"):
        for seed in (int(s) for s in args.seeds.split(",")):
            err.print(f"{strategy} seed {seed} ...")
            r, secs = run(strategy, seed)
            m = r.best.metrics
            tried = len(set(r.trials)) if r.trials else min(args.n, base.grid_size())
            rows.append([strategy, str(tried), str(seed), r.best.label,
                         f"{m[tune][primary]:.4f}", f"{m[report][primary]:.4f}",
                         f"{m[tune][primary] / top[tune][primary]:.3f}", f"{secs:.1f}"])
    print_table(f"{base.name}: {args.n} trials per search ({primary}; best chosen on {tune})",
                ["strategy", "distinct points", "seed", "best", f"{tune} {primary}",
                 f"{report} {primary}", f"{tune} / grid's", "seconds"], rows, args.markdown,
                right=["distinct points", f"{tune} {primary}", f"{report} {primary}",
                       f"{tune} / grid's", "seconds"],
                notes=[environment_line(), "grid: every point (its baseline aside); random: "
                       "n points drawn; tpe, cmaes, gp: n trials, a point chosen twice "
                       "scored once (distinct points)"])



def numeric_table(args, base, ds, studies) -> None:
    """Every swept setting numeric and applying to every point: what CMA-ES and GP model."""
    from aiblox.sweep import SweepSpec, run_sweep

    tune, report, primary = base.tune_split, base.report_split, base.primary
    numeric = base.model_dump()
    numeric["grid"] = {**{k: v for k, v in numeric["grid"].items() if v is not None},
                       "blend": ["linear"], "normalize": ["zscore"], "rrf_k": None}
    numeric_spec = SweepSpec.model_validate(numeric)
    rows = []
    for strategy in ("grid", "random", "tpe", "cmaes", "gp"):
        data = numeric_spec.model_dump()
        data["search"] = {"strategy": strategy, "seed": 0,
                          **({} if strategy == "grid" else {"n": args.numeric_n})}
        spec = SweepSpec.model_validate(data)
        shutil.rmtree(studies, ignore_errors=True)
        err.print(f"numeric grid, {strategy} ...")
        t0 = time.perf_counter()
        r = run_sweep(spec, cache_dir=args.cache_dir, progress=False, dataset=ds)
        secs = time.perf_counter() - t0
        if strategy == "grid":
            best_numeric = r.best.metrics[tune][primary]
        m = r.best.metrics
        tried = (len(set(r.trials)) if r.trials else
                 min(args.numeric_n, spec.grid_size()) if strategy == "random"
                 else spec.grid_size())
        rows.append([strategy, str(tried), r.best.label, f"{m[tune][primary]:.4f}",
                     f"{m[report][primary]:.4f}",
                     f"{m[tune][primary] / best_numeric:.3f}", f"{secs:.1f}"])
    print_table(f"numeric grid (linear, zscore: w_text x depth, {numeric_spec.grid_size()} "
                f"points): {args.numeric_n} trials per search, seed 0",
                ["strategy", "distinct points", "best", f"{tune} {primary}",
                 f"{report} {primary}", f"{tune} / grid's", "seconds"], rows, args.markdown,
                right=["distinct points", f"{tune} {primary}", f"{report} {primary}",
                       f"{tune} / grid's", "seconds"])


def front_tables(args, base, run) -> None:
    tune, report, primary = base.tune_split, base.report_split, base.primary
    objectives = [primary, "candidates"]
    for strategy in ("grid", "tpe"):
        seed = int(args.seeds.split(",")[0])
        err.print(f"{strategy} with objectives {objectives} ...")
        r, secs = run(strategy, seed, objectives)
        by_hash = {p.config_hash: p for p in r.points}
        front = [by_hash[h] for h in r.pareto]
        if args.markdown:
            print()
        print_table(f"Pareto front of {strategy} ({objectives}, on {tune}; "
                    f"{len(set(r.trials)) if r.trials else base.grid_size()} points scored)",
                    ["label", "candidates", f"{tune} {primary}", f"{report} {primary}"],
                    [[p.label, str(p.depth[0] + p.depth[1]), f"{p.metrics[tune][primary]:.4f}",
                      f"{p.metrics[report][primary]:.4f}"] for p in front], args.markdown,
                    right=["candidates", f"{tune} {primary}", f"{report} {primary}"])


if __name__ == "__main__":
    main()
