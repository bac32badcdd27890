"""Chunking in a notebook: how a chunker cut one document, and the chunk-level evaluation
(:func:`aiblox.engine.chunk_eval.evaluate_chunks`) of several chunkers on a query sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from aiblox.chunking import make_chunker
from aiblox.contracts.retrieval import ChunkingConfig, RetrievalPrefs
from aiblox.engine.chunk_eval import evaluate_chunks
from aiblox.explore.notebook import NotebookWorkspace
from aiblox.hashing import sha256_text
from aiblox.text import count_tokens

__all__ = ["chunk_table", "compare_chunkers"]


def _fitted(config: ChunkingConfig) -> tuple[ChunkingConfig, str]:
    """``config``, or with ``overlap_tokens`` cut to ``max_chunk_tokens - 1`` where the
    chunker refuses an overlap that is not below its budget, with a note saying so (else
    ``""``). The chunking lab's sliders let overlap reach the budget (16 and 16), and a cell
    that raises is no answer to moving a slider; a chunker that ignores overlap (``whole``)
    is left as given."""
    try:
        make_chunker(config)
        return config, ""
    except ValueError:
        size, overlap = config.max_chunk_tokens, config.overlap_tokens
        if size is None or overlap is None or overlap < size:
            raise
    fit = config.model_copy(update={"overlap_tokens": size - 1})
    return fit, (f"{config.chunker_id}: overlap_tokens {overlap} is not below "
                 f"max_chunk_tokens {size}; cut with overlap_tokens {size - 1}")


def chunk_table(item_id: str, text: str, chunker: str = "sentences",
                max_chunk_tokens: int | None = None, overlap_tokens: int | None = None,
                include_headers: bool = True, content_hash: str | None = None
                ) -> pd.DataFrame:
    """How ``chunker`` cuts ``text``: one row per chunk with its offsets, token count, the
    characters and tokens it shares with the previous chunk, its heading path and chunk id.

    ``content_hash``: the document's (``ItemRecord.content_hash``, what retrieval's chunk ids
    are made from), so the ids are the ones evidence carries; None (a text that is no stored
    document): the sha256 of ``text``. An ``overlap_tokens`` the chunker refuses for being at
    least ``max_chunk_tokens`` is cut to ``max_chunk_tokens - 1``, said in ``attrs["note"]``
    (``""`` when nothing was cut)."""
    config, note = _fitted(ChunkingConfig(chunker_id=chunker, max_chunk_tokens=max_chunk_tokens,
                                          overlap_tokens=overlap_tokens,
                                          include_headers=include_headers))
    chunks = make_chunker(config).chunk(
        item_id, text, sha256_text(text) if content_hash is None else content_hash)
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
    table = pd.DataFrame(rows, columns=["position", "start", "end", "chars", "tokens",
                                        "overlap_chars", "overlap_tokens", "heading_path",
                                        "chunk_id", "text"])
    table.attrs["note"] = note
    return table


def compare_chunkers(ws: NotebookWorkspace, chunkers: Sequence[str], limit: int | None = 12,
                     top_k_items: int = 10, top_k_chunks: int = 12,
                     k_values: Sequence[int] = (1, 5), max_chunk_tokens: int | None = None,
                     overlap_tokens: int | None = None, include_headers: bool = True,
                     ) -> pd.DataFrame:
    """Chunk-level evaluation of each chunker on the first ``limit`` queries: answer recall@k
    (datasets with gold answers), mean evidence tokens, and the max-passage nDCG@10; the chunk
    sizes (``max_chunk_tokens``, ``overlap_tokens``, ``include_headers``) are
    :func:`chunk_table`'s, so a comparison scores the chunks the table shows (an overlap cut
    to fit the budget as there, the notes joined in ``attrs["note"]``)."""
    retriever = ws.workspace.late_retriever()
    rows = []
    notes = []
    for name in chunkers:
        chunking, note = _fitted(ChunkingConfig(chunker_id=name,
                                                max_chunk_tokens=max_chunk_tokens,
                                                overlap_tokens=overlap_tokens,
                                                include_headers=include_headers))
        notes += [note] if note else []
        prefs = RetrievalPrefs(query_text="", mode="hybrid", top_k_items=top_k_items,
                               top_k_chunks=top_k_chunks, chunking=chunking)
        r = evaluate_chunks(retriever, ws.dataset, ws.split, prefs, k_values=k_values,
                            limit=limit, progress=False)
        row: dict[str, Any] = {"chunker": name, "chunker_id": r.chunker_id,
                               "queries": r.n_queries}
        row.update({k: round(v, 4) for k, v in r.answer_recall.items()})
        row.update({f"tokens_{k.lstrip('@')}": round(v, 1)
                    for k, v in r.evidence_tokens.items()})
        row["passage_ndcg@10"] = round(r.projection_metrics.get("ndcg@10", float("nan")), 4)
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["note"] = "; ".join(notes)
    return table
