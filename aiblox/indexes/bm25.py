"""BM25 as a bm25s index: a term-by-document score matrix built once, queried in batches.

Robertson et al., "Okapi at TREC-3" (1994); the variants and their names follow Kamphuis et al.,
"Which BM25 Do You Mean? A Large-Scale Reproducibility Study of Scoring Variants" (ECIR 2020),
as bm25s implements them (Lù, "BM25S: Orders of magnitude faster lexical search via eager
sparse scoring", 2024). Every (term, document) score is computed at build time and stored in a
compressed sparse column matrix (one column per term); a query's scores are the sums of its
terms' columns, in query order, in float32, and the top ``k`` are taken with the project's
tie-break (score descending, then item id ascending). Scores are bit for bit bm25s's
(``tests/indexes/test_bm25.py`` holds them to ``bm25s.BM25``).

Differences from bm25s, all deliberate:

- the build streams documents in batches (bounded memory: token ids and counts only, never the
  texts) and numbers the vocabulary in sorted order, so the index bytes do not depend on
  ``PYTHONHASHSEED``;
- documents whose summed term score is 0.0 are not returned: those that hold no query term
  (bm25s pads a short list with arbitrary zero-score documents), and under ``robertson`` or
  ``atire`` those holding only terms whose idf is 0;
- the top ``k`` breaks ties by item id, and a filter is a mask of allowed documents.

Field weighting (``FtsConfig.title_weight``, ``title_b``; :meth:`BM25Index.build`): titles and
bodies are analysed apart and each term's count is kept per field. With ``title_b`` None the
weighted counts share one length normalisation (BM25F with one ``b``): ``tf = w * tf_title +
tf_text`` and ``doc_len = w * len_title + len_text`` go through the variant's usual formulas, so
an integer ``w`` scores exactly like bm25s on a corpus whose titles are written ``w`` times, and
``w = 0`` exactly like the bodies alone. With ``title_b`` set, BM25F proper (Robertson, Zaragoza
and Taylor, "Simple BM25 extension to multiple weighted fields", CIKM 2004; Zaragoza et al.,
TREC 2004): each field's count is length-normalised by its own ``b`` and average length,
``tf~ = w * tf_title / B_title + tf_text / B_text`` with ``B_f = 1 - b_f + b_f * len_f /
avg_len_f`` (``b_text`` is ``b``), and ``tf~`` goes through the variant's term-frequency
formula with no further length normalisation (its ``b`` set to 0), e.g. ``lucene``:
``idf * tf~ / (k1 + tf~)``. In both, document frequencies count the documents holding a term in
a field of nonzero weight. The default (``w = 1``, ``title_b`` None) is the joined text, built by
the plain path (the same bytes as before field weighting existed).
"""

from __future__ import annotations

import collections
import functools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.compiled import readonly_view
from aiblox.contracts.retrieval import FtsConfig
from aiblox.fusion.types import RankedList
from aiblox.indexes.bm25_counts import BatchCounter, global_terms
from aiblox.indexes.single_query import bm25_top_k_one
from aiblox.memory import paused_gc
from aiblox.text.analysis import Analyzer

__all__ = ["BM25_VERSION", "BM25Index", "idf", "ranked_lists", "term_frequency_component"]

BM25_VERSION = "1"
"""Version of the index layout and scoring; part of the index key."""

_ARRAYS = ("data", "indices", "indptr", "doc_lens")


def idf(method: str, df: int, n: int) -> float:
    """Inverse document frequency of a term in ``df`` of ``n`` documents (bm25s's formulas)."""
    if method == "robertson":
        inner = (n - df + 0.5) / (df + 0.5)
        return math.log(max(inner, 1.0))
    if method == "lucene":
        return math.log(1 + (n - df + 0.5) / (df + 0.5))
    if method == "atire":
        return math.log(n / df)
    if method == "bm25l":
        return math.log((n + 1) / (df + 0.5))
    if method == "bm25+":
        return math.log((n + 1) / df)
    raise ValueError(f"unknown BM25 method {method!r}")


