"""Sweep points as Ray tasks (``aiblox sweep --executor ray``): the same points, stages, keys
and results as the local executor, computed on the workers of an existing Ray cluster.

The driver (:func:`aiblox.sweep.runner.run_sweep`) keeps everything that decides the
result: it runs the signals phase (so every worker reads the signals from the shared stage
cache instead of retrieving them), cuts the points into batches of consecutive points, one Ray
task each (``max_retries``: a task whose worker process or node dies is run again elsewhere),
advances its progress bar as :func:`ray.wait` returns, and hands the points back in point order
(MLflow logging and ``on_point`` happen in the driver, in that order). A model-based search asks
its trials one at a time, each a task, so its seeded trial sequence is the local one.

A worker builds one :class:`RunContext` per sweep (the first of its tasks reads the sweep's
job, a later one reuses it: the split indexes are built once per worker process) over the same
stage cache folder as the driver, which every node must see (a shared file system). Stage
entries are written atomically and content-addressed, so two workers computing one key (a
chunk stage several points share) write the same bytes, and a task killed mid-write leaves no
entry; a driver killed mid-sweep resumes (``--resume``) with every finished stage read back.
Each task writes its entries as packs (:meth:`StageCache.batched`), published before it returns.
The driver waits through :func:`aiblox.cluster.completed`: a cluster gone mid-sweep is one
error, and a failed task's siblings are cancelled.

A DuckDB store file allows one process at a time: a worker that must open it (a chunk stage not
yet cached) holds a lock file beside it until its point is done; a PostgreSQL store needs none.

Ray is imported on first use only, here and in :mod:`aiblox.cluster` (``pip install
'aiblox[distributed]'``).
"""

from __future__ import annotations

import math
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aiblox.cluster import MAX_RETRIES, ExecutorError, completed
from aiblox.compiled import compiled_threads
from aiblox.data import Dataset
from aiblox.engine.cache import StageCache
from aiblox.engine.context import RunContext
from aiblox.engine.point import evaluate_point
from aiblox.engine.settings import PipelinePoint, SweepSettings
from aiblox.engine.workspace import Workspace, default_store_path
from aiblox.memory import paused_gc

__all__ = ["RayPoints", "RecordingCache", "check_shared_cache", "merge_counts"]


TASKS_PER_CPU = 4
"""Batches per cluster CPU in a grid sweep: enough to balance uneven points, few enough that
Ray's per-task cost stays small against a batch of fast fusion points."""


Event = tuple[str, str, str]
"""A stage cache event: ``(stage name as counted, key, "computed" | "reused" | "repaired")``."""


class RecordingCache(StageCache):
    """A stage cache that also records, per :meth:`run`, which entry was computed, reused or
    repaired (:attr:`events`): the driver merges the workers' events into the counts one
    process would have made (:func:`merge_counts`)."""

    def __init__(self, root: str | Path) -> None:
        super().__init__(root)
        self.events: list[Event] = []
        self.written: set[str] = set()
        """The stages (by name, not as counted) this process wrote an entry of."""

    def run(self, name: str, version: str | int, config: Any, inputs: Sequence[str],
            compute: Callable[[], Any], load: bool = True,
            codec: Literal["json", "arrays"] = "json",
            count_reuse: bool = True, key: str | None = None,
            counted_as: str | None = None, stored: bool = True,
            reusable: Callable[[Any], bool] | None = None) -> tuple[Any, Any]:
        counters = (self.computed, self.reused, self.repaired)
        counted = counted_as or name
        before = [c.get(counted, 0) for c in counters]
        rec, out = super().run(name, version, config, inputs, compute, load=load, codec=codec,
                               count_reuse=count_reuse, key=key, counted_as=counted_as,
                               stored=stored, reusable=reusable)
        for kind, counter, n in zip(("computed", "reused", "repaired"), counters, before,
                                    strict=True):
            if counter.get(counted, 0) > n:
                self.events.append((counted, rec.key, kind))
                if kind != "reused":
                    self.written.add(name)
        return rec, out

    def dropped_damaged(self, name: str, keys: set[str], report: bool = True) -> set[str]:
        """:meth:`StageCache.dropped_damaged`, each entry lost recorded as repaired (a batch's
        pack written again drops the damaged entries other tasks had not looked at: counted
        here, else no process would)."""
        lost = super().dropped_damaged(name, keys, report)
        if report:
            self.events += [(name, key, "repaired") for key in sorted(lost)]
        return lost

    def look_again(self, stages: Iterable[str]) -> None:
        """The packs of ``stages`` that other processes published indexed now (a task that
        wrote them has returned), not a second later at most."""
        for name in stages:
            self._packs.refresh(name)

    def take_events(self) -> list[Event]:
        """The events recorded since the last call."""
        events, self.events = self.events, []
        return events


