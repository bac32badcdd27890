"""What the notebooks compute: cached signals re-fused per setting, chunk views, policy
comparisons and one question traced through the whole pipeline.

The marimo notebooks in ``notebooks/`` are thin over these functions (no pipeline logic lives
only in a notebook), so what a researcher sees there is what a test can assert on here.

* :func:`open_workspace` loads a dataset into a store and computes the full-text and vector
  lists of every query once, at the deepest depth offered; :func:`score_point` then fuses those
  cached lists under one scoring setting and scores the run with ranx (milliseconds on the
  sample, about a second on SciFact), and :func:`weight_curve` does that along a weight axis
  built from integer steps (``i / steps``, never a float accumulation).
* :func:`chunk_table` shows how a chunker cut one document; :func:`compare_chunkers` runs the
  chunk-level evaluation (:func:`aiblox.eval.chunk_eval.evaluate_chunks`) per chunker.
* :func:`retrieve_bundles`, :func:`answer_all` and :func:`answer_metrics` answer a query sample
  under a selection policy; :func:`compare_per_query` gives metric deltas with a paired
  randomization test, and win/tie/loss counts; :func:`evidence_changes` lists what evidence a
  second policy selected differently.
* :func:`mlflow_runs` lists the runs of the MLflow store the CLI's sweeps log to (an empty
  frame when there is none yet); :func:`compare_mlflow_runs` compares two of them.
* :func:`inspect_question` runs one question through retrieval, late chunking, selection,
  prompt building, the reader and validation, and returns every artifact with its hashes and
  its evidence pack; :func:`evidence_pack` builds the pack of any answered query (with the fixed
  :data:`PACK_RETRIEVED_AT`, so the same inputs give the same pack id) and :func:`diff_packs`
  lists what differs between two packs (decision, sources added or removed, prompts, hashes).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aiblox.assembly import (
    AnswerResult,
    answer_question,
    find_policies_dir,
    get_llm,
    load_policy,
)
from aiblox.chunking import make_chunker
from aiblox.contracts.retrieval import (
    ChunkingConfig,
    EvidenceChunk,
    RetrievalBundle,
    RetrievalPrefs,
)
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.eval.chunk_eval import evaluate_chunks
from aiblox.eval.datasets import Dataset, GoldAnswer, load_dataset
from aiblox.eval.metrics import DEFAULT_METRICS, evaluate_run
from aiblox.eval.runner import config_hash, run_hash
from aiblox.eval.workspace import default_store_path, prepare_store
from aiblox.evidence import DefaultEvidencePacker, EvidencePack, answer_evidence_pack
from aiblox.fusion.types import RankedList
from aiblox.hashing import canonical_json, sha256_hex, sha256_text
from aiblox.retrieval.late_chunking import make_retriever
from aiblox.retrieval.retriever import HybridRetriever, SignalRuns
from aiblox.stores import Store, open_store
from aiblox.text import count_tokens

__all__ = [
    "ANSWER_METRICS",
    "DEFAULT_DATASET",
    "DEFAULT_EMBEDDER",
    "DEFAULT_TRACKING_URI",
    "FusionPoint",
    "PACK_RETRIEVED_AT",
    "QueryTrace",
    "Workspace",
    "answer_all",
    "answer_metrics",
    "available_datasets",
    "available_embedders",
    "available_policies",
    "baseline_prefs",
    "chunk_table",
    "compare_chunkers",
    "compare_mlflow_runs",
    "compare_per_query",
    "contains_answer",
    "covers_span",
    "diff_packs",
    "evidence_pack",
    "evidence_changes",
    "fusion_prefs",
    "inspect_question",
    "log_fusion_point",
    "mlflow_runs",
    "moved_queries",
    "open_workspace",
    "paired_randomization_test",
    "retrieve_bundles",
    "score_point",
    "weight_curve",
]

DEFAULT_DATASET = "sample"
"""The project's own small dataset: fast and offline."""
DEFAULT_EMBEDDER = "hashing"
"""The offline hashing embedder (no model to load)."""
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
"""The MLflow store ``aiblox sweep`` logs to (the same default as the CLI)."""
PACK_RETRIEVED_AT = "2000-01-01T00:00:00Z"
"""The retrieval time the notebooks record in evidence packs: fixed, so that the same question
on the same store and settings gives the same pack id (``aiblox answer --retrieved-at`` with
this value reproduces it)."""

ANSWER_METRICS: tuple[str, ...] = (
    "span_in_cited", "span_in_selected", "gold_in_answer", "refused", "selected_chunks",
    "evidence_tokens",
)
"""Per-query answer metrics of :func:`answer_metrics` (1/0 flags, or counts)."""


# -- datasets and workspaces --------------------------------------------------------------
def _dataset_roots() -> list[Path]:
    roots = [Path(r) for r in os.environ.get("AIBLOX_DATASETS", "").split(os.pathsep) if r]
    repo = Path(__file__).resolve().parents[2]
    roots += [Path("datasets"), Path("../shared/datasets"), repo / "datasets",
              repo.parent / "shared" / "datasets"]
    return roots


