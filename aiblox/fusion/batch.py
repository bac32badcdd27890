"""Hybrid fusion of many queries at once, with numpy and compiled kernels: the same bytes as
:class:`aiblox.fusion.HybridScorer`, about two orders of magnitude faster for a sweep.

A fusion sweep fuses the same cached lists under many scoring configs. :class:`BatchFusion`
indexes a batch of queries' lists once (the union of each query's documents, sorted by id, in
one flat array), normalises each list once per normaliser (with the very functions the
HybridScorer uses), and then fuses a config with a few elementwise operations over the flat
array and one stable sort. The arithmetic is the reference's, in the same order, so every score
is the same IEEE double: linear is ``(0 + w_text * a) + w_vec * b`` (Python's ``sum``), RRF adds
``w / (k + rank)`` text first, and ties break on document id ascending because the stable sort
starts from id order. A document listed twice in one list keeps its first entry, its rank and
its score, as in every fusion route (:func:`~aiblox.fusion.types.first_occurrences`).
``tests/fusion/test_batch_fusion.py`` holds it to the reference.

:meth:`BatchFusion.fuse_arrays` gives the fused run in its compact form, :class:`FusedArrays`
(flat positions into this index, per-query counts, scores: what the sweep's fusion stage stores
and hashes), sorted per query by a compiled kernel (:mod:`aiblox.fusion.kernels`, imported on
first use); :meth:`BatchFusion.decode` turns it into ``{qid: [[doc_id, score], ...]}`` and
:meth:`BatchFusion.encode` back.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from aiblox.contracts.retrieval import ScoringConfig
from aiblox.fusion.normalize import get_normalizer, minmax, sigmoid, zscore
from aiblox.fusion.types import check_blend_finite, first_occurrences

__all__ = ["BatchFusion", "FusedArrays"]


class FusedArrays(NamedTuple):
    """A fused run of a batch of queries in compact form (relative to its :class:`BatchFusion`)."""

    positions: np.ndarray
    """int32 flat positions into the index, query by query, best first."""
    counts: np.ndarray
    """int32 hits kept per query, in the index's query order."""
    scores: np.ndarray
    """float64 fused score of each kept position."""

    def as_dict(self) -> dict[str, np.ndarray]:
        """The arrays by name (the fusion stage's stored output)."""
        return {"positions": self.positions, "counts": self.counts, "scores": self.scores}

    @classmethod
    def from_dict(cls, arrays: dict[str, np.ndarray]) -> FusedArrays:
        """From :meth:`as_dict`'s form."""
        return cls(arrays["positions"], arrays["counts"], arrays["scores"])