def term_frequency_component(method: str, tf: Any, doc_len: Any, avg_len: Any,
                             k1: float, b: float, delta: float) -> Any:
    """The term-frequency part of a BM25 score (bm25s's expressions, operation for operation, so
    the float results are the same bits); ``tf`` float32, ``doc_len`` one length per entry."""
    if method in ("robertson", "lucene"):
        return tf / (k1 * ((1 - b) + b * doc_len / avg_len) + tf)
    if method == "atire":
        return (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * doc_len / avg_len))
    if method == "bm25l":
        c = tf / (1 - b + b * doc_len / avg_len)
        return ((k1 + 1) * (c + delta)) / (k1 + c + delta)
    if method == "bm25+":
        num = (k1 + 1) * tf
        den = k1 * (1 - b + b * doc_len / avg_len) + tf
        return (num / den) + delta
    raise ValueError(f"unknown BM25 method {method!r}")


def ranked_lists(ids: np.ndarray, pos: np.ndarray, scores: np.ndarray, counts: np.ndarray
                 ) -> list[RankedList]:
    """Rows of positions and float32 scores (``counts[i]`` used in row ``i``) as ranked lists
    ``[(item id, score), ...]``."""
    with paused_gc():  # 10^5 tuples: no collector passes over everything alive meanwhile
        return [list(zip(ids[pos[i, :n]].tolist(), scores[i, :n].tolist(), strict=True))
                for i, n in enumerate(counts.tolist())]


_IDS_READ: list[tuple[bytes, list[str]]] = []
"""The last ids file read, as ``(bytes, parsed)``."""


def read_ids(path: Path) -> list[str]:
    """An index's ``ids.json``: the indexes of one store hold the same ids (a hybrid search
    loads BM25 and kNN), so a file whose bytes equal the last one read is not parsed again
    (1M ids: ~0.1 s). The list is shared: read only."""
    raw = path.read_bytes()
    if _IDS_READ and _IDS_READ[0][0] == raw:
        return _IDS_READ[0][1]
    ids: list[str] = json.loads(raw.decode("utf-8"))
    _IDS_READ[:] = [(raw, ids)]
    return ids


def _check_finite(data: np.ndarray, nonocc: np.ndarray | None, config: FtsConfig) -> None:
    """``ValueError`` when a term score is NaN or infinite: an index of them would rank every
    query by nothing (NaN sums) or overflow the JSON of a run; refused before it is saved."""
    bad = int(np.count_nonzero(~np.isfinite(data)))
    if nonocc is not None:
        bad += int(np.count_nonzero(~np.isfinite(nonocc)))
    if bad:
        raise ValueError(f"BM25 index: {bad} term score(s) are not finite numbers under "
                         f"{json.dumps(config.scoring(), sort_keys=True)}: choose other "
                         f"settings (k1, b, delta)")


def _field_norm(lens: np.ndarray, b: float) -> np.ndarray:
    """BM25F's per-document length normalisation of one field, ``1 - b + b * len / avg_len``;
    1 where it would be 0 (``b = 1`` and the field empty in that document, or in every one: the
    field holds no term there, so it adds nothing either way)."""
    avg = lens.mean() if len(lens) else 0.0
    if avg == 0.0:
        return np.ones(len(lens))
    norm = (1 - b) + b * lens / avg
    norm[norm == 0.0] = 1.0
    return norm


def item_text(fields: Sequence[str]) -> Callable[[Any], str]:
    if tuple(fields) == ("title", "text"):
        return lambda it: f"{it.title or ''} {it.text or ''}".strip()
    return lambda it: " ".join(getattr(it, f) or "" for f in fields).strip()


