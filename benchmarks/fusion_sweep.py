"""Fusion sweep speed on scifact: the scoring loop against ranx, the whole sweep with MLflow,
a TPE study, and the sweep's phases.

Default (issue 17): the scoring table. The spec's fusion grid (21 linear weights x 3
normalisations, plus 4 RRF k: 67 points) at one candidate depth (``--depth``, 1,000), every
fused run kept that deep, on the report split (scifact test, 300 queries), retrieval cached:

1. aiblox's scoring of every point, as the sweep's fusion and metrics stages compute it
   (:meth:`BatchFusion.fuse_arrays`: fused scores, per-query ranking; then
   :meth:`QrelsScorer.evaluate_packed`: the compiled metrics), best of ``--repeat`` passes; the
   same with the run hash (sha256 of the stored bytes); and aiblox's fusion with ranx's own
   metric kernels (the route before), in the same process;
2. the check: ranx's documented route (``Qrels``/``Run`` from dicts, ``evaluate``) scores
   aiblox's fused runs of a handful of points; every per-query value must be equal;
3. ranx's route for the same points: ``ranx.fuse`` (wsum over min-max, or rrf) then
   ``ranx.evaluate`` (the named baseline), its ``Qrels``/``Run`` built and one point fused and
   evaluated first, untimed, as aiblox's index is built and its kernels warmed untimed;
4. the whole sweep as ``aiblox sweep`` runs it (both splits, stage cache, one MLflow child run
   per point with its artifacts, on a fresh SQLite store), and with ``--no-tracking``: at the
   deep setting and for the spec itself (depths 25-200, top 100).

``--tracking``: the cost of logging and of new points (issue 26): the spec's sweep (268
points) on both splits, signals cached, its first run (fusion and metrics computed) and a
re-run with every stage cached, each with MLflow tracking on a fresh SQLite store and with
``--no-tracking``, timed whole (the tracker opened, ``run_sweep`` to its return: the last
batch, the named points' run files and the parent's summary included), and the logging alone
(the re-run's points seconds, tracked less untracked); then a denser grid over the same cached
signals (``w_text`` step ``--dense-step``, 0.01: 1,228 points, every one new) run as
``aiblox sweep --no-tracking`` in a process of its own, timed whole, and again as it ran
before issue 26's changes to threads: every core, ``OMP_WAIT_POLICY=ACTIVE`` (numba's OpenMP
workers spinning; leave it out with ``--skip-active``); and ranx's route (``ranx.fuse`` +
``ranx.evaluate``) on a handful of the points over the same lists. Then the ceiling: the
denser grid run again with every stage cached (a process of its own: its fixed cost) and the
sweep's fusion and metrics kernels alone over its points in this process; points / (both)
is about what the whole process would reach if its stage cache entries cost nothing (the
kernels timed a point at a time, and as the sweep computes its points ahead, a pass per split,
depth and blend). Goals:
>= 100 logged points/s, >= 200 new points/s untracked whole-process.

``--tpe N``: an N-trial TPE study over the spec's grid (signals cached, empty fusion/metrics
cache and study), with MLflow tracking and without. ``--phases``: the sweep's phases (first
run on an empty cache, re-run, one axis changed, one thread, ``ranx.optimize_fusion``).

Goals (issue 17): 200 points/s on scifact test at 1,000 deep on 2 cores, metrics equal to
ranx's; a 200-trial TPE study on scifact train under 5 minutes once signals are cached.

    python benchmarks/fusion_sweep.py [--markdown] [--jobs N] [--depth D] [--repeat R]
    python benchmarks/fusion_sweep.py --tracking [--markdown] [--dense-step 0.01] [--skip-active]
    python benchmarks/fusion_sweep.py --tpe 200 [--markdown]
    python benchmarks/fusion_sweep.py --phases [--markdown]
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _common import arg_parser, environment_line, err, nonnegative_int, positive_int, print_table  # noqa: E402

from aiblox.compiled import compiled_threads  # noqa: E402
from aiblox.data import load_dataset  # noqa: E402
from aiblox.engine.cache import StageCache
from aiblox.engine.settings import point_label  # noqa: E402
from aiblox.fusion import BatchFusion  # noqa: E402
from aiblox.metrics import packed_means, ranked_run, setup_numba_cache  # noqa: E402
from aiblox.sweep import SweepSpec, choose_best, load_spec, run_sweep
from aiblox.sweep.runner import default_jobs

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


# -- the scoring loop on 1,000-deep runs, next to ranx's route ---------------------------------
def _deep_spec(spec: SweepSpec, depth: int, keep: int | None = None) -> SweepSpec:
    """The spec's fusion grid (weights, normalisations, RRF k) at one candidate depth, every
    fused run kept ``keep`` deep (``depth`` when not given)."""
    keep = depth if keep is None else keep
    data = spec.model_dump(mode="json", exclude_none=True)
    name = f"{spec.name}_deep{depth}" + ("" if keep == depth else f"_keep{keep}")
    data.update(name=name, base={**data["base"], "top_k_items": keep},
                grid={**data["grid"], "depth": [depth]})
    data.pop("baseline", None)
    return SweepSpec.model_validate(data)


def _split_signals(spec: SweepSpec, result, cache: StageCache, split: str) -> dict:
    """The cached signals of ``split`` that the sweep's points read."""
    key = result.points[0].manifest.splits[split].stages[0]["key"]
    return cache.load("signals", key)


