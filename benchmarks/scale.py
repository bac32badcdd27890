"""Retrieval at corpus scale: ingest, indexes, BM25 and kNN against bm25s and faiss, one run.

A deterministic synthetic collection of ``--docs N`` documents is written in BEIR layout: each
document a seeded choice of real sentences from the shared collections, each query a few words
of one document (its one relevant document), and seeded vectors with the structure embeddings
have (documents in clusters inside a low-dimensional subspace, plus a little noise; a query near
its document), imported from parquet, so no model ever runs (the ``synthetic`` embedder gives a
text the cache lacks, a chunk late chunking scores, a vector seeded by its hash). Then, in this
one process (ingest, index builds and the baselines' phases in child processes, each started
by a small launcher, so each phase's peak memory is its own):

1. ingest (``aiblox ingest``'s streamed route): seconds, documents/s, peak RSS;
2. index builds: BM25 (bm25s's scoring), exact vectors, HNSW: seconds, peak RSS, size on disk;
3. BM25: aiblox's index against ``bm25s`` (numba backend, compiled first) on the same
   queries, both on every core: queries/s, nDCG@10, and whether the ranked lists are equal
   (ties by id aside);
4. exact kNN: aiblox against faiss ``IndexFlatIP``: queries/s, equal neighbours;
5. HNSW: queries/s and recall@10 against exact;
6. a whole evaluation (``evaluate_retrieval`` with ranx, bm25 and dense) against the same job
   with bm25s (numba, compiled) or faiss and ranx, in process;
7. the whole commands, each a process of its own: ``aiblox eval`` and ``aiblox search``
   against scripts a bm25s or faiss user would write (their saved index, ranx): bm25s on its
   default numpy backend, and again on its numba backend, which compiles its kernels in every
   process (bm25s does not cache them on disk).

Ratios are the claim (absolute times drift on a shared machine).

    python benchmarks/scale.py --docs 100000 [--queries 1000] [--workdir DIR] [--markdown]
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import arg_parser, environment_line, err, positive_int, print_table  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("scifact", "cranfield", "cisi", "medline", "vaswani", "adi")
"""The collections whose sentences make the synthetic documents, found as every script finds
a dataset (``aiblox.data.find.find_dataset``: ``$AIBLOX_DATASETS``, ``./datasets``,
``../shared/datasets``, ...). Only a plain ``corpus.jsonl`` is read: scifact's and vaswani's
are gzipped in the shared folder and have never been part of the collection (reading them
would change every document, and so every table measured before)."""
DEFAULT_DIM = 384


def model_id(dim: int = DEFAULT_DIM) -> str:
    """The synthetic embedder's model id at ``dim`` dimensions (the vectors files' names)."""
    return f"synthetic-{dim}"


_SENT = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z]{4,}")


# -- the synthetic collection ----------------------------------------------------------------
def _sources() -> list[Path]:
    """The plain ``corpus.jsonl`` of each of :data:`SOURCES` that the dataset lookup finds."""
    from aiblox.data import DatasetError
    from aiblox.data.find import find_dataset

    found = []
    for name in SOURCES:
        try:
            path = find_dataset(name) / "corpus.jsonl"
        except DatasetError:
            continue
        if path.exists():
            found.append(path)
    return found


def _sentences() -> list[str]:
    out: list[str] = []
    for path in _sources():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                obj = json.loads(line)
                text = f"{obj.get('title') or ''}. {obj.get('text') or ''}"
                out += [s.strip() for s in _SENT.split(text) if 30 <= len(s.strip()) <= 400]
    if not out:
        raise SystemExit(f"none of {', '.join(SOURCES)} found with a plain corpus.jsonl "
                         f"($AIBLOX_DATASETS, ./datasets, ../shared/datasets)")
    return sorted(set(out))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_collection(folder: Path, n_docs: int, n_queries: int, dim: int, seed: int) -> None:
    """The BEIR folder and its vectors' parquet files (streamed: bounded memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    sents = _sentences()
    rng = np.random.default_rng(seed)
    layout = np.random.default_rng(seed + 1)
    sub, clusters = 48, max(64, n_docs // 500)
    basis = layout.normal(size=(sub, dim)).astype(np.float32) / np.sqrt(sub)
    centres = layout.normal(size=(clusters, sub)).astype(np.float32) * 2.0
    qdocs = np.sort(rng.choice(n_docs, size=min(n_queries, n_docs), replace=False))
    qset = set(qdocs.tolist())
    vec_type = pa.list_(pa.float32(), dim)
    schema = pa.schema([("_id", pa.string()), ("text_sha256", pa.string()),
                        ("vector", vec_type)])
    writer = pq.ParquetWriter(folder / f"corpus.{model_id(dim)}.parquet", schema)
    qrows: list[tuple[str, str, np.ndarray]] = []
    block = 20000
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as corpus:
        for start in range(0, n_docs, block):
            n = min(block, n_docs - start)
            labels = rng.integers(0, clusters, size=n)
            x = centres[labels] + rng.normal(scale=0.5, size=(n, sub)).astype(np.float32)
            vecs = x @ basis + rng.normal(scale=0.02, size=(n, dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            ids, hashes = [], []
            for j in range(n):
                i = start + j
                k = int(rng.integers(3, 8))
                picks = rng.integers(0, len(sents), size=k)
                title = sents[int(picks[0])][:80]
                text = " ".join(sents[int(p)] for p in picks[1:])
                doc_id = f"d{i:07d}"
                corpus.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
                ids.append(doc_id)
                hashes.append(_sha(f"{title} {text}".strip()))
                if i in qset:
                    words = _WORD.findall(text) or _WORD.findall(title) or ["document"]
                    pick = rng.choice(len(words), size=min(5, len(words)), replace=False)
                    q = " ".join(words[int(p)] for p in sorted(pick))
                    qv = vecs[j] + rng.normal(scale=0.03, size=dim).astype(np.float32)
                    qrows.append((doc_id, q, qv / np.linalg.norm(qv)))
            flat = pa.array(vecs.astype(np.float32).ravel())
            writer.write_table(pa.table({"_id": ids, "text_sha256": hashes,
                                         "vector": pa.FixedSizeListArray.from_arrays(flat,
                                                                                     dim)},
                                        schema=schema))
    writer.close()
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as qf, \
            open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as qr:
        qr.write("query-id\tcorpus-id\tscore\n")
        for n, (doc_id, q, _) in enumerate(qrows):
            qf.write(json.dumps({"_id": f"q{n:06d}", "text": q}) + "\n")
            qr.write(f"q{n:06d}\t{doc_id}\t1\n")
    qv = np.stack([v for _, _, v in qrows]).astype(np.float32)
    pq.write_table(pa.table({"_id": [f"q{n:06d}" for n in range(len(qrows))],
                             "text_sha256": [_sha(q) for _, q, _ in qrows],
                             "vector": pa.FixedSizeListArray.from_arrays(pa.array(qv.ravel()),
                                                                         dim)}, schema=schema),
                   folder / f"queries.{model_id(dim)}.parquet")
    emb = folder.parent.parent / "embeddings" / folder.name  # as ../shared/embeddings
    emb.mkdir(parents=True, exist_ok=True)
    for f in (f"corpus.{model_id(dim)}.parquet", f"queries.{model_id(dim)}.parquet"):
        shutil.move(str(folder / f), emb / f)


class SyntheticEmbedder:
    """The benchmark's model id (``synthetic-<dim>``): documents' and queries' vectors come
    from the embedding cache (imported from the parquet files). No model ever runs: a text the
    cache lacks (a chunk that hybrid search's late chunking scores) gets a deterministic unit
    vector seeded by its sha256; the ingest counts such texts as cache misses and the benchmark
    stops on any."""

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        self.dim = dim
        self.model_id = model_id(dim)

    def embed(self, texts: Any) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def register(dim: int = DEFAULT_DIM) -> None:
    """``synthetic``: the :class:`SyntheticEmbedder` at ``dim`` dimensions (unless asked for
    another ``dim``)."""
    from functools import partial

    from aiblox.embedding import register_embedder

    register_embedder("synthetic", partial(SyntheticEmbedder, dim=dim))


# -- child phases (their own peak memory) ------------------------------------------------------
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import scale
phase, ds, db, dim = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
scale.register(dim)
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.stores import DuckDBStore
t0 = time.perf_counter()
out = {}
if phase in ("bm25s", "faiss"):
    print(json.dumps(scale.bm25s_phase(ds, db) if phase == "bm25s"
                     else scale.faiss_phase(ds, db, dim)))
    sys.exit(0)
store = DuckDBStore(db, dim=dim)
if phase == "ingest":
    from aiblox.engine.workspace import ingest_dataset
    emb = CachedEmbedder(get_embedder("synthetic"), store)
    r = ingest_dataset(store, ds, emb, progress=False, batch_size=5000)
    out = {"items": r.items.inserted, "vectors": r.vectors_written,
           "misses": r.embedding_cache_misses}
else:
    from aiblox.contracts import FtsConfig, VectorConfig
    from aiblox.indexes import StoreIndexes
    ix = StoreIndexes(store)
    if phase == "bm25":
        out = {"docs": ix.lexical(FtsConfig()).n_docs}
    else:
        out = {"n": ix.vectors(scale.model_id(dim), VectorConfig(index=phase)).n}  # defaults
store.close()
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""
"""One phase in a process of its own; it prints its results as JSON (its peak RSS and CPU
seconds come from the launcher, :data:`MEASURE`)."""


def child(phase: str, ds: Path, db: Path, dim: int = DEFAULT_DIM) -> dict[str, Any]:
    """Run ``phase`` in a process of its own, started by the small :data:`MEASURE` launcher
    (not by this process, whose resident memory a child started directly would count in its
    own peak): the phase's JSON with its ``peak_rss_mib`` and ``cpu_s``."""
    import tempfile

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")]), "AIBLOX_NO_PROGRESS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "usage.json"
        proc = subprocess.run([sys.executable, "-S", "-c", MEASURE, str(stats), sys.executable,
                               "-c", CHILD, str(Path(__file__).parent), phase, str(ds), str(db),
                               str(dim)], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{phase} failed:\n{proc.stderr[-3000:]}")
        usage = json.loads(stats.read_text())
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**out, "peak_rss_mib": usage["rss"], "cpu_s": usage["cpu"]}


def free_block_mib(db: Path) -> float:
    """MiB of the DuckDB file's blocks that hold nothing (DuckDB reuses them, never returns
    them)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        _, _, block_size, _, _, free, *_ = con.execute("PRAGMA database_size").fetchone()
    finally:
        con.close()
    return block_size * free / 2**20


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def read_queries(ds: Path) -> tuple[list[str], list[str], dict[str, dict[str, int]]]:
    """The test queries (ids ascending), their texts and qrels, without reading the corpus."""
    queries = {}
    with open(ds / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            queries[obj["_id"]] = obj["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(ds / "qrels" / "test.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            q, d, g = line.rstrip("\n").split("\t")
            qrels.setdefault(q, {})[d] = int(g)
    qids = sorted(qrels)
    return qids, [queries[q] for q in qids], qrels


def bm25s_phase(ds: str, db: str) -> dict[str, Any]:
    """bm25s on the same texts (title + " " + text, documents in id order), in a process of
    its own: index time and peak memory, retrieval from its own tokens (the kernel) and from
    text; the ranked lists (positions in id order) saved beside the store for the parent. Its
    index is saved for the whole-command scripts (they load it on either backend)."""
    import bm25s
    import Stemmer

    rows = []
    with open(Path(ds) / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            rows.append((obj["_id"], f"{obj.get('title') or ''} {obj.get('text') or ''}".strip()))
    rows.sort()
    texts = [t for _, t in rows]
    Path(f"{db}.bm25s.ids").write_text("\n".join(i for i, _ in rows), encoding="utf-8")
    del rows
    stemmer = Stemmer.Stemmer("english")
    threads = len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    ref = bm25s.BM25(k1=1.2, b=0.75, backend="numba")
    ref.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
              show_progress=False)
    index_s = time.perf_counter() - t0
    n_docs = len(texts)
    del texts
    ref.save(f"{db}.bm25s", show_progress=False)  # what the whole-command script loads
    _, qtexts, _ = read_queries(Path(ds))
    q_tok = bm25s.tokenize(qtexts, stopwords="en", stemmer=stemmer, show_progress=False)
    ref.retrieve(q_tok, k=100, n_threads=threads, show_progress=False)  # compile
    _, kernel_s = timed(lambda: ref.retrieve(q_tok, k=100, n_threads=threads,
                                             show_progress=False))
    (docs, scores), text_s = timed(lambda: ref.retrieve(
        bm25s.tokenize(qtexts, stopwords="en", stemmer=stemmer, show_progress=False), k=100,
        n_threads=threads, show_progress=False))
    np.savez(f"{db}.bm25s.npz", docs=np.asarray(docs), scores=np.asarray(scores))
    return {"docs": n_docs, "index_s": index_s, "kernel_s": kernel_s, "text_s": text_s}


def faiss_phase(ds: str, db: str, dim: int = DEFAULT_DIM) -> dict[str, Any]:
    """faiss ``IndexFlatIP`` over the same vectors (the corpus parquet file, read a block at a
    time), in a process of its own: build time and peak memory, search time; the index written
    beside the store for the whole-command script, the ranked lists (positions in id order)
    saved for the parent."""
    import faiss
    import pyarrow.parquet as pq

    emb = Path(ds).parent.parent / "embeddings" / Path(ds).name
    threads = len(os.sched_getaffinity(0))
    faiss.omp_set_num_threads(threads)
    t0 = time.perf_counter()
    pf = pq.ParquetFile(emb / f"corpus.{model_id(dim)}.parquet")
    ids: list[str] = []
    flat = None
    for batch in pf.iter_batches(batch_size=50_000, columns=["_id", "vector"]):
        col = batch.column(1)
        block = col.values.to_numpy(zero_copy_only=False).reshape(len(col), -1)
        if flat is None:
            flat = faiss.IndexFlatIP(block.shape[1])
        flat.add(np.ascontiguousarray(block, dtype=np.float32))
        ids += batch.column(0).to_pylist()
    if flat is None or ids != sorted(ids):
        raise SystemExit(f"{emb}: no vectors, or not in id order")
    index_s = time.perf_counter() - t0
    faiss.write_index(flat, f"{db}.faiss.flat")
    Path(f"{db}.faiss.ids").write_text("\n".join(ids), encoding="utf-8")
    qids, _, _ = read_queries(Path(ds))
    qv = query_vectors(Path(ds), qids, dim)
    flat.search(qv[:10], 100)
    _, search_s = timed(lambda: flat.search(qv, 100))
    dist, idx = flat.search(qv, 100)
    np.savez(f"{db}.faiss.npz", docs=idx, scores=dist)
    return {"docs": len(ids), "index_s": index_s, "search_s": search_s}


def query_vectors(ds: Path, qids: list[str], dim: int = DEFAULT_DIM) -> np.ndarray:
    """The queries' vectors from the collection's parquet file, in the order of ``qids``."""
    import pyarrow.parquet as pq

    table = pq.read_table(ds.parent.parent / "embeddings" / ds.name /
                          f"queries.{model_id(dim)}.parquet", columns=["_id", "vector"])
    col = table.column(1).combine_chunks()
    mat = col.values.to_numpy(zero_copy_only=False).reshape(len(col), -1)
    row = {q: i for i, q in enumerate(table.column(0).to_pylist())}
    return np.ascontiguousarray(mat[[row[q] for q in qids]], dtype=np.float32)


# -- whole commands, each a process timed from start to exit ----------------------------------
AIBLOX = r"""
import sys
sys.path.insert(0, sys.argv.pop(1))
import scale
scale.register(int(sys.argv.pop(1)))  # the benchmark's embedder at the collection's dimension
from aiblox.cli.main import main
sys.argv[0] = "aiblox"
main()  # as the console script
"""

READ_QRELS = r"""
qrels = {}
with open(f"{ds}/qrels/test.tsv", encoding="utf-8") as fh:
    next(fh)
    for line in fh:
        q, d, g = line.rstrip("\n").split("\t")
        qrels.setdefault(q, {})[d] = int(g)
qids = sorted(qrels)
"""
"""The baseline scripts' qrels (the dataset folder ``ds``'s test split) and query ids."""

BM25S_BACKENDS = {"numpy": "bm25s + ranx (script, numpy backend: bm25s's default)",
                  "numba": "bm25s + ranx (script, numba backend: compiles in every process)"}
"""The bm25s script's backends and their rows: numpy is what a user who builds ``BM25()``
gets; numba's kernels are not cached on disk, so the script compiles them in every process."""

BM25S_SCRIPT = r"""
import json, os, sys, time
import bm25s, Stemmer
from ranx import Qrels, Run, evaluate
ds, db = sys.argv[1], sys.argv[2]
backend = sys.argv[3] if len(sys.argv) > 3 else "numpy"  # bm25s's default
queries = {}
with open(f"{ds}/queries.jsonl", encoding="utf-8") as fh:
    for line in fh:
        obj = json.loads(line)
        queries[obj["_id"]] = obj["text"]
""" + READ_QRELS + r"""ref = bm25s.BM25.load(f"{db}.bm25s", mmap=True, show_progress=False,
                      backend=backend)
ids = open(f"{db}.bm25s.ids", encoding="utf-8").read().split("\n")
tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en",
                        stemmer=Stemmer.Stemmer("english"), show_progress=False)
docs, scores = ref.retrieve(tokens, k=100, n_threads=len(os.sched_getaffinity(0)),
                            show_progress=False)
run = {q: {ids[int(d)]: float(s) for d, s in zip(dr, sr)} for q, dr, sr in zip(qids, docs, scores)}
print(json.dumps({"ndcg@10": float(evaluate(Qrels.from_dict(qrels), Run.from_dict(run),
                                            "ndcg@10"))}))
"""

FAISS_SCRIPT = r"""
import json, os, sys
import faiss
import numpy as np
import pyarrow.parquet as pq
from ranx import Qrels, Run, evaluate
ds, db, vectors = sys.argv[1], sys.argv[2], sys.argv[3]
""" + READ_QRELS + r"""table = pq.read_table(vectors, columns=["_id", "vector"])
col = table.column(1).combine_chunks()
mat = col.values.to_numpy(zero_copy_only=False).reshape(len(col), -1)
row = {q: i for i, q in enumerate(table.column(0).to_pylist())}
qv = np.ascontiguousarray(mat[[row[q] for q in qids]], dtype=np.float32)
faiss.omp_set_num_threads(len(os.sched_getaffinity(0)))
index = faiss.read_index(f"{db}.faiss.flat")
ids = open(f"{db}.faiss.ids", encoding="utf-8").read().split("\n")
dist, idx = index.search(qv, 100)
run = {q: {ids[int(i)]: float(d) for d, i in zip(dr, ir)} for q, dr, ir in zip(qids, dist, idx)}
print(json.dumps({"ndcg@10": float(evaluate(Qrels.from_dict(qrels), Run.from_dict(run),
                                            "ndcg@10"))}))
"""


MEASURE = r"""
import json, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as fh:
    json.dump({"rss": usage.ru_maxrss / 1024, "cpu": usage.ru_utime + usage.ru_stime}, fh)
sys.exit(code)
"""
"""Runs a command and writes its peak RSS and CPU time. A process's peak RSS counts its
parent's resident memory at the fork (Linux carries it over exec), so the command is started
by this small launcher, not by the benchmark's large process."""


def whole(args: list[str]) -> tuple[float, float, str, float]:
    """Run one command as a process of its own: ``(seconds from start to exit, its peak RSS
    in MiB, its stdout, its CPU seconds)``; a failure stops the benchmark with its stderr."""
    import tempfile

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "usage.json"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-S", "-c", MEASURE, str(stats), *args],
                              capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args[:6])} failed:\n{proc.stderr[-3000:]}")
        usage = json.loads(stats.read_text())
        return seconds, usage["rss"], proc.stdout, usage["cpu"]