class BM25Index:
    """A built (or loaded) BM25 index over documents in item id order."""

    def __init__(self, ids: list[str], vocab: dict[str, int], data: np.ndarray,
                 indices: np.ndarray, indptr: np.ndarray, doc_lens: np.ndarray,
                 config: FtsConfig, nonoccurrence: np.ndarray | None = None) -> None:
        self.ids = ids
        """Item ids, ascending: a document's position is its rank among ties."""
        self.vocab = vocab
        """Term -> column."""
        # read-only, built or memory-mapped alike: one compiled kernel for both
        self.data, self.indices, self.indptr = (readonly_view(a) for a in (data, indices, indptr))
        self.doc_lens = doc_lens
        self.config = config
        self.nonoccurrence = nonoccurrence
        self.analyzer = Analyzer(lower=config.lower, stopwords=config.stopwords,
                                 stemmer=config.stemmer)

    @property
    def n_docs(self) -> int:
        return len(self.ids)

    @functools.cached_property
    def id_array(self) -> np.ndarray:
        """:attr:`ids` as a numpy object array (to turn positions into ids at C speed)."""
        return np.array(self.ids, dtype=object)

    # -- build -------------------------------------------------------------------------------
    @classmethod
    def build(cls, items: Iterable[Sequence[Any]], config: FtsConfig,
              progress: Callable[[int], None] | None = None, workers: int = 1) -> BM25Index:
        """Index item batches (each a sequence of objects with ``id``, ``title``, ``text``,
        ids ascending across batches); ``progress(n)`` is called after each batch counted;
        ``workers`` processes tokenise (1: this one; the index is the same bytes either way)."""
        if config.fielded:
            return cls._build_fielded(items, config, progress)
        analyzer = Analyzer(lower=config.lower, stopwords=config.stopwords,
                            stemmer=config.stemmer)
        text_of = item_text(config.fields)
        ids: list[str] = []
        sizes: collections.deque[int] = collections.deque()

        def texts() -> Iterator[list[str]]:
            last: str | None = None
            for batch in items:
                for it in batch:
                    if last is not None and it.id <= last:
                        raise ValueError(f"items must come in ascending id order: {it.id!r} "
                                         f"after {last!r}")
                    last = it.id
                    ids.append(it.id)
                sizes.append(len(batch))
                yield [text_of(it) for it in batch]

        vocab: dict[str, int] = {}
        doc_parts: list[np.ndarray] = []
        term_parts: list[np.ndarray] = []
        tf_parts: list[np.ndarray] = []
        len_parts: list[np.ndarray] = []
        base = 0
        for counts in BatchCounter(analyzer, workers).map(texts()):
            term_parts.append(global_terms(counts, vocab))
            doc_parts.append(counts.docs + np.int32(base))
            tf_parts.append(counts.counts)
            len_parts.append(counts.lens)
            size = sizes.popleft()
            base += size
            if progress is not None:
                progress(size)
        lens = np.concatenate(len_parts) if len_parts else np.zeros(0, dtype=np.int64)
        return cls._from_counts(ids, vocab, doc_parts, term_parts, tf_parts, lens, config)

    @classmethod
    def _build_fielded(cls, items: Iterable[Sequence[Any]], config: FtsConfig,
                       progress: Callable[[int], None] | None = None) -> BM25Index:
        """:meth:`build` with titles and bodies counted apart (``config.fielded``)."""
        analyzer = Analyzer(lower=config.lower, stopwords=config.stopwords,
                            stemmer=config.stemmer)
        use_title = config.title_weight > 0.0  # weight 0: titles are not indexed at all
        ids: list[str] = []
        vocab: dict[str, int] = {}
        doc_parts: list[np.ndarray] = []
        term_parts: list[np.ndarray] = []
        title_parts: list[np.ndarray] = []
        body_parts: list[np.ndarray] = []
        title_lens: list[int] = []
        body_lens: list[int] = []
        last: str | None = None
        for batch in items:
            bodies = analyzer.terms_many([it.text or "" for it in batch])
            titles = (analyzer.terms_many([it.title or "" for it in batch]) if use_title
                      else [[] for _ in batch])
            for it, t_terms, b_terms in zip(batch, titles, bodies, strict=True):
                if last is not None and it.id <= last:
                    raise ValueError(f"items must come in ascending id order: {it.id!r} "
                                     f"after {last!r}")
                last = it.id
                pos = len(ids)
                ids.append(it.id)
                title_lens.append(len(t_terms))
                body_lens.append(len(b_terms))
                n_title = len(t_terms)
                if not n_title and not b_terms:
                    continue
                tids = np.fromiter((vocab.setdefault(t, len(vocab))
                                    for t in (*t_terms, *b_terms)),
                                   dtype=np.int64, count=n_title + len(b_terms))
                uniq, inverse = np.unique(tids, return_inverse=True)
                title_parts.append(np.bincount(inverse[:n_title], minlength=len(uniq))
                                   .astype(np.float32))
                body_parts.append(np.bincount(inverse[n_title:], minlength=len(uniq))
                                  .astype(np.float32))
                term_parts.append(uniq.astype(np.int32))
                doc_parts.append(np.full(len(uniq), pos, dtype=np.int32))
            if progress is not None:
                progress(len(batch))
        empty_f = np.zeros(0, dtype=np.float32)
        tf_title = np.concatenate(title_parts) if title_parts else empty_f
        tf_body = np.concatenate(body_parts) if body_parts else empty_f
        del title_parts, body_parts
        len_title = np.asarray(title_lens, dtype=np.float64)
        len_body = np.asarray(body_lens, dtype=np.float64)
        docs = np.concatenate(doc_parts) if doc_parts else np.zeros(0, dtype=np.int32)
        w = config.title_weight
        if config.title_b is None:  # one normalisation of the weighted length
            tf = np.float32(w) * tf_title + tf_body
            return cls._from_counts(ids, vocab, [docs], term_parts, [tf],
                                    w * len_title + len_body, config)
        norm_title = _field_norm(len_title, config.title_b)
        norm_body = _field_norm(len_body, config.b)
        tf_tilde = w * tf_title / norm_title[docs] + tf_body / norm_body[docs]
        return cls._from_counts(ids, vocab, [docs], term_parts, [tf_tilde],
                                len_title + len_body, config, normalised=True)

    @classmethod
    def _from_counts(cls, ids: list[str], vocab: dict[str, int], doc_parts: list[np.ndarray],
                     term_parts: list[np.ndarray], tf_parts: list[np.ndarray],
                     doc_lens: np.ndarray, config: FtsConfig,
                     normalised: bool = False) -> BM25Index:
        """The index from per-entry term counts; ``normalised``: the counts are BM25F's
        already length-normalised ``tf~`` (scored with ``b = 0``)."""
        n_docs, n_terms = len(ids), len(vocab)
        # number the vocabulary in sorted order: the index bytes do not depend on set order
        order = sorted(vocab)
        remap = np.empty(n_terms, dtype=np.int32)
        for new, term in enumerate(order):
            remap[vocab[term]] = new
        sorted_vocab = {t: i for i, t in enumerate(order)}
        empty_i = np.zeros(0, dtype=np.int32)
        docs = np.concatenate(doc_parts) if doc_parts else empty_i
        terms = remap[np.concatenate(term_parts)] if term_parts else empty_i
        tf = np.concatenate(tf_parts) if tf_parts else np.zeros(0, dtype=np.float32)
        del doc_parts, term_parts, tf_parts
        df = np.bincount(terms, minlength=n_terms)
        avg_len = doc_lens.mean() if n_docs else np.float64(0.0)
        method, k1, b, delta = config.method, config.k1, config.b, config.delta
        score_lens, score_avg = doc_lens, avg_len
        if normalised:  # BM25F: lengths are in tf~ already
            b, score_lens, score_avg = 0.0, np.ones(n_docs), np.float64(1.0)
        idf_by_df = {int(d): idf(method, int(d), n_docs) for d in np.unique(df) if d}
        idf_array = np.zeros(n_terms, dtype=np.float32)
        for t in range(n_terms):
            if df[t]:
                idf_array[t] = idf_by_df[int(df[t])]
        with np.errstate(all="ignore"):  # a score out of range: refused just below
            nonocc = None
            if method in ("bm25l", "bm25+"):
                tfc0 = term_frequency_component(method, 0, score_avg, score_avg, k1, b, delta)
                nonocc = np.zeros(n_terms, dtype=np.float32)
                nz = df != 0
                nonocc[nz] = np.asarray([idf_by_df[int(d)] * tfc0 for d in df[nz]])
            data = np.empty(len(tf), dtype=np.float32)
            step = 1 << 22  # bounded temporaries (float64) on big collections
            for s in range(0, len(tf), step):
                sl = slice(s, s + step)
                tfc = term_frequency_component(method, tf[sl], score_lens[docs[sl]],
                                               score_avg, k1, b, delta)
                scores = idf_array[terms[sl]] * tfc
                if nonocc is not None:
                    scores -= nonocc[terms[sl]]
                data[sl] = scores
        _check_finite(data, nonocc, config)
        # compressed sparse columns: entries grouped by term, documents ascending within one
        by_term = np.lexsort((docs, terms)) if len(terms) else empty_i
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        return cls(ids, sorted_vocab, data[by_term], docs[by_term].astype(np.int32), indptr,
                   doc_lens, config, nonocc)

    # -- persistence -----------------------------------------------------------------------------
    def save(self, folder: Path) -> list[str]:
        """Write the index into ``folder``; returns the file names written."""
        folder.mkdir(parents=True, exist_ok=True)
        names = []
        arrays = {"data": self.data, "indices": self.indices, "indptr": self.indptr,
                  "doc_lens": self.doc_lens}
        if self.nonoccurrence is not None:
            arrays["nonoccurrence"] = self.nonoccurrence
        for name, arr in arrays.items():
            np.save(folder / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
            names.append(f"{name}.npy")
        (folder / "ids.json").write_text(json.dumps(self.ids, ensure_ascii=False),
                                         encoding="utf-8")
        terms = sorted(self.vocab, key=self.vocab.__getitem__)  # in column order
        (folder / "vocab.json").write_text(json.dumps(terms, ensure_ascii=False),
                                           encoding="utf-8")
        return [*names, "ids.json", "vocab.json"]

    @classmethod
    def load(cls, folder: Path, config: FtsConfig, mmap: bool = True) -> BM25Index:
        """Read an index written by :meth:`save` (arrays memory-mapped when ``mmap``)."""
        arrays = {n: np.load(folder / f"{n}.npy", mmap_mode="r" if mmap else None,
                             allow_pickle=False)
                  for n in _ARRAYS}
        nonocc = None
        if (folder / "nonoccurrence.npy").exists():
            nonocc = np.load(folder / "nonoccurrence.npy", allow_pickle=False)
        ids = read_ids(folder / "ids.json")
        terms = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        return cls(ids, {t: i for i, t in enumerate(terms)}, arrays["data"],
                   arrays["indices"], arrays["indptr"], arrays["doc_lens"], config, nonocc)

    # -- search ------------------------------------------------------------------------------
    def query_terms(self, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each query's term columns, in query order (repeats kept, unknown terms dropped), as
        one flat int32 array and ``len(queries) + 1`` offsets."""
        vocab = self.vocab
        flat: list[int] = []
        offsets = [0]
        for terms in self.analyzer.terms_many(queries):
            flat.extend(vocab[t] for t in terms if t in vocab)
            offsets.append(len(flat))
        return np.asarray(flat, dtype=np.int32), np.asarray(offsets, dtype=np.int64)

    def search(self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None,
               threads: int | None = None) -> list[RankedList]:
        """Top ``k`` documents per query, best first (score desc, id asc). ``allowed``: a bool
        mask over documents (a filter); documents whose term scores sum to 0.0 (no query term)
        are not returned. One query is scored in numpy (:mod:`aiblox.indexes.single_query`:
        the kernel's bits), a batch by the compiled kernel."""
        flat, offsets = self.query_terms(queries)
        extra = np.zeros(len(queries), dtype=np.float32)
        if self.nonoccurrence is not None:
            for i in range(len(queries)):
                extra[i] = self.nonoccurrence[flat[offsets[i]:offsets[i + 1]]].sum()
        if len(queries) == 1:  # the same hits, without loading numba (a search command)
            pos1, scores1 = bm25_top_k_one(
                self.data, self.indices, self.indptr, flat, float(extra[0]),
                None if allowed is None else np.asarray(allowed, dtype=np.bool_),
                self.n_docs, int(k))
            return [list(zip([self.ids[p] for p in pos1.tolist()], scores1.tolist(),
                             strict=True))]
        from aiblox.indexes.kernels import bm25_top_k, compiled_threads

        mask = (np.ones(self.n_docs, dtype=np.bool_) if allowed is None
                else np.ascontiguousarray(allowed, dtype=np.bool_))
        with compiled_threads(threads):
            pos, scores, counts = bm25_top_k(
                self.data, self.indices, self.indptr, flat, offsets, extra, mask,
                self.n_docs, int(k))
        return ranked_lists(self.id_array, pos, scores, counts)

    def weighted_terms(self, queries: Sequence[Mapping[str, float]]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each query's ``{analysed term: weight}`` as term columns and float32 weights (in the
        mapping's order; terms not in the vocabulary dropped, as :meth:`query_terms` drops
        them) and ``len(queries) + 1`` offsets. ``ValueError`` for a weight that is not a
        finite number."""
        vocab = self.vocab
        cols: list[int] = []
        weights: list[float] = []
        offsets = [0]
        for terms in queries:
            for t, w in terms.items():
                if not math.isfinite(w):
                    raise ValueError(f"term {t!r}: weight {w!r} is not a finite number")
                col = vocab.get(t)
                if col is not None:
                    cols.append(col)
                    weights.append(w)
            offsets.append(len(cols))
        return (np.asarray(cols, dtype=np.int32), np.asarray(weights, dtype=np.float32),
                np.asarray(offsets, dtype=np.int64))

    def search_terms(self, queries: Sequence[Mapping[str, float]], k: int,
                     allowed: np.ndarray | None = None, threads: int | None = None
                     ) -> list[RankedList]:
        """Top ``k`` documents per query of weighted analysed terms (``{term: weight}``, e.g.
        RM3's or Bo1's expanded query): ``score(d) = sum_t w_t * bm25(t, d)``, the products
        and their sum in float32 (the weight rounded to float32 once, the index's stored term
        scores as they are), in the mapping's order. The terms are index terms, not analysed
        again; those not in the vocabulary contribute nothing. The rest as :meth:`search`:
        best first (score desc, id asc), ``allowed`` a filter, documents scoring 0.0 left
        out. Weights all 1.0 give :meth:`search`'s scores for the same terms."""
        from aiblox.indexes.kernels import bm25_top_k_weighted, compiled_threads

        flat, weights, offsets = self.weighted_terms(queries)
        extra = np.zeros(len(queries), dtype=np.float32)
        if self.nonoccurrence is not None:
            for i in range(len(queries)):
                sl = slice(offsets[i], offsets[i + 1])
                extra[i] = (weights[sl] * self.nonoccurrence[flat[sl]]).sum()
        mask = (np.ones(self.n_docs, dtype=np.bool_) if allowed is None
                else np.ascontiguousarray(allowed, dtype=np.bool_))
        with compiled_threads(threads):
            pos, scores, counts = bm25_top_k_weighted(
                self.data, self.indices, self.indptr, flat, weights, offsets, extra, mask,
                self.n_docs, int(k))
        return ranked_lists(self.id_array, pos, scores, counts)

    def term_scores(self, terms: Mapping[str, float]) -> np.ndarray:
        """Every document's score for weighted analysed ``terms`` (float32; the reference
        :meth:`search_terms` is held to)."""
        flat, weights, _ = self.weighted_terms([terms])
        out = np.zeros(self.n_docs, dtype=np.float32)
        for t, w in zip(flat.tolist(), weights, strict=True):
            lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
            np.add.at(out, self.indices[lo:hi], w * self.data[lo:hi])
        if self.nonoccurrence is not None:
            out += (weights * self.nonoccurrence[flat]).sum()
        return out

    def scores(self, query: str) -> np.ndarray:
        """Every document's score for ``query`` (float32; the reference the kernel is held
        to)."""
        flat, _ = self.query_terms([query])
        out = np.zeros(self.n_docs, dtype=np.float32)
        for t in flat:
            lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
            np.add.at(out, self.indices[lo:hi], self.data[lo:hi])
        if self.nonoccurrence is not None:
            out += self.nonoccurrence[flat].sum()
        return out

