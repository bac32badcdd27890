"""Incremental sweeps: a spec's grid scored point by point, every stage memoised by its key in
an on-disk stage cache, determinism manifests, MLflow logging (parent run per sweep, child run
per point), reports, comparisons and verification.

==================  ==========================================================================
module              what it is for
==================  ==========================================================================
``spec``            sweep specs (TOML): dataset, splits, base config, grid, baseline; points
``axes``            the grid's axes over fusion, chunking and selection, and the search draw
``grid``            exact numeric axes (decimal steps, simplex weights)
``stages``          a stage (name, version, config, inputs, function), the table of stage
                    versions, stage keys and every stage's config
``cache``           the on-disk stage cache (checked reads, atomic writes)
``compute``         what each stage computes
``points``          a point's settings, config hash and label
``context``         one sweep's state: workspace, signals, indexes, scorers
``pipeline``        the chain of stages of one point on one split
``runner``          :func:`run_sweep`: signals, points, conclusion
``distributed``     the points as Ray tasks on a cluster (``executor="ray"``)
``search``          model-based search (Optuna's TPE, CMA-ES or GP over the grid's points,
                    one or several objectives, resumable)
``pareto``          quality against cost: objectives, their directions, the Pareto front
``results``         :class:`SweepResult`, the ranking of points, best point, significance
``outputs``         stored outputs read back (fused runs, per-query values, evidence)
``manifest``        determinism manifests of points
``tracking``        MLflow logging, one writer per sweep
``report``          Markdown and HTML reports of a logged sweep
``frames``          pandas views of a result (leaderboard, axes, significance)
``compare``         two logged points compared (``aiblox compare``)
``runs``            logged sweeps and points listed, a point found by name (``aiblox runs``)
``ranking``         the one ranking of points (value descending, ties by config hash)
``crossval``        seeded k-fold cross-validation over the tuning queries (``[cv]``)
``verify``          a logged point re-executed from its manifest (``aiblox verify``)
``applies``         which settings apply to a point (for per-setting plots)
==================  ==========================================================================
"""

from aiblox.engine.cache import StageCache
from aiblox.engine.manifest import MANIFEST_VERSION, PointManifest, SplitManifest
from aiblox.engine.settings import PipelinePoint, ranking_key
from aiblox.engine.task import STAGE_VERSIONS, StageRecord, Task, stage_key
from aiblox.engine.tracking import (
    DEFAULT_TRACKING_URI,
    SweepBusy,
    SweepInterrupted,
    SweepTracker,
    TrackingStoreError,
    metric_key,
    tracking_client,
)
from aiblox.metrics.pareto import pareto_front
from aiblox.sweep.axes import ChunkingGrid, FusionGrid, SearchConfig, SelectionGrid, Steps
from aiblox.sweep.compare import MetricDelta, RunComparison, compare_runs, per_query_metrics
from aiblox.sweep.crossval import CrossValidation, CVConfig, FoldResult, fold_partition
from aiblox.sweep.frames import (
    axis_frame,
    folds_frame,
    leaderboard,
    manifest_frame,
    pareto_frame,
    point_settings,
    significance_frame,
    stage_counts,
    swept_axes,
    tune_vs_report,
)
from aiblox.sweep.grid import GridError, decimal_count, decimal_range, simplex, to_decimal
from aiblox.sweep.report import (
    SweepReport,
    find_sweep_run,
    load_sweep_report,
    render_html,
    render_markdown,
    write_report,
)
from aiblox.sweep.results import PointResult, SweepResult, choose_best
from aiblox.sweep.runner import DEFAULT_CACHE_DIR, default_jobs, run_sweep
from aiblox.sweep.runs import RunRef, list_points, list_sweeps, resolve_run
from aiblox.sweep.spec import DEFAULT_MAX_POINTS, SweepSpec, SweepSpecError, load_spec
from aiblox.sweep.verify import StageCheck, VerifyReport, verify_point

__all__ = [
    "CVConfig",
    "ChunkingGrid",
    "CrossValidation",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_MAX_POINTS",
    "DEFAULT_TRACKING_URI",
    "FoldResult",
    "FusionGrid",
    "GridError",
    "MANIFEST_VERSION",
    "MetricDelta",
    "PipelinePoint",
    "PointManifest",
    "PointResult",
    "RunComparison",
    "RunRef",
    "STAGE_VERSIONS",
    "SearchConfig",
    "SelectionGrid",
    "SplitManifest",
    "StageCache",
    "StageCheck",
    "StageRecord",
    "Steps",
    "SweepBusy",
    "SweepInterrupted",
    "SweepReport",
    "SweepResult",
    "SweepSpec",
    "SweepSpecError",
    "SweepTracker",
    "Task",
    "TrackingStoreError",
    "VerifyReport",
    "axis_frame",
    "choose_best",
    "compare_runs",
    "decimal_count",
    "decimal_range",
    "default_jobs",
    "find_sweep_run",
    "fold_partition",
    "folds_frame",
    "leaderboard",
    "list_points",
    "list_sweeps",
    "load_spec",
    "load_sweep_report",
    "manifest_frame",
    "metric_key",
    "pareto_frame",
    "pareto_front",
    "per_query_metrics",
    "point_settings",
    "ranking_key",
    "render_html",
    "render_markdown",
    "resolve_run",
    "run_sweep",
    "significance_frame",
    "simplex",
    "stage_counts",
    "stage_key",
    "swept_axes",
    "to_decimal",
    "tracking_client",
    "tune_vs_report",
    "verify_point",
    "write_report",
]
