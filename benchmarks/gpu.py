"""The GPU against the CPU, each job on both: documents/s embedded, fine-tuning time, rerank
pairs/s, every number beside the device (and card) that gave it.

1. embedding: aiblox's ``minilm`` embedder (all-MiniLM-L6-v2, batch 64, 256 word pieces) behind
   its embedding cache, as ``aiblox ingest`` embeds, over the documents of ``benchmarks/scale.py``'s
   synthetic collection (seeded choices of real sentences from the shared collections; the same
   folder, reused when scale.py wrote it). The GPU embeds all ``--docs`` of them, then runs a real
   dense evaluation at that size: the queries embedded, aiblox's exact kNN (on the GPU through
   faiss when faiss-gpu is installed) over every document vector, nDCG@10 and recall@100 by
   aiblox's metrics (ranx's numbers). The CPU embeds the first ``--cpu-docs`` (the same
   texts: the largest difference between the two devices' vectors is shown) and its time for
   ``--docs`` is extrapolated, labelled so;
2. fine-tuning: the recipe of a ``[finetune]`` spec (``--spec``, default the scifact spec) on its
   training pairs (the sweep's own, BM25 hard negatives from a throwaway store), through aiblox's
   ``fine_tune``: every step on the GPU; ``--cpu-steps`` steps on the CPU, the whole recipe
   extrapolated from their time per step (labelled so);
3. reranking: a sentence-transformers ``CrossEncoder`` built from MiniLM's weights (a fresh
   one-label head: no cross-encoder ships offline, and the head does not change the work) scoring
   (query, document) pairs of the collection: pairs/s on each device.

Without a GPU (torch sees none) the table says so, and only the CPU side runs, on small sizes
(``--docs`` capped to ``--cpu-docs``), so the script is tested here; on a GPU machine it is one
command (``--out`` keeps every number as JSON, written after each phase):

    python benchmarks/gpu.py --docs 1000000 --out $OUT/gpu.json   # a GPU machine
    python benchmarks/gpu.py [--cpu-docs 1000] [--markdown]        # no GPU: the CPU side only

The jobs run in the order 2, 3, 1 (the long one last), each row printed to stderr as it is
measured. The GPU embeds in parts of ``--embed-part`` documents, a line and ``--out`` written
after each, so a run cut short keeps the rate it measured. At 1M documents most of the time is
embedding: on an H100 (2026-11-27) the fine-tuning and reranking jobs took 76 s and the
embedding ran at 2,239 documents/s, so 1M documents take about 7.5 min on their own. Where one
command may run 10 minutes, run the jobs as two: ``--skip embed``, then ``--skip
finetune,rerank`` (the collection is written once; ``--workdir`` keeps it). ``--gpu cpu`` runs
the GPU side's code on the CPU (labelled a dry run): the script checked end to end without a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    arg_parser,
    cpu_name,
    environment_line,
    err,
    minilm_cross_encoder,
    positive_int,
    print_table,
)

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "evals" / "sweeps" / "scifact_finetune.toml"


# -- what runs where -----------------------------------------------------------------------------
def gpu_device(wanted: str) -> tuple[str | None, str]:
    """``(device, label)``: the GPU asked for when torch sees it, else None and why not."""
    import torch

    from aiblox.embedding.device import DeviceError, describe_device, gpu_count, resolve_device

    if wanted == "cpu":  # a dry run of the GPU side (its code paths), labelled so
        return "cpu", "cpu as the GPU (--gpu cpu: a dry run)"
    if not gpu_count():
        return None, (f"torch sees no GPU: torch.cuda.is_available() is False (torch "
                      f"{torch.__version__})")
    try:
        device = resolve_device(wanted, "--gpu")
    except DeviceError as exc:
        return None, str(exc)
    if not device.startswith("cuda"):
        return None, f"--gpu {wanted}: not a CUDA device"
    return device, describe_device(device)


class Results:
    """Every number, written to ``--out`` after each phase (a run cut short keeps the rest)."""

    def __init__(self, out: Path | None, header: dict[str, Any]) -> None:
        self.out, self.data = out, {**header, "jobs": {}}

    def put(self, job: str, side: str, values: dict[str, Any]) -> None:
        self.data["jobs"].setdefault(job, {})[side] = values
        if self.out is not None:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self.out.write_text(json.dumps(self.data, indent=2, sort_keys=True) + "\n",
                                encoding="utf-8")


# -- the collection ------------------------------------------------------------------------------
def collection(workdir: Path, n_docs: int, n_queries: int, seed: int) -> Path:
    """scale.py's synthetic collection of ``n_docs`` (its folder layout and arguments, so a
    collection scale.py wrote is reused, and this one is the one scale.py measures)."""
    import scale

    folder = workdir / f"n{n_docs}" / "datasets" / f"synthetic{n_docs}"
    if not (folder / "qrels" / "test.tsv").exists():
        shutil.rmtree(folder, ignore_errors=True)
        err.print(f"writing the synthetic collection, {n_docs:,} documents ...")
        t0 = time.perf_counter()
        scale.write_collection(folder, n_docs, n_queries, 384, seed)
        err.print(f"  {time.perf_counter() - t0:.0f} s")
    return folder


def read_corpus(folder: Path) -> tuple[list[str], list[str]]:
    """Document ids (ascending, as written) and the texts aiblox embeds (title + text)."""
    from aiblox.contracts.items import embedding_text

    ids, texts = [], []
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            ids.append(obj["_id"])
            texts.append(embedding_text(obj.get("title"), obj.get("text")))
    return ids, texts


# -- 1. embedding --------------------------------------------------------------------------------
_EMBEDDERS: dict[str, Any] = {}
"""The minilm embedder of each device, loaded once (documents, then queries)."""


def embed(texts: list[str], device: str) -> tuple[Any, float, float]:
    """The texts' vectors through aiblox's minilm embedder behind an embedding cache (as
    ingest embeds), the seconds and this process's CPU seconds (every thread), the model
    loaded and warmed up first (not counted)."""
    import numpy as np

    from aiblox.embedding import CachedEmbedder, InMemoryEmbeddingCache, get_embedder

    model = _EMBEDDERS.get(device)
    if model is None:
        model = _EMBEDDERS[device] = get_embedder("minilm", device=device)
        model.embed(["warm up the model", "and its kernels"] * 32)
    cached = CachedEmbedder(model, InMemoryEmbeddingCache())
    t0, c0 = time.perf_counter(), time.process_time()
    vectors = cached.embed(texts)
    return (np.asarray(vectors, dtype=np.float32), time.perf_counter() - t0,
            time.process_time() - c0)


def embed_in_parts(texts: list[str], device: str, part: int,
                   on_part: Any = None) -> tuple[Any, float]:
    """:func:`embed` over ``texts`` in parts of ``part`` documents: the vectors (in order) and
    the seconds of embedding in all; ``on_part(done, seconds)`` after each part, so a run cut
    short still has the rate it measured (the model's load and warm-up are not counted)."""
    import numpy as np

    parts, spent = [], 0.0
    for start in range(0, len(texts), max(1, part)):
        vectors, seconds, _ = embed(texts[start:start + max(1, part)], device)
        parts.append(vectors)
        spent += seconds
        if on_part is not None:
            on_part(start + len(vectors), spent)
    return np.concatenate(parts), spent


def dense_eval(ids: list[str], vectors: Any, folder: Path, device: str) -> dict[str, Any]:
    """The collection's queries embedded on ``device`` and searched exactly over every
    document vector (aiblox's exact kNN; on the GPU via faiss-gpu when installed), scored by
    aiblox's metrics (ranx's numbers): nDCG@10, recall@100, queries/s of the search."""
    from scale import read_queries

    from aiblox.contracts import VectorConfig
    from aiblox.indexes.knn import VectorIndex, gpu_index
    from aiblox.metrics import evaluate_run

    qids, qtexts, qrels = read_queries(folder)
    qvecs, embed_s, _ = embed(qtexts, device)
    index = VectorIndex.build(ids, vectors, VectorConfig(index="exact"))
    index.search(qvecs[:8], 100, device=device)  # faiss's GPU resources made, not counted
    t0 = time.perf_counter()
    hits = index.search(qvecs, 100, device=device)
    search_s = time.perf_counter() - t0
    means, _ = evaluate_run(qrels, dict(zip(qids, hits, strict=True)), ["ndcg@10", "recall@100"])
    return {"queries": len(qids), "docs": len(ids), "query_embed_s": round(embed_s, 3),
            "search_s": round(search_s, 3), "search_qps": round(len(qids) / search_s, 1),
            "faiss_gpu": gpu_index(device) is not None,
            **{m: round(float(v), 4) for m, v in means.items()}}


# -- 2. fine-tuning ------------------------------------------------------------------------------
def training_set(spec_path: Path, work: Path) -> tuple[Any, list[Any]]:
    """The spec's recipe and its training pairs, as the sweep's fine-tuning stage draws them
    (BM25 hard negatives from a throwaway store of the dataset)."""
    from aiblox.data import load_dataset
    from aiblox.sweep import load_spec
    from aiblox.sweep.finetune import training_pairs, training_query_ids

    spec = load_spec(spec_path)
    if spec.finetune is None:
        raise SystemExit(f"{spec_path}: no [finetune] table")
    train = load_dataset(spec.dataset, splits=[spec.finetune.split])
    scored = load_dataset(spec.dataset, splits=spec.splits)
    qids = training_query_ids(spec, train, scored)
    pairs = training_pairs(spec, train, qids, str(work / "negatives.duckdb"))
    return spec, pairs


def train(spec: Any, pairs: list[Any], device: str, out: Path, steps: int | None = None
          ) -> dict[str, Any]:
    """``fine_tune`` on ``device``: the whole recipe, or its first ``steps`` steps (one epoch
    of ``steps`` batches); seconds in all and per step (from the first step's end on, so
    loading the model and the first step's set-up are not counted; one step: its whole
    time, both included)."""
    from aiblox.embedding.finetune import fine_tune
    from aiblox.sweep.finetune import base_model_folder

    recipe = spec.finetune.recipe()
    total = recipe.epochs * -(-len(pairs) // recipe.batch_size)
    if steps is not None:
        pairs = pairs[:steps * recipe.batch_size]
        recipe = recipe.model_copy(update={"epochs": 1})
    ends: list[tuple[float, float]] = []
    t0, c0 = time.perf_counter(), time.process_time()
    fine_tune(base_model_folder(spec.embedder), pairs, out, recipe, device=device,
              on_step=lambda *_: ends.append((time.perf_counter(), time.process_time())))
    wall = time.perf_counter() - t0
    n = len(ends)
    per_step = (ends[-1][0] - ends[0][0]) / (n - 1) if n > 1 else ends[0][0] - t0
    cpu_step = (ends[-1][1] - ends[0][1]) / (n - 1) if n > 1 else ends[0][1] - c0
    return {"steps": n, "recipe_steps": total, "pairs": len(pairs),
            "seconds": round(wall, 2), "per_step_s": round(per_step, 3),
            "cpu_s_per_step": round(cpu_step, 3),
            "recipe_s": round(wall if steps is None else per_step * total, 1),
            "extrapolated": steps is not None}


# -- 3. reranking --------------------------------------------------------------------------------
def rerank_pairs(folder: Path, texts: list[str], ids: list[str], n: int) -> list[tuple[str, str]]:
    """``n`` (query, document) pairs: each query with its relevant document and the next nine
    documents of the collection, round the queries until ``n``."""
    from scale import read_queries

    qids, qtexts, qrels = read_queries(folder)
    pos = {d: i for i, d in enumerate(ids)}
    out: list[tuple[str, str]] = []
    while len(out) < n:
        for qid, q in zip(qids, qtexts, strict=True):
            start = pos.get(next(iter(qrels[qid])), 0)
            out += [(q, texts[(start + j) % len(texts)]) for j in range(10)]
            if len(out) >= n:
                break
    return out[:n]


def rerank(pairs: list[tuple[str, str]], device: str) -> tuple[Any, float, float]:
    """Scores of ``pairs`` by a MiniLM cross-encoder on ``device`` (batch 64, 256 word pieces),
    the seconds and the CPU seconds (the model loaded and warmed up first, not counted)."""
    import numpy as np

    model = minilm_cross_encoder(device)
    model.predict(pairs[:64], batch_size=64, show_progress_bar=False)
    t0, c0 = time.perf_counter(), time.process_time()
    scores = model.predict(pairs, batch_size=64, show_progress_bar=False)
    return (np.asarray(scores, dtype=np.float32), time.perf_counter() - t0,
            time.process_time() - c0)


# -- the run -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--docs", type=positive_int, default=100_000,
                    help="documents the GPU embeds and evaluates on (the synthetic collection)")
    ap.add_argument("--queries", type=positive_int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-docs", type=positive_int, default=1000, help="documents the CPU embeds")
    ap.add_argument("--embed-part", type=positive_int, default=100_000,
                    help="documents the GPU embeds between two lines (and --out writes): a "
                    "run cut short keeps its rate")
    ap.add_argument("--cpu-steps", type=positive_int, default=3,
                    help="fine-tuning steps on the CPU")
    ap.add_argument("--rerank-pairs", type=positive_int, default=50_000,
                    help="pairs the GPU scores")
    ap.add_argument("--cpu-rerank-pairs", type=positive_int, default=500,
                    help="pairs the CPU scores")
    ap.add_argument("--spec", default=str(SPEC), help="the [finetune] spec whose recipe trains")
    ap.add_argument("--gpu", default="cuda:0", help="the GPU (cuda or cuda:N; cpu: a dry run "
                    "of the GPU side on the CPU, to check the script without a GPU)")
    ap.add_argument("--skip", default="", help="comma-separated: embed, finetune, rerank")
    ap.add_argument("--workdir", default=".aiblox/bench/scale",
                    help="where the collection is (scale.py's folder: shared with it)")
    ap.add_argument("--out", default=None, help="write every number to this JSON file")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    os.environ.setdefault("AIBLOX_NO_PROGRESS", "1")

    import numpy as np

    gpu, gpu_label = gpu_device(args.gpu)
    cpu_label = cpu_name()
    n_docs = args.docs if gpu else min(args.docs, args.cpu_docs)
    if gpu is None:
        err.print(f"no GPU: {gpu_label}. The CPU side only, on small sizes "
                  f"({n_docs:,} documents).")
    else:
        err.print(f"GPU: {gpu_label}; CPU: {cpu_label}")
    res = Results(Path(args.out) if args.out else None,
                  {"gpu": gpu_label if gpu else None, "no_gpu_reason": None if gpu else gpu_label,
                   "cpu": cpu_label, "environment": environment_line(), "docs": n_docs})
    rows: list[list[str]] = []
    t_all = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="aiblox-gpu-bench-"))
    try:
        folder = collection(Path(args.workdir), n_docs, args.queries, args.seed)
        ids, texts = read_corpus(folder)
        # the short jobs first: a run cut short at 1M documents still has them (in --out)
        phases = {"finetune": lambda: finetune_phase(args, work, gpu, gpu_label, cpu_label,
                                                     res),
                  "rerank": lambda: rerank_phase(args, ids, texts, folder, gpu, gpu_label,
                                                 cpu_label, res, np),
                  "embed": lambda: embedding_phase(args, ids, texts, folder, gpu, gpu_label,
                                                   cpu_label, res, np)}
        for name, phase in phases.items():
            if name in skip:
                continue
            t0 = time.perf_counter()
            done = phase()
            for row in done:  # as measured, on stderr: a log keeps them whatever happens next
                err.print("  " + " | ".join(row), highlight=False, soft_wrap=True)
            err.print(f"  {name}: {time.perf_counter() - t0:.0f} s")
            rows += done
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if gpu is None:
        rows.append(["GPU", "not measured", "-", "-", "-", "-", f"no GPU here: {gpu_label}"])
    print_table("GPU against CPU: the same jobs on each device",
                ["job", "device", "size", "seconds", "rate", "GPU / CPU", "note"], rows,
                args.markdown, right=["seconds", "rate", "GPU / CPU"],
                notes=[f"{time.perf_counter() - t_all:.0f} s in all; {environment_line()}"])
    return 0