def _ranx_dicts(sig: dict) -> tuple[dict, dict]:
    # ranx needs every run to hold every judged query: an empty list becomes a zero-score dummy
    text = {q: ({d: s for d, s in hits} or {"__none__": 0.0})
            for q, hits in zip(sig["qids"], sig["text"], strict=True)}
    vec = {q: ({d: s for d, s in hits} or {"__none__": 0.0})
           for q, hits in zip(sig["qids"], sig["vec"], strict=True)}
    return text, vec


def _ranx_inputs(sig: dict, qrels: dict) -> tuple:
    """ranx's ``Qrels`` and the two ``Run`` objects of ``sig``'s lists (its documented route)."""
    from ranx import Qrels, Run

    text, vec = _ranx_dicts(sig)
    return Qrels.from_dict(qrels), [Run.from_dict(text, name="bm25"),
                                    Run.from_dict(vec, name="vec")]


def _ranx_points(points, q, runs, metrics: list[str]) -> list:
    """``ranx.fuse`` of the two runs (wsum over min-max, or rrf), then ``ranx.evaluate``, per
    point: each point's means."""
    from ranx import evaluate, fuse

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for prefs in points:
            sc = prefs.scoring
            if sc.blend == "rrf":
                fused = fuse(runs, method="rrf", params={"k": sc.rrf_k})
            else:
                fused = fuse(runs, norm="min-max", method="wsum",
                             params={"weights": [sc.w_text, sc.w_vec]})
            out.append(evaluate(q, fused, metrics, make_comparable=True))
    return out


def _ranx_route(points, sig: dict, qrels: dict, metrics: list[str]
                ) -> tuple[float, float, list]:
    """ranx's documented route per point: ``Qrels``/``Run`` from the dicts, then per point
    ``ranx.fuse`` and ``ranx.evaluate``, all timed (the tracking table's row, beside whole
    sweeps); wall and CPU seconds, and each point's means."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time()
        q, runs = _ranx_inputs(sig, qrels)
        out = _ranx_points(points, q, runs, metrics)
        return time.perf_counter() - t0, time.process_time() - c0, out


def _ranx_warm_route(points, sig: dict, qrels: dict, metrics: list[str]
                     ) -> tuple[float, float, list, float]:
    """ranx's route as the scoring table times aiblox's: ``Qrels``/``Run`` built and one
    point fused and evaluated first, untimed (ranx's typed containers and kernels compiled or
    loaded), then every point's ``ranx.fuse`` + ``ranx.evaluate`` timed; wall and CPU seconds,
    each point's means, and the wall seconds of that untimed setup and first point."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q, runs = _ranx_inputs(sig, qrels)
    _ranx_points(points[:1], q, runs, metrics)
    setup = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    out = _ranx_points(points, q, runs, metrics)
    return time.perf_counter() - t0, time.process_time() - c0, out, setup


def _ranx_on_ours(index: BatchFusion, fused, qrels: dict, metrics: list[str]):
    """ranx's documented route (Qrels, Run from dicts) scoring aiblox's own fused run: the
    numbers aiblox's metrics must equal, per query."""
    from ranx import Qrels, Run, evaluate

    run = ranked_run(index.decode(fused))
    r = Run.from_dict({q: run.get(q) or {"__none__": 0.0} for q in qrels})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate(Qrels.from_dict(qrels), r, metrics, make_comparable=True)
    return {m: dict(r.scores[m]) for m in metrics}