# -- comparisons --------------------------------------------------------------------------------
def ndcg10(qrels: dict[str, dict[str, int]], run: dict[str, list[tuple[str, float]]]) -> float:
    from aiblox.metrics import evaluate_run

    return evaluate_run(qrels, run, ["ndcg@10"])[0]["ndcg@10"]


def ranx_ndcg10(qrels: dict[str, dict[str, int]],
                run: dict[str, list[tuple[str, float]]]) -> float:
    """nDCG@10 the way a ranx user computes it (its public ``Qrels``/``Run`` route): the
    baselines' scoring step."""
    from ranx import Qrels, Run, evaluate

    scored = {q: {d: float(s) for d, s in hits} for q, hits in run.items()}
    judged = {q: docs for q, docs in qrels.items() if docs}
    return float(evaluate(Qrels.from_dict(judged), Run.from_dict(scored), "ndcg@10"))


def equal_up_to_ties(ours: list[tuple[str, float]], theirs: list[tuple[str, float]],
                     k: int = 10, tol: float = 1e-4) -> bool:
    """The same top ``k``: the same scores (within ``tol``) and the same documents, except
    documents tied with the ``k``-th score (engines break such ties differently, aiblox by id;
    either is a correct top ``k``)."""
    a, b = ours[:k], theirs[:k]
    if len(a) != len(b) or not np.allclose([s for _, s in a], [s for _, s in b], atol=tol):
        return False
    floor = a[-1][1] if a else 0.0
    return {d for d, s in a if s > floor + tol} == {d for d, s in b if s > floor + tol}


