"""Incremental sweeps: specs with exact grids, stage keys and an on-disk stage cache,
determinism manifests, and MLflow logging (parent run per sweep, child run per point)."""

from aiblox.eval.sweep.compare import MetricDelta, RunComparison, compare_runs, per_query_metrics
from aiblox.eval.sweep.grid import GridError, decimal_range, simplex, to_decimal
from aiblox.eval.sweep.manifest import (
    MANIFEST_VERSION,
    PointManifest,
    SplitManifest,
    environment,
    git_commit,
)
from aiblox.eval.sweep.report import (
    SweepReport,
    find_sweep_run,
    load_sweep_report,
    render_html,
    render_markdown,
    write_report,
)
from aiblox.eval.sweep.runner import (
    FUSION_VERSION,
    METRICS_VERSION,
    SIGNALS_VERSION,
    PointResult,
    SweepResult,
    choose_best,
    fusion_config,
    metrics_config,
    point_label,
    run_sweep,
    signals_config,
)
from aiblox.eval.sweep.significance import (
    Comparison,
    bootstrap_ci,
    compare_to_baseline,
    holm,
)
from aiblox.eval.sweep.spec import FusionGrid, Steps, SweepSpec, SweepSpecError, load_spec
from aiblox.eval.sweep.stages import StageCache, StageRecord, stage_key
from aiblox.eval.sweep.tracking import (
    DEFAULT_TRACKING_URI,
    SweepInterrupted,
    SweepTracker,
    flatten,
    metric_key,
    trec_run,
)
from aiblox.eval.sweep.verify import StageCheck, VerifyReport, verify_point

__all__ = [
    "Comparison",
    "DEFAULT_TRACKING_URI",
    "FUSION_VERSION",
    "FusionGrid",
    "GridError",
    "MANIFEST_VERSION",
    "METRICS_VERSION",
    "MetricDelta",
    "PointManifest",
    "PointResult",
    "RunComparison",
    "SIGNALS_VERSION",
    "SplitManifest",
    "StageCache",
    "StageCheck",
    "StageRecord",
    "Steps",
    "SweepInterrupted",
    "SweepReport",
    "SweepResult",
    "SweepSpec",
    "SweepSpecError",
    "SweepTracker",
    "VerifyReport",
    "bootstrap_ci",
    "choose_best",
    "compare_runs",
    "compare_to_baseline",
    "decimal_range",
    "environment",
    "find_sweep_run",
    "flatten",
    "fusion_config",
    "git_commit",
    "holm",
    "load_spec",
    "load_sweep_report",
    "metric_key",
    "metrics_config",
    "per_query_metrics",
    "point_label",
    "render_html",
    "render_markdown",
    "run_sweep",
    "signals_config",
    "simplex",
    "stage_key",
    "to_decimal",
    "trec_run",
    "verify_point",
    "write_report",
]
