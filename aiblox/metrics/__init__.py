"""Every number an evaluation reports, computed in one place: ranking metrics (ranx), chunk
metrics, answer metrics, significance tests and confidence intervals.

The one-shot eval (:mod:`aiblox.engine.evaluate`, :mod:`aiblox.engine.chunk_eval`), the sweep,
``aiblox compare``, the report and the notebooks all go through these modules:

========================  ====================================================================
module                    holds
========================  ====================================================================
``names``                 which metric names ranx computes, checked before any work
``depth``                 how deep a run must be for its metrics: the evaluation depth, and
                          retrieval settings refused when they cut a run above a cutoff
``ranking``               :func:`evaluate_run` and :class:`QrelsScorer` (ranx, one route)
``packed``                metric values as named arrays (a sweep's metrics stage output)
``kernels``               the compiled metrics (ranx's numbers) and ranx run builder (numba)
``chunks``                chunk metrics of returned evidence (answer recall@k, tokens,
                          max-passage projection)
``squad``                 SQuAD exact match and token F1
``answers``               answer metrics of answered queries (status rates, EM, F1, evidence
                          recall, citation precision)
``significance``          paired tests, Holm's correction, bootstrap intervals
``directions``            which way is better per metric (costs: lower), win/loss under it
``marks``                 how every table marks a difference from the baseline (▲/▼ beside
                          the signed delta, the adjusted p-value)
========================  ====================================================================
"""

from aiblox.compiled import setup_numba_cache
from aiblox.metrics.answers import (
    ANSWER_METRICS,
    STATUSES,
    answer_metrics,
    answer_status,
    contains_answer,
    covers_span,
    query_answer_metrics,
)
from aiblox.metrics.chunks import CHUNK_SCALARS, PROJECTION_PREFIX, chunk_metrics
from aiblox.metrics.depth import (
    DEFAULT_DEPTH,
    WHOLE_RUN_DEPTH,
    DepthError,
    check_depth,
    evaluation_depth,
    evaluation_prefs,
    metric_cutoff,
)
from aiblox.metrics.directions import (
    COST_METRICS,
    Direction,
    directed_counts,
    lower_is_better,
    metric_direction,
)
from aiblox.metrics.names import RANX_METRICS, canonical_metrics, validate_metrics
from aiblox.metrics.packed import pack_metrics, packed_means, unpack_metrics
from aiblox.metrics.ranking import (
    DEFAULT_METRICS,
    QrelsScorer,
    evaluate_run,
    ranked_run,
    ranks_read,
    segment_heads,
)
from aiblox.metrics.significance import (
    CORRECTIONS,
    STAT_TESTS,
    Comparison,
    Correction,
    PairedTest,
    StatTest,
    adjust,
    bootstrap_ci,
    compare_pairwise,
    compare_to_baseline,
    holm,
    paired_p_value,
    paired_test,
)
from aiblox.metrics.squad import exact_match, normalize_answer, token_f1

__all__ = [
    "ANSWER_METRICS",
    "CHUNK_SCALARS",
    "CORRECTIONS",
    "COST_METRICS",
    "Comparison",
    "Correction",
    "DEFAULT_DEPTH",
    "DEFAULT_METRICS",
    "DepthError",
    "Direction",
    "PROJECTION_PREFIX",
    "PairedTest",
    "QrelsScorer",
    "RANX_METRICS",
    "STATUSES",
    "STAT_TESTS",
    "StatTest",
    "WHOLE_RUN_DEPTH",
    "adjust",
    "answer_metrics",
    "answer_status",
    "bootstrap_ci",
    "canonical_metrics",
    "check_depth",
    "chunk_metrics",
    "compare_pairwise",
    "compare_to_baseline",
    "contains_answer",
    "covers_span",
    "directed_counts",
    "evaluate_run",
    "evaluation_depth",
    "evaluation_prefs",
    "exact_match",
    "holm",
    "lower_is_better",
    "metric_cutoff",
    "metric_direction",
    "normalize_answer",
    "pack_metrics",
    "packed_means",
    "paired_p_value",
    "paired_test",
    "query_answer_metrics",
    "ranked_run",
    "ranks_read",
    "segment_heads",
    "setup_numba_cache",
    "token_f1",
    "unpack_metrics",
    "validate_metrics",
]