def same_lists(a: list[list[tuple[str, float]]], b: list[list[tuple[str, float]]],
               k: int = 10) -> float:
    """Share of queries whose top ``k`` are equal up to ties (:func:`equal_up_to_ties`)."""
    same = sum(equal_up_to_ties(x, y, k) for x, y in zip(a, b, strict=True))
    return same / max(1, len(a))


def timed(fn: Any, repeat: int = 3) -> tuple[Any, float]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def drop_page_cache() -> None:
    """Write dirty pages out and drop the page cache (``--cold``: needs root on Linux)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n", encoding="ascii")
    except OSError as exc:
        raise SystemExit(f"--cold: cannot drop the page cache ({exc}); run as root, on Linux, "
                         f"or leave --cold out") from None


WHOLE_NOTE = (
    "Whole commands: each a process of its own, timed from start to exit (imports, reading the "
    "files, the index, the queries, ranx); the best of two runs after a first one (the first "
    "after a build checks the index files' sha256 once). `aiblox` runs as its console script "
    "does, with the benchmark's synthetic embedder registered; its compiled kernels load from "
    "numba's cache on disk. The scripts score with ranx, whose first evaluate compiles its typed "
    "containers in every process (about 5 s here), cache or not. The bm25s script loads the "
    "saved index on bm25s's default numpy backend, and again on its numba backend, whose "
    "kernels bm25s does not cache: that process compiles them every time. In process, bm25s "
    "runs on numba, compiled by an untimed retrieval first.")
"""The whole commands' note under both tables."""