def available_datasets() -> list[str]:
    """Dataset names the notebooks offer: ``sample`` first, then every BEIR-layout folder
    found where :func:`aiblox.eval.find_dataset` looks (``../shared/datasets`` and so on)."""
    names: set[str] = set()
    for root in _dataset_roots():
        if root.is_dir():
            names |= {p.name for p in root.iterdir() if (p / "queries.jsonl").is_file()}
    names.discard(DEFAULT_DATASET)
    return [DEFAULT_DATASET, *sorted(names)]


def available_embedders() -> list[str]:
    """``hashing`` always; ``minilm`` when sentence-transformers is installed."""
    out = [DEFAULT_EMBEDDER]
    if importlib.util.find_spec("sentence_transformers") is not None:
        out.append("minilm")
    return out


def available_policies() -> list[str]:
    """Selection policy versions in ``evals/policies`` (sorted names)."""
    folder = find_policies_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder is not None else []


@dataclass
class Workspace:
    """A dataset in a store, with every query's full-text and vector lists computed once."""

    dataset: Dataset
    split: str
    store: Store
    embedder: CachedEmbedder
    retriever: HybridRetriever
    queries: list[tuple[str, str]]
    signals: SignalRuns
    max_depth: int
    db: str

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        """The split's judgements."""
        return self.dataset.qrels[self.split]

    @property
    def query_text(self) -> dict[str, str]:
        """``{qid: text}`` of the split's queries."""
        return dict(self.queries)

    def index_version(self) -> str:
        """Short hash of the store's item content hashes (the CLI's ``index_version``)."""
        return sha256_hex(self.store.item_hashes())[:16]

    def close(self) -> None:
        """Close the store."""
        self.store.close()


def default_db(dataset: str) -> str:
    """``:memory:`` for the sample; the dataset's default store otherwise (the CLI's
    :func:`~aiblox.eval.workspace.default_store_path`), so a notebook reuses what ``aiblox eval``
    ingested (and the other way round)."""
    return ":memory:" if dataset == DEFAULT_DATASET else default_store_path(dataset)


def open_workspace(dataset: str = DEFAULT_DATASET, embedder: str = DEFAULT_EMBEDDER,
                   split: str = "test", db: str | None = None, max_depth: int = 100,
                   backend: str = "duckdb") -> Workspace:
    """Load ``dataset``, make the store hold it (only what is missing), and compute the hybrid
    signals of every query of ``split`` at ``max_depth``."""
    if backend not in ("duckdb", "postgres"):
        raise ValueError(f"unknown backend {backend!r}; known: duckdb, postgres")
    if backend == "postgres" and not (db or "").startswith("postgres"):
        raise ValueError("backend 'postgres' needs db='postgresql+psycopg://...' (the server URL)")
    if max_depth < 1:
        raise ValueError(f"max_depth must be >= 1, got {max_depth}")
    ds = load_dataset(dataset, splits=[split])
    path = db or (":memory:" if ds.name == DEFAULT_DATASET else default_store_path(ds))
    if path != ":memory:" and "://" not in path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    emb_model = get_embedder(embedder)
    store = open_store(path, dim=emb_model.dim)
    emb = CachedEmbedder(emb_model, store, progress=False)
    prepare_store(store, ds, emb, progress=False)
    retriever = HybridRetriever(store, emb)
    queries = ds.split_queries(split)
    base = RetrievalPrefs(query_text="", mode="hybrid", top_k_items=max_depth,
                          fts={"top_k": max_depth},  # type: ignore[arg-type]
                          vector={"top_k": max_depth})  # type: ignore[arg-type]
    group = [base.model_copy(update={"query_text": t, "query_id": q}) for q, t in queries]
    signals = retriever.signals(group) if group else SignalRuns(text=[], vec=[])
    return Workspace(dataset=ds, split=split, store=store, embedder=emb, retriever=retriever,
                     queries=queries, signals=signals, max_depth=max_depth, db=path)


# -- fusion -------------------------------------------------------------------------------
def fusion_prefs(blend: str = "rrf", w_text: float = 0.35, rrf_k: int = 60,
                 normalize: str = "sigmoid", depth: int = 100, missing: str = "zero",
                 top_k: int = 100, mode: str = "hybrid") -> RetrievalPrefs:
    """Retrieval preferences of one fusion setting. ``w_text`` is the text share: the linear
    blend uses ``(w_text, 1 - w_text)``, RRF the per-signal weights ``(w_text, 1 - w_text)``
    scaled so that 0.5 is classic unweighted RRF."""
    if not 0.0 <= w_text <= 1.0:
        raise ValueError(f"w_text must lie in [0, 1], got {w_text}")
    w_vec = round(1.0 - w_text, 12)
    return RetrievalPrefs(
        query_text="", mode=mode, top_k_items=top_k,  # type: ignore[arg-type]
        fts={"top_k": depth}, vector={"top_k": depth},  # type: ignore[arg-type]
        scoring={"blend": blend, "w_text": w_text, "w_vec": w_vec,  # type: ignore[arg-type]
                 "normalize": normalize, "rrf_k": rrf_k, "missing": missing,
                 "rrf_w_text": round(2 * w_text, 12), "rrf_w_vec": round(2 * w_vec, 12)})


