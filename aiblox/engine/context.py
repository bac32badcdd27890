"""One sweep's state, made per sweep and dropped with it: the stage cache, the dataset's
workspace (opened on first need), the signals of every split planned, the split indexes and
scorers built from them, and the outputs later points share.

Nothing here is global: two sweeps in one process never see each other's indexes, and a
sweep's memory goes when its :class:`RunContext` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.data import Dataset
from aiblox.engine.cache import StageCache
from aiblox.engine.chunk_eval import gold_answers, precomputed_refusal
from aiblox.engine.compute import fused_arrays, signals_output
from aiblox.engine.configs import (
    STORED_CHUNK_STRATEGIES,
    chunks_config,
    fusion_config,
    signals_config,
)
from aiblox.engine.data import Queries, Run
from aiblox.engine.outputs import StageReader
from aiblox.engine.plan import Value
from aiblox.engine.retrieval import StageContext
from aiblox.engine.settings import SweepSettings
from aiblox.engine.task import StageRecord, Task, make_task, stage_key
from aiblox.engine.workspace import Workspace, open_workspace
from aiblox.fusion import BatchFusion, FusedArrays
from aiblox.metrics import QrelsScorer
from aiblox.retrieval import LateChunker, default_chunk_cache
from aiblox.stores import mask_password, store_backend

__all__ = ["RunContext", "embedder_id"]


def embedder_id(name: str, device: str | None = None) -> str:
    """The model id of the registry embedder ``name`` on ``device`` (None: ``auto``; its
    model is not loaded)."""
    from aiblox.embedding import get_embedder

    return get_embedder(name, device=device).model_id


def _check_backend(kind: str, backend: str, where: str) -> None:
    """A store of another kind than ``backend``, the backend the stage keys and config hashes
    name, is a ``ValueError``: its results would be recorded as the other backend's (a
    verification of a PostgreSQL point on the dataset's DuckDB store reported it reproduced)."""
    if kind != backend:
        raise ValueError(f"{where} is a {kind} store, but the stages are keyed for backend "
                         f"{backend!r}: name a {backend} store (--db)")


