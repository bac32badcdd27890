"""What the notebooks compute: cached signals re-fused per setting, chunk views, policy
comparisons, MLflow runs and one question traced through the whole pipeline.

The marimo notebooks in ``notebooks/`` are thin over these functions, and these are thin views
over the package (no pipeline logic lives only in a notebook, and no number is computed here
another way than the CLI computes it), so what a researcher sees there is what a test can assert
on here:

============  ==================================================================================
module        what it is for
============  ==================================================================================
``workspace`` :func:`open_workspace`: a dataset's workspace
              (:func:`aiblox.eval.workspace.open_workspace`) with one split's signals computed
              once at the deepest depth offered; the dataset, embedder and policy pickers
``fusion``    :func:`score_point` fuses those signals under one setting and scores the run
              (:func:`aiblox.eval.metrics.evaluate_run`); :func:`weight_curve`,
              :func:`moved_queries`
``chunking``  :func:`chunk_table` (how a chunker cut one document), :func:`compare_chunkers`
              (:func:`aiblox.eval.chunk_eval.evaluate_chunks` per chunker)
``policies``  :func:`retrieve_bundles`, :func:`answer_all` and :func:`score_answers` (the
              sweep's answer metrics) answer a query sample under a selection policy;
              :func:`compare_per_query` (the paired test of ``aiblox compare``) and
              :func:`evidence_changes`
``runs``      :func:`mlflow_runs` lists the runs of the MLflow store the CLI's sweeps log to,
              :func:`log_fusion_point` logs a notebook setting there, :func:`compare_mlflow_runs`
              compares two of them as ``aiblox compare`` does
``trace``     :func:`inspect_question` runs one question through retrieval, late chunking,
              selection, prompt building, the reader and validation; :func:`evidence_pack`,
              :func:`diff_packs`
============  ==================================================================================
"""

from aiblox.eval.explore.chunking import chunk_table, compare_chunkers
from aiblox.eval.explore.fusion import (
    FusionPoint,
    baseline_prefs,
    fitting_metrics,
    fusion_prefs,
    moved_queries,
    score_point,
    weight_curve,
)
from aiblox.eval.explore.policies import (
    answer_all,
    compare_per_query,
    evidence_changes,
    retrieve_bundles,
    score_answers,
)
from aiblox.eval.explore.runs import compare_mlflow_runs, log_fusion_point, mlflow_runs
from aiblox.eval.explore.trace import (
    PACK_RETRIEVED_AT,
    QueryTrace,
    diff_packs,
    evidence_pack,
    inspect_question,
)
from aiblox.eval.explore.workspace import (
    DEFAULT_DATASET,
    DEFAULT_EMBEDDER,
    NotebookWorkspace,
    available_datasets,
    available_embedders,
    available_policies,
    default_db,
    open_workspace,
)
from aiblox.eval.sweep.tracking import DEFAULT_TRACKING_URI

__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_EMBEDDER",
    "DEFAULT_TRACKING_URI",
    "FusionPoint",
    "NotebookWorkspace",
    "PACK_RETRIEVED_AT",
    "QueryTrace",
    "answer_all",
    "available_datasets",
    "available_embedders",
    "available_policies",
    "baseline_prefs",
    "chunk_table",
    "compare_chunkers",
    "compare_mlflow_runs",
    "compare_per_query",
    "default_db",
    "diff_packs",
    "evidence_changes",
    "evidence_pack",
    "fitting_metrics",
    "fusion_prefs",
    "inspect_question",
    "log_fusion_point",
    "mlflow_runs",
    "moved_queries",
    "open_workspace",
    "retrieve_bundles",
    "score_answers",
    "score_point",
    "weight_curve",
]