def baseline_prefs(depth: int = 100, top_k: int = 100) -> RetrievalPrefs:
    """The package's default fusion (classic RRF, k=60) at ``depth``: what moves are measured
    against."""
    return RetrievalPrefs(query_text="", mode="hybrid", top_k_items=top_k,
                          fts={"top_k": depth}, vector={"top_k": depth})  # type: ignore[arg-type]


@dataclass
class FusionPoint:
    """One fusion setting scored on the workspace's split."""

    prefs: RetrievalPrefs
    run: dict[str, RankedList]
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    hashes: dict[str, str] = field(default_factory=dict)


def _fuse(ws: Workspace, prefs: RetrievalPrefs) -> dict[str, RankedList]:
    if prefs.fts.top_k > ws.max_depth or prefs.vector.top_k > ws.max_depth:
        raise ValueError(f"depth above the cached depth {ws.max_depth}")
    sig = SignalRuns(text=[t[:prefs.fts.top_k] for t in ws.signals.text],
                     vec=[v[:prefs.vector.top_k] for v in ws.signals.vec])
    hits = HybridRetriever.fuse([prefs] * len(ws.queries), sig)
    return {q: [(h.doc_id, h.score) for h in hs]
            for (q, _), hs in zip(ws.queries, hits, strict=True)}


def score_point(ws: Workspace, prefs: RetrievalPrefs,
                metrics: Sequence[str] = DEFAULT_METRICS) -> FusionPoint:
    """Fuse the cached signals under ``prefs`` and score the run with ranx."""
    run = _fuse(ws, prefs)
    means, per_query = evaluate_run(ws.qrels, run, metrics)
    chash, _ = config_hash(prefs, ws.embedder.model_id, ws.store.kind)
    return FusionPoint(prefs=prefs, run=run, metrics=means, per_query=per_query,
                       hashes={"dataset": ws.dataset.hash, "config": chash,
                               "run": run_hash(run)})


