"""Evaluation: labelled datasets, a dataset's workspace, the one-shot retrieval and chunk
evaluations, and the metrics every evaluation reports.

=====================  =========================================================================
module / package       what it is for
=====================  =========================================================================
``datasets``           BEIR-layout datasets (corpus, queries, qrels, gold answers), checked
``workspace``          :func:`open_workspace`: a dataset's store, synced, with embedder and
                       retrievers (every command, the sweep, verify and the notebooks)
``runner``             :func:`evaluate_retrieval`: one configuration scored on one split
``chunk_eval``         :func:`evaluate_chunks`: which chunking serves evidence best
``experiment``         experiment tables: modes and TREC run files, tested against a baseline
``trec``               TREC run files read and written as trec_eval reads them
``metrics``            ranking, chunk and answer metrics, significance and intervals (one place)
``sweep``              incremental sweeps over grids of configurations (:mod:`aiblox.sweep`)
``explore``            what the notebooks compute (thin views over the above)
=====================  =========================================================================
"""

from aiblox.data import (
    Dataset,
    DatasetError,
    GoldAnswer,
    available_splits,
    find_dataset,
    load_dataset,
)
from aiblox.engine.chunk_eval import ChunkEvalResult, evaluate_chunks
from aiblox.engine.evaluate import EvalResult, config_hash, evaluate_retrieval, run_hash
from aiblox.engine.workspace import Workspace, default_store_path, open_workspace, prepare_store
from aiblox.metrics import DEFAULT_METRICS, evaluate_run

__all__ = [
    "ChunkEvalResult",
    "DEFAULT_METRICS",
    "Dataset",
    "DatasetError",
    "EvalResult",
    "GoldAnswer",
    "Workspace",
    "available_splits",
    "config_hash",
    "default_store_path",
    "evaluate_chunks",
    "evaluate_retrieval",
    "evaluate_run",
    "find_dataset",
    "load_dataset",
    "open_workspace",
    "prepare_store",
    "run_hash",
]