class RunContext:
    """The state of one sweep (or of one verification): see the module doc.

    ``outputs`` memoises stage runs by ``(name, key)``: a key is run (and counted by the
    cache) once per sweep; the outputs of the chunk and answer stages are kept, since several
    points share them, those of fusion and metrics are read again when a later point needs
    them."""

    def __init__(self, settings: SweepSettings, dataset: Dataset, cache: StageCache,
                 db: str | None, backend: str, splits: Sequence[str],
                 embedder: str | None = None, progress: bool = True,
                 workspace: Workspace | None = None) -> None:
        self.settings, self.dataset, self.cache = settings, dataset, cache
        if workspace is not None:
            _check_backend(workspace.store.kind, backend, workspace.store.location)
        if settings.trained:  # the trained models its embedder and stages name by reference
            from aiblox.embedding.sentence_transformers import use_trained

            use_trained(dict(settings.trained))
        self.db, self.backend, self.progress = db, backend, progress
        self.splits = list(splits)
        """The splits every point is scored on (tune, then report)."""
        self.embedder_id = (embedder if embedder is not None
                            else embedder_id(settings.embedder, settings.device))
        self.reader = StageReader(cache)
        self.signals: dict[tuple[str, str], tuple[StageRecord, dict[str, Any] | None]] = {}
        """``(split, signals key) -> (record, output)``; the output is None until needed."""
        self.read_s = 0.0
        """Seconds spent reading cached signals back (part of the signals phase)."""
        self.index_version = dataset.hash[:16]
        """The ``index_version`` the answer stages record."""
        self._loaders: dict[tuple[str, str], Callable[[], tuple[StageRecord, Any]]] = {}
        self._given = workspace
        """A workspace the caller opened (a one-point evaluation's): used, never closed here."""
        self._workspace: Workspace | None = workspace
        self._fingerprint: dict[str, str | None] | None = None
        self._scorers: dict[str, QrelsScorer] = {}
        self._qids: dict[str, list[str]] = {}
        self._codes: dict[str, np.ndarray] = {}
        self._late: LateChunker | None = None
        self._seen: set[tuple[str, str]] = set()
        self._planned: dict[tuple[str, int], tuple[RetrievalPrefs, str]] = {}
        self._kept: dict[tuple[str, str], tuple[StageRecord, Any]] = {}
        self._topics: dict[str, Value] = {}
        self._ready: dict[tuple[str, str], Any] = {}
        self.precomputed: dict[tuple[str, str], tuple[int, str]] = {}
        """The store's precomputed chunk entries read so far: ``(chunker id, model id) ->
        (n, digest)`` (:meth:`precomputed_chunks`)."""

    # -- the workspace ----------------------------------------------------------------------
    def workspace(self) -> Workspace:
        """The dataset's workspace (:func:`aiblox.engine.workspace.open_workspace`), opened on
        first need (again after :meth:`close`). The store ``db`` names must be of the backend
        the stage keys name (:attr:`backend`), checked before anything is opened or made."""
        if self._workspace is None:
            _check_backend(store_backend(self.db) if self.db else "duckdb", self.backend,
                           mask_password(self.db) if self.db else
                           f"the default store of dataset {self.dataset.name!r}")
            s = self.settings
            self._workspace = open_workspace(
                self.dataset, self.db, s.embedder, device=s.device, vectors=s.vectors,
                with_vectors=s.needs_vectors, progress=self.progress)
        return self._workspace

    def fingerprint(self) -> dict[str, str | None]:
        """What retrieval reads from the store, for signals keys (the store is opened and
        synced once for it)."""
        if self._fingerprint is None:
            self._fingerprint = self.workspace().fingerprint(self.settings.needs_vectors)
        return self._fingerprint

    @property
    def late(self) -> LateChunker:
        """The default late chunker over the store's chunk cache."""
        if self._late is None:
            ws = self.workspace()
            self._late = LateChunker(ws.retriever.embedder, default_chunk_cache(ws.store))
        return self._late

    def precomputed_chunks(self, chunker_id: str, model_id: str) -> tuple[int, str]:
        """``(n, digest)`` of the chunk entries ``aiblox index build --chunks`` wrote to the
        store for ``chunker_id`` and ``model_id``
        (:meth:`~aiblox.stores.chunk_cache.ChunkCache.precomputed_digest`), read once."""
        key = (chunker_id, model_id)
        if key not in self.precomputed:
            cache = default_chunk_cache(self.workspace().store)
            self.precomputed[key] = cache.precomputed_digest(chunker_id, model_id)
        return self.precomputed[key]

    def check_chunks(self, prefs: RetrievalPrefs) -> None:
        """Before any stage computes: the store's precomputed chunks a point's chunk stage
        reads (``precomputed`` and ``mixed`` strategies) looked up, and the ``precomputed``
        strategy over a store holding none for its chunker (and embedder: none for a bm25
        point) refused, as ``aiblox eval --chunks`` refuses it (``ValueError``): every chunk
        metric would be 0."""
        if prefs.chunking.strategy not in STORED_CHUNK_STRATEGIES:
            return
        cfg = chunks_config(prefs, self.embedder_id)
        n, _ = self.precomputed_chunks(cfg["chunker"], cfg["late"]["embedder"])
        if n == 0 and prefs.chunking.strategy == "precomputed":
            raise ValueError(precomputed_refusal(cfg["chunker"], cfg["late"]["embedder"]))

    def _stored_chunks_keyed(self, stage: Task) -> Task:
        """A chunks stage that reads the store's precomputed chunks, its config with their
        digest added (``precomputed``): its output depends on which documents have them and
        what they hold, which no other key covers (the store fingerprint is the items' and
        vectors'), so ``aiblox index build --chunks`` after a sweep moves its key and the
        sweep does not serve what it computed before."""
        cfg = stage.config
        if stage.name != "chunks" or not isinstance(cfg, dict) or "precomputed" in cfg \
                or cfg.get("strategy") not in STORED_CHUNK_STRATEGIES:
            return stage
        _, digest = self.precomputed_chunks(cfg["chunker"], cfg["late"]["embedder"])
        return replace(stage, config={**cfg, "precomputed": digest})

    def close(self) -> None:
        """Close the store (a later need opens it again: a damaged entry found late); a
        workspace the caller gave is left open."""
        if self._workspace is not None and self._workspace is not self._given:
            self._workspace.close()
        self._workspace = self._given
        self._late = None

    # -- stages -----------------------------------------------------------------------------
    def run(self, stage: Task, load: bool = True, keep: bool = False
            ) -> tuple[StageRecord, Any]:
        """A memoised stage: its first run in this sweep is counted by the cache, a later one
        reads the entry again (``load``) without counting; ``keep`` holds the output for the
        points after. A chunks stage on precomputed chunks is keyed by them too
        (:meth:`_stored_chunks_keyed`)."""
        stage = self._stored_chunks_keyed(stage)
        key = (stage.name, stage.key)
        if key in self._kept:
            return self._kept[key]
        if self._ready and key in self._ready:
            stage = stage.given(self._ready.pop(key))
        first = key not in self._seen
        self._seen.add(key)
        out = self.cache.run_stage(stage, load=load, count_reuse=first)
        if keep:
            self._kept[key] = out
        return out

    def ready(self, name: str, key: str, output: Any) -> None:
        """An output computed ahead (:func:`aiblox.engine.ahead.batches_ahead`): the next run of
        stage ``(name, key)`` in this sweep takes it instead of computing it (an entry already
        stored is still read; a recorded one is checked against it)."""
        self._ready[(name, key)] = output

    def drop_ready(self) -> None:
        """Forget the outputs computed ahead and not taken."""
        self._ready.clear()

    def plan_signals(self, prefs: RetrievalPrefs, split: str) -> str:
        """The key of the signals stage of ``prefs`` on ``split``, memoised without reading
        its output (computed when missing: the retrieval runs now)."""
        planned = self._planned.get((split, id(prefs)))
        if planned is not None and planned[0] is prefs:  # a point's own prefs: planned already
            return planned[1]
        limit = self.settings.query_limit
        cfg = signals_config(prefs, self.dataset.hash, split, self.backend, self.embedder_id,
                             limit=limit, store=self.fingerprint())
        stage = make_task("signals", cfg, [], partial(self._retrieve, prefs, split))
        key = stage.key
        if (split, key) not in self.signals:
            # a cached output is not read here, only when a point needs it
            rec, out = self.cache.run_stage(stage, load=False)
            self.signals[(split, key)] = (rec, out)
            self._loaders[(split, key)] = partial(self.cache.run_stage, stage,
                                                  count_reuse=False)
        self._planned[(split, id(prefs))] = (prefs, key)
        return key

    def _retrieve(self, prefs: RetrievalPrefs, split: str) -> dict[str, Any]:
        return signals_output(self.workspace().retriever, self.dataset, split, prefs,
                              limit=self.settings.query_limit, progress=self.progress)

    def signals_output(self, split: str, key: str) -> dict[str, Any]:
        """The split's signals, read from the stage cache on first use: a sweep whose fusion
        and metrics are all cached never reads them."""
        rec, out = self.signals[(split, key)]
        if out is None:
            t0 = time.perf_counter()
            rec, out = self._loaders[(split, key)]()
            self.signals[(split, key)] = (rec, out)
            self.read_s += time.perf_counter() - t0
        return out

    def forget(self, split: str, key: str) -> None:
        """Drop what was read of one split's signals (read again, checked, on next use)."""
        rec, _ = self.signals[(split, key)]
        self.signals[(split, key)] = (rec, None)
        self._codes.pop(key, None)
        self.reader.forget(key)

    def fusion_index(self, split: str, key: str) -> BatchFusion:
        """The split's lists indexed for fast fusion (built on first use)."""
        return self.reader.index(key, partial(self.signals_output, split, key))

    def codes(self, split: str, key: str) -> np.ndarray:
        """Per flat position of the split's index: its document's code for the split's scorer."""
        if key not in self._codes:
            self._codes[key] = self.scorer(split).codes(self.fusion_index(split, key).docs)
        return self._codes[key]

    # -- the engine's planning (aiblox.engine.plan.PlanContext) ------------------------------
    def topics(self, split: str) -> Value:
        """The split's scored queries as the topics of a pipeline, keyed by the dataset, the
        split and ``query_limit``."""
        if split not in self._topics:
            limit = self.settings.query_limit
            queries = self.dataset.split_queries(split)[:limit]
            config: dict[str, Any] = {"dataset": self.dataset.hash, "split": split,
                                      "limit": limit}
            if any(not text.strip() for _, text in queries):
                # a query with no text retrieves nothing in a stage after feedback too (it
                # ranked documents before, aiblox.engine.retrieval): the stages that read
                # these topics are keyed anew, only where such a query is
                config["blank_queries"] = "retrieve nothing"
            key = stage_key("topics", "1", config)
            self._topics[split] = Value("queries", key, (), partial(Queries.of, queries),
                                        topics=True)
        return self._topics[split]

    def first_stage(self, prefs: RetrievalPrefs, split: str) -> Value:
        """The fused run of ``prefs``' first stage (the signals and fusion stages every point
        has); its output, a :class:`~aiblox.engine.data.Run`, is read on demand."""
        skey = self.plan_signals(prefs, split)
        sig_rec = self.signals[(split, skey)][0]
        fusion = self.fusion_stage(prefs, split, skey)
        frec, _ = self.run(fusion, load=False)

        def load() -> Run:
            arrays = self.run(fusion)[1]
            index = self.fusion_index(split, skey)
            return Run.from_dict(index.decode(FusedArrays.from_dict(arrays)), index.qids)

        return Value("run", frec.key, (sig_rec, frec), load, prefs=prefs,
                     queries=self.topics(split))

    def fusion_stage(self, prefs: RetrievalPrefs, split: str, skey: str) -> Task:
        """The fusion stage of ``prefs`` over the split's signals ``skey``."""
        def fuse() -> dict[str, Any]:
            index = self.fusion_index(split, skey)
            return fused_arrays(prefs, index).as_dict()

        # a hybrid fused run takes a millisecond to compute again from its signals and half a
        # megabyte a point to store: recorded (key and output hash), not stored
        hybrid = prefs.mode == "hybrid"
        return make_task("fusion", fusion_config(prefs), [skey], fuse, codec="arrays",
                         counted_as=None if hybrid else "cut", stored=not hybrid)

    def run_stage(self, name: str, version: str, config: Any, inputs: Sequence[str],
                  compute: Callable[[], Any]) -> tuple[StageRecord, Any]:
        """A pipeline stage (arrays), memoised by its key and kept for later points."""
        return self.run(Task(name, version, config, tuple(inputs), compute, "arrays"),
                        keep=True)

    def fingerprints(self, reads: frozenset[str]) -> dict[str, Any]:
        """What a pipeline stage reads besides its inputs, for its key: the dataset, the
        backend, the store's digests (items, the embedder's vectors) and the embedder."""
        out: dict[str, Any] = {"dataset": self.dataset.hash, "backend": self.backend}
        if reads & {"items", "vectors"}:
            out["store"] = self.fingerprint()
        if reads & {"vectors", "embedder"}:
            out["embedder"] = self.embedder_id
        return out

    def stage_context(self) -> StageContext:
        """What a stage's function may use: the workspace (opened on first need)."""
        return StageContext(self.workspace, progress=self.progress)

    # -- the split's queries ----------------------------------------------------------------
    def qids(self, split: str) -> list[str]:
        """The scored queries of ``split``: its judged queries in id order, the first
        ``query_limit`` when set (as the signals stage retrieves them)."""
        if split not in self._qids:
            queries = self.dataset.split_queries(split)[:self.settings.query_limit]
            self._qids[split] = [q for q, _ in queries]
        return self._qids[split]

    def qrels(self, split: str) -> dict[str, dict[str, int]]:
        """The judgements of the scored queries (a query left out by ``query_limit`` must not
        count as a miss)."""
        qrels = self.dataset.split_qrels(split)
        if self.settings.query_limit is None:
            return qrels
        return {q: qrels[q] for q in self.qids(split) if q in qrels}

    def scorer(self, split: str) -> QrelsScorer:
        """ranx over :meth:`qrels` (built on first use)."""
        if split not in self._scorers:
            self._scorers[split] = QrelsScorer(self.qrels(split))
        return self._scorers[split]

    def gold(self, qids: Sequence[str]) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """Gold answer spans and texts of ``qids`` (empty without ``answers.jsonl``)."""
        spans = gold_answers(self.dataset, qids)
        texts = {q: list(self.dataset.answers[q].answers) for q in spans}
        return spans, texts
