"""Raw term statistics of a store's items, for pseudo-relevance feedback (RM3, Bo1).

The BM25 index (:mod:`aiblox.indexes.bm25`) keeps one float32 BM25 score per (term, document),
grouped by term: what a search sums, but not what feedback reads. RM3 and Bo1 read a feedback
document's own terms with their counts, and each term's document and collection frequencies.
:class:`TermStats` holds them, built from the same analysis as the BM25 index (so its
vocabulary, numbered in sorted order, is the BM25 index's), in compressed sparse rows: one row
per document (item id order), its term columns ascending, each with its count:

==================  ==========================================================================
array               what it holds
==================  ==========================================================================
``doc_ptr``         int64, ``n_docs + 1``: document ``d``'s entries are ``doc_ptr[d]:doc_ptr[d+1]``
``cols``            int32: term columns (the vocabulary's sorted order), ascending per document
``tfs``             float32: the term's count in the document
``doc_lens``        float64: the document's length (its counts summed)
``cf``              float64, one per term: collection frequency (counts summed over documents)
``df``              int64, one per term: documents holding the term
==================  ==========================================================================

Counts are the ones BM25 weighs before its length normalisation: with field weighting
(``FtsConfig.title_weight`` other than 1) a title term counts ``title_weight`` times (0: titles
left out), as in the BM25 index's ``tf = w * tf_title + tf_text``; ``title_b`` and the scoring
settings (``k1``, ``b``, variant) do not change a count, so one statistics index serves every
BM25 setting of one analysis. It is a derived index of its own (``terms-<key>``, keyed by the
items' digest, the analysis and a title weight other than 1:
:meth:`~aiblox.indexes.store_indexes.StoreIndexes.term_stats`), so BM25 index keys and bytes
are what they were. Built deterministically (sorted vocabulary, documents in id order) and
memory-mapped when loaded, like the BM25 index.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.contracts.retrieval import FtsConfig
from aiblox.indexes.bm25 import item_text, read_ids
from aiblox.text.analysis import Analyzer

__all__ = ["TERMS_VERSION", "TermStats", "term_stats_spec"]

TERMS_VERSION = "1"
"""Version of the statistics' layout; part of their index key."""

_ARRAYS = ("doc_ptr", "cols", "tfs", "doc_lens", "cf", "df")


def term_stats_spec(cfg: FtsConfig) -> dict[str, Any]:
    """What decides the statistics besides the items (part of their index key): the analysis,
    and the title weight when it is not 1 (the joined text)."""
    out: dict[str, Any] = {"analysis": cfg.analysis()}
    if cfg.title_weight != 1.0:
        out["title_weight"] = cfg.title_weight
    return out


