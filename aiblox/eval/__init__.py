"""Evaluation: BEIR datasets, ranx metrics and the retrieval eval runner."""

from aiblox.eval.chunk_eval import (
    CHUNK_EVAL_VERSION,
    ChunkEvalResult,
    evaluate_chunks,
    gold_answers,
)
from aiblox.eval.datasets import (
    Dataset,
    DatasetError,
    GoldAnswer,
    available_splits,
    find_dataset,
    load_dataset,
)
from aiblox.eval.metrics import DEFAULT_METRICS, evaluate_run, ranked_run, setup_numba_cache
from aiblox.eval.runner import EvalResult, config_hash, evaluate_retrieval, run_hash
from aiblox.eval.workspace import (
    Workspace,
    dataset_binding,
    default_store_path,
    find_precomputed_vectors,
    open_dataset_store,
    open_workspace,
    prepare_store,
)

__all__ = [
    "CHUNK_EVAL_VERSION",
    "ChunkEvalResult",
    "DEFAULT_METRICS",
    "Dataset",
    "DatasetError",
    "EvalResult",
    "GoldAnswer",
    "Workspace",
    "available_splits",
    "config_hash",
    "dataset_binding",
    "default_store_path",
    "evaluate_chunks",
    "evaluate_retrieval",
    "evaluate_run",
    "find_dataset",
    "find_precomputed_vectors",
    "gold_answers",
    "load_dataset",
    "open_dataset_store",
    "open_workspace",
    "prepare_store",
    "ranked_run",
    "run_hash",
    "setup_numba_cache",
]