def weight_curve(ws: Workspace, prefs: RetrievalPrefs, metric: str = "ndcg@10",
                 steps: int = 10) -> pd.DataFrame:
    """``metric`` along the text weight ``w_text = i / steps`` (i = 0..steps) with every other
    setting of ``prefs`` kept: columns ``w_text`` and ``value``."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    s = prefs.scoring
    rows = []
    for i in range(steps + 1):
        w = i / steps
        p = fusion_prefs(blend=s.blend, w_text=w, rrf_k=s.rrf_k, normalize=s.normalize,
                         depth=prefs.fts.top_k, missing=s.missing, top_k=prefs.top_k_items)
        means, _ = evaluate_run(ws.qrels, _fuse(ws, p), [metric])
        rows.append({"w_text": w, "value": means[metric]})
    return pd.DataFrame(rows, columns=["w_text", "value"])


def _first_relevant(hits: RankedList, rel: Mapping[str, int]) -> int | None:
    for i, (d, _) in enumerate(hits, start=1):
        if rel.get(d, 0) > 0:
            return i
    return None


def moved_queries(ws: Workspace, before: FusionPoint, after: FusionPoint,
                  metric: str = "ndcg@10", cutoff: int = 10) -> pd.DataFrame:
    """Per judged query: ``metric`` before and after, its delta, the first relevant rank and
    the top document before and after, and whether the top ``cutoff`` changed. Sorted by
    ``|delta|`` desc, then query id."""
    text = ws.query_text
    rows = []
    for q in sorted(before.per_query[metric]):
        b, a = before.per_query[metric][q], after.per_query[metric].get(q, 0.0)
        rb, ra = before.run.get(q, []), after.run.get(q, [])
        rel = ws.qrels.get(q, {})
        rows.append({
            "qid": q, "query": text.get(q, ""), "before": round(b, 4), "after": round(a, 4),
            "delta": round(a - b, 4),
            "first_rel_before": _first_relevant(rb, rel),
            "first_rel_after": _first_relevant(ra, rel),
            "top1_before": rb[0][0] if rb else None, "top1_after": ra[0][0] if ra else None,
            "top_changed": [d for d, _ in rb[:cutoff]] != [d for d, _ in ra[:cutoff]],
        })
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_abs"] = df["delta"].abs()
    return df.sort_values(["_abs", "qid"], ascending=[False, True]).drop(columns="_abs") \
        .reset_index(drop=True)


# -- chunking -----------------------------------------------------------------------------
def chunk_table(item_id: str, text: str, chunker: str = "sentences",
                max_chunk_tokens: int | None = None, overlap_tokens: int | None = None,
                include_headers: bool = True) -> pd.DataFrame:
    """How ``chunker`` cuts ``text``: one row per chunk with its offsets, token count, the
    characters and tokens it shares with the previous chunk, and its heading path."""
    config = ChunkingConfig(chunker_id=chunker, max_chunk_tokens=max_chunk_tokens,
                            overlap_tokens=overlap_tokens, include_headers=include_headers)
    chunks = make_chunker(config).chunk(item_id, text, sha256_text(text))
    rows = []
    prev_end: int | None = None
    for c in chunks:
        overlap = max(0, prev_end - c.start_idx) if prev_end is not None else 0
        shared = text[c.start_idx:c.start_idx + overlap]
        rows.append({
            "position": c.position, "start": c.start_idx, "end": c.end_idx,
            "chars": c.end_idx - c.start_idx, "tokens": c.token_count,
            "overlap_chars": overlap, "overlap_tokens": count_tokens(shared) if shared else 0,
            "heading_path": " > ".join(c.heading_path or []), "chunk_id": c.chunk_id,
            "text": c.text,
        })
        prev_end = c.end_idx
    return pd.DataFrame(rows, columns=["position", "start", "end", "chars", "tokens",
                                       "overlap_chars", "overlap_tokens", "heading_path",
                                       "chunk_id", "text"])


def compare_chunkers(ws: Workspace, chunkers: Sequence[str], limit: int | None = 12,
                     top_k_items: int = 10, top_k_chunks: int = 12,
                     k_values: Sequence[int] = (1, 5), max_chunk_tokens: int | None = None,
                     ) -> pd.DataFrame:
    """Chunk-level evaluation of each chunker on the first ``limit`` queries: answer recall@k
    (datasets with gold answers), mean evidence tokens, and the max-passage nDCG@10."""
    retriever = make_retriever(ws.store, ws.embedder)
    rows = []
    for name in chunkers:
        prefs = RetrievalPrefs(query_text="", mode="hybrid", top_k_items=top_k_items,
                               top_k_chunks=top_k_chunks,
                               chunking={"chunker_id": name,  # type: ignore[arg-type]
                                         "max_chunk_tokens": max_chunk_tokens})
        r = evaluate_chunks(retriever, ws.dataset, ws.split, prefs, k_values=k_values,
                            limit=limit, progress=False)
        row: dict[str, Any] = {"chunker": name, "chunker_id": r.chunker_id,
                               "queries": r.n_queries}
        row.update({k: round(v, 4) for k, v in r.answer_recall.items()})
        row.update({f"tokens_{k.lstrip('@')}": round(v, 1)
                    for k, v in r.evidence_tokens.items()})
        row["passage_ndcg@10"] = round(r.projection_metrics.get("ndcg@10", float("nan")), 4)
        rows.append(row)
    return pd.DataFrame(rows)


# -- answers under a policy -----------------------------------------------------------------
def retrieve_bundles(ws: Workspace, limit: int | None = 12, chunker: str = "sentences",
                     top_k_chunks: int = 12) -> dict[str, RetrievalBundle]:
    """Late-chunked retrieval bundles of the first ``limit`` queries of the split (sorted ids),
    retrieved once so that every policy is compared on the same evidence."""
    retriever = make_retriever(ws.store, ws.embedder)
    queries = sorted(ws.queries)[:limit]
    prefs = [RetrievalPrefs(query_text=t, query_id=q, top_k_chunks=top_k_chunks,
                            chunking={"chunker_id": chunker})  # type: ignore[arg-type]
             for q, t in queries]
    bundles = retriever.search_many(prefs) if prefs else []
    return {q: b for (q, _), b in zip(queries, bundles, strict=True)}


def answer_all(ws: Workspace, bundles: Mapping[str, RetrievalBundle], policy: str,
               llm: str = "extractive") -> dict[str, AnswerResult]:
    """Answer every bundled query under ``policy`` (a version name or a path)."""
    pol, reader = load_policy(policy), get_llm(llm)
    index_version = ws.index_version()
    text = ws.query_text
    out = {}
    for q in sorted(bundles):
        b = bundles[q]
        top_k = int(b.stats.params.get("top_k_chunks", len(b.evidence)) or len(b.evidence))
        out[q] = answer_question(text[q], b, pol, reader, index_version=index_version,
                                 embedding_model=ws.embedder.model_id,
                                 retrieval_top_k=max(top_k, 1))
    return out


def covers_span(ev: EvidenceChunk, gold: GoldAnswer) -> bool:
    """Whether ``ev`` is cut from the gold document and contains one gold answer span whole."""
    if ev.item_id != gold.corpus_id or ev.start_idx is None or ev.end_idx is None:
        return False
    return any(ev.start_idx <= s and s + len(a) <= ev.end_idx
               for a, s in zip(gold.answers, gold.answer_starts, strict=True))


def contains_answer(text: str | None, gold: GoldAnswer) -> bool:
    """Whether ``text`` contains one gold answer string (casefolded)."""
    if not text:
        return False
    folded = text.casefold()
    return any(a.casefold() in folded for a in gold.answers if a.strip())


def answer_metrics(ws: Workspace, bundles: Mapping[str, RetrievalBundle],
                   results: Mapping[str, AnswerResult]) -> dict[str, dict[str, float]]:
    """Per-query answer metrics ``{metric: {qid: value}}`` (see :data:`ANSWER_METRICS`);
    the span metrics need gold answers (``answers.jsonl``) and are left out without them."""
    out: dict[str, dict[str, float]] = {m: {} for m in ANSWER_METRICS}
    for q in sorted(results):
        r, b = results[q], bundles[q]
        by_chunk = {ev.chunk_id: ev for ev in b.evidence}
        selected = [by_chunk[s.chunk_id] for s in r.answer_bundle.selected_evidence
                    if s.chunk_id in by_chunk]
        cited = set(r.validation.cited_chunk_ids)
        gold = ws.dataset.answers.get(q)
        if gold is not None and gold.answers:
            out["span_in_selected"][q] = float(any(covers_span(e, gold) for e in selected))
            out["span_in_cited"][q] = float(any(covers_span(e, gold) for e in selected
                                                if e.chunk_id in cited))
            out["gold_in_answer"][q] = float(contains_answer(r.answer_text, gold)
                                             and not r.validation.is_refusal)
        out["refused"][q] = float(r.validation.is_refusal)
        out["selected_chunks"][q] = float(len(r.answer_bundle.selected_evidence))
        out["evidence_tokens"][q] = float(sum(s.token_count
                                              for s in r.answer_bundle.selected_evidence))
    return {m: v for m, v in out.items() if v}


# -- comparisons ----------------------------------------------------------------------------
def paired_randomization_test(a: Sequence[float], b: Sequence[float],
                              n_resamples: int = 10_000, seed: int = 42) -> float:
    """Two-sided p-value of Fisher's paired randomization test on the mean difference (the
    test ranx ``compare`` runs by default). Exact over all sign flips up to 16 pairs; a seeded
    Monte Carlo sample of ``n_resamples`` flips above, so the same input gives the same p."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if d.shape != (len(a),) or len(a) != len(b):
        raise ValueError("paired test needs two sequences of the same length")
    n = len(d)
    if n == 0 or not np.any(d):
        return 1.0
    observed = abs(d.mean())
    if n <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((1.0, -1.0), size=(n_resamples, n))
    means = np.abs((signs * d).mean(axis=1))
    count = int(np.sum(means >= observed - 1e-12))
    if n <= 16:
        return count / len(signs)
    return (count + 1) / (n_resamples + 1)


