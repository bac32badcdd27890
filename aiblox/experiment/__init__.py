"""Experiment tables: several retrieval systems (modes, TREC run files) on one labelled split,
tested against a baseline, rendered and logged to MLflow (``aiblox eval``).

==============  ==============================================================================
module          what it is for
==============  ==============================================================================
``table``       :class:`System`, :class:`Experiment`, :func:`run_experiment`: the table, its
                paired tests and corrections, its renderings and TREC run files
``tracking``    :func:`log_experiment`: one MLflow run per system, logged as a sweep point
==============  ==============================================================================
"""

from aiblox.experiment.table import (
    CORRECTIONS,
    EVAL_EXPERIMENT,
    TESTS,
    Experiment,
    Significance,
    System,
    run_experiment,
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
    "log_experiment",
    "result_manifest",
    "run_experiment",
    "system_from_result",
    "system_from_run",
    "write_trec_run",
]