def whole_commands(ds_dir: Path, db: Path, query: str, cold: bool = False,
                   dim: int = DEFAULT_DIM) -> list[list[str]]:
    """The whole commands, from scratch: each a process timed from start to exit, the first
    run (after a build it checks the index files once; with ``cold``, right after the page
    cache is dropped, so it reads every file from the disk) and the best of two more; the
    table's rows."""
    err.print("whole commands ...")
    here = str(Path(__file__).resolve().parent)
    aiblox = [sys.executable, "-c", AIBLOX, here, str(dim)]
    vectors_file = (ds_dir.parent.parent / "embeddings" / ds_dir.name /
                    f"queries.{model_id(dim)}.parquet")
    commands = {
        # every aiblox command names the embedder: the store is opened at its dimension
        "aiblox eval --mode bm25": [*aiblox, "eval", str(ds_dir), "--mode", "bm25",
                                    "--embedder", "synthetic", "--db", str(db),
                                    "--format", "json"],
        **{label: [sys.executable, "-c", BM25S_SCRIPT, str(ds_dir), str(db), backend]
           for backend, label in BM25S_BACKENDS.items()},
        "aiblox eval --mode dense": [*aiblox, "eval", str(ds_dir), "--mode", "dense",
                                     "--embedder", "synthetic", "--db", str(db),
                                     "--format", "json"],
        "faiss flat + ranx (script)": [sys.executable, "-c", FAISS_SCRIPT, str(ds_dir),
                                       str(db), str(vectors_file)],
        "aiblox search --mode bm25 (top 10)": [*aiblox, "search", query, "--db", str(db),
                                               "--mode", "bm25", "--embedder", "synthetic"],
        "aiblox search (hybrid, top 10)": [*aiblox, "search", query, "--db", str(db),
                                           "--embedder", "synthetic"],
    }
    if dim != DEFAULT_DIM:  # aiblox search opens its store at 384 dimensions (cli open_db)
        err.print(f"  aiblox search: not timed at {dim} dimensions (it opens a store at 384)")
        commands = {k: v for k, v in commands.items() if not k.startswith("aiblox search")}
    runs: dict[str, tuple[float, float, float, str, float]] = {}
    for label, cmd in commands.items():
        if cold:
            drop_page_cache()
        first = whole(cmd)
        best = min((whole(cmd) for _ in range(2)), key=lambda r: r[0])
        runs[label] = (first[0], best[0], max(first[1], best[1]), best[2], best[3])
        err.print(f"  {label}: first {first[0]:.1f} s, then {best[0]:.1f} s "
                  f"(CPU {best[3]:.1f} s), {runs[label][2]:,.0f} MiB")

    def whole_ndcg(label: str) -> str:
        found = re.search(r'"ndcg@10"\s*:\s*([0-9.]+)', runs[label][3])
        return f"{float(found.group(1)):.4f}" if found else ""

    rows = []
    against = {"aiblox eval --mode bm25": list(BM25S_BACKENDS.values()),
               "aiblox eval --mode dense": ["faiss flat + ranx (script)"]}
    short = {BM25S_BACKENDS["numpy"]: "bm25s (numpy) + ranx",
             BM25S_BACKENDS["numba"]: "bm25s (numba) + ranx",
             "faiss flat + ranx (script)": "faiss flat + ranx"}
    for label, (first_s, best_s, rss, _, cpu_s) in runs.items():
        bases = against.get(label, [])
        ratio = ("; ".join(f"{best_s / runs[b][1]:.2f}x the time of {short[b]}" for b in bases)
                 if bases else ("baseline" if any(label in b for b in against.values())
                                else ""))
        rows.append([f"whole command: {label}",
                     f"{best_s:.1f} s ({'cold' if cold else 'first'} {first_s:.1f} s)",
                     ratio, f"{rss:,.0f} MiB", whole_ndcg(label), f"CPU {cpu_s:.1f} s"])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--docs", type=positive_int, default=100_000)
    ap.add_argument("--queries", type=positive_int, default=1000)
    ap.add_argument("--dim", type=positive_int, default=DEFAULT_DIM,
                    help="the vectors' dimension (default 384; the model id is synthetic-DIM)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=".aiblox/bench/scale")
    ap.add_argument("--keep", action="store_true", help="reuse the collection if present")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--commands-only", action="store_true",
                    help="with --keep: time the whole commands on the store a previous run "
                         "built (and the baselines' saved indexes, made when missing)")
    ap.add_argument("--cold", action="store_true",
                    help="drop the page cache before each whole command's first run (root "
                         "only): the first run then reads every file from the disk")
    args = ap.parse_args(argv)
    if args.cold:
        drop_page_cache()  # refused before any work when not permitted
    register(args.dim)
    import resource

    from aiblox.contracts import FtsConfig, RetrievalPrefs, VectorConfig
    from aiblox.data import Dataset
    from aiblox.embedding import CachedEmbedder, get_embedder
    from aiblox.engine.evaluate import evaluate_retrieval
    from aiblox.indexes import StoreIndexes, forget_loaded
    from aiblox.retrieval import HybridRetriever
    from aiblox.stores import DuckDBStore

    # a collection of another dimension is another folder (the default's keeps its name)
    work = Path(args.workdir) / (f"n{args.docs}" if args.dim == DEFAULT_DIM
                                 else f"n{args.docs}-d{args.dim}")
    ds_dir = work / "datasets" / f"synthetic{args.docs}"
    db = work / "store.duckdb"
    t_all = time.perf_counter()
    if args.commands_only:
        if not (args.keep and db.exists()):
            raise SystemExit("--commands-only needs --keep and a store built by a previous run")
        for phase, saved in (("bm25s", f"{db}.bm25s.npz"), ("faiss", f"{db}.faiss.npz")):
            if not Path(saved).exists():
                err.print(f"{phase} (index and queries, a process of its own) ...")
                err.print(f"  {child(phase, ds_dir, db, args.dim)}")
        _, qtexts, _ = read_queries(ds_dir)
        load = os.getloadavg()
        print_table(f"Whole commands: {args.docs:,} documents, {len(qtexts):,} queries",
                    ["what", "time", "against the baseline", "peak RSS", "nDCG@10", "CPU"],
                    whole_commands(ds_dir, db, qtexts[0], args.cold, args.dim), args.markdown,
                    right=("time", "peak RSS", "nDCG@10"),
                    notes=[f"Measured {environment_line()}; load average at the end "
                           f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min).",
                           WHOLE_NOTE])
        return 0
    if not (args.keep and (ds_dir / "corpus.jsonl").exists()):
        shutil.rmtree(work, ignore_errors=True)
        err.print(f"writing {args.docs:,} documents ...")
        t0 = time.perf_counter()
        write_collection(ds_dir, args.docs, args.queries, args.dim, args.seed)
        err.print(f"  {time.perf_counter() - t0:.0f} s")
    for p in (db, Path(f"{db}.wal")):
        p.unlink(missing_ok=True)
    shutil.rmtree(f"{db}.indexes", ignore_errors=True)

    err.print("ingest ...")
    ing = child("ingest", ds_dir, db, args.dim)
    if ing["misses"]:
        raise SystemExit("texts were embedded live: the vectors files do not cover the corpus")
    err.print(f"  {ing}")
    builds = {}
    for phase in ("bm25", "exact", "hnsw"):
        err.print(f"index {phase} ...")
        builds[phase] = child(phase, ds_dir, db, args.dim)
        err.print(f"  {builds[phase]}")
    # the DuckDB file and its log only (the baselines' files beside it are not the store's)
    store_mib = sum(p.stat().st_size for p in (db, Path(f"{db}.wal")) if p.exists()) / 2**20
    free_mib = free_block_mib(db)
    index_mib = {k: 0.0 for k in builds}
    for folder in Path(f"{db}.indexes").iterdir():
        kind = json.loads((folder / "manifest.json").read_text())["spec"]
        key = "bm25" if kind["kind"] == "bm25" else kind["index"]
        index_mib[key] = folder_size(folder) / 2**20

    err.print("bm25s (index and queries, a process of its own) ...")
    ref_out = child("bm25s", ds_dir, db, args.dim)
    err.print(f"  {ref_out}")
    err.print("faiss IndexFlatIP (index and queries, a process of its own) ...")
    faiss_out = child("faiss", ds_dir, db, args.dim)
    err.print(f"  {faiss_out}")
    qids, qtexts, qrels = read_queries(ds_dir)
    ds = Dataset(name=ds_dir.name, path=ds_dir, corpus={},  # the corpus stays on disk
                 queries=dict(zip(qids, qtexts, strict=True)), qrels={"test": qrels})
    threads = len(os.sched_getaffinity(0))
    store = DuckDBStore(db, dim=args.dim, read_only=False)
    ix = StoreIndexes(store)
    emb = CachedEmbedder(get_embedder("synthetic"), store)
    qvecs = emb.embed(qtexts)
    lex = ix.lexical(FtsConfig())
    bm25s_index_s, ref_kernel_s, bm25s_s = (ref_out["index_s"], ref_out["kernel_s"],
                                            ref_out["text_s"])
    saved = np.load(f"{db}.bm25s.npz")
    doc_ids = lex.ids
    ref_bm25 = [[(doc_ids[int(d)], float(s)) for d, s in zip(docs, scores, strict=True)
                 if s > 0] for docs, scores in zip(saved["docs"], saved["scores"], strict=True)]

    ours_bm25, ours_bm25_s = timed(lambda: lex.search(qtexts, 100))
    # the same tokens: each engine's scoring and top-k alone (bm25s's measured in its phase)
    from aiblox.indexes.kernels import bm25_top_k, compiled_threads

    flat_terms, offsets = lex.query_terms(qtexts)
    mask = np.ones(lex.n_docs, dtype=np.bool_)
    zeros = np.zeros(len(qtexts), dtype=np.float32)
    with compiled_threads(threads):
        _, kernel_s = timed(lambda: bm25_top_k(lex.data, lex.indices, lex.indptr, flat_terms,
                                               offsets, zeros, mask, lex.n_docs, 100))

    # kNN: aiblox exact vs faiss flat (searched in its own process); HNSW vs exact
    exact = ix.vectors(model_id(args.dim), VectorConfig(index="exact"))
    faiss_s = faiss_out["search_s"]
    fsaved = np.load(f"{db}.faiss.npz")
    faiss_run = [[(exact.ids[int(i)], float(d)) for d, i in zip(drow, irow, strict=True)]
                 for drow, irow in zip(fsaved["scores"], fsaved["docs"], strict=True)]
    ours_exact, exact_s = timed(lambda: exact.search(qvecs, 100))
    exact10, exact10_s = timed(lambda: exact.search(qvecs, 10))
    # the default HNSW: the commands' own
    hnsw = ix.vectors(model_id(args.dim), VectorConfig(index="hnsw"))
    ours_hnsw, hnsw_s = timed(lambda: hnsw.search(qvecs, 100))
    hnsw10, hnsw10_s = timed(lambda: hnsw.search(qvecs, 10))
    recall = float(np.mean([len({d for d, _ in a[:10]} & {d for d, _ in b[:10]}) / 10
                            for a, b in zip(ours_hnsw, ours_exact, strict=True)]))
    recall10 = float(np.mean([len({d for d, _ in a} & {d for d, _ in b}) / 10
                              for a, b in zip(hnsw10, exact10, strict=True)]))

    # evaluations in this process: aiblox (store, indexes, ranx) vs the baselines' retrieval
    # (timed in their phases) + building the run + ranx
    retriever = HybridRetriever(store, emb)
    ev = {}
    for mode in ("bm25", "dense"):
        prefs = RetrievalPrefs(query_text="", mode=mode, top_k_items=100,
                               vector={"index": "exact"})  # type: ignore[arg-type]
        ev[mode] = timed(lambda p=prefs: evaluate_retrieval(retriever, ds, "test", p,
                                                           metrics=["ndcg@10"],
                                                           progress=False), repeat=2)

    def bm25s_job() -> float:
        run = {q: [(doc_ids[int(d)], float(s)) for d, s in zip(dr, sr, strict=True)]
               for q, dr, sr in zip(qids, saved["docs"], saved["scores"], strict=True)}
        return ranx_ndcg10(qrels, run)

    def faiss_job() -> float:
        return ranx_ndcg10(qrels, dict(zip(qids, faiss_run, strict=True)))

    (ref_bm25_ndcg, bm25s_job_s) = timed(bm25s_job, repeat=2)
    bm25s_job_s += bm25s_s  # its retrieval from text, timed in its phase
    (faiss_ndcg, faiss_job_s) = timed(faiss_job, repeat=2)
    faiss_job_s += faiss_s
    store.close()
    forget_loaded()
    parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    command_rows = whole_commands(ds_dir, db, qtexts[0], args.cold, args.dim)

    nq = len(qids)

    def ndcg_of(lists: list[list[tuple[str, float]]]) -> float:
        return ndcg10(qrels, dict(zip(qids, lists, strict=True)))

    n = args.docs
    default_vec = "hnsw" if n >= 300_000 else "exact"
    built_s = ing["seconds"] + builds["bm25"]["seconds"] + builds[default_vec]["seconds"]
    rows = [
        ["ingest (stream, batches of 5,000)", f"{ing['seconds']:.0f} s",
         f"{n / ing['seconds']:,.0f} docs/s", f"{ing['peak_rss_mib']:,.0f} MiB", "",
         f"CPU {ing['cpu_s']:.0f} s"],
        ["store on disk", f"{store_mib:,.0f} MiB", f"{free_mib:,.0f} MiB of it free blocks", "",
         "", ""],
    ]
    for phase, label in (("bm25", "BM25 index build"), ("exact", "exact vector index build"),
                         ("hnsw", "HNSW index build (the default: M 32, efC 200)")):
        b = builds[phase]
        rows.append([label, f"{b['seconds']:.0f} s", f"{index_mib[phase]:,.0f} MiB on disk",
                     f"{b['peak_rss_mib']:,.0f} MiB", "", f"CPU {b['cpu_s']:.0f} s"])
    rows += [
        [f"ingest + BM25 + {default_vec} index (the default vector index at this size)",
         f"{built_s / 60:.1f} min", "", "", "", ""],
        ["bm25s index (numba; tokenize + index, a process of its own)",
         f"{bm25s_index_s:.0f} s", "",
         f"{ref_out['peak_rss_mib']:,.0f} MiB", "", "baseline"],
        ["faiss IndexFlatIP build (from parquet, a process of its own)",
         f"{faiss_out['index_s']:.0f} s", "", f"{faiss_out['peak_rss_mib']:,.0f} MiB", "",
         "baseline"],
        ["BM25 from tokens, aiblox kernel", f"{nq / kernel_s:,.0f} q/s",
         f"{ref_kernel_s / kernel_s:.2f}x the speed of bm25s", "", "", "same tokens, top 100"],
        ["BM25 from tokens, bm25s retrieve (numba)", f"{nq / ref_kernel_s:,.0f} q/s",
         "baseline", "", "", ""],
        ["BM25 query, aiblox index (text in, ranked lists out)", f"{nq / ours_bm25_s:,.0f} q/s",
         f"{(nq / ours_bm25_s) / (nq / bm25s_s):.2f}x the speed of bm25s", "",
         f"{ndcg_of(ours_bm25):.4f}",
         f"top-10 equal to bm25s (ties aside): {same_lists(ours_bm25, ref_bm25):.1%}"],
        ["BM25 query, bm25s retrieve (numba; text in, arrays out)", f"{nq / bm25s_s:,.0f} q/s",
         "baseline",
         "",
         f"{ndcg_of(ref_bm25):.4f}", ""],
        ["exact kNN, aiblox", f"{nq / exact_s:,.0f} q/s",
         f"{faiss_s / exact_s:.2f}x the speed of faiss flat", "", f"{ndcg_of(ours_exact):.4f}",
         f"top-10 equal to faiss (ties aside): {same_lists(ours_exact, faiss_run):.1%}"],
        ["exact kNN, faiss IndexFlatIP", f"{nq / faiss_s:,.0f} q/s", "baseline", "",
         f"{ndcg_of(faiss_run):.4f}", ""],
        ["HNSW top 100, aiblox (faiss, efSearch 200)", f"{nq / hnsw_s:,.0f} q/s",
         f"{exact_s / hnsw_s:.1f}x the speed of exact", "", f"{ndcg_of(ours_hnsw):.4f}",
         f"recall@10 vs exact {recall:.4f}"],
        ["HNSW top 10, aiblox (faiss, efSearch 128)", f"{nq / hnsw10_s:,.0f} q/s",
         f"{exact10_s / hnsw10_s:.1f}x the speed of exact top 10", "", "",
         f"recall@10 vs exact {recall10:.4f}"],
        ["evaluate_retrieval, bm25 (retrieve + ranx, in process)", f"{ev['bm25'][1]:.2f} s",
         f"{ev['bm25'][1] / bm25s_job_s:.2f}x the time of bm25s (numba) + ranx "
         f"({bm25s_job_s:.2f} s)", "",
         f"{ev['bm25'][0].metrics['ndcg@10']:.4f}", f"bm25s + ranx {ref_bm25_ndcg:.4f}"],
        ["evaluate_retrieval, dense exact (retrieve + ranx, in process)",
         f"{ev['dense'][1]:.2f} s",
         f"{ev['dense'][1] / faiss_job_s:.2f}x the time of faiss flat + ranx ({faiss_job_s:.2f} s)",
         "", f"{ev['dense'][0].metrics['ndcg@10']:.4f}", f"faiss + ranx {faiss_ndcg:.4f}"],
        ["this benchmark's own process (indexes loaded, no baseline in it)", "", "",
         f"{parent_rss:,.0f} MiB", "", ""],
    ]
    rows += command_rows
    load = os.getloadavg()
    print_table(f"Retrieval at scale: {n:,} documents, {nq:,} queries",
                ["what", "time or rate", "against the baseline", "peak RSS", "nDCG@10",
                 "check"], rows, args.markdown,
                right=("time or rate", "peak RSS", "nDCG@10"),
                notes=[f"Measured {environment_line()}; {threads} threads for every engine; "
                       f"{time.perf_counter() - t_all:.0f} s in all; load average at the end "
                       f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min).",
                       WHOLE_NOTE,
                       "Against the baseline: a rate's ratio is our speed over the "
                       "baseline's (above 1: faster), a time's ratio our time over the "
                       "baseline's (below 1: faster).",
                       "Synthetic collection (benchmarks/scale.py): real sentences from the "
                       "shared collections, queries of five words of one document, seeded "
                       f"clustered {args.dim}-d vectors imported from parquet (no model runs)."])
    return 0


if __name__ == "__main__":
    sys.exit(main())
