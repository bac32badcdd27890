"""Experiment tables: several retrieval systems (modes, pipelines, saved runs) on one labelled
split, tested against a baseline or pairwise, rendered and logged to MLflow (``aiblox eval``;
from Python, :func:`run_experiment`).

==============  ==============================================================================
module          what it is for
==============  ==============================================================================
``table``       :class:`System`, :class:`Experiment`, :func:`compare_systems`: the table, its
                paired tests and corrections, its renderings and TREC run files
``systems``     :func:`run_experiment`: the one call, systems given as modes, pipelines, run
                files, run mappings or frames, scored and compared
``tracking``    :func:`log_experiment`: one MLflow run per system, logged as a sweep point
==============  ==============================================================================
"""

from aiblox.experiment.systems import run_experiment
from aiblox.experiment.table import (
    CORRECTIONS,
    EVAL_EXPERIMENT,
    TESTS,
    Experiment,
    Significance,
    System,
    compare_systems,
    system_from_result,
    system_from_run,
    write_trec_run,
)
from aiblox.experiment.tracking import log_experiment, result_manifest

__all__ = [
    "CORRECTIONS",
    "EVAL_EXPERIMENT",
    "Experiment",
    "Significance",
    "System",
    "TESTS",
    "compare_systems",
    "log_experiment",
    "result_manifest",
    "run_experiment",
    "system_from_result",
    "system_from_run",
    "write_trec_run",
]