def _duration(seconds: float) -> str:
    return (f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"
            if seconds >= 60 else f"{seconds:.0f} s")


def _rate(n: float, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def embedding_phase(args: Any, ids: list[str], texts: list[str], folder: Path, gpu: str | None,
                    gpu_label: str, cpu_label: str, res: Results, np: Any) -> list[list[str]]:
    rows: list[list[str]] = []
    n_cpu = min(args.cpu_docs, len(texts))
    err.print(f"embedding {n_cpu:,} documents on the CPU ...")
    cpu_vecs, cpu_s, cpu_time = embed(texts[:n_cpu], "cpu")
    cpu_rate = _rate(n_cpu, cpu_s)
    whole_h = args.docs / cpu_rate / 3600  # the size asked for (the GPU's; capped without one)
    res.put("embed", "cpu", {"device": cpu_label, "docs": n_cpu, "seconds": round(cpu_s, 2),
                             "cpu_s": round(cpu_time, 2), "docs_per_s": round(cpu_rate, 1),
                             "docs_asked": args.docs,
                             "docs_asked_hours_extrapolated": round(whole_h, 2)})
    cpu_row = ["embed (minilm)", cpu_label, f"{n_cpu:,} docs", f"{cpu_s:.1f}",
               f"{cpu_rate:,.1f} docs/s", "",
               f"CPU time {cpu_time:.0f} s"
               + (f"; {args.docs:,} docs: {_duration(whole_h * 3600)} (extrapolated)"
                  if n_cpu < args.docs else "")]
    evaluated = None
    if gpu is not None:
        err.print(f"embedding {len(texts):,} documents on {gpu_label} "
                  f"(in parts of {args.embed_part:,}) ...")

        def so_far(done: int, seconds: float) -> None:  # a run cut short keeps its rate
            res.put("embed", "gpu", {"device": gpu_label, "docs": done,
                                     "docs_asked": len(texts), "complete": done == len(texts),
                                     "seconds": round(seconds, 2),
                                     "docs_per_s": round(_rate(done, seconds), 1)})
            err.print(f"  {done:,} of {len(texts):,} documents: {seconds:.0f} s, "
                      f"{_rate(done, seconds):,.1f} docs/s", highlight=False)

        vecs, gpu_s = embed_in_parts(texts, gpu, args.embed_part, so_far)
        gpu_rate = _rate(len(texts), gpu_s)
        diff = float(np.abs(vecs[:n_cpu] - cpu_vecs).max())
        res.put("embed", "gpu", {"device": gpu_label, "docs": len(texts),
                                 "docs_asked": len(texts), "complete": True,
                                 "seconds": round(gpu_s, 2), "docs_per_s": round(gpu_rate, 1),
                                 "max_abs_diff_vs_cpu": diff})
        rows.append(["embed (minilm)", gpu_label, f"{len(texts):,} docs", f"{gpu_s:.1f}",
                     f"{gpu_rate:,.1f} docs/s", f"{gpu_rate / cpu_rate:.1f}x",
                     f"largest GPU-CPU vector difference {diff:.1e} (the CPU's {n_cpu:,})"])
        evaluated = (vecs, gpu, gpu_label)
    elif n_cpu == len(texts):
        evaluated = (cpu_vecs, "cpu", cpu_label)
    rows.append(cpu_row)
    if evaluated is not None:
        vecs, device, label = evaluated
        err.print(f"dense evaluation over {len(ids):,} documents on {label} ...")
        ev = dense_eval(ids, vecs, folder, device)
        res.put("dense_eval", "gpu" if device != "cpu" else "cpu", {"device": label, **ev})
        rows.append([f"dense eval at {len(ids):,} docs", label, f"{ev['queries']:,} queries",
                     f"{ev['search_s']:.2f}", f"{ev['search_qps']:,.0f} q/s", "",
                     f"nDCG@10 {ev['ndcg@10']:.4f}, recall@100 {ev['recall@100']:.4f}; exact "
                     f"kNN {'faiss-gpu' if ev['faiss_gpu'] else 'faiss (CPU)'}"])
    return rows


def finetune_phase(args: Any, work: Path, gpu: str | None, gpu_label: str, cpu_label: str,
                   res: Results) -> list[list[str]]:
    rows: list[list[str]] = []
    err.print(f"fine-tuning: the training pairs of {args.spec} ...")
    spec, pairs = training_set(Path(args.spec), work)
    recipe = spec.finetune.recipe()
    what = (f"finetune ({Path(args.spec).stem}: {len(pairs)} pairs, {recipe.epochs} epochs, "
            f"batch {recipe.batch_size})")
    err.print(f"fine-tuning {args.cpu_steps} step(s) on the CPU ...")
    cpu = train(spec, pairs, "cpu", work / "ft-cpu", steps=args.cpu_steps)
    res.put("finetune", "cpu", {"device": cpu_label, **cpu})
    cpu_row = [what, cpu_label, f"{cpu['steps']} of {cpu['recipe_steps']} steps",
               f"{cpu['seconds']:.1f}", f"{cpu['per_step_s']:.2f} s/step", "",
               f"the recipe: {_duration(cpu['recipe_s'])} (extrapolated); CPU time "
               f"{cpu['cpu_s_per_step']:.1f} s/step"]
    if gpu is not None:
        err.print(f"fine-tuning the whole recipe on {gpu_label} ...")
        g = train(spec, pairs, gpu, work / "ft-gpu")
        res.put("finetune", "gpu", {"device": gpu_label, **g})
        rows.append([what, gpu_label, f"{g['steps']} steps", f"{g['seconds']:.1f}",
                     f"{g['per_step_s']:.3f} s/step", f"{cpu['recipe_s'] / g['seconds']:.1f}x",
                     "the whole recipe, model load and save included"])
    rows.append(cpu_row)
    return rows


def rerank_phase(args: Any, ids: list[str], texts: list[str], folder: Path, gpu: str | None,
                 gpu_label: str, cpu_label: str, res: Results, np: Any) -> list[list[str]]:
    rows: list[list[str]] = []
    n = args.rerank_pairs if gpu else args.cpu_rerank_pairs
    pairs = rerank_pairs(folder, texts, ids, max(n, args.cpu_rerank_pairs))
    err.print(f"reranking {args.cpu_rerank_pairs:,} pairs on the CPU ...")
    cpu_scores, cpu_s, cpu_time = rerank(pairs[:args.cpu_rerank_pairs], "cpu")
    cpu_rate = _rate(args.cpu_rerank_pairs, cpu_s)
    res.put("rerank", "cpu", {"device": cpu_label, "pairs": args.cpu_rerank_pairs,
                              "seconds": round(cpu_s, 2), "cpu_s": round(cpu_time, 2),
                              "pairs_per_s": round(cpu_rate, 1)})
    cpu_row = ["rerank (MiniLM cross-encoder)", cpu_label, f"{args.cpu_rerank_pairs:,} pairs",
               f"{cpu_s:.1f}", f"{cpu_rate:,.1f} pairs/s", "", f"CPU time {cpu_time:.0f} s"]
    if gpu is not None:
        err.print(f"reranking {n:,} pairs on {gpu_label} ...")
        scores, gpu_s, _ = rerank(pairs[:n], gpu)
        gpu_rate = _rate(n, gpu_s)
        diff = float(np.abs(scores[:args.cpu_rerank_pairs] - cpu_scores).max())
        res.put("rerank", "gpu", {"device": gpu_label, "pairs": n, "seconds": round(gpu_s, 2),
                                  "pairs_per_s": round(gpu_rate, 1),
                                  "max_abs_diff_vs_cpu": diff})
        rows.append(["rerank (MiniLM cross-encoder)", gpu_label, f"{n:,} pairs",
                     f"{gpu_s:.1f}", f"{gpu_rate:,.1f} pairs/s", f"{gpu_rate / cpu_rate:.1f}x",
                     f"largest GPU-CPU score difference {diff:.1e}"])
    rows.append(cpu_row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
