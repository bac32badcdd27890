"""Answer assembly on squad-v1.1-dev, extractive reader, two selection policies side by side.

The first ``--limit`` test questions (sorted by query id, so the subset is the same on every run)
are retrieved once with late chunking (:func:`aiblox.retrieval.late_chunking.make_retriever`,
hybrid search, ``--chunker`` chunks of at most ``--max-chunk-tokens``), and every retrieval
bundle is then answered with :func:`aiblox.assembly.answer_question` under each policy
(``R2_POLICY_V1`` and ``R2_POLICY_V2`` by default) with the offline ``extractive`` reader.
Per policy:

* span recall cited: share of questions where a cited chunk comes from the gold paragraph and
  covers a gold answer span (``answer_starts`` offsets inside the chunk's ``start_idx:end_idx``);
* string recall cited: share where a cited chunk's text contains a gold answer string
  (casefolded);
* span in selected: the same span test over every selected chunk, cited or not (the ceiling of
  the cited figure for this selection);
* gold in answer: share where the validated answer text contains a gold answer string;
* validation pass: share of questions whose answer passes answer validation (a refusal that is
  exactly the refusal string passes); refusal: share answered with the refusal string;
* chunks: mean chunks selected;
* prompt tokens: mean tokens of the built prompt (the questions whose prompt was built);
* assembly ms: time of ``answer_question`` per question (input validation, selection, prompt
  build, reader, answer validation; retrieval excluded), mean and 95th percentile (ms p95).

Under the table: the retrieval ceiling (gold paragraph / a gold span in the retrieved evidence,
the same for every policy) and, per policy, the selection drops by reason and the answer
validation failure codes.

Chunk vectors are computed on first use and kept in the store's chunk cache (minilm on 2 cores:
the default 200 questions take about 1.5 minutes in all); with ``--db-dir`` a second run reuses
them. ``--embedder hashing`` is faster (no model) but retrieves worse.

    python benchmarks/answer_assembly.py [--limit 200] [--embedder minilm] [--markdown]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from _common import (
    arg_parser,
    environment_line,
    err,
    nonnegative_int,
    open_quiet_store,
    positive_int,
    print_table,
)

from aiblox.assembly import answer_question, get_llm, load_policy
from aiblox.contracts.retrieval import RetrievalBundle, RetrievalPrefs
from aiblox.data import Dataset, load_dataset
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.engine.workspace import prepare_store
from aiblox.hashing import sha256_hex
from aiblox.metrics import contains_answer, covers_span
from aiblox.retrieval.late_chunking import make_retriever
from aiblox.stores import DuckDBStore

DATASET = "squad-v1.1-dev"
DEFAULT_POLICIES = ("R2_POLICY_V1", "R2_POLICY_V2")


@dataclass
class PolicyTally:
    """Counts and timings of one policy over the question subset."""

    n: int = 0
    span_cited: int = 0
    string_cited: int = 0
    span_selected: int = 0
    gold_in_answer: int = 0
    passed: int = 0
    refused: int = 0
    no_evidence: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    selected: list[int] = field(default_factory=list)
    assembly_ms: list[float] = field(default_factory=list)
    failure_codes: Counter[str] = field(default_factory=Counter)
    drops: Counter[str] = field(default_factory=Counter)


def retrieve(ds: Dataset, qids: list[str], store: DuckDBStore, embedder_name: str,
             chunking: dict[str, object], top_k_items: int, top_k_chunks: int
             ) -> tuple[list[RetrievalBundle], str, float]:
    """Retrieve every question once; the bundles, the embedder's model id and the seconds taken."""
    emb = CachedEmbedder(get_embedder(embedder_name), store, progress=False)
    t0 = time.perf_counter()
    report = prepare_store(store, ds, emb, progress=False)
    err.print(f"{DATASET}: {len(ds.corpus)} paragraphs in the store "
              f"({time.perf_counter() - t0:.1f} s, {report.embedding_cache_misses} embedded live)")
    retriever = make_retriever(store, emb)
    prefs = [RetrievalPrefs(query_text=ds.queries[q], query_id=q, top_k_items=top_k_items,
                            top_k_chunks=top_k_chunks,
                            chunking=chunking)
             for q in qids]
    t0 = time.perf_counter()
    bundles: list[RetrievalBundle] = []
    step = 25
    for i in range(0, len(prefs), step):
        bundles += retriever.search_many(prefs[i:i + step])
        err.print(f"  retrieved {len(bundles)}/{len(prefs)} ({time.perf_counter() - t0:.0f} s)")
    return bundles, emb.model_id, time.perf_counter() - t0


