"""What the stages that run a model cost per query, on the CPU and on a GPU, on each shared
collection: the cost columns of the stage table in ``evals/sweeps/README.md`` (issue 27).

The other stages (``bm25``, ``rm3``, ``bo1``, ``rocchio``, ``dense``'s search, fusion) are CPU
code: a GPU machine runs them as its CPU does. Three stages run a model, and this prices it:

- ``embed query``: all-MiniLM-L6-v2 (aiblox's ``minilm`` embedder, the ``dense`` and
  ``dense_rescore`` stages' model) embedding the queries, one batch, as a stage does when a
  query's vector is not in the embedding cache;
- ``cross_encoder``: the stage's own scorer (:class:`aiblox.embedding.cross_encoder.
  CrossEncoderScorer`, its default batch of 32 and 256 word pieces, no cache: a first run)
  scoring each query against its BM25 top ``--top-n`` documents, the pairs the stage builds
  (the query text as the split gives it, the document's title and text). No cross-encoder
  ships offline: the model is one built from MiniLM's weights with a fresh one-output head
  (seed 0), the architecture and size of the one ``[finetune_reranker]`` trains, so the work
  per pair is that model's.

Two steps, because the GPU machine this was measured on has no DuckDB and no copy of
``../shared``: ``pairs`` runs here (the engine's BM25 over each collection's default store)
and writes the queries and pairs to one file; ``measure`` reads that file on any device:

    python benchmarks/stage_costs.py pairs --out /tmp/stage_pairs.json.xz
    python benchmarks/stage_costs.py measure --pairs /tmp/stage_pairs.json.xz --device cpu \\
        --queries 50 --markdown                    # 2 CPUs: the first 50 queries of each
    python benchmarks/stage_costs.py measure --pairs ... --device cuda --out $OUT/costs.json

Each cost is the median of ``--repeat`` timed runs (the model loaded and warmed up first, not
counted) divided by the queries; the CPU time of the process beside it. ``bash
benchmarks/gpu_pack.sh stages`` packs the file and this script for a lent GPU machine.
"""

from __future__ import annotations

import json
import lzma
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    arg_parser,
    cpu_name,
    environment_line,
    err,
    minilm_cross_encoder,
    nonnegative_int,
    positive_int,
    print_table,
)

DATASETS = ["scifact", "cranfield", "cisi", "medline", "adi", "vaswani"]


# -- step 1: the pairs (here, with the engine) ---------------------------------------------------
def collection_pairs(name: str, top_n: int) -> dict[str, Any]:
    """``name``'s test queries and, for each, its BM25 top ``top_n`` as the ``cross_encoder``
    stage builds its pairs (the document's ``embedding_text``)."""
    from aiblox.contracts.retrieval import FtsConfig
    from aiblox.data import load_dataset
    from aiblox.engine import Queries, StageContext
    from aiblox.engine.retrieval import retrieve
    from aiblox.engine.workspace import open_workspace

    ds = load_dataset(name)
    ws = open_workspace(ds, None, "minilm", with_vectors=False, progress=False)
    try:
        topics = Queries.of(ds.split_queries("test"))
        run = retrieve("bm25", FtsConfig(top_k=top_n), topics, StageContext(ws))
        items = ws.store.get_items(sorted({d for docs in run.docs for d in docs}))
        text_of = topics.text_of()
        return {"name": name, "docs": ws.store.count_items(),
                "queries": [{"qid": q, "text": text_of[q],
                             "docs": [items[d].embedding_text for d in docs]}
                            for q, docs in zip(run.qids, run.docs, strict=True)]}
    finally:
        ws.close()


