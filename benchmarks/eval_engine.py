"""`aiblox eval` through the engine against the direct route it replaced, on SciFact test.

``evaluate_retrieval`` is a one-point run of the engine (issue 26): the signals stage, fusion,
metrics, each keyed and written to a temporary stage cache. Before, it retrieved with
``HybridRetriever.signals`` then ``fuse``, scored the run with ``evaluate_run`` and hashed it
(``run_hash``): the direct route, kept here as the baseline. Both run in one process, on one
store (precomputed MiniLM vectors, so no model is loaded), mode by mode, best of ``--repeat``;
the runs must be equal (one run hash: the same documents, order and scores) and so the metrics,
per query.

    python benchmarks/eval_engine.py [--markdown] [--repeat 3]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import arg_parser, environment_line, err, positive_int, print_table  # noqa: E402

from aiblox.contracts import RetrievalPrefs  # noqa: E402
from aiblox.data import load_dataset  # noqa: E402
from aiblox.engine.evaluate import evaluate_retrieval, run_hash  # noqa: E402
from aiblox.engine.workspace import open_workspace  # noqa: E402
from aiblox.metrics import DEFAULT_METRICS, evaluate_run, evaluation_prefs  # noqa: E402


def direct(ws, ds, split, prefs, metrics):
    """The route before the engine: signals, fuse, evaluate_run (1,000 queries a batch)."""
    queries = ds.split_queries(split)
    run = {}
    for start in range(0, len(queries), 1000):
        batch = queries[start:start + 1000]
        group = [prefs.model_copy(update={"query_text": t, "query_id": q}) for q, t in batch]
        hits = ws.retriever.fuse(group, ws.retriever.signals(group))
        for (q, _), hs in zip(batch, hits, strict=True):
            run[q] = [(h.doc_id, h.score) for h in hs]
    means, per_query = evaluate_run(ds.qrels[split], run, metrics)
    return means, per_query, run_hash(run)  # the old evaluate_retrieval hashed its run too


def best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--dataset", default="scifact")
    args = ap.parse_args()
    metrics = list(DEFAULT_METRICS)
    ds = load_dataset(args.dataset, splits=["test"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            open_workspace(ds, str(Path(tmp) / "s.duckdb"), "minilm", progress=False) as ws:
        for mode in ("bm25", "dense", "hybrid"):
            prefs = evaluation_prefs(RetrievalPrefs(query_text="", mode=mode), metrics)
            direct(ws, ds, "test", prefs, metrics)  # warm: indexes loaded, query vectors cached
            t_direct, m_direct = best(lambda p=prefs: direct(ws, ds, "test", p, metrics),
                                      args.repeat)
            t_engine, result = best(lambda p=prefs: evaluate_retrieval(
                ws, ds, "test", p, metrics, progress=False), args.repeat)
            means, per_query, hashed = m_direct
            same_run = result.hashes["run"] == hashed
            equal = same_run and all(result.metrics[k] == means[k]
                                     and result.per_query[k] == per_query[k] for k in metrics)
            rows.append([mode, str(len(ds.split_queries("test"))), f"{t_direct:.3f}",
                         f"{t_engine:.3f}", f"{t_engine / t_direct:.2f}",
                         "equal (run hash, per query)" if equal else
                         "DIFFER" + ("" if same_run else " (run hash)")])
            err.print(f"{mode}: direct {t_direct:.3f} s, engine {t_engine:.3f} s")
    print_table(f"evaluate_retrieval through the engine vs the direct route "
                f"({args.dataset} test, best of {args.repeat})",
                ["mode", "queries", "direct route s", "engine s", "engine / direct",
                 "runs and metrics"], rows, args.markdown,
                right=("queries", "direct route s", "engine s", "engine / direct"),
                notes=[f"{environment_line()}; load average at the end "
                       f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1 / 5 / 15 min)"])


if __name__ == "__main__":
    main()
