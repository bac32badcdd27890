"""Term counts of document batches for the BM25 build, in this process or in worker processes.

:meth:`aiblox.indexes.BM25Index.build` needs, per document, its length and the count of each of
its terms. :func:`count_batch` computes them for a batch of texts with numpy (one sort per
batch, not one ``np.unique`` per document) and returns them against a vocabulary local to the
batch; :class:`BatchCounter` maps local term numbers to the build's own and, on big builds, runs
:func:`count_batch` in worker processes (tokenising and stemming are pure Python: the GIL keeps
threads from helping). Results do not depend on how many workers ran: the index numbers its
vocabulary in sorted order and orders its entries by (term, document) afterwards.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import multiprocessing
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from aiblox.text.analysis import Analyzer

__all__ = ["PARALLEL_FROM_DOCS", "BatchCounter", "BatchCounts", "count_batch", "global_terms"]

PARALLEL_FROM_DOCS = 50_000
"""Builds over fewer documents stay in this process (a worker costs about 0.3 s to start)."""

_ANALYZERS: dict[tuple[bool, str, str | None], Analyzer] = {}


@dataclass
class BatchCounts:
    """One batch's term counts: entry ``e`` is ``counts[e]`` occurrences of local term
    ``terms[e]`` in document ``docs[e]`` (its position in the batch)."""

    vocab: list[str]
    """Local term number -> term."""
    docs: np.ndarray
    terms: np.ndarray
    counts: np.ndarray
    lens: np.ndarray
    """Terms per document (repeats counted), one per text."""


def count_batch(texts: Sequence[str], lower: bool, stopwords: str,
                stemmer: str | None) -> BatchCounts:
    """Term counts of ``texts`` under the analysis (a worker keeps one analyzer, and its stem
    cache, per analysis)."""
    key = (lower, stopwords, stemmer)
    analyzer = _ANALYZERS.get(key)
    if analyzer is None:
        analyzer = _ANALYZERS[key] = Analyzer(lower=lower, stopwords=stopwords, stemmer=stemmer)
    per_doc = analyzer.terms_many(texts)
    lens = np.fromiter((len(t) for t in per_doc), dtype=np.int64, count=len(per_doc))
    local: dict[str, int] = {}
    total = int(lens.sum())
    tids = np.fromiter((local.setdefault(t, len(local)) for terms in per_doc for t in terms),
                       dtype=np.int64, count=total)
    docs = np.repeat(np.arange(len(per_doc), dtype=np.int64), lens)
    width = max(1, len(local))
    pairs, counts = np.unique(docs * width + tids, return_counts=True)
    return BatchCounts(vocab=list(local), docs=(pairs // width).astype(np.int32),
                       terms=(pairs % width).astype(np.int32),
                       counts=counts.astype(np.float32), lens=lens)


class BatchCounter:
    """Counts batches of texts in order, with ``workers`` processes (1: in this one), at most
    two batches per worker in flight (bounded memory)."""

    def __init__(self, analyzer: Analyzer, workers: int = 1) -> None:
        self.args = (analyzer.lower, analyzer.stopwords, analyzer.stemmer)
        self.workers = max(1, int(workers))

    def map(self, batches: Iterable[Sequence[str]]) -> Iterator[BatchCounts]:
        """The counts of each batch, in order."""
        if self.workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
            for texts in batches:
                yield count_batch(texts, *self.args)
            return
        # fork: spawn and forkserver re-run the caller's main module in every worker (a script
        # without a __main__ guard would build again); the workers touch nothing but their texts
        # and leave by os._exit (no database handle of the parent is ever closed twice)
        ctx = multiprocessing.get_context("fork")
        with cf.ProcessPoolExecutor(self.workers, mp_context=ctx) as pool:
            pending: collections.deque[cf.Future[BatchCounts]] = collections.deque()
            for texts in batches:
                pending.append(pool.submit(count_batch, list(texts), *self.args))
                if len(pending) >= 2 * self.workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()


def global_terms(counts: BatchCounts, vocab: dict[str, int]) -> np.ndarray:
    """``counts.terms`` numbered in the build's ``vocab`` (new terms added)."""
    mapping = np.fromiter((vocab.setdefault(t, len(vocab)) for t in counts.vocab),
                          dtype=np.int32, count=len(counts.vocab))
    return mapping[counts.terms] if len(counts.terms) else counts.terms