class TermStats:
    """Per-document term counts and per-term frequencies of a store's items (module doc)."""

    def __init__(self, ids: list[str], terms: list[str], doc_ptr: np.ndarray, cols: np.ndarray,
                 tfs: np.ndarray, doc_lens: np.ndarray, cf: np.ndarray, df: np.ndarray,
                 config: FtsConfig) -> None:
        self.ids = ids
        """Item ids, ascending (a document's row)."""
        self.terms = terms
        """The vocabulary in column order (sorted)."""
        self.doc_ptr, self.cols, self.tfs = doc_ptr, cols, tfs
        self.doc_lens, self.cf, self.df = doc_lens, cf, df
        self.config = config
        self.analyzer = Analyzer(lower=config.lower, stopwords=config.stopwords,
                                 stemmer=config.stemmer)

    @property
    def n_docs(self) -> int:
        return len(self.ids)

    @property
    def n_terms(self) -> int:
        """The vocabulary's size."""
        return len(self.terms)

    @functools.cached_property
    def vocab(self) -> dict[str, int]:
        """Term -> column."""
        return {t: i for i, t in enumerate(self.terms)}

    @functools.cached_property
    def position(self) -> dict[str, int]:
        """Item id -> row."""
        return {d: i for i, d in enumerate(self.ids)}

    @functools.cached_property
    def total_terms(self) -> float:
        """The collection's length (every count summed)."""
        return float(np.sum(self.doc_lens))

    def row(self, pos: int) -> tuple[np.ndarray, np.ndarray]:
        """Document ``pos``'s term columns (ascending) and counts."""
        lo, hi = int(self.doc_ptr[pos]), int(self.doc_ptr[pos + 1])
        return self.cols[lo:hi], self.tfs[lo:hi]

    def doc_terms(self, item_id: str) -> dict[str, float]:
        """``{term: count}`` of one document (for tests and inspection)."""
        cols, tfs = self.row(self.position[item_id])
        return {self.terms[c]: float(f) for c, f in zip(cols.tolist(), tfs.tolist(),
                                                        strict=True)}

    # -- build -------------------------------------------------------------------------------
    @classmethod
    def build(cls, items: Iterable[Sequence[Any]], config: FtsConfig,
              progress: Callable[[int], None] | None = None) -> TermStats:
        """Count the terms of item batches (objects with ``id``, ``title``, ``text``, ids
        ascending across batches); ``progress(n)`` after each batch."""
        analyzer = Analyzer(lower=config.lower, stopwords=config.stopwords,
                            stemmer=config.stemmer)
        w = config.title_weight
        joined = w == 1.0
        text_of = item_text(config.fields)
        ids: list[str] = []
        vocab: dict[str, int] = {}
        term_parts: list[np.ndarray] = []
        tf_parts: list[np.ndarray] = []
        per_doc: list[int] = []
        lens: list[float] = []
        last: str | None = None
        titles: list[list[str]]
        for batch in items:
            if joined:
                titles = [[] for _ in batch]
                bodies = analyzer.terms_many([text_of(it) for it in batch])
            else:
                bodies = analyzer.terms_many([it.text or "" for it in batch])
                titles = (analyzer.terms_many([it.title or "" for it in batch]) if w > 0.0
                          else [[] for _ in batch])
            for it, t_terms, b_terms in zip(batch, titles, bodies, strict=True):
                if last is not None and it.id <= last:
                    raise ValueError(f"items must come in ascending id order: {it.id!r} "
                                     f"after {last!r}")
                last = it.id
                ids.append(it.id)
                n_title = len(t_terms)
                lens.append(w * n_title + len(b_terms) if not joined else len(b_terms))
                if not n_title and not b_terms:
                    per_doc.append(0)
                    continue
                tids = np.fromiter((vocab.setdefault(t, len(vocab))
                                    for t in (*t_terms, *b_terms)),
                                   dtype=np.int64, count=n_title + len(b_terms))
                uniq, inverse = np.unique(tids, return_inverse=True)
                counts = np.bincount(inverse[n_title:], minlength=len(uniq)).astype(np.float32)
                if n_title:
                    counts = (np.float32(w) * np.bincount(inverse[:n_title], minlength=len(uniq))
                              .astype(np.float32) + counts)
                term_parts.append(uniq.astype(np.int32))
                tf_parts.append(counts)
                per_doc.append(len(uniq))
            if progress is not None:
                progress(len(batch))
        return cls._finish(ids, vocab, term_parts, tf_parts, per_doc, lens, config)

    @classmethod
    def _finish(cls, ids: list[str], vocab: dict[str, int], term_parts: list[np.ndarray],
                tf_parts: list[np.ndarray], per_doc: list[int], lens: list[float],
                config: FtsConfig) -> TermStats:
        n_docs, n_terms = len(ids), len(vocab)
        order = sorted(vocab)  # the BM25 index's numbering: sorted, not first-seen
        remap = np.empty(n_terms, dtype=np.int32)
        for new, term in enumerate(order):
            remap[vocab[term]] = new
        cols = remap[np.concatenate(term_parts)] if term_parts else np.zeros(0, np.int32)
        tfs = np.concatenate(tf_parts) if tf_parts else np.zeros(0, np.float32)
        doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(np.asarray(per_doc, dtype=np.int64), out=doc_ptr[1:])
        rows = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(doc_ptr))
        by_row = np.lexsort((cols, rows)) if len(cols) else np.zeros(0, np.int64)
        cols, tfs = cols[by_row].astype(np.int32), tfs[by_row].astype(np.float32)
        cf = np.bincount(cols, weights=tfs.astype(np.float64), minlength=n_terms)
        df = np.bincount(cols, minlength=n_terms).astype(np.int64)
        return cls(ids, order, doc_ptr, cols, tfs, np.asarray(lens, dtype=np.float64),
                   cf.astype(np.float64), df, config)

    # -- persistence -------------------------------------------------------------------------
    def save(self, folder: Path) -> list[str]:
        """Write the statistics into ``folder``; returns the file names written."""
        folder.mkdir(parents=True, exist_ok=True)
        names = []
        for name in _ARRAYS:
            np.save(folder / f"{name}.npy", np.ascontiguousarray(getattr(self, name)),
                    allow_pickle=False)
            names.append(f"{name}.npy")
        (folder / "ids.json").write_text(json.dumps(self.ids, ensure_ascii=False),
                                         encoding="utf-8")
        (folder / "vocab.json").write_text(json.dumps(self.terms, ensure_ascii=False),
                                           encoding="utf-8")
        return [*names, "ids.json", "vocab.json"]

    @classmethod
    def load(cls, folder: Path, config: FtsConfig, mmap: bool = True) -> TermStats:
        """Read statistics written by :meth:`save` (arrays memory-mapped when ``mmap``)."""
        arrays = {n: np.load(folder / f"{n}.npy", mmap_mode="r" if mmap else None,
                             allow_pickle=False) for n in _ARRAYS}
        ids = read_ids(folder / "ids.json")
        terms = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        return cls(ids, terms, arrays["doc_ptr"], arrays["cols"], arrays["tfs"],
                   arrays["doc_lens"], arrays["cf"], arrays["df"], config)