def compare_per_query(a: Mapping[str, Mapping[str, float]], b: Mapping[str, Mapping[str, float]],
                      higher_is_better: Mapping[str, bool] | None = None,
                      alpha: float = 0.05) -> pd.DataFrame:
    """Metric deltas B - A over the queries both have, with the paired randomization p-value
    and win/tie/loss counts of B against A (a win is a better value under the metric's
    direction: lower is better for ``refused``, ``evidence_tokens`` and ``selected_chunks``
    unless ``higher_is_better`` says otherwise)."""
    lower = {"refused", "evidence_tokens", "selected_chunks"}
    rows = []
    for m in sorted(set(a) & set(b)):
        qids = sorted(set(a[m]) & set(b[m]))
        if not qids:
            continue
        va = [a[m][q] for q in qids]
        vb = [b[m][q] for q in qids]
        up = (higher_is_better or {}).get(m, m not in lower)
        diff = np.asarray(vb) - np.asarray(va)
        better = diff > 0 if up else diff < 0
        worse = diff < 0 if up else diff > 0
        p = paired_randomization_test(va, vb)
        rows.append({"metric": m, "n": len(qids), "A": round(float(np.mean(va)), 4),
                     "B": round(float(np.mean(vb)), 4), "delta": round(float(diff.mean()), 4),
                     "p_value": round(p, 4), "significant": bool(p < alpha),
                     "wins": int(better.sum()), "ties": int((diff == 0).sum()),
                     "losses": int(worse.sum())})
    return pd.DataFrame(rows, columns=["metric", "n", "A", "B", "delta", "p_value",
                                       "significant", "wins", "ties", "losses"])


def evidence_changes(ws: Workspace, a: Mapping[str, AnswerResult],
                     b: Mapping[str, AnswerResult]) -> pd.DataFrame:
    """Per query whose selected or cited evidence differs between A and B: the chunks only A
    or only B selected, B's drop reasons for the chunks A kept, and both answers."""
    text = ws.query_text
    rows = []
    for q in sorted(set(a) & set(b)):
        ra, rb = a[q], b[q]
        sa = [s.chunk_id for s in ra.answer_bundle.selected_evidence]
        sb = [s.chunk_id for s in rb.answer_bundle.selected_evidence]
        ca, cb = ra.validation.cited_chunk_ids, rb.validation.cited_chunk_ids
        if sa == sb and ca == cb and ra.answer_text == rb.answer_text:
            continue
        drops_b = {d.chunk_id: d.reason for d in rb.answer_bundle.metrics.dropped}
        only_a = [c for c in sa if c not in set(sb)]
        rows.append({
            "qid": q, "query": text.get(q, ""),
            "only_A": ", ".join(only_a), "only_B": ", ".join(c for c in sb if c not in set(sa)),
            "B_drop_reasons": ", ".join(sorted({drops_b.get(c, "") for c in only_a} - {""})),
            "cited_A": ", ".join(ca), "cited_B": ", ".join(cb),
            "answer_A": ra.answer_text or "", "answer_B": rb.answer_text or "",
        })
    return pd.DataFrame(rows, columns=["qid", "query", "only_A", "only_B", "B_drop_reasons",
                                       "cited_A", "cited_B", "answer_A", "answer_B"])


