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
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from aiblox.contracts.retrieval import ScoringConfig
from aiblox.fusion.normalize import get_normalizer, minmax, sigmoid, zscore
from aiblox.fusion.types import first_occurrences

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


def _kernels() -> Any:
    """The compiled kernels (numba is imported, and its cache folder set, on first use)."""
    from aiblox.fusion import kernels

    return kernels


class BatchFusion:
    """The full-text and vector lists of a batch of queries (a sweep: one split), indexed for
    fast repeated fusion."""

    def __init__(self, qids: list[str], text: list[list[Any]], vec: list[list[Any]]) -> None:
        self.qids = list(qids)
        # each document's first entry in each list, at its rank there (the rule of every
        # fusion route: aiblox.fusion.types.first_occurrences); the lists fused are these
        text_ranked = [first_occurrences(t) for t in text]
        vec_ranked = [first_occurrences(v) for v in vec]
        self.text: list[Sequence[Any]] = [hits for hits, _ in text_ranked]
        self.vec: list[Sequence[Any]] = [hits for hits, _ in vec_ranked]
        seg: list[int] = []
        docs: list[str] = []
        rank_t: list[float] = []
        rank_v: list[float] = []
        self._pos_t: list[list[int]] = []  # flat position of each text hit, in list order
        self._pos_v: list[list[int]] = []
        for qi, (t, v) in enumerate(zip(self.text, self.vec, strict=True)):
            ids = sorted({d for d, _ in t} | {d for d, _ in v})
            base = len(docs)
            where = {d: base + i for i, d in enumerate(ids)}
            docs.extend(ids)
            seg.extend([qi] * len(ids))
            rt = [0.0] * len(ids)
            rv = [0.0] * len(ids)
            for r, (d, _) in zip(text_ranked[qi][1], t, strict=True):
                rt[where[d] - base] = float(r)
            for r, (d, _) in zip(vec_ranked[qi][1], v, strict=True):
                rv[where[d] - base] = float(r)
            rank_t.extend(rt)
            rank_v.extend(rv)
            self._pos_t.append([where[d] for d, _ in t])
            self._pos_v.append([where[d] for d, _ in v])
        self.seg = np.asarray(seg, dtype=np.int64)
        self.docs = np.asarray(docs, dtype=object)
        self.rank_t = np.asarray(rank_t, dtype=np.float64)
        self.rank_v = np.asarray(rank_v, dtype=np.float64)
        self.has_t = self.rank_t > 0
        self.has_v = self.rank_v > 0
        self.n = len(docs)
        self.counts = np.bincount(self.seg, minlength=len(self.qids)).astype(np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.counts)[:-1])).astype(np.int64)
        # each list's raw scores per query, and where its hits sit, flat (for normalising)
        self._raw = ([[float(sc) for _, sc in t] for t in self.text],
                     [[float(sc) for _, sc in v] for v in self.vec])
        self._flat_pos = (np.asarray([p for pos in self._pos_t for p in pos], dtype=np.int64),
                          np.asarray([p for pos in self._pos_v for p in pos], dtype=np.int64))
        self._where: list[dict[str, int]] | None = None
        self._flat: list[tuple[np.ndarray, np.ndarray]] | None = None
        self._norm: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._fill: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def from_signals(cls, sig: dict[str, Any]) -> BatchFusion:
        """From a ``signals`` stage output (``{"qids", "text", "vec"}``)."""
        return cls(sig["qids"], sig["text"], sig["vec"])

    def _flat_raw(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each list's raw scores flat, with the offsets of its queries (built once: every
        normalisation reads them)."""
        if self._flat is None:
            self._flat = []
            for raw in self._raw:
                offsets = np.zeros(len(raw) + 1, dtype=np.int64)
                np.cumsum([len(scores) for scores in raw], out=offsets[1:])
                flat = np.fromiter(chain.from_iterable(raw), dtype=np.float64,
                                   count=int(offsets[-1]))
                self._flat.append((flat, offsets))
        return self._flat

    def _normalised(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per flat position: normalised text and vector scores (0 where absent), and per
        query the lowest normalised score of each list (0 for an empty list)."""
        if name not in self._norm:
            norm = get_normalizer(name)
            out = []
            for raw, flat_pos, (flat_raw, offsets) in zip(self._raw, self._flat_pos,
                                                          self._flat_raw(), strict=True):
                if norm is minmax:  # compiled, step for step the same arithmetic
                    normed, mins = _kernels().minmax_lists(flat_raw, offsets)
                elif (norm is zscore or norm is sigmoid) and bool(
                        (np.abs(flat_raw) < 1e150).all()):  # where Python's floats never overflow
                    normed, mins = _kernels().zscore_lists(flat_raw, offsets, norm is sigmoid,
                                                           2.0)
                else:
                    normed, mins = _python_lists(norm, raw)
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
        a, b = self._filled(cfg.normalize, cfg.missing == "list_min")
        return k.linear_blend(a, b, float(cfg.w_text), float(cfg.w_vec))

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
