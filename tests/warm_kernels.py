"""aiblox's numba kernels compiled once, before the suite's tests run (``tests/conftest.py``).

A clean clone has no compiled kernel (numba keys its cache by the source file's path and time).
Left to the tests, both workers and the processes they start (sweep commands, Ray workers, the
CLI) compile the same kernels at the same time, each for itself: about 25 s of CPU a process
(2026-11-28). Here one process compiles them while the workers start and collect, through the
calls the tests make (the same argument types, so the same compiled signatures), into the
cache every later process loads from (``NUMBA_CACHE_DIR``, or
:func:`aiblox.compiled.setup_numba_cache`'s folder); the workers wait for it before their first
test. A kernel missed here is compiled by the test that needs it, as before: this changes when
compiling happens, never what a test checks.

ranx's kernels are not compiled here: on a machine that has not run ranx, compiling them takes
about two minutes of one core, longer than the tests that need them take compiling them on
both (they are cached outside the clone, keyed by the installed package, so a machine pays
once).

    python -m tests.warm_kernels
"""

from __future__ import annotations

import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PIPELINES = """
name = "warm_pipelines"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10"]
pipeline = ["bm25 >> rm3 >> bm25", "bm25 >> bo1 >> bm25",
            "fuse(bm25, dense, blend='linear', normalize='sigmoid')"]
"""


def warm() -> None:
    """BM25 (plain and with expanded queries), dense search, every fusion blend and
    normalisation, the metrics: the sample scored per scoring, its fusion sweep and a sweep of
    feedback pipelines, in a folder thrown away after."""
    from aiblox import RetrievalPrefs, evaluate_retrieval, load_dataset, open_workspace
    from aiblox.sweep import load_spec, run_sweep

    ds = load_dataset(REPO / "datasets" / "sample")
    with tempfile.TemporaryDirectory() as tmp:
        with open_workspace(ds, db=str(Path(tmp) / "warm.duckdb"), embedder="hashing",
                            progress=False) as ws:
            for scoring in ({"blend": "rrf"}, {"blend": "linear", "normalize": "minmax"},
                            {"blend": "linear", "normalize": "zscore"}):
                evaluate_retrieval(ws.retriever, ds, "test",
                                   RetrievalPrefs(query_text="", scoring=scoring),
                                   progress=False)
        pipelines = Path(tmp) / "pipelines.toml"
        pipelines.write_text(PIPELINES, encoding="utf-8")
        for spec in (REPO / "evals" / "sweeps" / "sample_fusion.toml", pipelines):
            run_sweep(load_spec(spec), cache_dir=Path(tmp) / "stages",
                      db=str(Path(tmp) / "sweep.duckdb"), dataset=ds, progress=False)


if __name__ == "__main__":
    warm()
