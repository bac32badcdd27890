"""Reading a sweep's stored stage outputs back: a point's fused run (for TREC files), its
per-query metric values (for MLflow, significance and intervals), the evidence its selection
kept and its reader's failed generations (for the sweep's one warning about them).

A fused run is kept in compact form, relative to the :class:`~aiblox.fusion.BatchFusion`
index of its split's signals (a hybrid point's is recorded, not stored, and computed again
from that index); a :class:`StageReader` keeps the indexes it built for its own
lifetime (one sweep), so logging a thousand points builds each split's index once.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiblox.data.trec import trec_run_text, trec_scores
from aiblox.engine.cache import StageCache, StageCacheError, decode_arrays, encode_arrays
from aiblox.engine.compute import failed_generations, recorded_fusion
from aiblox.engine.task import is_output_keyed
from aiblox.fusion import BatchFusion, FusedArrays
from aiblox.hashing import sha256_bytes
from aiblox.metrics import unpack_metrics

__all__ = [
    "PER_QUERY_STAGES",
    "StageReader",
    "failed_generations_note",
    "load_fused_run",
    "logged_per_query",
    "selected_evidence",
]

PER_QUERY_STAGES = ("metrics", "chunk_metrics", "answer_metrics")
"""Stages whose output has per-query values (``metrics`` as arrays, the others as
``{"means", "per_query"}``)."""


class StageReader:
    """Reads one stage cache's outputs back, keeping the split indexes it builds."""

    def __init__(self, cache: StageCache) -> None:
        self.cache = cache
        self._indexes: dict[str, BatchFusion] = {}
        self._tables: dict[str, tuple[list[str], list[str]]] = {}
        self._fresh: set[str] = set()
        """Signals keys whose index is built from the signals on next use (:meth:`forget`)."""

    def index(self, signals_key: str,
              signals: Callable[[], dict[str, Any]] | None = None) -> BatchFusion:
        """The :class:`BatchFusion` index of a signals output, on first use read from
        ``<root>/doc_tables/<key>.index`` (its arrays, checked against the signals entry's
        output hash and their own sha256: milliseconds, where building it reads the signals'
        JSON and every hit in Python, about a quarter of a second per split of scifact at
        depth 200), else built from ``signals()`` (else from the cache) and written there."""
        if signals_key not in self._indexes:
            self._indexes[signals_key] = self._stored_index(signals_key, signals)
        return self._indexes[signals_key]

    def _stored_index(self, signals_key: str,
                      signals: Callable[[], dict[str, Any]] | None) -> BatchFusion:
        file = f"{signals_key}.index"
        if signals_key not in self._fresh:
            signals_hash = self._signals_hash(signals_key)
            kept = _derived_body(self.cache.read_file(_DOC_TABLES, file), signals_hash)
            if kept is not None:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    return BatchFusion.from_arrays(decode_arrays(kept[1]))
        sig = signals() if signals is not None else self.cache.load("signals", signals_key)
        index = BatchFusion.from_signals(sig)
        self._fresh.discard(signals_key)
        # the signals' hash read again: a damaged entry was computed again by signals()
        signals_hash = self._signals_hash(signals_key)
        arrays = index.to_arrays()
        if signals_hash is not None and arrays is not None:
            with contextlib.suppress(StageCacheError):
                self.cache.write_file(_DOC_TABLES, file,
                                      _derived_bytes(signals_hash, encode_arrays(arrays)))
        return index

    def _signals_hash(self, signals_key: str) -> str | None:
        """The output hash a signals entry recorded; None when it cannot be read."""
        try:
            return str(self.cache.meta("signals", signals_key)["output_hash"])
        except StageCacheError:
            return None

    def forget(self, signals_key: str) -> None:
        """Drop the index of a signals output (built again, from a fresh read of the signals,
        not from its stored arrays, on next use)."""
        self._indexes.pop(signals_key, None)
        self._tables.pop(signals_key, None)
        self._fresh.add(signals_key)

    def fused(self, signals_key: str, fusion_key: str) -> FusedArrays:
        """A cached fusion entry's run in compact form: read back, or for a recorded entry
        computed again from its signals and checked against its recorded hash
        (:class:`~aiblox.engine.cache.StageCacheCorrupt` when an entry is damaged or the
        computed run is not the recorded one)."""
        m = self.cache.meta("fusion", fusion_key)
        if m.get("stored") is not False:
            return FusedArrays.from_dict(self.cache.load("fusion", fusion_key))
        fused = recorded_fusion(m["config"], self.index(signals_key))
        self.cache.recomputed("fusion", fusion_key, fused.as_dict(), m)
        return fused

    def fused_run(self, signals_key: str, fusion_key: str) -> dict[str, list[list[Any]]]:
        """A cached fused run as ``{qid: [[doc_id, score], ...]}`` (:meth:`fused`)."""
        return self.index(signals_key).decode(self.fused(signals_key, fusion_key))

    def fused_trec(self, signals_key: str, fusion_key: str, tag: str) -> str:
        """:func:`~aiblox.engine.tracking.trec_run` of a cached fused run, the same text
        (scores strictly decreasing: :func:`aiblox.data.trec.trec_scores`), written from the
        compact run (no ``{qid: [[doc, score]]}`` in between) and its split's document table
        (:meth:`doc_table`: a stored run's re-run that never read its signals reads no signals
        for it; a recorded run is computed again from them)."""
        fused = self.fused(signals_key, fusion_key)
        qids, docs = self.doc_table(signals_key)
        starts = [0] * len(qids)
        counts = fused.counts.tolist()
        for i in range(1, len(counts)):
            starts[i] = starts[i - 1] + counts[i - 1]
        positions = fused.positions.tolist()
        end = f" {_safe_tag(tag)}"
        lines = []
        for q in sorted(range(len(qids)), key=qids.__getitem__):
            a, n = starts[q], counts[q]
            head = f"{qids[q]} Q0 "
            scores = trec_scores(fused.scores[a:a + n].tolist())  # ties strictly decreasing
            lines += [f"{head}{docs[positions[a + i]]} {i + 1} {scores[i]!r}{end}"
                      for i in range(n)]
        return "\n".join(lines) + ("\n" if lines else "")

    def doc_table(self, signals_key: str) -> tuple[list[str], list[str]]:
        """The query ids and the document id of every flat position of a signals output's
        :class:`BatchFusion` index: all a fused run's TREC text needs of its signals. From
        the index when this reader built it; else from ``<root>/doc_tables/<key>.txt``, kept
        beside the entries and checked against the signals entry's output hash and its own
        sha256; else built from the signals and written there (once per signals output)."""
        if signals_key in self._tables:
            return self._tables[signals_key]
        signals_hash = self.cache.meta("signals", signals_key)["output_hash"]
        file = f"{signals_key}.txt"
        table = _read_doc_table(self.cache.read_file(_DOC_TABLES, file), signals_hash)
        if table is None:
            index = self.index(signals_key)
            table = (list(index.qids), index.docs.tolist())
            data = _doc_table_bytes(*table, signals_hash)
            if data is not None:
                self.cache.write_file(_DOC_TABLES, file, data)
        self._tables[signals_key] = table
        return table

    def point_trec(self, stages: Sequence[dict[str, Any]], tag: str) -> str:
        """The TREC text of the run a point's metrics were computed from (one split's stage
        records): its fused run, or the output of the last stage of its retrieval pipeline."""
        by_key = {s["key"]: s for s in stages}
        metrics = next(s for s in stages if s["name"] == "metrics")
        run = by_key[metrics["inputs"][0]]
        if run["name"] == "fusion":
            return self.fused_trec(run["inputs"][0], run["key"], tag)
        from aiblox.engine.data import Run

        # ties written strictly decreasing, as every TREC file aiblox writes (trec_eval would
        # re-sort equal scores by document id and score another ranking)
        return trec_run_text(Run.from_arrays(self.cache.load(run["name"], run["key"])).as_dict(),
                             tag)

    def point_run(self, stages: Sequence[dict[str, Any]]) -> dict[str, list[list[Any]]]:
        """The run a point's metrics were computed from (one split's stage records), as
        ``{qid: [[doc_id, score], ...]}``: its fused run, or its pipeline's last stage's."""
        by_key = {s["key"]: s for s in stages}
        metrics = next(s for s in stages if s["name"] == "metrics")
        run = by_key[metrics["inputs"][0]]
        if run["name"] == "fusion":
            return self.fused_run(run["inputs"][0], run["key"])
        from aiblox.engine.data import Run

        out = Run.from_arrays(self.cache.load(run["name"], run["key"]))
        return {q: [[d, s] for d, s in hits] for q, hits in out.as_dict().items()}

    def per_query(self, stages: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
        """:func:`logged_per_query` of one split's stage records."""
        return logged_per_query(self.cache, stages)

    def selected_evidence(self, stages: Sequence[dict[str, Any]]
                          ) -> list[dict[str, Any]] | None:
        """:func:`selected_evidence` of one split's stage records."""
        return selected_evidence(self.cache, stages)


_DOC_TABLES = "doc_tables"
"""The cache folder of :meth:`StageReader.doc_table`'s files."""


def _doc_table_bytes(qids: list[str], docs: list[str], signals_hash: str) -> bytes | None:
    """A doc table's file: one JSON header line (the signals output hash, the query ids, the
    sha256 of the body), then the document ids one a line; None when an id holds a line
    break (such a table is rebuilt each time instead)."""
    if any("\n" in d or "\r" in d for d in docs):
        return None
    return _derived_bytes(signals_hash, "\n".join(docs).encode("utf-8"), qids=qids,
                          n=len(docs))


def _read_doc_table(data: bytes | None, signals_hash: str
                    ) -> tuple[list[str], list[str]] | None:
    """The ``(qids, docs)`` of a doc table's file, None when there is none or it is not the
    table of this signals output, whole."""
    kept = _derived_body(data, signals_hash)
    if kept is None:
        return None
    header, body = kept
    try:
        docs = body.decode("utf-8").split("\n") if header["n"] else []
        if len(docs) != header["n"]:
            return None
        return list(header["qids"]), docs
    except (ValueError, KeyError, TypeError):
        return None


def _derived_bytes(signals_hash: str, body: bytes, **header: Any) -> bytes:
    """A file derived from a signals entry (a doc table, a fusion index): one JSON header line
    (the signals' output hash, the body's sha256, ``header``'s fields), then the body."""
    head = {"signals": signals_hash, **header, "sha256": sha256_bytes(body)}
    return json.dumps(head).encode("utf-8") + b"\n" + body


def _derived_body(data: bytes | None, signals_hash: str | None
                  ) -> tuple[dict[str, Any], bytes] | None:
    """The header and body of a :func:`_derived_bytes` file; None when there is none, it is of
    other signals, or its body is not the one hashed."""
    if data is None or signals_hash is None:
        return None
    try:
        end = data.index(b"\n")
        header = json.loads(data[:end])
        body = data[end + 1:]
        if header["signals"] != signals_hash or sha256_bytes(body) != header["sha256"]:
            return None
        return header, body
    except (ValueError, KeyError, TypeError):
        return None


def _safe_tag(tag: str) -> str:
    """A run tag as :func:`aiblox.data.trec.trec_run_text` writes it (whitespace as ``_``)."""
    return "_".join(tag.split()) or "run"


def load_fused_run(cache: StageCache, signals_key: str, fusion_key: str
                   ) -> dict[str, list[list[Any]]]:
    """A cached fused run as ``{qid: [[doc_id, score], ...]}`` (for TREC files and reports);
    :class:`~aiblox.engine.cache.StageCacheCorrupt` when an entry it reads is damaged."""
    return StageReader(cache).fused_run(signals_key, fusion_key)


def logged_per_query(cache: StageCache, stages: Sequence[dict[str, Any]]
                     ) -> dict[str, dict[str, float]]:
    """``{metric: {qid: value}}`` of every stage of one split's records whose output has
    per-query values (:data:`PER_QUERY_STAGES`: ranx of the fused run, chunk metrics, answer
    metrics), read from the stage cache; for MLflow's ``per_query.<split>.parquet``."""
    out: dict[str, dict[str, float]] = {}
    for rec in stages:
        if rec["name"] in PER_QUERY_STAGES:
            output = cache.load(rec["name"], rec["key"])
            if rec["name"] == "metrics":  # ranx's, stored as arrays
                output = unpack_metrics(output)
            out.update(output["per_query"])
    return out


def selected_evidence(cache: StageCache, stages: Sequence[dict[str, Any]]
                      ) -> list[dict[str, Any]] | None:
    """Rows ``query_id, rank, chunk_id, item_id`` of the evidence the selection stage kept, in
    order per query (a query that kept nothing is one row with rank -1 and no chunk); None when
    the records have no selection stage. For MLflow's ``evidence.<split>.parquet``."""
    sel = next((rec for rec in stages if rec["name"] == "selection"), None)
    if sel is None:
        return None
    rows: list[dict[str, Any]] = []
    for qid, q in sorted(cache.load("selection", sel["key"])["queries"].items()):
        chosen = q["bundle"]["selected_evidence"]
        rows += [{"query_id": qid, "rank": i, "chunk_id": ev["chunk_id"],
                  "item_id": ev["knowledge_id"]} for i, ev in enumerate(chosen)]
        if not chosen:
            rows.append({"query_id": qid, "rank": -1, "chunk_id": None, "item_id": None})
    return rows


def failed_generations_note(cache: StageCache,
                            splits: Iterable[tuple[str, Sequence[dict[str, Any]]]]) -> str | None:
    """One line saying how many generations the reader failed in the points of ``splits``
    (``(split, stage records)`` pairs) and the first one's reason; None when none did. Only an
    output kept under a key naming it (:func:`aiblox.engine.compute.reader_reusable`: an
    endpoint's failures) is read, each once however many points share it: a sweep whose
    generations failed was scored on them, status ``FAILED``, and said nothing of it."""
    failed: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for split, stages in splits:
        key = next((r["key"] for r in stages if r["name"] == "reader"), None)
        if key is None or key in seen:
            continue
        seen.add(key)
        with contextlib.suppress(StageCacheError):  # a damaged entry: not this note's to say
            if is_output_keyed(cache.meta("reader", key, repair=False).get("config")):
                failed += [(split, q, why) for q, why in
                           failed_generations(cache.load("reader", key))]
    if not failed:
        return None
    split, qid, why = failed[0]
    n = len(failed)
    return (f"the reader failed {n} generation{'s' * (n != 1)} (its endpoint's failures, "
            f"scored as status:FAILED and not kept as the reader's result: the next run asks "
            f"again); the first, query {qid} on {split}: {why}")