def assemble(ds: Dataset, qids: list[str], bundles: list[RetrievalBundle], policy_name: str,
             index_version: str, embedding_model: str, top_k_chunks: int) -> PolicyTally:
    """Answer every question under one policy with the extractive reader and tally the results."""
    policy = load_policy(policy_name)
    reader = get_llm("extractive")
    tally = PolicyTally()
    # Warm-up (tokenizer tables, regexes), not timed.
    answer_question(ds.queries[qids[0]], bundles[0], policy, reader, index_version=index_version,
                    embedding_model=embedding_model, retrieval_top_k=top_k_chunks)
    for qid, bundle in zip(qids, bundles, strict=True):
        gold = ds.answers[qid]
        t0 = time.perf_counter()
        result = answer_question(ds.queries[qid], bundle, policy, reader,
                                 index_version=index_version, embedding_model=embedding_model,
                                 retrieval_top_k=top_k_chunks)
        tally.assembly_ms.append((time.perf_counter() - t0) * 1000)
        v = result.validation
        by_id = {ev.chunk_id: ev for ev in bundle.evidence}
        selected = [by_id[s.chunk_id] for s in result.answer_bundle.selected_evidence]
        cited = [by_id[c] for c in v.cited_chunk_ids if c in by_id]
        tally.n += 1
        tally.span_cited += any(covers_span(ev, gold) for ev in cited)
        tally.string_cited += any(contains_answer(ev.text, gold) for ev in cited)
        tally.span_selected += any(covers_span(ev, gold) for ev in selected)
        tally.gold_in_answer += (not v.is_refusal) and contains_answer(result.answer_text, gold)
        tally.passed += v.validation_status == "PASSED"
        tally.refused += v.is_refusal
        tally.no_evidence += result.answer_bundle.assembly_status == "NO_EVIDENCE"
        tally.failure_codes.update(v.failure_codes)
        tally.drops.update({k: n for k, n in result.drop_counts.items() if n})
        tally.selected.append(len(selected))
        if result.prompt.build_status == "OK":
            tally.prompt_tokens.append(result.prompt.prompt_tokens)
    return tally


def pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}%" if n else "—"


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[18] if len(xs) > 1 else xs[0]


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--limit", type=positive_int, default=200,
                    help="questions: the first N test query ids in sorted order (default 200)")
    ap.add_argument("--policies", default=",".join(DEFAULT_POLICIES),
                    help="comma-separated policy versions (default R2_POLICY_V1,R2_POLICY_V2)")
    ap.add_argument("--embedder", default="minilm", help="minilm (default) or hashing (fast)")
    ap.add_argument("--chunker", default="sentences", help="late chunker (default sentences)")
    ap.add_argument("--max-chunk-tokens", type=positive_int, default=64,
                    help="token budget per chunk (default 64: a SQuAD paragraph gives about "
                         "three chunks, so the per-paragraph caps have something to cut)")
    ap.add_argument("--overlap-tokens", type=nonnegative_int, default=0,
                    help="tokens shared by consecutive chunks (default 0)")
    ap.add_argument("--top-k-items", type=positive_int, default=4,
                    help="candidate paragraphs chunked per question (default 4)")
    ap.add_argument("--top-k-chunks", type=positive_int, default=12,
                    help="evidence chunks retrieved per question (default 12, as aiblox answer)")
    ap.add_argument("--db-dir", help="keep the DuckDB file here (reused with its chunk cache) "
                                     "instead of a temp folder")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]

    chunking = {"chunker_id": args.chunker, "max_chunk_tokens": args.max_chunk_tokens,
                "overlap_tokens": args.overlap_tokens}
    t_all = time.perf_counter()
    ds = load_dataset(DATASET, splits=["test"])
    qids = sorted(q for q in ds.qrels["test"] if q in ds.answers)[: args.limit]
    if not qids:
        err.print(f"{DATASET}: no test questions with gold answers")
        return 1
    with tempfile.TemporaryDirectory(prefix="aiblox-bench-") as tmp:
        db_dir = Path(args.db_dir) if args.db_dir else Path(tmp)
        db_dir.mkdir(parents=True, exist_ok=True)
        store = open_quiet_store(db_dir / f"{DATASET}-{args.embedder}.duckdb")
        try:
            bundles, model_id, retrieve_s = retrieve(
                ds, qids, store, args.embedder, chunking, args.top_k_items, args.top_k_chunks)
            index_version = sha256_hex(store.item_hashes())[:16]
        finally:
            store.close()

    gold_doc = sum(any(ev.item_id == ds.answers[q].corpus_id for ev in b.evidence)
                   for q, b in zip(qids, bundles, strict=True))
    gold_span = sum(any(covers_span(ev, ds.answers[q]) for ev in b.evidence)
                    for q, b in zip(qids, bundles, strict=True))
    tallies = {}
    for name in policies:
        tallies[name] = assemble(ds, qids, bundles, name, index_version, model_id,
                                 args.top_k_chunks)
        t = tallies[name]
        err.print(f"{name}: span recall (cited) {pct(t.span_cited, t.n)}, "
                  f"validation pass {pct(t.passed, t.n)}, refusal {pct(t.refused, t.n)}")

    columns = ["policy", "n", "span recall cited", "string recall cited",
               "span in selected", "gold in answer", "validation pass", "refusal", "chunks",
               "prompt tokens", "assembly ms", "ms p95"]
    rows = []
    for name, t in tallies.items():
        rows.append([name, str(t.n), pct(t.span_cited, t.n), pct(t.string_cited, t.n),
                     pct(t.span_selected, t.n), pct(t.gold_in_answer, t.n), pct(t.passed, t.n),
                     pct(t.refused, t.n), f"{statistics.fmean(t.selected):.2f}",
                     f"{statistics.fmean(t.prompt_tokens):.0f}" if t.prompt_tokens else "—",
                     f"{statistics.fmean(t.assembly_ms):.1f}", f"{p95(t.assembly_ms):.1f}"])
    notes = [
        f"Measured {environment_line()}; {time.perf_counter() - t_all:.0f} s in all.",
        f"{DATASET} test, first {len(qids)} query ids sorted; retrieval: hybrid, embedder "
        f"{model_id}, late chunking with '{args.chunker}' "
        f"({args.max_chunk_tokens} tokens, overlap {args.overlap_tokens}), top "
        f"{args.top_k_items} paragraphs, top {args.top_k_chunks} chunks ({retrieve_s:.1f} s, "
        f"not in assembly time); reader: extractive.",
        "chunks: mean chunks selected; prompt tokens: mean (cl100k_base); assembly ms: mean "
        "time of answer_question per question (selection, prompt build, reader, answer "
        "validation).",
        f"Retrieved evidence (same for every policy): gold paragraph in evidence "
        f"{pct(gold_doc, len(qids))}, a chunk covering a gold span {pct(gold_span, len(qids))}.",
    ]
    for name, t in tallies.items():
        drops = ", ".join(f"{k} {n}" for k, n in sorted(t.drops.items())) or "none"
        codes = ", ".join(f"{k} {n}" for k, n in sorted(t.failure_codes.items())) or "none"
        notes.append(f"{name}: drops {drops}; validation failure codes {codes}; NO_EVIDENCE "
                     f"{t.no_evidence}.")
    print_table(f"Answer assembly, {DATASET} (extractive reader)", columns, rows, args.markdown,
                right=columns[1:], notes=notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
