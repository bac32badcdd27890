"""Sweeps: a spec's grid of configurations scored point by point through the engine
(:mod:`aiblox.engine`: every stage keyed and cached, a manifest per point, one MLflow writer),
the best point chosen on the tune split and reported on the report split; model-based search,
k-fold cross-validation, reports, comparisons and verification of logged points.

==================  ==========================================================================
module              what it is for
==================  ==========================================================================
``spec``            sweep specs (TOML): dataset, splits, base config, grid, baseline
``axes``            the grid's axes over fusion, chunking and selection, and the search draw
``grid``            exact numeric axes (decimal steps, simplex weights)
``points``          the grid's points expanded (fusion, chunking, selection, pipelines), its size
``spec_checks``     what a spec is checked for when it loads, beyond each field's bounds
``runner``          :func:`run_sweep`: signals, points, conclusion
``distributed``     the points as Ray tasks on a cluster (``executor="ray"``)
``space``           the grid's points as the parameters of a model-based search
``search``          model-based search (Optuna's TPE, CMA-ES or GP over the grid's points,
                    one or several objectives, resumable)
``results``         :class:`SweepResult`, the best point, significance against the baseline
``crossval``        seeded k-fold cross-validation over the tuning queries (``[cv]``)
``finetune``        the embedder fine-tuned on a split the sweep does not score (``[finetune]``)
``report``          Markdown and HTML reports of a logged sweep
``report_plots``    the report's plots (metric by swept parameter, Pareto front)
``frames``          pandas views of a result (leaderboard, axes, significance)
``compare``         two logged points compared (``aiblox compare``)
``runs``            logged sweeps and points listed, a point found by name (``aiblox runs``)
``verify``          a logged point re-executed from its manifest (``aiblox eval verify``)
``verify_sweep``    a logged sweep's point runs read as the conclusion reads points; a logged
                    table compared with its recomputation, field by field
``verify_summary``  a logged sweep's conclusion recomputed from its point runs
``verify_cv``       a ``[cv]`` sweep's k-fold result recomputed from its point runs
``applies``         which settings apply to a point (for per-setting plots)
==================  ==========================================================================

The package exports what a user of sweeps needs; everything else is imported from its module
(the stage cache, keys and MLflow writer from :mod:`aiblox.engine`, the Pareto front from
:mod:`aiblox.metrics.pareto`). The names are imported on first use, so a sweep that does not
use a report, a comparison or pandas's frames does not import them (nor pandas).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiblox.lazy import lazy_exports

_EXPORTS = {
    "PointResult": "aiblox.sweep.results",
    "RunComparison": "aiblox.sweep.compare",
    "SweepReport": "aiblox.sweep.report",
    "SweepResult": "aiblox.sweep.results",
    "SweepSpec": "aiblox.sweep.spec",
    "SweepSpecError": "aiblox.sweep.spec",
    "VerifyReport": "aiblox.sweep.verify",
    "axis_frame": "aiblox.sweep.frames",
    "choose_best": "aiblox.sweep.results",
    "compare_runs": "aiblox.sweep.compare",
    "leaderboard": "aiblox.sweep.frames",
    "list_points": "aiblox.sweep.runs",
    "list_sweeps": "aiblox.sweep.runs",
    "load_spec": "aiblox.sweep.spec",
    "load_sweep_report": "aiblox.sweep.report",
    "manifest_frame": "aiblox.sweep.frames",
    "pareto_frame": "aiblox.sweep.frames",
    "run_sweep": "aiblox.sweep.runner",
    "significance_frame": "aiblox.sweep.frames",
    "stage_counts": "aiblox.sweep.frames",
    "swept_axes": "aiblox.sweep.frames",
    "tune_vs_report": "aiblox.sweep.frames",
    "verify_point": "aiblox.sweep.verify",
    "write_report": "aiblox.sweep.report",
}
"""Exported name -> the module that defines it (imported on first use)."""

__all__ = [
    "PointResult",
    "RunComparison",
    "SweepReport",
    "SweepResult",
    "SweepSpec",
    "SweepSpecError",
    "VerifyReport",
    "axis_frame",
    "choose_best",
    "compare_runs",
    "leaderboard",
    "list_points",
    "list_sweeps",
    "load_spec",
    "load_sweep_report",
    "manifest_frame",
    "pareto_frame",
    "run_sweep",
    "significance_frame",
    "stage_counts",
    "swept_axes",
    "tune_vs_report",
    "verify_point",
    "write_report",
]

if TYPE_CHECKING:  # what type checkers and IDEs see
    from aiblox.sweep.compare import RunComparison, compare_runs
    from aiblox.sweep.frames import (
        axis_frame,
        leaderboard,
        manifest_frame,
        pareto_frame,
        significance_frame,
        stage_counts,
        swept_axes,
        tune_vs_report,
    )
    from aiblox.sweep.report import SweepReport, load_sweep_report, write_report
    from aiblox.sweep.results import PointResult, SweepResult, choose_best
    from aiblox.sweep.runner import run_sweep
    from aiblox.sweep.runs import list_points, list_sweeps
    from aiblox.sweep.spec import SweepSpec, SweepSpecError, load_spec
    from aiblox.sweep.verify import VerifyReport, verify_point


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)