def _python_lists(norm: Any, raw: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """``norm`` of each list, flat, and each list's lowest normalised score (0.0 if empty)."""
    flat: list[float] = []
    mins = [0.0] * len(raw)
    for qi, scores in enumerate(raw):
        if scores:
            normed = norm(scores)
            flat.extend(normed)
            mins[qi] = min(normed)
    return np.asarray(flat, dtype=np.float64), np.asarray(mins, dtype=np.float64)


def _utf8(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and int64 offsets (``len(names) + 1``)."""
    enc = [n.encode("utf-8") for n in names]
    offsets = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in enc], out=offsets[1:])
    return np.frombuffer(b"".join(enc), dtype=np.uint8), offsets


def _from_utf8(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    """Inverse of :func:`_utf8`."""
    data = blob.tobytes()
    at = offsets.tolist()
    return [data[at[i]:at[i + 1]].decode("utf-8") for i in range(len(at) - 1)]


def _kernels() -> Any:
    """The compiled kernels (numba is imported, and its cache folder set, on first use)."""
    from aiblox.fusion import kernels

    return kernels


class _Flat:
    """One side's lists (each as :func:`~aiblox.fusion.types.first_occurrences` gives it) flat:
    each hit's query index, document id, rank and score, and each query's offsets."""

    def __init__(self, ranked: list[tuple[Sequence[Any], Sequence[int]]]) -> None:
        lengths = [len(hits) for hits, _ in ranked]
        self.offsets = np.zeros(len(ranked) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.offsets[1:])
        n = int(self.offsets[-1])
        self.qidx = np.repeat(np.arange(len(ranked), dtype=np.int64), lengths)
        self.ids = [hit[0] for hits, _ in ranked for hit in hits]
        if all(type(rs) is range for _, rs in ranked):  # no list names a document twice
            self.ranks = (np.arange(1, n + 1, dtype=np.int64)
                          - np.repeat(self.offsets[:-1], lengths)).astype(np.float64)
        else:
            self.ranks = np.fromiter((r for _, rs in ranked for r in rs), dtype=np.float64,
                                     count=n)
        self.scores = np.fromiter((float(hit[1]) for hits, _ in ranked for hit in hits),
                                  dtype=np.float64, count=n)


class BatchFusion:
    """The full-text and vector lists of a batch of queries (a sweep: one split), indexed for
    fast repeated fusion."""

    _vocab: tuple[list[Any], np.ndarray]
    """The batch's distinct document ids sorted, and each position's code into them (what
    :meth:`to_arrays` writes and :meth:`from_arrays` reads)."""

    def __init__(self, qids: list[str], text: list[list[Any]], vec: list[list[Any]]) -> None:
        self.qids = list(qids)
        if len(text) != len(vec):
            raise ValueError(f"{len(text)} full-text lists for {len(vec)} vector lists")
        # each document's first entry in each list, at its rank there (the rule of every
        # fusion route: aiblox.fusion.types.first_occurrences); the lists fused are these
        lists = [_Flat([first_occurrences(hits) for hits in side]) for side in (text, vec)]
        # every (query, document) pair of either list once, by query then document id: the
        # flat index; a document's code is its place among all the batch's ids, so sorting
        # the pairs' keys sorts each query's documents by id
        distinct = {d for side in lists for d in side.ids}
        try:
            vocab = sorted(distinct)
        except TypeError:  # ids of several types (lists built by hand): each type apart
            vocab = sorted(distinct, key=lambda d: (type(d).__name__, d))
        code = {d: i for i, d in enumerate(vocab)}
        width = max(len(vocab), 1)
        keys = [side.qidx * width + np.array([code[d] for d in side.ids], dtype=np.int64)
                for side in lists]
        flat_keys = np.unique(np.concatenate(keys))
        codes = flat_keys % width
        seg = flat_keys // width
        pos = [np.searchsorted(flat_keys, k).astype(np.int64) for k in keys]
        ranks = []
        for side, where in zip(lists, pos, strict=True):
            rank = np.zeros(len(flat_keys), dtype=np.float64)
            rank[where] = side.ranks
            ranks.append(rank)
        docs = np.empty(len(vocab), dtype=object)
        docs[:] = vocab
        self._set(docs[codes], ranks[0], ranks[1],
                  np.bincount(seg, minlength=len(self.qids)).astype(np.int64),
                  ((lists[0].scores, lists[0].offsets), (lists[1].scores, lists[1].offsets)),
                  (pos[0], pos[1]), (vocab, codes))

    def _set(self, docs: np.ndarray, rank_t: np.ndarray, rank_v: np.ndarray,
             counts: np.ndarray, flat: tuple[tuple[np.ndarray, np.ndarray], ...],
             flat_pos: tuple[np.ndarray, np.ndarray],
             vocab: tuple[list[Any], np.ndarray]) -> None:
        """The index's arrays (from the lists, or from :meth:`to_arrays`' form)."""
        self.docs = docs
        self.rank_t, self.rank_v = rank_t, rank_v
        self.has_t = self.rank_t > 0
        self.has_v = self.rank_v > 0
        self.n = len(docs)
        self.counts = counts
        self.seg = np.repeat(np.arange(len(self.qids), dtype=np.int64), counts)
        # one start per query (none for no query: [0] of length 1 crashed the kernels)
        self.starts = np.zeros(len(counts), dtype=np.int64)
        np.cumsum(counts[:-1], out=self.starts[1:])
        self._flat = list(flat)
        self._flat_pos = flat_pos
        self._where: list[dict[str, int]] | None = None
        self._vocab = vocab
        self._norm: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._fill: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._top: dict[tuple[str, bool], tuple[float, float]] = {}

    @classmethod
    def from_signals(cls, sig: dict[str, Any]) -> BatchFusion:
        """From a ``signals`` stage output (``{"qids", "text", "vec"}``)."""
        return cls(sig["qids"], sig["text"], sig["vec"])

    def to_arrays(self) -> dict[str, np.ndarray] | None:
        """The index as named arrays (query and document ids as UTF-8 with offsets, each
        position's document as a code into the sorted distinct ids), which
        :meth:`from_arrays` turns back into an equal index in milliseconds, where building it
        from a signals output reads every hit in Python; None when an id is not a string."""
        vocab, doc_code = self._vocab
        if not all(map(isinstance, self.qids, repeat(str))) or \
                not all(map(isinstance, vocab, repeat(str))):
            return None
        qid_blob, qid_off = _utf8(self.qids)
        doc_blob, doc_off = _utf8(vocab)
        (raw_t, off_t), (raw_v, off_v) = self._flat
        return {"qid_blob": qid_blob, "qid_off": qid_off, "doc_blob": doc_blob,
                "doc_off": doc_off,
                "doc_code": np.asarray(doc_code, dtype=np.int64),
                "counts": self.counts, "rank_t": self.rank_t, "rank_v": self.rank_v,
                "raw_t": raw_t, "off_t": off_t, "raw_v": raw_v, "off_v": off_v,
                "pos_t": self._flat_pos[0], "pos_v": self._flat_pos[1]}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BatchFusion:
        """The index :meth:`to_arrays` wrote (``ValueError`` when the arrays do not fit
        together)."""
        a = {k: np.asarray(v) for k, v in arrays.items()}
        self = cls.__new__(cls)
        self.qids = _from_utf8(a["qid_blob"], a["qid_off"])
        vocab = np.empty(len(a["doc_off"]) - 1, dtype=object)
        vocab[:] = _from_utf8(a["doc_blob"], a["doc_off"])
        codes, counts = a["doc_code"].astype(np.int64), a["counts"].astype(np.int64)
        n = len(codes)
        flat = ((a["raw_t"], a["off_t"]), (a["raw_v"], a["off_v"]))
        if (len(counts) != len(self.qids) or int(counts.sum()) != n
                or len(a["rank_t"]) != n or len(a["rank_v"]) != n
                or any(len(off) != len(self.qids) + 1 or int(off[-1]) != len(raw)
                       for raw, off in flat)
                or len(a["pos_t"]) != len(a["raw_t"]) or len(a["pos_v"]) != len(a["raw_v"])
                or (n and (codes.min() < 0 or codes.max() >= len(vocab)))
                or any(len(p) and (p.min() < 0 or p.max() >= n)
                       for p in (a["pos_t"], a["pos_v"]))):
            raise ValueError("the arrays of a fusion index do not fit together")
        self._set(vocab[codes] if n else np.empty(0, dtype=object),
                  np.ascontiguousarray(a["rank_t"], dtype=np.float64),
                  np.ascontiguousarray(a["rank_v"], dtype=np.float64), counts,
                  tuple((np.ascontiguousarray(raw, dtype=np.float64),
                         np.ascontiguousarray(off, dtype=np.int64)) for raw, off in flat),
                  (np.ascontiguousarray(a["pos_t"], dtype=np.int64),
                   np.ascontiguousarray(a["pos_v"], dtype=np.int64)), (vocab.tolist(), codes))
        return self

    def _raw(self, li: int) -> list[list[float]]:
        """List ``li``'s raw scores (0: full text, 1: vector) per query, as Python floats
        (for a normaliser with no compiled form)."""
        flat, offsets = self._flat[li]
        return [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]

    def _normalised(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per flat position: normalised text and vector scores (0 where absent), and per
        query the lowest normalised score of each list (0 for an empty list)."""
        if name not in self._norm:
            norm = get_normalizer(name)
            out = []
            for li, (flat_pos, (flat_raw, offsets)) in enumerate(zip(
                    self._flat_pos, self._flat, strict=True)):
                if norm is minmax:  # compiled, step for step the same arithmetic
                    normed, mins = _kernels().minmax_lists(flat_raw, offsets)
                elif (norm is zscore or norm is sigmoid) and bool(
                        (np.abs(flat_raw) < 1e150).all()):  # where Python's floats never overflow
                    normed, mins = _kernels().zscore_lists(flat_raw, offsets, norm is sigmoid,
                                                           2.0)
                else:
                    normed, mins = _python_lists(norm, self._raw(li))
                values = np.zeros(self.n, dtype=np.float64)
                values[flat_pos] = normed
                out += [values, mins]
            self._norm[name] = (out[0], out[2], out[1], out[3])
        return self._norm[name]

    def scores(self, cfg: ScoringConfig) -> np.ndarray:
        """The fused score of every flat position under ``cfg`` (compiled, in parallel)."""
        k = _kernels()
        if cfg.blend == "rrf":
            # a document absent from a list gets no term from it (rank 0 is never divided by)
            return k.rrf_scores(self.rank_t, self.rank_v, self.has_t, self.has_v,
                                float(cfg.rrf_k), float(cfg.rrf_w_text), float(cfg.rrf_w_vec))
        a, b = self._checked_blend(cfg)
        return k.linear_blend(a, b, float(cfg.w_text), float(cfg.w_vec))

    def blend_inputs(self, cfg: ScoringConfig) -> tuple[bool, np.ndarray, np.ndarray]:
        """What :meth:`scores` blends per position under ``cfg``: ``(True, rank_t, rank_v)``
        for reciprocal rank fusion, else ``(False, a, b)``, the filled normalised scores of
        the linear blend; the arrays are the same objects for every setting of one blend,
        normalisation and missing-document rule."""
        if cfg.blend == "rrf":
            return True, self.rank_t, self.rank_v
        return (False, *self._checked_blend(cfg))

    def _checked_blend(self, cfg: ScoringConfig) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_filled` for ``cfg``, refused where a fused score would pass the largest
        float: ``w_text * a + w_vec * b`` of the largest magnitudes (``zscore`` and ``none``
        are unbounded) would be inf, every such document one tie."""
        key = (cfg.normalize, cfg.missing == "list_min")
        a, b = self._filled(*key)
        if key not in self._top:  # once per normalisation and rule, not per point
            self._top[key] = (float(np.abs(a).max()) if len(a) else 0.0,
                              float(np.abs(b).max()) if len(b) else 0.0)
        top_a, top_b = self._top[key]
        check_blend_finite(cfg.w_text * top_a + cfg.w_vec * top_b, cfg.normalize)
        return a, b

    def _filled(self, name: str, list_min: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per flat position the normalised text and vector score a linear blend adds, a
        document missing from a list given that list's minimum (``list_min``) or 0: built
        once per normalisation and rule, so a point's fused scores are one pass
        (:func:`~aiblox.fusion.kernels.linear_blend`), the same doubles as
        :func:`~aiblox.fusion.kernels.linear_scores`."""
        key = (name, list_min)
        if key not in self._fill:
            nt, nv, min_t, min_v = self._normalised(name)
            if list_min:
                a = np.where(self.has_t, nt, min_t[self.seg])
                b = np.where(self.has_v, nv, min_v[self.seg])
            else:
                a = np.where(self.has_t, nt, 0.0)
                b = np.where(self.has_v, nv, 0.0)
            self._fill[key] = (np.ascontiguousarray(a, dtype=np.float64),
                               np.ascontiguousarray(b, dtype=np.float64))
        return self._fill[key]

    def fuse_arrays(self, cfg: ScoringConfig, top_k: int | None) -> FusedArrays:
        """The fused run in compact form: per query best first (score desc, id asc), cut to
        ``top_k``."""
        fused = self.scores(cfg)
        positions, kept, ordered = _kernels().segment_order(fused, self.starts, self.counts,
                                                            -1 if top_k is None else int(top_k))
        return FusedArrays(positions, kept, ordered)

    def single_arrays(self, side: str, top_k: int | None) -> FusedArrays:
        """One list passed through (``bm25`` or ``dense`` mode, ``side`` ``"text"`` or
        ``"vec"``) in compact form: each query's first ``top_k`` hits in list order, the
        document's first entry only, its raw score, as :meth:`HybridScorer.single
        <aiblox.fusion.HybridScorer.single>` gives them (and :meth:`encode` of that: the same
        arrays, without the lists)."""
        li = 0 if side == "text" else 1
        raw, offsets = self._flat[li]
        lengths = np.diff(offsets)
        kept = lengths if not top_k else np.minimum(lengths, int(top_k))
        take = np.repeat(offsets[:-1], kept) + (
            np.arange(int(kept.sum()), dtype=np.int64) - np.repeat(np.cumsum(kept) - kept, kept))
        return FusedArrays(self._flat_pos[li][take].astype(np.int32), kept.astype(np.int32),
                           np.ascontiguousarray(raw[take], dtype=np.float64))

    def decode(self, fused: FusedArrays) -> dict[str, list[list[Any]]]:
        """``{qid: [[doc_id, score], ...]}`` of a compact run."""
        docs = self.docs[fused.positions].tolist()
        vals = fused.scores.tolist()
        out: dict[str, list[list[Any]]] = {}
        start = 0
        for qid, c in zip(self.qids, fused.counts.tolist(), strict=True):
            out[qid] = [[d, v] for d, v in zip(docs[start:start + c], vals[start:start + c],
                                               strict=True)]
            start += c
        return out

    def encode(self, run: dict[str, list[list[Any]]]) -> FusedArrays:
        """The compact form of a run over this index's lists (every document of the run must
        be in its query's lists; a query absent from ``run`` keeps nothing)."""
        if self._where is None:
            self._where = [{d: int(self.starts[qi]) + i for i, d in enumerate(
                self.docs[self.starts[qi]:self.starts[qi] + self.counts[qi]].tolist())}
                for qi in range(len(self.qids))]
        positions: list[int] = []
        counts: list[int] = []
        scores: list[float] = []
        for qid, where in zip(self.qids, self._where, strict=True):
            hits = run.get(qid, [])
            try:
                positions += [where[d] for d, _ in hits]
            except KeyError as exc:
                raise ValueError(f"query {qid!r}: document {exc.args[0]!r} is in neither "
                                 f"list") from None
            scores += [float(s) for _, s in hits]
            counts.append(len(hits))
        return FusedArrays(np.asarray(positions, dtype=np.int32),
                           np.asarray(counts, dtype=np.int32),
                           np.asarray(scores, dtype=np.float64))

    def fuse(self, cfg: ScoringConfig, top_k: int | None) -> dict[str, list[list[Any]]]:
        """``{qid: [[doc_id, score], ...]}`` best first (score desc, id asc), cut to ``top_k``."""
        return self.decode(self.fuse_arrays(cfg, top_k))