def scoring_table(args, spec: SweepSpec, ds, cache_dir: Path) -> None:
    """Points per second of the sweep's scoring (fusion, ranking, metrics) on the report
    split's 1,000-deep runs, of ranx's fuse + evaluate on the same lists, and of the whole
    sweep (both splits, stage cache, MLflow)."""
    from aiblox.engine.cache import encode_arrays
    from aiblox.hashing import sha256_bytes
    from aiblox.metrics import QrelsScorer, unpack_metrics

    deep = _deep_spec(spec, args.depth, args.keep)
    keep = int(deep.base.get("top_k_items", args.depth))
    split = deep.report_split
    err.print(f"signals at depth {args.depth} (retrieved once, then cached) ...")
    warm = deep.model_copy(update={"grid": deep.grid.model_copy(update={
        "blend": ["rrf"], "rrf_k": [60]})})
    r0 = run_sweep(warm, cache_dir=cache_dir, db=args.db, dataset=ds, progress=False)
    cache = StageCache(cache_dir)
    sig = _split_signals(deep, r0, cache, split)
    qrels = {q: {d: int(g) for d, g in docs.items()} for q, docs in ds.qrels[split].items()
             if docs}
    points = deep.points()
    metrics = list(deep.metrics)
    jobs = default_jobs() if args.jobs <= 0 else args.jobs
    rows = []

    def aiblox_pass(with_hash: bool, ranx_metrics: bool) -> tuple[float, float, float, list]:
        t0 = time.perf_counter()
        index = BatchFusion.from_signals(sig)
        scorer = QrelsScorer(qrels)
        codes = scorer.codes(index.docs)
        t_index = time.perf_counter() - t0
        outs = []
        t0, c0 = time.perf_counter(), time.process_time()
        for prefs in points:
            fused = index.fuse_arrays(prefs.scoring, prefs.top_k_items)
            if with_hash:
                sha256_bytes(encode_arrays(fused.as_dict()))
            if ranx_metrics:  # the route before: ranx's kernels on typed lists
                from aiblox.metrics.kernels import run_arrays

                offsets = np.zeros(len(index.qids) + 1, dtype=np.int64)
                np.cumsum(fused.counts, out=offsets[1:])
                mat = scorer._ranx(run_arrays(codes[fused.positions], offsets), metrics)
                outs.append(mat)
            else:  # as the sweep's metrics stage: the ranks the metrics read, gathered
                outs.append(scorer.evaluate_positions(index.qids, codes, fused.positions,
                                                      fused.counts, metrics))
        return t_index, time.perf_counter() - t0, time.process_time() - c0, outs

    variants = [("aiblox: fuse + rank + metrics", False, False),
                ("aiblox: fuse + rank + metrics + run hash (sha256)", True, False),
                ("aiblox fusion + ranx's metric kernels (the route before)", False, True)]
    with compiled_threads(jobs):
        aiblox_pass(False, False)  # compile and warm (not timed)
        for label, with_hash, rk in variants:
            err.print(f"{label} ...")
            best = cpu = None
            for _ in range(args.repeat):
                t_index, t_loop, t_cpu, outs = aiblox_pass(with_hash, rk)
                best = t_loop if best is None else min(best, t_loop)
                cpu = t_cpu if cpu is None else min(cpu, t_cpu)
            rows.append([label, str(len(points)), f"{1000 * best / len(points):.2f}",
                         f"{1000 * cpu / len(points):.2f}", f"{len(points) / best:.1f}",
                         f"{t_index:.2f}", ""])
            if not rk and not with_hash:
                ours = outs
        # the check: ranx's documented route on aiblox's fused runs, per query, bit for bit
        err.print("ranx's own evaluation of aiblox's fused runs (the check) ...")
        index = BatchFusion.from_signals(sig)
        picked = _check_points(points)
        same = 0
        for i in picked:
            fused = index.fuse_arrays(points[i].scoring, points[i].top_k_items)
            want = _ranx_on_ours(index, fused, qrels, metrics)
            got = unpack_metrics(ours[i])["per_query"]
            same += all(float(got[m][q]) == float(want[m][q]) for m in metrics for q in want[m])
        rows[0][-1] = f"{same}/{len(picked)} points equal to ranx per query"
        err.print("ranx.fuse + ranx.evaluate ...")
        ranx_points = [points[i] for i in picked if points[i].scoring.normalize == "minmax"
                       or points[i].scoring.blend == "rrf"]
        t_ranx, c_ranx, ranx_means, ranx_setup = _ranx_warm_route(ranx_points, sig, qrels,
                                                                  metrics)
        by_label = {point_label(p): o for p, o in zip(points, ours, strict=True)}
        diff = max(abs(float(m[k]) - packed_means(by_label[point_label(p)])[k])
                   for p, m in zip(ranx_points, ranx_means, strict=True) for k in metrics)
        rows.append(["ranx: fuse (min-max wsum / rrf) + evaluate", str(len(ranx_points)),
                     f"{1000 * t_ranx / len(ranx_points):.2f}",
                     f"{1000 * c_ranx / len(ranx_points):.2f}",
                     f"{len(ranx_points) / t_ranx:.1f}", f"{ranx_setup:.2f}",
                     f"max |Δ mean| vs aiblox {diff:.1e} (its own fusion; ties differ)"])
    err.print("the whole sweep with MLflow (both splits, fusion and metrics recomputed) ...")
    own_points = spec.points()
    depths = sorted({max(p.fts.top_k, p.vector.top_k) for p in own_points})
    tops = sorted({p.top_k_items for p in own_points})
    own = (f"aiblox sweep {spec.name} (depth {depths[0]}-{depths[-1]}, "
           f"top {'-'.join(str(t) for t in dict.fromkeys((tops[0], tops[-1])))})")
    for sweep, label, tracking in (
            (deep, f"aiblox sweep, {args.depth}-deep, MLflow tracking (sqlite)", True),
            (deep, f"aiblox sweep, {args.depth}-deep, --no-tracking", False),
            (spec, f"{own}, MLflow tracking", True),
            (spec, f"{own}, --no-tracking", False)):
        c0 = time.process_time()
        r = _whole_sweep(sweep, ds, cache_dir, args.db, jobs, tracking)
        cpu = time.process_time() - c0
        rows.append([f"{label}, {deep.tune_split} + {split}", str(len(r.points)),
                     f"{1000 / r.timings['points_per_s']:.2f}",
                     f"{1000 * cpu / len(r.points):.2f}",
                     f"{r.timings['points_per_s']:.1f}", "-",
                     f"best {r.best.label}"])
    runs = ("lists and fused runs" if keep == args.depth
            else f"lists, fused runs kept {keep} deep")
    notes = [f"{len(qrels)} {split} queries, {args.depth}-deep {runs}, metrics "
             f"{', '.join(metrics)}; {jobs} numba threads; best of {args.repeat} passes; "
             f"ranx route on {len(ranx_points)} of the points (min-max wsum and rrf): like "
             f"aiblox's, warmed and its setup untimed (its index s: Qrels and Run from the "
             f"dicts and one point fused and evaluated first, compiling ranx's typed "
             f"containers; until 2026-11-29 both were in ranx's timed loop)",
             "ms/point: wall clock; CPU ms/point: process CPU time (all threads), steadier on a "
             "shared machine; index s: building the split's fusion index and qrels codes once "
             "(not in points/s);"
             " the whole-sweep rows count each point on both splits, stage cache writes and "
             "(with tracking) one MLflow child run per point, artifacts included",
             f"{environment_line()}; load average at the end "
             f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1 / 5 / 15 min)"]
    print_table(f"Fusion scoring on {ds.name} {split} ({args.depth}-deep runs"
                + ("" if keep == args.depth else f", fused runs kept {keep}") + ")",
                ["route", "points", "ms/point", "CPU ms/point", "points/s", "index s", "check"],
                rows, args.markdown,
                right=["points", "ms/point", "CPU ms/point", "points/s", "index s"],
                notes=notes)