# -- MLflow -------------------------------------------------------------------------------
def mlflow_runs(tracking_uri: str = DEFAULT_TRACKING_URI, max_results: int = 500) -> pd.DataFrame:
    """The runs of the MLflow store (``mlflow.search_runs`` over every experiment), newest
    first; an empty frame when mlflow is not installed or the store does not exist yet (a
    missing SQLite file is not created)."""
    if importlib.util.find_spec("mlflow") is None:
        return pd.DataFrame()
    import mlflow

    from aiblox.eval.sweep.tracking import TrackingStoreError, check_tracking_store

    try:
        check_tracking_store(tracking_uri)  # a missing store is not created
    except TrackingStoreError:
        return pd.DataFrame()

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    try:
        df = mlflow.search_runs(search_all_experiments=True, max_results=max_results,
                                output_format="pandas")
    except Exception:  # noqa: BLE001 - an unreadable store shows as "no runs"
        return pd.DataFrame()
    finally:
        mlflow.set_tracking_uri(previous)
    return df if isinstance(df, pd.DataFrame) else pd.DataFrame()


def _per_query_artifacts(run_id: str, tracking_uri: str) -> dict[str, dict[str, float]]:
    """Per-query metrics ``{"<split>:<metric>": {qid: value}}`` from a run's parquet artifacts:
    the long layout ``aiblox sweep`` logs (``per_query.<split>.parquet`` with ``query_id``,
    ``metric``, ``value``) or a wide one (a query id column and one column per metric);
    ``{}`` when a run has none."""
    import tempfile

    out: dict[str, dict[str, float]] = {}
    from aiblox.eval.sweep.tracking import tracking_client

    try:
        client = tracking_client(tracking_uri)  # a reader: never creates a store
        # evidence.<split>.parquet lists kept chunks (rank is a position, not a metric)
        files = sorted(f for f in _walk_artifacts(client, run_id, "")
                       if f.endswith(".parquet") and not Path(f).name.startswith("evidence."))
        with tempfile.TemporaryDirectory() as tmp:
            for f in files:
                df = pd.read_parquet(client.download_artifacts(run_id, f, tmp))
                split = Path(f).stem.removeprefix("per_query.")
                qcol = next((c for c in ("query_id", "qid") if c in df.columns), None)
                if qcol is None:
                    continue
                if {"metric", "value"} <= set(df.columns):
                    for (metric, q, v) in zip(df["metric"], df[qcol], df["value"], strict=True):
                        out.setdefault(f"{split}:{metric}", {})[str(q)] = float(v)
                    continue
                for col in df.columns:
                    if col != qcol and pd.api.types.is_numeric_dtype(df[col]):
                        out[f"{split}:{col}"] = {str(q): float(v)
                                                 for q, v in zip(df[qcol], df[col], strict=True)}
    except Exception:  # noqa: BLE001 - a run without readable artifacts has no per-query data
        return {}
    return out


def _walk_artifacts(client: Any, run_id: str, path: str) -> list[str]:
    out = []
    for info in client.list_artifacts(run_id, path or None):
        if info.is_dir:
            out += _walk_artifacts(client, run_id, info.path)
        else:
            out.append(info.path)
    return out