def merge_counts(events: Sequence[Event]) -> tuple[dict[str, int], dict[str, int],
                                                    dict[str, int]]:
    """``(computed, reused, repaired)`` per stage name from the events of every process: an
    entry counts once, as computed when any process computed it (two workers may race to one
    key; one process counts a key at its first use), else as reused; every repair counts."""
    kinds: dict[tuple[str, str], set[str]] = {}
    repaired: dict[str, int] = {}
    for name, key, kind in events:
        kinds.setdefault((name, key), set()).add(kind)
        if kind == "repaired":
            repaired[name] = repaired.get(name, 0) + 1
    computed: dict[str, int] = {}
    reused: dict[str, int] = {}
    for (name, _), seen in kinds.items():
        counter = computed if "computed" in seen else reused if "reused" in seen else None
        if counter is not None:
            counter[name] = counter.get(name, 0) + 1
    return computed, reused, repaired


@dataclass(frozen=True)
class SweepJob:
    """What a worker needs to score a sweep's points: shipped once per sweep (``ray.put``)."""

    settings: SweepSettings
    dataset: Dataset
    cache_dir: str
    db: str | None
    backend: str
    splits: tuple[str, ...]
    embedder_id: str
    fingerprint: dict[str, str | None]
    jobs: int
    precomputed: dict[tuple[str, str], tuple[int, str]]
    """The store's precomputed chunks the driver looked up (:attr:`RunContext.precomputed`)."""


class _WorkerContext(RunContext):
    """A worker's sweep context: the store fingerprint comes from the driver (a fusion point
    never opens the store), and a DuckDB store file is opened under a lock file beside it."""

    def __init__(self, job: SweepJob) -> None:
        super().__init__(job.settings, job.dataset, RecordingCache(job.cache_dir), job.db,
                         job.backend, list(job.splits), embedder=job.embedder_id,
                         progress=False)
        self._fp = dict(job.fingerprint)
        self.precomputed.update(job.precomputed)  # a chunk stage's key: no store opened for it
        self.jobs = job.jobs
        self._lock: Any = None

    def fingerprint(self) -> dict[str, str | None]:
        return self._fp

    def workspace(self) -> Workspace:
        db = self.db or ""
        if self._lock is None and "://" not in db and db != ":memory:":
            from filelock import FileLock

            self._lock = FileLock(db.removeprefix("duckdb:///") + ".lock")
            self._lock.acquire()
        return super().workspace()

    @property
    def holds_store(self) -> bool:
        """Whether this worker holds the store file's lock (closed after each point)."""
        return self._lock is not None

    def close(self) -> None:
        super().close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None


_WORKER: dict[str, _WorkerContext] = {}
"""In a Ray worker process: the context of the sweep whose task it ran last."""


def _worker_context(job_id: str, holder: list[Any]) -> _WorkerContext:
    ctx = _WORKER.get(job_id)
    if ctx is None:
        import ray

        for old in _WORKER.values():
            old.close()
        _WORKER.clear()
        ctx = _WORKER[job_id] = _WorkerContext(ray.get(holder[0]))
    return ctx


Returned = tuple[list[dict[str, dict[str, Any]]], list[Event], list[str],
                 list[tuple[str, type[Warning]]]]
"""A task's points' outputs, stage cache events, the stages it wrote and its warnings."""


def run_points(job_id: str, holder: list[Any], points: list[PipelinePoint]) -> Returned:
    """A Ray task: :func:`evaluate_point` of each point in a worker's context of the sweep
    (``holder``: the job's object ref, inside a list so Ray does not fetch it for every task).
    Its entries are written as packs (:meth:`StageCache.batched`, as the local executor's),
    published before it returns; the warnings it raised (a damaged entry computed again) go
    back to the driver, which warns in its turn (a worker's output is not shown there)."""
    ctx = _worker_context(job_id, holder)
    cache = ctx.cache
    assert isinstance(cache, RecordingCache)
    outs = []
    with warnings.catch_warnings(record=True) as caught, paused_gc(), \
            compiled_threads(ctx.jobs), cache.batched():
        for pt in points:
            try:
                outs.append(evaluate_point(ctx, pt))
            finally:
                if ctx.holds_store:
                    ctx.close()  # the store file is free for the next worker
    written, cache.written = sorted(cache.written), set()
    notes = [(str(w.message), w.category if issubclass(w.category, Warning) else UserWarning)
             for w in caught]
    return outs, cache.take_events(), written, notes