def _check_points(points) -> list[int]:
    """A handful of points of every kind (min-max, z-score, sigmoid weights; RRF)."""
    out = []
    for i, p in enumerate(points):
        s = p.scoring
        if s.blend == "rrf" or s.w_text in (0.0, 0.3, 0.55, 1.0):
            out.append(i)
    return out


def _whole_sweep(spec: SweepSpec, ds, cache_dir: Path, db: str, jobs: int, tracking: bool):
    """``aiblox sweep`` as the command runs it (a :class:`SweepTracker` on a fresh SQLite
    store when ``tracking``), signals cached, fusion and metrics computed again."""
    import tempfile

    from aiblox.engine.tracking import SweepTracker

    for stage in ("fusion", "metrics"):
        shutil.rmtree(cache_dir / stage, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        tracker = None
        if tracking:
            tracker = SweepTracker(f"sqlite:///{tmp}/mlflow.db", f"bench/{spec.name}",
                                   spec.hash, spec.model_dump(mode="json"))
        return run_sweep(spec, cache_dir=cache_dir, db=db, dataset=ds, jobs=jobs,
                         tracker=tracker, progress=False)


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--spec", default=str(REPO / "evals" / "sweeps" / "scifact_fusion.toml"))
    ap.add_argument("--db", default=str(REPO / ".aiblox" / "bench" / "fusion_sweep" /
                                        "scifact.duckdb"))
    ap.add_argument("--cache-dir", default=str(REPO / ".aiblox" / "bench" / "fusion_sweep" /
                                               "stages"))
    ap.add_argument("--jobs", type=nonnegative_int, default=0, help="numba threads (0: all cores)")
    ap.add_argument("--depth", type=positive_int, default=1000,
                    help="candidate depth and fused-run depth of the scoring table")
    ap.add_argument("--keep", type=positive_int, default=None,
                    help="fused-run depth (default: --depth; the shipped specs keep 100)")
    ap.add_argument("--repeat", type=positive_int, default=3,
                    help="passes of the scoring loop (best)")
    ap.add_argument("--phases", action="store_true",
                    help="instead: the sweep's phases (first run, re-run, one axis changed)")
    ap.add_argument("--tracking", action="store_true",
                    help="instead: the spec's sweep with and without MLflow tracking, first "
                         "run and re-run (signals cached)")
    ap.add_argument("--dense-step", type=float, default=0.01,
                    help="--tracking: the w_text step of the denser grid (new points)")
    ap.add_argument("--skip-active", action="store_true",
                    help="--tracking: leave out the denser grid with spinning OpenMP workers")
    ap.add_argument("--tpe", type=nonnegative_int, default=0, metavar="N",
                    help="instead: an N-trial TPE study over the spec's grid, signals cached")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    setup_numba_cache()
    spec = load_spec(args.spec)
    ds = load_dataset(spec.dataset, splits=[spec.tune_split, spec.report_split])
    cache_dir = Path(args.cache_dir)
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    if args.tracking:
        tracking_table(args, spec, ds, cache_dir)
    elif args.tpe:
        tpe_table(args, spec, ds, cache_dir)
    elif args.phases:
        phases(args, spec, ds, cache_dir)
    else:
        scoring_table(args, spec, ds, cache_dir)


def phases(args, spec: SweepSpec, ds, cache_dir: Path) -> None:
    """The sweep's phases, each timed end to end (no MLflow): see the module doc."""
    jobs = default_jobs() if args.jobs <= 0 else args.jobs
    shutil.rmtree(cache_dir, ignore_errors=True)  # the first run starts from an empty cache

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


def tracking_table(args, spec: SweepSpec, ds, cache_dir: Path) -> None:
    """The spec's sweep, signals cached: first run (fusion and metrics computed) and re-run
    (every stage cached), each tracked on a fresh SQLite store and untracked; then a denser
    grid over the same cached signals as ``aiblox sweep --no-tracking`` runs it (a process of
    its own, every point new); and ranx's route on the same lists (see the module doc)."""
    import tempfile

    from aiblox.engine.tracking import SweepTracker

    jobs = default_jobs() if args.jobs <= 0 else args.jobs
    err.print("signals (cached after the first run; not timed) ...")
    r0 = run_sweep(spec, cache_dir=cache_dir, db=args.db, dataset=ds, jobs=jobs, progress=False)
    rows, points_s = [], {}
    for phase in ("first run (fusion + metrics computed)", "re-run (every stage cached)"):
        for label, tracking in (("MLflow tracking (sqlite)", True), ("--no-tracking", False)):
            if phase.startswith("first"):
                for stage in ("fusion", "metrics"):
                    shutil.rmtree(cache_dir / stage, ignore_errors=True)
            err.print(f"{phase}, {label} ...")
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                tracker = (SweepTracker(f"sqlite:///{tmp}/mlflow.db", f"bench/{spec.name}",
                                        spec.hash, spec.model_dump(mode="json"))
                           if tracking else None)
                t_open = time.perf_counter() - t0
                r = run_sweep(spec, cache_dir=cache_dir, db=args.db, dataset=ds, jobs=jobs,
                              tracker=tracker, progress=False)
                wall = time.perf_counter() - t0
            n = len(r.points)
            points_s[(phase, tracking)] = r.timings["points_s"]
            logged = "-"
            if tracking:
                logged = str(r.tracking.get("logged", "-"))
                err.print(f"  tracker opened in {t_open:.2f} s")
            rows.append([phase, label, str(n), f"{r.timings['signals_s']:.2f}",
                         f"{r.timings['points_s']:.2f}", f"{wall:.2f}", f"{n / wall:.1f}",
                         logged])
    rerun = "re-run (every stage cached)"
    log_s = points_s[(rerun, True)] - points_s[(rerun, False)]
    n = len(r0.points)
    rows.append(["re-run: logging alone (points s tracked - untracked)", "MLflow tracking "
                 "(sqlite)", str(n), "-", f"{log_s:.2f}", "-",
                 f"{n / log_s:.1f}" if log_s > 0 else "-", str(n)])
    dense = _dense_spec(spec, args.dense_step)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    for label, threads, env in (
            ("--no-tracking, whole process (--jobs 0: the idle cores)", args.jobs, {}),
            (f"the same as before: --jobs {cores} (every core), OMP_WAIT_POLICY=ACTIVE "
             f"(numba's workers spinning)", cores, {"OMP_WAIT_POLICY": "ACTIVE"})):
        if env and args.skip_active:
            continue
        err.print(f"denser grid ({dense['points']} points), {label} ...")
        wall, cpu, new = _dense_process(dense, cache_dir, args.db, threads, env)
        rows.append([f"denser grid, new points over cached signals (w_text step "
                     f"{args.dense_step})", label, str(new), "cached", "-", f"{wall:.2f}",
                     f"{new / wall:.1f}", "-"])
        err.print(f"  CPU {cpu:.2f} s ({1000 * cpu / new:.2f} ms a point)")
    # the ceiling on 2 cores: what the whole process would reach if storing cost nothing
    err.print("denser grid re-run, every stage cached (the process's fixed cost) ...")
    fixed, _, _ = _dense_process(dense, cache_dir, args.db, args.jobs, {}, fresh=False)
    rows.append(["denser grid re-run, every stage cached (start, dataset, reads, conclusion)",
                 "--no-tracking, whole process", str(dense["points"]), "cached", "-",
                 f"{fixed:.2f}", "-", "-"])
    err.print("denser grid, fusion + metrics alone in this process ...")
    alone, compute = _dense_compute(dense["spec"], ds, cache_dir, r0, jobs)
    rows.append(["denser grid, fusion + metrics alone, a point at a time (in process: no "
                 "cache, no start)", "-", str(dense["points"]), "cached", f"{alone:.2f}", "-",
                 f"{dense['points'] / alone:.1f}", "-"])
    rows.append(["denser grid, fusion + metrics alone, as the sweep computes them ahead (a "
                 "pass per split, depth, blend)", "-", str(dense["points"]), "cached",
                 f"{compute:.2f}", "-", f"{dense['points'] / compute:.1f}", "-"])
    ceiling = dense["points"] / (compute + fixed)
    err.print("ranx: fuse + evaluate on the same cached lists ...")
    rows.append(_ranx_row(spec, ds, cache_dir, r0))
    print_table(f"Tracked and untracked sweep on {ds.name} ({spec.name})",
                ["run", "tracking", "points", "signals s", "points s", "wall s", "points/s",
                 "logged"], rows, args.markdown,
                right=["points", "signals s", "points s", "wall s", "points/s", "logged"],
                notes=[f"{len(ds.qrels[spec.tune_split])} {spec.tune_split} + "
                       f"{len(ds.qrels[spec.report_split])} {spec.report_split} queries, each "
                       f"point on both splits, {jobs} numba threads; wall s: the tracker "
                       f"opened, run_sweep to its return (the last batch, the named points' "
                       f"run files and the parent's summary written); points/s = points / "
                       f"wall s (logging alone: points / its seconds); the denser grid: "
                       f"`aiblox sweep --no-tracking` in a process of its own (imports, "
                       f"dataset, conclusion included), its fusion and metrics not cached, "
                       f"points/s = new points / wall s; ranx: ranx.fuse + ranx.evaluate of "
                       f"the same lists, both splits; ceiling: the denser grid's points / "
                       f"(fusion + metrics alone, as computed ahead, + the re-run's whole "
                       f"process) = {ceiling:.1f} new points/s, what the whole process would "
                       f"reach if its stage cache entries cost nothing and nothing ran "
                       f"beside the kernels (the command runs a batch's points while the "
                       f"next batch computes, so it can pass it); {environment_line()}"])


def _dense_spec(spec: SweepSpec, step: float) -> dict:
    """The spec's TOML with ``w_text`` at a finer step (and its own name): its text, the spec
    and its point count."""
    import re
    import tomllib

    text = (REPO / "evals" / "sweeps" / f"{spec.name}.toml").read_text()
    text = re.sub(r'(?m)^name = ".*"$', f'name = "{spec.name}_dense"', text, count=1)
    text = re.sub(r"(?m)^w_text = .*$", f"w_text = {{ start = 0, stop = 1, step = {step} }}",
                  text, count=1)
    dense = SweepSpec.model_validate(tomllib.loads(text))
    return {"text": text, "points": len(dense.points()), "spec": dense}


def _dense_process(dense: dict, cache_dir: Path, db: str, jobs: int, env: dict,
                   fresh: bool = True) -> tuple[float, float, int]:
    """``aiblox sweep SPEC --no-tracking --jobs JOBS`` of the denser grid in a process of its
    own, its fusion and metrics cache emptied first when ``fresh`` (every point new; signals
    cached): wall seconds, the child's CPU seconds and the new points (fusion entries computed
    / 2 splits)."""
    import resource
    import subprocess
    import tempfile

    for stage in ("fusion", "metrics") if fresh else ():
        shutil.rmtree(cache_dir / stage, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{dense['spec'].name}.toml"
        path.write_text(dense["text"])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "aiblox.cli", "sweep", str(path), "--no-tracking", "--json",
             "--jobs", str(jobs), "--cache-dir", str(cache_dir), "--db", db],
            env={**os.environ, **env}, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    import json

    computed = json.loads(out.stdout).get("computed", {})
    new = int(computed.get("fusion", 0)) // 2
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, new


def _dense_compute(dense: SweepSpec, ds, cache_dir: Path, result, jobs: int
                   ) -> tuple[float, float]:
    """Seconds of the sweep's fusion and metrics alone over every point of the denser grid on
    both splits, in this process, from the signals ``result`` cached (indexes built, scores
    normalised and kernels warmed first, not timed): no stage keys, hashes, files or start-up.
    Two ways: one point at a time (:meth:`BatchFusion.fuse_arrays`, then
    :meth:`QrelsScorer.evaluate_positions`: a point's own stages), and as the sweep computes
    them ahead (:meth:`QrelsScorer.score_fusions`: each split, depth and normalisation's
    settings in one pass)."""
    from aiblox.metrics import QrelsScorer

    cache = StageCache(cache_dir)
    splits = (dense.tune_split, dense.report_split)
    keys = {(p.depth, s): p.manifest.splits[s].stages[0]["key"]
            for p in result.points for s in splits}
    indexes = {k: BatchFusion.from_signals(cache.load("signals", key)) for k, key in keys.items()}
    scorers = {s: QrelsScorer(ds.qrels[s]) for s in splits}
    codes = {k: scorers[k[1]].codes(index.docs) for k, index in indexes.items()}
    metrics = list(dense.metrics)
    points = dense.points()
    groups: dict[tuple, list] = {}
    for prefs in points:
        sc = prefs.scoring
        blend = ("rrf",) if sc.blend == "rrf" else ("linear", sc.normalize, sc.missing)
        for s in splits:
            k = ((prefs.fts.top_k, prefs.vector.top_k), s)
            groups.setdefault((k, prefs.top_k_items, blend), []).append(sc)

    def one(prefs) -> None:
        for s in splits:
            k = ((prefs.fts.top_k, prefs.vector.top_k), s)
            fused = indexes[k].fuse_arrays(prefs.scoring, prefs.top_k_items)
            scorers[s].evaluate_positions(indexes[k].qids, codes[k], fused.positions,
                                          fused.counts, metrics)

    def batched() -> None:
        for (k, top_k, _), cfgs in groups.items():
            scorers[k[1]].score_fusions(indexes[k], cfgs, top_k, codes[k], metrics)

    with compiled_threads(jobs):
        for prefs in points[:: max(1, len(points) // 20)]:  # every kernel compiled and warm
            one(prefs)
        for (k, top_k, _), cfgs in groups.items():
            scorers[k[1]].score_fusions(indexes[k], cfgs[:1], top_k, codes[k], metrics)
        t0 = time.perf_counter()
        for prefs in points:
            one(prefs)
        t1 = time.perf_counter()
        batched()
        return t1 - t0, time.perf_counter() - t1


def _ranx_row(spec: SweepSpec, ds, cache_dir: Path, result) -> list[str]:
    """ranx's documented route (``ranx.fuse`` then ``ranx.evaluate``) on a handful of the
    spec's points at depth 100, on both splits, over the sweep's cached lists."""
    cache = StageCache(cache_dir)
    picked = [p for p in result.points if p.depth == (100, 100) and (
        p.scoring["blend"] == "rrf" or (p.scoring["normalize"] == "minmax"
                                        and p.scoring["w_text"] in (0.0, 0.3, 0.55, 1.0)))]
    prefs = {point_label(p): p for p in spec.points()}
    todo = [prefs[p.label] for p in picked if p.label in prefs]
    seconds = 0.0
    for split in (spec.tune_split, spec.report_split):
        key = picked[0].manifest.splits[split].stages[0]["key"]
        sig = cache.load("signals", key)
        qrels = {q: {d: int(g) for d, g in docs.items()} for q, docs in ds.qrels[split].items()
                 if docs}
        if split == spec.tune_split:  # ranx's kernels compiled and loaded (not timed)
            _ranx_route([todo[0], todo[-1]], sig, qrels, list(spec.metrics))
        t, _, _ = _ranx_route(todo, sig, qrels, list(spec.metrics))
        seconds += t
    return ["ranx: fuse (min-max wsum / rrf) + evaluate, both splits, depth 100", "-",
            str(len(todo)), "cached", f"{seconds:.2f}", "-", f"{len(todo) / seconds:.1f}", "-"]


def tpe_table(args, spec: SweepSpec, ds, cache_dir: Path) -> None:
    """An N-trial TPE study (Optuna, seeded) over the spec's grid on a fresh study and an
    empty fusion/metrics cache, signals cached; with and without MLflow tracking."""
    import tempfile

    from aiblox.engine.tracking import SweepTracker
    from aiblox.sweep.axes import SearchConfig

    jobs = default_jobs() if args.jobs <= 0 else args.jobs
    study = spec.model_copy(update={"name": f"{spec.name}_tpe{args.tpe}",
                                    "search": SearchConfig(strategy="tpe", n=args.tpe, seed=0)})
    err.print("signals (cached after the first run) ...")
    warm = spec.model_copy(update={"grid": spec.grid.model_copy(update={
        "blend": ["rrf"], "rrf_k": [60]}), "baseline": None})
    run_sweep(warm, cache_dir=cache_dir, db=args.db, dataset=ds, jobs=jobs, progress=False)
    rows = []
    for label, tracking in (("MLflow tracking (sqlite)", True), ("--no-tracking", False)):
        for stage in ("fusion", "metrics", "studies"):
            shutil.rmtree(cache_dir / stage, ignore_errors=True)
        err.print(f"{args.tpe} TPE trials, {label} ...")
        with tempfile.TemporaryDirectory() as tmp:
            tracker = (SweepTracker(f"sqlite:///{tmp}/mlflow.db", f"bench/{study.name}",
                                    study.hash, study.model_dump(mode="json"))
                       if tracking else None)
            t0 = time.perf_counter()
            r = run_sweep(study, cache_dir=cache_dir, db=args.db, dataset=ds, jobs=jobs,
                          tracker=tracker, progress=False)
            wall = time.perf_counter() - t0
        rows.append([label, str(len(r.trials)), str(len(r.points)), f"{r.timings['signals_s']:.1f}",
                     f"{r.timings['points_s']:.1f}", f"{wall:.1f}",
                     f"{r.best.label} ({r.best.metrics[spec.tune_split][spec.primary]:.4f})"])
    print_table(f"TPE study on {ds.name} ({spec.name}, {args.tpe} trials)",
                ["run", "trials", "points scored", "signals s", "trials s", "wall s",
                 f"best on {spec.tune_split}"], rows, args.markdown,
                right=["trials", "points scored", "signals s", "trials s", "wall s"],
                notes=[f"{len(ds.qrels[spec.tune_split])} {spec.tune_split} + "
                       f"{len(ds.qrels[spec.report_split])} {spec.report_split} queries, "
                       f"{jobs} numba threads; trials s: the trials and the conclusion "
                       f"(Optuna's sampler and its SQLite study included); "
                       f"{environment_line()}"])


if __name__ == "__main__":
    main()
