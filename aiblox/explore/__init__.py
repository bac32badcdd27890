"""What the notebooks compute: cached signals re-fused per setting, chunk views, policy
comparisons, MLflow runs and one question traced through the whole pipeline.

The marimo notebooks in ``notebooks/`` are thin over these functions, and these are thin views
over the package (no pipeline logic lives only in a notebook, and no number is computed here
another way than the CLI computes it), so what a researcher sees there is what a test can assert
on here:

============  ==================================================================================
module        what it is for
============  ==================================================================================
``notebook``  :func:`open_notebook_workspace`: a dataset's workspace
              (:func:`aiblox.engine.workspace.open_workspace`) with one split's signals computed
              once at the deepest depth offered; the dataset, split, embedder and policy
              pickers
``fusion``    :func:`score_point` fuses those signals under one setting and scores the run
              (:func:`aiblox.metrics.evaluate_run`); :func:`weight_curve`,
              :func:`moved_queries`
``chunking``  :func:`chunk_table` (how a chunker cut one document), :func:`compare_chunkers`
              (:func:`aiblox.engine.chunk_eval.evaluate_chunks` per chunker)
``policies``  :func:`retrieve_bundles`, :func:`answer_all` and :func:`score_answers` (the
              sweep's answer metrics) answer a query sample under a selection policy;
              :func:`compare_per_query` (the paired test of ``aiblox compare``) and
              :func:`evidence_changes_table`
``runs``      :func:`mlflow_runs` lists the runs of the MLflow store the CLI's sweeps log to
              (:func:`notebook_tracking_uri`: ``MLFLOW_TRACKING_URI``, else the CLI's default),
              :func:`point_run_choices` the points among them (not a sweep's parent run),
              :func:`log_fusion_point` logs a notebook setting there, and
              :func:`compare_mlflow_runs` compares two of them as ``aiblox compare`` does
``trace``     :func:`inspect_question` runs one question through retrieval, late chunking,
              selection, prompt building, the reader and validation; :func:`evidence_pack`,
              :func:`diff_packs`
============  ==================================================================================
"""

from aiblox.engine.tracking import DEFAULT_TRACKING_URI
from aiblox.explore.chunking import chunk_table, compare_chunkers
from aiblox.explore.fusion import (
    FusionPoint,
    baseline_prefs,
    fitting_metrics,
    fusion_prefs,
    moved_queries,
    score_point,
    weight_curve,
)
from aiblox.explore.notebook import (
    DEFAULT_DATASET,
    DEFAULT_EMBEDDER,
    NotebookWorkspace,
    available_datasets,
    available_embedders,
    available_policies,
    default_db,
    open_notebook_workspace,
    split_choices,
)
from aiblox.explore.policies import (
    answer_all,
    compare_per_query,
    evidence_changes_table,
    retrieve_bundles,
    score_answers,
)
from aiblox.explore.runs import (
    compare_mlflow_runs,
    log_fusion_point,
    mlflow_runs,
    notebook_tracking_uri,
    point_run_choices,
)
from aiblox.explore.trace import (
    PACK_RETRIEVED_AT,
    QueryTrace,
    diff_packs,
    evidence_pack,
    inspect_question,
)

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
    "evidence_changes_table",
    "evidence_pack",
    "fitting_metrics",
    "fusion_prefs",
    "inspect_question",
    "log_fusion_point",
    "mlflow_runs",
    "moved_queries",
    "notebook_tracking_uri",
    "open_notebook_workspace",
    "point_run_choices",
    "retrieve_bundles",
    "score_answers",
    "score_point",
    "split_choices",
    "weight_curve",
]