def check_shared_cache(uri: str | Path) -> None:
    """Refuse a stage cache the Ray workers cannot share (``memory://``: one process's), in one
    line, before any work (:func:`~aiblox.sweep.runner.run_sweep` asks first)."""
    if str(uri).startswith("memory://"):
        raise ExecutorError(f"--cache-dir {uri}: a memory:// stage cache lives in one process, "
                            f"the Ray workers would not see it; give --executor ray a folder "
                            f"(or object store) every node sees")


class RayPoints:
    """The driver's side: a sweep's points scored as Ray tasks over a shared stage cache."""

    def __init__(self, ctx: RunContext, cpus: int, threads: int = 1) -> None:
        import ray

        self.cpus = cpus
        self.events: list[Event] = []
        self.job_id = uuid.uuid4().hex
        self.cache = ctx.cache
        check_shared_cache(ctx.cache.uri)
        job = SweepJob(settings=ctx.settings, dataset=ctx.dataset,
                       cache_dir=ctx.cache.uri,  # a URI as given, a folder made absolute
                       db=_absolute(ctx.db or default_store_path(ctx.dataset)),
                       backend=ctx.backend, splits=tuple(ctx.splits),
                       embedder_id=str(ctx.embedder_id), fingerprint=dict(ctx.fingerprint()),
                       jobs=threads, precomputed=dict(ctx.precomputed))
        self._holder = [ray.put(job)]
        self._task = ray.remote(run_points).options(
            num_cpus=threads, max_retries=MAX_RETRIES, retry_exceptions=False,
            scheduling_strategy="SPREAD",  # across the nodes, not the driver's first
            name="aiblox_sweep_points")

    def _submit(self, points: list[PipelinePoint]) -> Any:
        return self._task.remote(self.job_id, self._holder, points)

    def batches(self, n: int) -> list[range]:
        """Consecutive point ranges, about :data:`TASKS_PER_CPU` per cluster CPU."""
        size = max(1, math.ceil(n / (self.cpus * TASKS_PER_CPU)))
        return [range(a, min(a + size, n)) for a in range(0, n, size)]

    def ordered(self, points: Sequence[PipelinePoint], tick: Callable[[int], None]
                ) -> Iterator[tuple[int, dict[str, dict[str, Any]]]]:
        """``(i, outputs of point i)`` in point order, each as soon as it and every point
        before it are done; ``tick(k)`` as each task returns (``k`` points)."""
        batches = self.batches(len(points))
        refs = {self._submit([points[i] for i in b]): b for b in batches}
        done: dict[int, dict[str, dict[str, Any]]] = {}
        nxt = 0
        for ref, got in completed(list(refs), AGAIN):
            outs = self._returned(got)
            done.update(zip(refs[ref], outs, strict=True))
            tick(len(outs))
            while nxt in done:
                yield nxt, done.pop(nxt)
                nxt += 1

    def one(self, point: PipelinePoint) -> dict[str, dict[str, Any]]:
        """One point as one task (a search trial), waited for."""
        for _, got in completed([self._submit([point])], AGAIN):
            return self._returned(got)[0]
        raise AssertionError("unreachable: a task's value or its error")

    def _returned(self, got: Returned) -> list[dict[str, dict[str, Any]]]:
        """A task's points' outputs; its events kept, its packs indexed, its warnings
        given."""
        outs, events, written, notes = got
        self.events += events
        if isinstance(self.cache, RecordingCache):
            self.cache.look_again(written)
        for message, category in notes:
            warnings.warn(message, category, stacklevel=2)
        return outs


AGAIN = ("run the same `aiblox sweep` command with --resume (or again, without MLflow): it "
         "continues where it stopped, the finished points are kept")
"""What to do once the cluster that went away mid-sweep is back."""


def _absolute(db: str | None) -> str | None:
    """A DuckDB store path (a path or ``duckdb:///path``) made absolute, as a path: the
    workers may run in another folder. URLs (``postgresql://``) and ``:memory:`` as they
    are."""
    if db is not None and db.startswith("duckdb:///"):
        db = db.removeprefix("duckdb:///")
    if db is None or "://" in db or db == ":memory:":
        return db
    return str(Path(db).resolve())
