"""aiblox: a notebook-first research and evaluation harness for retrieval-augmented generation.

The front door: what a notebook or a script needs, importable as ``from aiblox import ...``::

    ds = load_dataset("scifact", splits=["test"])
    with open_workspace(ds) as ws:                      # the dataset's store, synced to it
        result = evaluate_retrieval(ws.retriever, ds, "test", RetrievalPrefs(query_text=""))
    sweep = run_sweep(load_spec("evals/sweeps/sample_fusion.toml"))
    table = run_experiment(["bm25", "hybrid", Stage("bm25") >> Stage("rm3") >> Stage("bm25")],
                           ds, "test", baseline=0)   # an experiment table, as `aiblox eval`

The names are imported on first use, so ``import aiblox`` (and the ``aiblox`` command) stays
fast. Everything else lives in the subpackages; ``docs/architecture.md`` maps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiblox.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Dataset": "aiblox.data",
    "RequestContext": "aiblox.contracts",
    "RetrievalPrefs": "aiblox.contracts",
    "Stage": "aiblox.engine",
    "Workspace": "aiblox.engine.workspace",
    "answer_question": "aiblox.assembly",
    "compare_runs": "aiblox.sweep",
    "evaluate_retrieval": "aiblox.engine.evaluate",
    "evaluate_run": "aiblox.metrics",
    "get_llm": "aiblox.assembly",
    "load_dataset": "aiblox.data",
    "load_policy": "aiblox.assembly",
    "load_spec": "aiblox.sweep",
    "open_workspace": "aiblox.engine.workspace",
    "run_experiment": "aiblox.experiment",
    "run_sweep": "aiblox.sweep",
}
"""Front-door name -> the module that defines (or exports) it."""

__all__ = [
    "Dataset",
    "RequestContext",
    "RetrievalPrefs",
    "Stage",
    "Workspace",
    "__version__",
    "answer_question",
    "compare_runs",
    "evaluate_retrieval",
    "evaluate_run",
    "get_llm",
    "load_dataset",
    "load_policy",
    "load_spec",
    "open_workspace",
    "run_experiment",
    "run_sweep",
]

if TYPE_CHECKING:  # what type checkers and IDEs see
    from aiblox.assembly import answer_question, get_llm, load_policy
    from aiblox.contracts import RequestContext, RetrievalPrefs
    from aiblox.data import Dataset, load_dataset
    from aiblox.engine import Stage
    from aiblox.engine.evaluate import evaluate_retrieval
    from aiblox.engine.workspace import Workspace, open_workspace
    from aiblox.experiment import run_experiment
    from aiblox.metrics import evaluate_run
    from aiblox.sweep import compare_runs, load_spec, run_sweep


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)