def _flatten(value: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(value, dict) and value:
        out: dict[str, str] = {}
        for k in sorted(value):
            out.update(_flatten(value[k], f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): canonical_json(value) if isinstance(value, dict | list)
            else str(value)}


def log_fusion_point(ws: Workspace, point: FusionPoint,
                     tracking_uri: str = DEFAULT_TRACKING_URI,
                     experiment: str = "aiblox-notebooks") -> str:
    """Log a fusion setting from a notebook to the MLflow store the CLI's sweeps use, in their
    layout: params are the flattened config, metrics ``<split>.<metric>`` (``@`` written
    ``_at_``), tags the hashes, and a ``per_query.<split>.parquet`` artifact
    (``query_id, metric, value``); artifacts beside a SQLite store (``<db dir>/artifacts``).
    Returns the run id."""
    import tempfile

    from aiblox.eval.sweep.tracking import artifact_location, tracking_client

    client = tracking_client(tracking_uri, create=True)  # schema made once, under a file lock
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp is not None else client.create_experiment(
        experiment, artifact_location=artifact_location(tracking_uri, experiment))
    _, config = config_hash(point.prefs, ws.embedder.model_id, ws.store.kind)
    s = point.prefs.scoring
    label = (f"notebook {s.blend} w_text={s.w_text} k={s.rrf_k} {s.normalize} "
             f"depth={point.prefs.fts.top_k}")
    run = client.create_run(exp_id, run_name=label, tags={
        "aiblox.kind": "notebook", "aiblox.config_hash": point.hashes["config"],
        "aiblox.dataset_hash": point.hashes["dataset"],
        f"aiblox.run_hash.{ws.split}": point.hashes["run"], "aiblox.label": label})
    rid = run.info.run_id
    for k, v in sorted(_flatten({**config, "dataset": ws.dataset.name}).items()):
        client.log_param(rid, k, v[:6000])
    for m, score in sorted(point.metrics.items()):
        client.log_metric(rid, f"{ws.split}.{m.replace('@', '_at_')}", float(score))
    rows = [{"query_id": q, "metric": m, "value": v}
            for m, vals in sorted(point.per_query.items()) for q, v in sorted(vals.items())]
    with tempfile.TemporaryDirectory() as tmp:
        pd.DataFrame(rows, columns=["query_id", "metric", "value"]).to_parquet(
            Path(tmp) / f"per_query.{ws.split}.parquet", index=False)
        client.log_artifacts(rid, tmp)
    client.set_terminated(rid, status="FINISHED")
    return rid


def compare_mlflow_runs(run_a: str, run_b: str, tracking_uri: str = DEFAULT_TRACKING_URI,
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two MLflow runs side by side: ``(logged metric deltas, per-query comparison)``; the
    second frame is empty unless both runs logged per-query metrics as parquet artifacts."""
    runs = mlflow_runs(tracking_uri)
    if runs.empty:
        return pd.DataFrame(), pd.DataFrame()
    by_id = runs.set_index("run_id")
    cols = sorted(c for c in runs.columns if c.startswith("metrics."))
    rows = []
    for c in cols:
        va, vb = by_id.at[run_a, c], by_id.at[run_b, c]
        if pd.isna(va) and pd.isna(vb):
            continue
        rows.append({"metric": c[len("metrics."):], "A": va, "B": vb,
                     "delta": (vb - va) if not (pd.isna(va) or pd.isna(vb)) else None})
    per_a = _per_query_artifacts(run_a, tracking_uri)
    per_b = _per_query_artifacts(run_b, tracking_uri)
    return pd.DataFrame(rows), compare_per_query(per_a, per_b)


# -- one question -------------------------------------------------------------------------
@dataclass
class QueryTrace:
    """One question through the whole pipeline, with every artifact."""

    question: str
    prefs: RetrievalPrefs
    bundle: RetrievalBundle
    result: AnswerResult
    sources: list[Any]
    candidates: pd.DataFrame
    chunks: pd.DataFrame
    selected: pd.DataFrame
    dropped: pd.DataFrame
    hashes: dict[str, str | None]
    pack: EvidencePack
    """The evidence pack of the answer (built with :data:`PACK_RETRIEVED_AT`)."""

    @property
    def prompt_bytes(self) -> bytes:
        """The exact prompt sent to the reader (UTF-8)."""
        return self.result.prompt.prompt_text.encode("utf-8")


def evidence_pack(ws: Workspace, question: str, bundle: RetrievalBundle, result: AnswerResult,
                  *, retrieved_at: str = PACK_RETRIEVED_AT, query_id: str | None = None,
                  ) -> EvidencePack:
    """The evidence pack of ``question`` answered as ``result`` from ``bundle``, built as
    ``aiblox answer`` builds it (source cards for the links, the items' full texts from the
    store for the content hashes), at the fixed ``retrieved_at``. The retrieval's cache counts
    are recorded in the pack's ``observations``, outside its id: a cold and a warm chunk cache
    give the same pack id."""
    cards = DefaultEvidencePacker().pack(bundle.candidates, bundle.evidence)
    items = ws.store.get_items(sorted({c.item_id for c in bundle.candidates}))
    return answer_evidence_pack(question, bundle, result, retrieved_at=retrieved_at,
                                source_cards=cards,
                                item_texts={k: v.text for k, v in items.items()},
                                query_id=query_id)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else canonical_json(value)


def _flat(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for k in sorted(value):
            _flat(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            # tool calls by kind (retrieval, llm), prompts by template, others by position
            key = v.get("kind") or v.get("template_name") or str(i)
            _flat(v, f"{prefix}[{key}]", out)
    else:
        out[prefix] = _cell(value)


_DIFF_COLUMNS = ["field", "change", "A", "B"]


def diff_packs(a: EvidencePack, b: EvidencePack) -> pd.DataFrame:
    """What differs from pack A to pack B, one row per change (``field``, ``change``, ``A``,
    ``B``): the pack id first, then the decision, then the sources (``added`` / ``removed`` by
    their ``internal_ref``, or uri, or name; for a source in both: a moved position and a changed
    excerpt, content hash or confidence), then every other field of the hashed content (tool
    calls keyed by kind, prompts by template) in field order. ``created_at``, the signature and
    the observations are not content and are left out. Empty when the packs have the same
    content."""
    rows: list[dict[str, str]] = []
    if a.pack_id != b.pack_id:
        rows.append({"field": "pack_id", "change": "changed", "A": a.pack_id, "B": b.pack_id})
    da, db_ = a.decision.model_dump(mode="json"), b.decision.model_dump(mode="json")
    for k in ("kind", "status", "reason", "text"):
        if da.get(k) != db_.get(k):
            rows.append({"field": f"decision.{k}", "change": "changed", "A": _cell(da.get(k)),
                         "B": _cell(db_.get(k))})

    def ref(s: Any) -> str:
        return s.internal_ref or s.uri or s.name

    sa = {ref(s): (i, s) for i, s in enumerate(a.sources, 1)}
    sb = {ref(s): (i, s) for i, s in enumerate(b.sources, 1)}
    for r, (i, _s) in sa.items():
        if r not in sb:
            rows.append({"field": "sources", "change": "removed", "A": f"[{i}] {r}", "B": ""})
    for r, (i, _s) in sb.items():
        if r not in sa:
            rows.append({"field": "sources", "change": "added", "A": "", "B": f"[{i}] {r}"})
    for r, (i, s) in sa.items():
        if r not in sb:
            continue
        j, t = sb[r]
        if i != j:
            rows.append({"field": f"sources[{r}].position", "change": "moved", "A": str(i),
                         "B": str(j)})
        for k in ("excerpt", "content_sha256", "confidence", "retrieved_at", "name", "uri"):
            va, vb = getattr(s, k), getattr(t, k)
            if va != vb:
                rows.append({"field": f"sources[{r}].{k}", "change": "changed",
                             "A": _cell(va), "B": _cell(vb)})
    skip = {"pack_id", "decision", "sources", "created_at", "signature", "observations"}
    fa: dict[str, str] = {}
    fb: dict[str, str] = {}
    _flat({k: v for k, v in a.model_dump(mode="json").items() if k not in skip}, "", fa)
    _flat({k: v for k, v in b.model_dump(mode="json").items() if k not in skip}, "", fb)
    order = list(fa) + [k for k in fb if k not in fa]
    for k in order:
        if k not in fb:
            rows.append({"field": k, "change": "removed", "A": fa[k], "B": ""})
        elif k not in fa:
            rows.append({"field": k, "change": "added", "A": "", "B": fb[k]})
        elif fa[k] != fb[k]:
            rows.append({"field": k, "change": "changed", "A": fa[k], "B": fb[k]})
    return pd.DataFrame(rows, columns=_DIFF_COLUMNS)


def inspect_question(ws: Workspace, question: str, policy: str = "R2_POLICY_V1",
                     llm: str = "extractive", chunker: str = "sentences",
                     top_k_chunks: int = 12, retrieved_at: str = PACK_RETRIEVED_AT,
                     ) -> QueryTrace:
    """Run ``question`` through late-chunked hybrid retrieval, selection under ``policy``,
    Prompt Contract V1, the reader and R5 validation (what ``aiblox answer`` does), and build
    its evidence pack at ``retrieved_at``."""
    prefs = RetrievalPrefs(query_text=question, top_k_chunks=top_k_chunks,
                           chunking={"chunker_id": chunker})  # type: ignore[arg-type]
    retriever = make_retriever(ws.store, ws.embedder)
    # search_many is what the async search runs in its worker thread; called directly, it works
    # inside a running event loop too (marimo's kernel, Jupyter's)
    bundle = retriever.search_many([prefs])[0]
    index_version = ws.index_version()
    result = answer_question(question, bundle, load_policy(policy), get_llm(llm),
                             index_version=index_version, embedding_model=ws.embedder.model_id,
                             retrieval_top_k=top_k_chunks)
    sources = DefaultEvidencePacker().pack(bundle.candidates, bundle.evidence)
    candidates = pd.DataFrame([{
        "rank": i, "item_id": c.item_id, "title": c.title, "score": round(c.score, 6),
        "rank_text": c.rank_text, "rank_vec": c.rank_vec,
        "score_text": c.score_text, "score_vec": c.score_vec} for i, c in
        enumerate(bundle.candidates, start=1)])
    chunks = pd.DataFrame([{
        "rank": i, "chunk_id": e.chunk_id, "item_id": e.item_id, "score": round(e.score, 6),
        "score_text": e.score_text, "score_vec": e.score_vec, "start": e.start_idx,
        "end": e.end_idx, "text": e.text} for i, e in enumerate(bundle.evidence, start=1)])
    selected = pd.DataFrame([{
        "anchor": s.citation_anchor, "rank": s.rank, "chunk_id": s.chunk_id,
        "item_id": s.knowledge_id, "similarity": round(s.similarity_score, 6),
        "tokens": s.token_count, "truncated": s.truncated,
        "cited": s.chunk_id in set(result.validation.cited_chunk_ids)}
        for s in result.answer_bundle.selected_evidence],
        columns=["anchor", "rank", "chunk_id", "item_id", "similarity", "tokens", "truncated",
                 "cited"])
    dropped = pd.DataFrame([{"rank": d.rank, "chunk_id": d.chunk_id, "reason": d.reason}
                            for d in result.answer_bundle.metrics.dropped],
                           columns=["rank", "chunk_id", "reason"])
    chash, _ = config_hash(prefs, ws.embedder.model_id, ws.store.kind)
    hashes: dict[str, str | None] = {
        "dataset": ws.dataset.hash, "index_version": index_version, "retrieval_config": chash,
        "evidence": sha256_hex([[e.chunk_id, e.score] for e in bundle.evidence]),
        **result.hashes}
    return QueryTrace(question=question, prefs=prefs, bundle=bundle, result=result,
                      sources=list(sources), candidates=candidates, chunks=chunks,
                      selected=selected, dropped=dropped, hashes=hashes,
                      pack=evidence_pack(ws, question, bundle, result,
                                         retrieved_at=retrieved_at))
