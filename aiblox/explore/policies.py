"""Selection policies compared in a notebook: a query sample retrieved once (late-chunked
bundles), answered under each policy, scored with the answer metrics the sweep records
(:mod:`aiblox.metrics.answers`), compared query by query with the paired test ``aiblox
compare`` runs (:func:`aiblox.metrics.paired_test`), and the evidence that changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from aiblox.assembly import AnswerResult, answer_question, get_llm, load_policy
from aiblox.assembly.sanitize import kept_source_length
from aiblox.contracts.retrieval import RetrievalBundle, RetrievalPrefs
from aiblox.engine.chunk_eval import gold_answers
from aiblox.explore.notebook import NotebookWorkspace, check_top_k_chunks
from aiblox.metrics import StatTest, answer_metrics, paired_test
from aiblox.metrics.directions import COST_METRICS, FAILURE_RATES, directed_counts, metric_direction
from aiblox.metrics.significance import holm
from aiblox.sweep.compare import evidence_changes as selection_changes

__all__ = [
    "LOWER_IS_BETTER",
    "answer_all",
    "score_answers",
    "compare_per_query",
    "evidence_changes_table",
    "retrieve_bundles",
]

LOWER_IS_BETTER = frozenset({*COST_METRICS, *FAILURE_RATES})
"""Metrics named as lower-is-better (:mod:`aiblox.metrics.directions`, the one place; a
name counting tokens or time is lower-is-better too, :func:`lower_is_better`)."""


def retrieve_bundles(ws: NotebookWorkspace, limit: int | None = 12, chunker: str = "sentences",
                     top_k_chunks: int = 12) -> dict[str, RetrievalBundle]:
    """Late-chunked retrieval bundles of the first ``limit`` queries of the split (sorted ids),
    retrieved once so that every policy is compared on the same evidence. ``top_k_chunks``
    below 1 is refused (a ``ValueError``), as :func:`~aiblox.explore.trace.inspect_question`
    and ``aiblox answer`` refuse it."""
    check_top_k_chunks(top_k_chunks)
    retriever = ws.workspace.late_retriever()
    queries = sorted(ws.queries)[:limit]
    prefs = [RetrievalPrefs(query_text=t, query_id=q, top_k_chunks=top_k_chunks,
                            chunking={"chunker_id": chunker})  # type: ignore[arg-type]
             for q, t in queries]
    bundles = retriever.search_many(prefs) if prefs else []
    return {q: b for (q, _), b in zip(queries, bundles, strict=True)}


def answer_all(ws: NotebookWorkspace, bundles: Mapping[str, RetrievalBundle], policy: str,
               llm: str = "extractive") -> dict[str, AnswerResult]:
    """Answer every bundled query under ``policy`` (a version name or a path), as ``aiblox
    answer`` and the sweep answer it: the trace's ``retrieval_top_k`` is the number of chunks
    the retrieval asked for (``top_k_chunks``, which the retriever records in the bundle's
    params; fewer may come back), else, for a bundle without it, the evidence it holds; at
    least 1. The bundles' query ids must be queries of ``ws``'s split (a ``ValueError`` names
    the others)."""
    text = ws.query_text
    unknown = sorted(set(bundles) - set(text))
    if unknown:
        shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more"
                                           if len(unknown) > 10 else "")
        raise ValueError(f"bundles of {len(unknown)} query id(s) not in the workspace's split "
                         f"{ws.split!r} of {ws.dataset.name!r}: {shown}; retrieve the bundles "
                         "from this workspace (retrieve_bundles)")
    pol, reader = load_policy(policy), get_llm(llm)
    index_version = ws.index_version()
    out = {}
    for q in sorted(bundles):
        b = bundles[q]
        top_k = int(b.stats.params.get("top_k_chunks", len(b.evidence)) or len(b.evidence))
        out[q] = answer_question(text[q], b, pol, reader, index_version=index_version,
                                 embedding_model=ws.embedder.model_id,
                                 retrieval_top_k=max(top_k, 1))
    return out


def score_answers(ws: NotebookWorkspace, bundles: Mapping[str, RetrievalBundle],
                      results: Mapping[str, AnswerResult]) -> dict[str, dict[str, float]]:
    """Per-query answer metrics ``{metric: {qid: value}}`` of answered queries: the sweep's
    (:func:`aiblox.metrics.answer_metrics`: status rates, SQuAD EM and F1, evidence
    answer recall, citation precision, selected chunks and tokens); the gold-based ones need
    gold answers (``answers.jsonl``) and are left out without them."""
    qids = sorted(results)
    gold, texts = gold_answers(ws.dataset, qids), {}
    for q in gold:
        texts[q] = list(ws.dataset.answers[q].answers)
    spans = {ev.chunk_id: (ev.item_id, ev.start_idx, ev.end_idx, ev.text)
             for q in qids for ev in bundles[q].evidence if ev.chunk_id is not None}
    queries = {q: (results[q].answer_bundle.model_dump(mode="json"),
                   results[q].validation.model_dump(mode="json")) for q in qids}
    return answer_metrics(queries, spans, gold, texts, kept=kept_source_length)["per_query"]


def compare_per_query(a: Mapping[str, Mapping[str, float]], b: Mapping[str, Mapping[str, float]],
                      higher_is_better: Mapping[str, bool] | None = None,
                      alpha: float = 0.05, test: StatTest = "student") -> pd.DataFrame:
    """Per metric, B against A over the queries both have: means, delta ``B - A``, the p-value
    of the paired test ``aiblox compare`` runs (:func:`aiblox.metrics.paired_test`, the
    same numbers for the same values) and its Holm adjustment over the metrics compared
    (``p_adjusted``, ``aiblox compare``'s; ``significant``: ``p_adjusted <= alpha``), the
    metric's direction (``better``: ``higher`` or
    ``lower``, :func:`aiblox.metrics.directions.metric_direction`, as ``aiblox compare``
    and the sweep report show it) and win/tie/loss counts of B against A (a win is a better
    value under that direction, unless ``higher_is_better`` says otherwise)."""
    rows: list[dict[str, Any]] = []
    for m in sorted(set(a) & set(b)):
        t = paired_test(a[m], b[m], test)
        if not t.n:
            continue
        if higher_is_better is not None and m in higher_is_better:
            up = bool(higher_is_better[m])
            wins, ties, losses = (t.wins, t.ties, t.losses) if up else (t.losses, t.ties, t.wins)
            better = "higher" if up else "lower"
        else:
            wins, ties, losses = directed_counts(m, t.wins, t.ties, t.losses)
            better = metric_direction(m)
        rows.append({"metric": m, "better": better, "n": t.n, "A": t.mean_a, "B": t.mean_b,
                     "delta": t.delta, "p_value": t.p_value,
                     "wins": wins, "ties": ties, "losses": losses})
    # one family, the metrics compared, Holm-adjusted as aiblox compare adjusts it: a mark is
    # earned by the adjusted p, never the raw one
    for row, p in zip(rows, holm([r["p_value"] for r in rows]), strict=True):
        row["p_adjusted"] = p
        row["significant"] = bool(p <= alpha)
    return pd.DataFrame(rows, columns=["metric", "better", "n", "A", "B", "delta", "p_value",
                                       "p_adjusted", "significant", "wins", "ties", "losses"])


def evidence_changes_table(ws: NotebookWorkspace, a: Mapping[str, AnswerResult],
                     b: Mapping[str, AnswerResult]) -> pd.DataFrame:
    """Per query whose selected or cited evidence or answer differs between A and B: the chunks
    only A or only B selected (:func:`aiblox.sweep.compare.evidence_changes`, as ``aiblox
    compare`` lists them), B's drop reasons for the chunks A kept, and both answers."""
    text = ws.query_text
    common = sorted(set(a) & set(b))
    selected = [{q: [s.chunk_id for s in r[q].answer_bundle.selected_evidence] for q in common}
                for r in (a, b)]
    changed = {c.query_id: c for c in selection_changes(selected[0], selected[1])[0]}
    rows = []
    for q in common:
        ra, rb = a[q], b[q]
        ca, cb = ra.validation.cited_chunk_ids, rb.validation.cited_chunk_ids
        change = changed.get(q)
        if change is None and ca == cb and ra.answer_text == rb.answer_text:
            continue
        only_a = change.left if change is not None else []
        only_b = change.entered if change is not None else []
        drops_b = {d.chunk_id: d.reason for d in rb.answer_bundle.metrics.dropped}
        rows.append({
            "qid": q, "query": text.get(q, ""),
            "only_A": ", ".join(only_a), "only_B": ", ".join(only_b),
            "B_drop_reasons": ", ".join(sorted({drops_b.get(c, "") for c in only_a} - {""})),
            "cited_A": ", ".join(ca), "cited_B": ", ".join(cb),
            "answer_A": ra.answer_text or "", "answer_B": rb.answer_text or "",
        })
    return pd.DataFrame(rows, columns=["qid", "query", "only_A", "only_B", "B_drop_reasons",
                                       "cited_A", "cited_B", "answer_A", "answer_B"])
