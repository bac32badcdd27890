"""``aiblox sweep``: run a sweep spec incrementally, log it to MLflow, choose on tune, report."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from aiblox.cli._common import (
    checked_at_least,
    checked_db,
    console,
    fail,
    out,
    print_json,
    show_progress,
    size_text,
    writable_folder,
)
from aiblox.cli._defaults import MAX_POINTS, STAGE_CACHE_DIR, TRACKING_URI
from aiblox.hashing import short_hash

if TYPE_CHECKING:  # the sweep, the engine and MLflow are imported when the command runs
    from rich.table import Table

    from aiblox.sweep import SweepResult, SweepSpec


def sweep(
    spec_path: Path = typer.Argument(..., metavar="SPEC", help="Sweep spec (TOML), e.g. "
                                     "evals/sweeps/sample_fusion.toml."),
    resume: bool = typer.Option(False, "--resume", help="Finish an interrupted sweep whose "
                                "process is gone (its MLflow parent run is adopted; finished "
                                "points are not redone). A live sweep is never taken over."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Threads for the compiled fusion and "
                             "metrics kernels; 0: the available cores not busy with other "
                             "work (load average), at least one."),
    tracking_uri: str = typer.Option(TRACKING_URI, "--tracking-uri", envvar="MLFLOW_TRACKING_URI",
                                     help="MLflow tracking URI (any MLflow server)."),
    no_tracking: bool = typer.Option(False, "--no-tracking", help="Do not log to MLflow."),
    cache_dir: str = typer.Option(STAGE_CACHE_DIR, "--cache-dir",
                                  help="Stage cache: a folder, or an fsspec URI shared by "
                                       "workers (s3://bucket/stages, file:///mnt/shared/stages)."),
    db: str = typer.Option("", "--db", help="Store path (overrides the spec's)."),
    device: str = typer.Option("", "--device", help="Where the embedder runs and a "
                               "fine-tuned model trains (overrides the spec's device, default "
                               "auto): auto, cpu, cuda, cuda:N or mps. Off the CPU the "
                               "points are keyed apart (model id +cuda)."),
    top: int = typer.Option(10, "--top", help="Leaderboard rows printed (at least 1)."),
    max_points: int = typer.Option(MAX_POINTS, "--max-points",
                                   help="Refuse a grid of more points than this (counted from "
                                        "the axes before anything is built)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    executor: str = typer.Option("local", "--executor", help="Where the points run: local "
                                 "(this process) or ray (tasks on a Ray cluster; the stage "
                                 "cache folder must be one every node sees)."),
    address: str = typer.Option("", "--address", help="With --executor ray: the cluster's "
                                "address (HOST:PORT as `ray start --head` prints it); empty: "
                                "a local Ray instance."),
) -> None:
    """Score every point of SPEC (only stages not cached), choose on the tune split, report on
    the report split."""
    from rich.markup import escape

    from aiblox.cluster import ExecutorError, check_executor
    from aiblox.data import DatasetError, load_dataset
    from aiblox.embedding import VectorImportError
    from aiblox.embedding.device import DeviceError, describe_device
    from aiblox.engine.cache import StageCacheError, check_cache_root
    from aiblox.engine.tracking import SweepBusy, SweepInterrupted, TrackingStoreError
    from aiblox.stores.base import is_disk_full
    from aiblox.sweep import SweepSpecError, load_spec, run_sweep
    from aiblox.sweep.finetune import check_spec_vectors, check_training
    from aiblox.sweep.runner import check_cv, check_held_out, default_jobs, sweep_device

    checked_at_least(jobs, 0, "--jobs")
    checked_at_least(top, 1, "--top")
    checked_at_least(max_points, 1, "--max-points")
    try:
        spec = load_spec(spec_path, max_points=max_points)
    except SweepSpecError as exc:
        fail(str(exc))
        return
    checked_db(db)  # a URL naming no store: refused before MLflow or a store is touched
    try:  # before the store or MLflow is opened, before anything is scheduled
        check_executor(executor, address or None)
    except ExecutorError as exc:
        fail(str(exc))
        return
    # one device for the sweep, resolved before the spec is hashed: a GPU sweep is its own run
    option = "--device" if device else f"{spec_path}: device"
    try:
        resolved = sweep_device(spec, device or None, option)
    except DeviceError as exc:
        fail(str(exc))
        return
    spec = spec.model_copy(update={"device": resolved})
    n_points = len(spec.grid_points())
    drawn = "" if spec.search.strategy == "grid" else f" drawn from {spec.grid_size():,}"
    if spec.search.model_based:
        trials = min(int(spec.search.n or 0), n_points)
        capped = f" (n = {spec.search.n} capped to the grid)" if trials < (spec.search.n or 0) \
            else ""
        drawn = (f" searched by {spec.search.strategy} (seed {spec.search.seed}): {trials:,} "
                 f"trials{capped}")
    cv = (f"; chosen by {spec.cv.folds}-fold cross-validation (seed {spec.cv.seed}) over the "
          f"{spec.tune_split} queries" if spec.cv is not None else "")
    console.print(f"sweep {spec.name}: {n_points:,} point{'s' * (n_points != 1)}{drawn} "
                  f"(limit {max_points:,}; "
                  f"--max-points raises it), each on {' and '.join(spec.splits)}{cv}; "
                  f"embedder {spec.embedder} on {describe_device(resolved)}", soft_wrap=True)
    merged = _merged(spec)
    if merged["points"]:
        console.print(f"{merged['points']:,} more grid point"
                      f"{'s' if merged['points'] != 1 else ''} merged into these: each "
                      f"computes the same run as one of them, scored once; {merged['why']}",
                      soft_wrap=True, markup=False)
    # the data (its hash names the parent run); k folds need k queries, a model its training
    # split, a report split queries tuning does not score: checked before anything is logged
    try:
        dataset = load_dataset(spec.dataset, splits=spec.splits)
        check_cv(spec, dataset)
        check_held_out(spec, dataset)
        check_training(spec, dataset)
        check_spec_vectors(spec, dataset, cache_dir, resolved)  # read once trained
    except VectorImportError as exc:  # a vectors file's: its file, row and field
        fail(str(exc))
        return
    except (DatasetError, ValueError) as exc:
        fail(_dataset_fault(spec_path, spec, exc))
        return
    if "://" in cache_dir:  # checked by publishing a probe, as entries are
        try:
            check_cache_root(cache_dir, "--cache-dir")
        except StageCacheError as exc:
            fail(str(exc))
    else:
        writable_folder(cache_dir, "--cache-dir")
    if not no_tracking:
        folder = local_tracking_folder(tracking_uri)
        if folder is not None:
            writable_folder(folder, "--tracking-uri")
    tracker = None
    if not no_tracking:
        # MLflow prints two "View run" links per run to stdout for a tracking server (and
        # fetches the run again to do so): stdout is for results (--json), so not here
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        try:
            from aiblox.engine.tracking import SweepTracker
        except ImportError:  # pragma: no cover - mlflow is the `tracking` extra
            fail("MLflow is not installed: pip install 'aiblox[tracking]' or pass --no-tracking")
        try:
            tracker = SweepTracker(tracking_uri, spec.experiment or f"aiblox-sweep/{spec.name}",
                                   spec.hash, spec.model_dump(mode="json"), resume=resume,
                                   spec_path=spec_reference(spec_path),
                                   workdir=Path.cwd().resolve().as_posix(),
                                   dataset_hash=dataset.hash,
                                   rerun_options=_rerun_options(db, cache_dir, device))
        except (SweepInterrupted, SweepBusy, TrackingStoreError) as exc:
            fail(str(exc))
            raise  # unreachable
        if tracker.other_data and not tracker.resumed:  # the data changed: another parent
            console.print(f"sweep {spec.name}: its data changed since it was logged (dataset "
                          f"{short_hash(dataset.hash)}): a new MLflow run; `aiblox runs "
                          f"{spec.name}` shows the newest",
                          markup=False, highlight=False, soft_wrap=True)
    try:
        with _sigterm_as_exit():  # a terminated sweep gives its MLflow run up, as Ctrl-C does
            result = run_sweep(spec, cache_dir=cache_dir, db=db or None,
                               jobs=jobs or default_jobs(), tracker=tracker,
                               progress=show_progress(), dataset=dataset,
                               executor=executor, address=address or None)
    except KeyboardInterrupt:  # Ctrl-C: one line saying what is kept and how to go on
        from aiblox.cli._errors import print_error

        again = _again(spec_path, db, cache_dir, device, tracking_uri if tracker else "",
                       executor, address, "--resume" if tracker else "--no-tracking")
        print_error(f"interrupted: the finished points are kept (stage cache {cache_dir}"
                    + (f", MLflow {tracking_uri}); `{again}` continues where it stopped"
                       if tracker is not None else
                       f"); `{again}` again reads them back"), prefix="stopped")
        raise typer.Exit(130) from None
    except Exception as exc:
        if is_disk_full(exc):  # one line: what could not be written, and how to go on
            again = _again(spec_path, db, cache_dir, device, tracking_uri if tracker else "",
                           executor, address, "--resume")
            fail(f"cannot write {_written(exc, cache_dir, tracking_uri)}: the disk is full "
                 f"(ENOSPC, no space left on the device); free space, then `{again}` "
                 f"continues where it stopped (finished points are kept)")
        if isinstance(exc, DatasetError | ValueError | SweepBusy):
            fail(_located(spec_path, str(exc)))
        raise
    if as_json:
        print_json({**_summary(result, top), "merged": merged})
        return
    out.print(_leaderboard(result, top))
    b = result.best
    out.print(f"best on {result.tune_split} by {result.primary}: [bold]{escape(b.label)}[/bold] "
                  f"(config {short_hash(b.config_hash)})")
    for split in result.splits:
        vals = "  ".join(f"{m} {v:.4f}" for m, v in b.metrics[split].items())
        out.print(f"  {split}: {vals}")
    shown = result.report_split or result.tune_split
    mean, low, high = result.ci[shown]
    out.print(f"  {shown} {result.primary} 95% bootstrap CI [{low:.4f}, {high:.4f}]")
    if result.gap is not None:
        out.print(f"  gap of the chosen point, {result.tune_split} (tune) minus "
                      f"{result.report_split} (report) {result.primary}: {result.gap:+.4f}")
    if result.cv is not None:
        out.print(_folds(result), soft_wrap=True)
        _cv_lines(result)
    if result.objectives:
        out.print(_front(result))
    # a baseline outside the grid is a point of its own: the header counted the grid's
    own = (" (a point of its own, " + ("outside the grid)" if spec.search.strategy == "grid"
                                        else "not among the points drawn)")
           if result.baseline is not None and result.baseline.outside_grid else "")
    if result.baseline is not None and result.report_split is not None:
        base = result.baseline
        out.print(f"baseline {escape(base.label)}{own}: {result.report_split} {result.primary} "
                  f"{base.metrics[result.report_split][result.primary]:.4f}")
        out.print(_significance(result))
    out.print(f"stages computed: {_counts(result.computed)}; reused: {_counts(result.reused)}"
              + (f"; repaired (damaged, computed again): {_counts(result.repaired)}"
                 if result.repaired else ""))
    if result.computed and "://" not in cache_dir:  # the cache grew: say how big it is now
        from aiblox.engine.cache import StageCache
        from aiblox.engine.housekeeping import cache_usage

        rows = [r for r in cache_usage(StageCache(cache_dir)) if r.kind == "stage"]
        console.print(f"stage cache {cache_dir}: {sum(r.entries for r in rows)} entries, "
                      f"{size_text(sum(r.size for r in rows))} (aiblox cache list, aiblox "
                      f"cache prune)", soft_wrap=True)
    if result.tracking:
        t = result.tracking
        out.print(f"MLflow {t['tracking_uri']}: parent run {t['parent_run_id']}, "
                  f"{t['logged']} points logged{' (the baseline among them)' if own else ''}, "
                  f"{t['skipped']} already logged")


def _counts(counts: dict[str, int]) -> str:
    """``signals 4, fusion 48, metrics 48`` (stage order as counted), or ``none``."""
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"


def _leaderboard(result: SweepResult, top: int) -> Table:
    """The top points by the tune split's primary metric (its direction: fewest tokens first
    for a cost), the chosen point marked (and added below when the ranking puts it lower: the
    Pareto front's best); with a baseline, each point's delta to it on the report split (its
    mark and adjusted p where the point was tested)."""
    from rich.table import Table
    from rich.text import Text

    from aiblox.metrics.marks import adjusted_text, delta_text, p_text, value_text

    report = f"report split {result.report_split}" if result.report_split else "no report split"
    table = Table(title=f"{result.name}: top {top} on {result.tune_split} ({report})")
    table.add_column("point")
    for split in result.splits:
        table.add_column(f"{split} {result.primary}", justify="right")
    base, against = result.baseline, result.report_split or result.tune_split
    if base is not None:
        untested = ", untested: see the cross-validated margin" \
            if result.cv is not None and result.report_split is None else ""  # no p to show
        first = result.significance[0] if result.significance else None
        adjusted = f", p {adjusted_text(first.correction)}" if first is not None \
            and first.correction != "none" and not untested else ""
        table.add_column(f"vs baseline ({against}{untested}{adjusted})", justify="right")
    table.add_column("config", justify="left")
    tested = {c.candidate: c for c in result.significance if c.metric == result.primary}
    ranked = _ranked(result)
    chosen = result.best.config_hash
    at = next(i for i, p in enumerate(ranked) if p.config_hash == chosen)
    # the chosen point is always shown (the Pareto front's best may rank lower), marked
    for i in [*range(min(top, len(ranked))), *([at] if at >= top else [])]:
        p = ranked[i]
        notes = [n for n, on in (("chosen" + (f", rank {i + 1}" if i else ""), i == at),
                                 ("baseline", p.is_baseline)) if on]
        row: list[Text | str] = [
            Text(p.label + (f" ({'; '.join(notes)})" if notes else "")),
            *(value_text(p.metrics[s][result.primary]) for s in result.splits)]
        if base is not None:
            c = tested.get(p.label)
            row.append("" if p.is_baseline else (
                f"{delta_text(c.delta, c.significant)} p={p_text(c.p_adjusted, c.alpha)}"
                if c is not None
                else delta_text(p.metrics[against][result.primary]
                                - base.metrics[against][result.primary])))
        table.add_row(*row, short_hash(p.config_hash))
    return table


def _folds(result: SweepResult) -> Table:
    """The k-fold table: per fold the point chosen on the other folds and its scores."""
    from rich.table import Table
    from rich.text import Text

    cv = result.cv
    assert cv is not None
    table = Table(title=f"{cv.folds}-fold cross-validation over {cv.split} ({cv.n_queries} "
                        f"queries, seed {cv.seed}), {cv.metric}: chosen on the other folds "
                        f"(tune), scored on the held-out fold (n queries); gap = tune - "
                        f"held-out")
    for col in ("fold", "n", "chosen point (config)", "tune", "held-out", "gap", "baseline"):
        table.add_column(col, justify="left" if col.startswith("chosen") else "right",
                         overflow="fold")
    for r in cv.rows:
        table.add_row(str(r.fold), str(r.n_held_out),
                      Text(f"{r.label} ({short_hash(r.config_hash)})"),
                      f"{r.tune:.4f}", f"{r.held_out:.4f}", f"{r.gap:+.4f}",
                      "" if r.baseline_held_out is None else f"{r.baseline_held_out:.4f}")
    # every cell of the row a mean over the folds, the baseline's too (its mean over queries,
    # beside the cross-validated score's, is in the lines below)
    base = [r.baseline_held_out for r in cv.rows if r.baseline_held_out is not None]
    table.add_row("mean (over folds)", "", "", f"{cv.mean_tune:.4f}", f"{cv.mean_held_out:.4f}",
                  f"{cv.mean_gap:+.4f}", f"{sum(base) / len(base):.4f}" if base else "")
    return table


def _cv_lines(result: SweepResult) -> None:
    cv = result.cv
    assert cv is not None
    out.print(f"cross-validated {cv.metric} (each query held out once, mean over queries): "
                  f"{cv.pooled_held_out:.4f}; mean over folds {cv.mean_held_out:.4f}; gap "
                  f"(tune minus held-out) {cv.mean_gap:+.4f}", soft_wrap=True)
    if cv.margin is not None:
        out.print(f"against baseline {cv.baseline} ({cv.baseline_mean:.4f}): margin "
                      f"{cv.margin:+.4f}, 95% CI [{cv.margin_low:+.4f}, {cv.margin_high:+.4f}] "
                      f"({cv.ci_method}); paired {cv.test} test p {cv.p_value:.4g}; W/T/L "
                      f"{cv.wins}/{cv.ties}/{cv.losses}", soft_wrap=True)
    out.print(f"verdict: {cv.verdict}", soft_wrap=True)


def _front(result: SweepResult) -> Table:
    """The Pareto front on the tune split (``[search] objectives``), best first by primary."""
    from rich.table import Table
    from rich.text import Text

    from aiblox.engine.tracking import pareto_summary

    par = pareto_summary(result)
    names = list(result.objectives)
    table = Table(title=f"Pareto front on {result.tune_split}: " + ", ".join(
        f"{n} ({'max' if d == 'maximize' else 'min'})" for n, d in result.objectives.items()))
    table.add_column("point")
    for n in names:
        table.add_column(f"{result.tune_split} {n}", justify="right")
    if result.report_split:
        table.add_column(f"{result.report_split} {result.primary}", justify="right")
    by_hash = {p["config_hash"]: p for p in par["points"]}
    q = names.index(result.primary)
    for h in result.pareto:
        p = by_hash[h]
        table.add_row(Text(p["label"] + (" (chosen)" if h == result.best.config_hash else "")),
                      *(f"{v:.4f}" if v != int(v) else f"{int(v)}" for v in p["tune"]),
                      *([f"{p['report'][q]:.4f}"] if result.report_split else []))
    return table


def _significance(result: SweepResult) -> Table:
    """The top points against the baseline on the report split: value, delta (marked when
    significant), p and adjusted p, wins/ties/losses under the metric's direction (and the
    queries left out for a NaN value)."""
    from aiblox.metrics.marks import (
        adjusted_text,
        counts_text,
        delta_text,
        legend,
        p_text,
        value_text,
    )
    from aiblox.metrics.significance import TEST_NAMES

    first = result.significance[0] if result.significance else None
    adjusted = adjusted_text(first.correction if first is not None else "holm")
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"top points vs baseline on {result.report_split} "
                        f"({TEST_NAMES.get(first.test, first.test) if first else 'paired test'}, "
                        f"{adjusted} over the points per metric)",
                  caption=legend("the baseline", first.alpha if first else 0.05),
                  caption_justify="left")
    for col in ("point", "metric", "better", "value", "delta", "p", "p (adjusted)", "W/T/L"):
        table.add_column(col, justify="left" if col in ("point", "metric", "better")
                         else "right")
    for c in result.significance:  # W/T/L under the metric's direction (fewer tokens wins)
        table.add_row(Text(c.candidate), c.metric, c.direction, value_text(c.candidate_mean),
                      delta_text(c.delta, c.significant), p_text(c.p_value, c.alpha),
                      p_text(c.p_adjusted, c.alpha),
                      counts_text(c.wins, c.ties, c.losses, c.dropped))
    return table


def _ranked(result: SweepResult) -> list:
    """Every point best first on the tune split by the primary metric (its direction, ties by
    config hash, NaN last): the one ranking, :func:`~aiblox.engine.settings.ranked`."""
    from aiblox.engine.settings import ranked

    return ranked(result.points, result.tune_split, result.primary)


def _again(spec_path: Path, db: str, cache_dir: str, device: str, tracking_uri: str,
           executor: str, address: str, then: str) -> str:
    """The command that runs this sweep again on what it wrote (``then``: its last option,
    ``--resume``): the spec and every option that says where (store, stage cache, MLflow
    store, cluster); without them ``--resume`` started a fresh sweep elsewhere (the default
    cache and MLflow store), the stopped one left KILLED. A password is read from an
    environment variable (``--db "$AIBLOX_DB"``), never shown."""
    from aiblox.engine.tracking.layout import rerun_command

    given = [("--tracking-uri", "" if tracking_uri in ("", TRACKING_URI) else tracking_uri),
             ("--executor", "" if executor == "local" else executor), ("--address", address)]
    return rerun_command(f"aiblox sweep {spec_reference(spec_path)}",
                         _rerun_options(db, cache_dir, device),
                         *[x for option, value in given if value for x in (option, value)], then)


def _rerun_options(db: str, cache_dir: str, device: str) -> str:
    """The options given beside the spec that a rerun needs to read the same store and stage
    cache (the report's reproduce command), as a shell would take them, each URL's password
    masked (it is tagged on the parent run); "" for the defaults."""
    from aiblox.engine.tracking.layout import rerun_options

    return rerun_options([("--db", db), ("--cache-dir", "" if cache_dir == STAGE_CACHE_DIR
                                          else cache_dir), ("--device", device)])


def _dataset_fault(spec_path: Path, spec: SweepSpec, exc: Exception) -> str:
    """A dataset the spec names that does not load, or a split it does not have, as the
    spec's file, line and field: ``spec.toml:4: field 'tune_split': ... no split 'trian'``."""
    import re

    from aiblox.sweep.spec import SweepSpec
    from aiblox.sweep.spec_errors import key_lines, located

    message = str(exc)
    if message.startswith(_TRAINING):  # a training table's split (check_training)
        return located(spec_path, message, SweepSpec)
    split = re.search(r"no split '([^']*)'", message)
    field: tuple[str, ...] = ("dataset",)
    if split is not None:
        field = next(((f,) for f in ("tune_split", "report_split")
                      if getattr(spec, f) == split.group(1)), field)
    elif message.startswith("cv.folds "):  # more folds than the tuning split's queries
        field = ("cv", "folds")
    elif message.startswith("report_split = "):  # queries the tuning split judges too
        field = ("report_split",)
    try:
        line = key_lines(spec_path.read_text(encoding="utf-8")).get(field)
    except (OSError, UnicodeDecodeError):
        line = None
    return f"{spec_path}{f':{line}' if line else ''}: field {'.'.join(field)!r}: {message}"


_TRAINING = ("finetune.", "finetune_reranker.")
"""How a refusal of a training table's field starts (``finetune.split = 'dev': ...``)."""


def _located(spec_path: Path, message: str) -> str:
    """A stage's refusal found when the sweep starts (``stage rm3: fb_terms = 200000 but the
    index's vocabulary holds 1042 terms``) with the spec's file, line and field that write
    the value, as a refusal when the spec loads has them; any other message as it is."""
    import tomllib

    from aiblox.sweep.spec import SweepSpec
    from aiblox.sweep.spec_errors import located, stage_error_line

    if message.startswith(_TRAINING):  # a model about to train (finetune.negative_depth)
        return located(spec_path, message, SweepSpec)
    if not message.startswith("stage "):
        return message
    try:
        text = spec_path.read_text(encoding="utf-8")
        return stage_error_line(str(spec_path), text, tomllib.loads(text), message)
    except (OSError, ValueError):  # the spec changed or went since it loaded: as it is
        return message


def _merged(spec) -> dict:
    """How many points of the full grid were merged into others computing the same run (or
    listed again: a value listed twice in one axis), and why (:meth:`SweepSpec.merged_points`):
    ``--json``'s ``merged``."""
    from aiblox.sweep.points import merged_why, repeated_values

    merged = spec.merged_points()
    repeated = repeated_values(spec.grid, spec.pipelines())
    return {"points": len(merged), "why": merged_why(merged, repeated) or None}


def _summary(result: SweepResult, top: int) -> dict:
    def row(p):
        return {"label": p.label, "config_hash": p.config_hash, "metrics": p.metrics,
                "manifest_hash": p.manifest.manifest_hash, "is_baseline": p.is_baseline}

    return {"name": result.name, "sweep_hash": result.sweep_hash, "dataset": result.dataset,
            "dataset_hash": result.dataset_hash, "tune_split": result.tune_split,
            "report_split": result.report_split, "primary": result.primary,
            "n_points": len(result.points), "best": row(result.best),
            "baseline": row(result.baseline) if result.baseline else None,
            "leaderboard": [row(p) for p in _ranked(result)[:top]],
            "ci": result.ci, "gap": result.gap,
            "cv": None if result.cv is None else result.cv.model_dump(mode="json"),
            "significance": [c.model_dump(mode="json") for c in result.significance],
            "computed": result.computed, "reused": result.reused,
            "repaired": result.repaired,
            "tracking": result.tracking,
            **({"trials": result.trials} if result.trials else {}),
            **({"objectives": [[n, d] for n, d in result.objectives.items()],  # in order
                "pareto": result.pareto}
               if result.objectives else {})}


def _causes(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _written(exc: BaseException, cache_dir: str, tracking_uri: str) -> str:
    """What a sweep failed to write on a full disk: the stage cache, the MLflow store or the
    store (named), else the file the error names."""
    from aiblox.cli._errors import store_location
    from aiblox.engine.cache import StageCacheError
    from aiblox.stores.base import StoreError

    for e in _causes(exc):
        if isinstance(e, StageCacheError):
            return f"the stage cache ({cache_dir})"
        if type(e).__module__.split(".")[0] in ("mlflow", "sqlalchemy", "sqlite3"):
            return f"the MLflow store ({tracking_uri})"
        if isinstance(e, StoreError) or type(e).__module__.split(".")[0] in ("duckdb",
                                                                             "_duckdb"):
            where = store_location(e)
            return f"the store{f' ({where})' if where else ''}"
    folder = local_tracking_folder(tracking_uri)
    for e in _causes(exc):
        name = getattr(e, "filename", None)
        if isinstance(e, OSError) and name:
            inside = folder is not None and Path(name).resolve().is_relative_to(
                folder.resolve())
            return f"the MLflow store ({tracking_uri}): {name}" if inside else str(name)
    return "a file"


def local_tracking_folder(uri: str) -> Path | None:
    """The local folder an MLflow tracking URI writes to (``sqlite:///mlruns/mlflow.db``: its
    folder ``mlruns``; ``file:`` URIs and plain paths: the folder itself); None for a server."""
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///")).parent
    if uri.startswith("file://"):
        return Path(uri.removeprefix("file://"))
    if uri.startswith("file:"):
        return Path(uri.removeprefix("file:"))
    if "://" not in uri:
        return Path(uri)
    return None


def spec_reference(path: Path) -> str:
    """The spec path as a reproduce command should name it: relative to the working directory
    when the file lies under it, else absolute; always with forward slashes. The parent run
    records that folder too (tag ``aiblox.workdir``): the reproduce command runs there, where
    the spec's relative paths resolve."""
    p = path.resolve()
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) while the sweep runs (main thread only), so the tracker
    releases its parent run instead of leaving it RUNNING; inside a batch's database
    transaction, just after it (:func:`~aiblox.engine.bulk_mlflow.whole_write`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from aiblox.engine.bulk_mlflow import defer_signal

    def _exit(signum: int, frame: object) -> None:
        if defer_signal(signum):  # inside a batch's transaction: exit once it is written
            return
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