def write_pairs(out: Path, datasets: list[str], top_n: int) -> None:
    data = {"top_n": top_n, "collections": []}
    for name in datasets:
        err.print(f"[dim]{name}: BM25 top {top_n} ...[/dim]")
        data["collections"].append(collection_pairs(name, top_n))
    out.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(out, "wt", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
    n = sum(len(c["queries"]) for c in data["collections"])
    err.print(f"{out}: {n:,} queries of {len(datasets)} collections, {out.stat().st_size:,} bytes")


# -- step 2: the costs (any device) --------------------------------------------------------------
def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """The median wall seconds and CPU seconds of ``repeat`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def reranker_folder(work: Path) -> Path:
    """A cross-encoder folder built from MiniLM's weights with a fresh one-output head (seed 0)."""
    folder = work / "ce-minilm"
    minilm_cross_encoder("cpu").save(str(folder))
    return folder


def device_label(device: str) -> str:
    """``cuda:0 (NVIDIA H200)`` or ``cpu (2 threads, <model name>)``."""
    from aiblox.embedding.device import describe_device

    return describe_device(device) if device.startswith("cuda") else cpu_name()


def measure(pairs_file: Path, device: str, queries: int, repeat: int) -> dict[str, Any]:
    from aiblox.embedding import get_embedder
    from aiblox.embedding.cross_encoder import CrossEncoderScorer
    from aiblox.embedding.device import resolve_device

    with lzma.open(pairs_file, "rt", encoding="utf-8") as f:
        data = json.load(f)
    device = resolve_device(device, "--device")
    embedder = get_embedder("minilm", device=device)
    with tempfile.TemporaryDirectory() as tmp:
        scorer = CrossEncoderScorer(reranker_folder(Path(tmp)), 256, 32, device)
        rows = []
        for c in data["collections"]:
            qs = c["queries"][:queries] if queries else c["queries"]
            texts = [q["text"] for q in qs]
            pairs = [(q["text"], d) for q in qs for d in q["docs"]]
            embedder.embed(texts[:1])  # both models loaded and warm before any timing
            scorer.predict(pairs[:32])
            embed_s, embed_cpu = timed(lambda texts=texts: embedder.embed(texts), repeat)
            ce_s, ce_cpu = timed(lambda pairs=pairs: scorer.predict(pairs), repeat)
            n = len(qs)
            rows.append({"name": c["name"], "queries": n, "pairs": len(pairs),
                         "embed_s_per_query": embed_s / n, "embed_cpu_s_per_query": embed_cpu / n,
                         "ce_s_per_query": ce_s / n, "ce_cpu_s_per_query": ce_cpu / n,
                         "ce_pairs_per_s": len(pairs) / ce_s})
            err.print(f"[dim]{c['name']}: {n} queries, embed {embed_s / n:.5f} s/query, "
                      f"cross_encoder {ce_s / n:.4f} s/query ({len(pairs) / ce_s:,.0f} "
                      f"pairs/s)[/dim]")
    return {"device": device_label(device), "top_n": data["top_n"], "repeat": repeat,
            "queries_per_collection": queries or "all", "environment": environment_line(),
            "collections": rows}


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("pairs", help="write each collection's queries and BM25 top-n pairs")
    p.add_argument("--out", type=Path, required=True, help="the file (xz-compressed JSON)")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--top-n", type=positive_int, default=20)
    m = sub.add_parser("measure", help="time the model stages on --device")
    m.add_argument("--pairs", type=Path, required=True, help="the file `pairs` wrote")
    m.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    m.add_argument("--queries", type=nonnegative_int, default=0,
                   help="the first N queries of each collection (0: all)")
    m.add_argument("--repeat", type=positive_int, default=3)
    m.add_argument("--out", type=Path, help="write every number to this JSON file")
    m.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    if args.step == "pairs":
        write_pairs(args.out, args.datasets.split(","), args.top_n)
        return 0
    if not args.pairs.is_file():
        ap.error(f"--pairs {args.pairs}: no such file (write it with the `pairs` step)")
    res = measure(args.pairs, args.device, args.queries, args.repeat)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    table = [[r["name"], f"{r['queries']:,}", f"{r['pairs']:,}",
              f"{r['embed_s_per_query']:.5f}", f"{r['ce_s_per_query']:.4f}",
              f"{r['ce_cpu_s_per_query']:.4f}", f"{r['ce_pairs_per_s']:,.0f}"]
             for r in res["collections"]]
    columns = ["collection", "queries", "pairs", "embed query s/query", "cross_encoder s/query",
               "its CPU s/query", "pairs/s"]
    print_table(f"Model stages' cost per query on {res['device']} (cross_encoder: BM25's top "
                f"{res['top_n']}; median of {args.repeat})", columns, table,
                markdown=args.markdown, right=columns[1:], notes=[res["environment"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
