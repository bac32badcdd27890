"""What a stage cache holds, and keeping it in bounds (``aiblox cache list|prune|verify``).

A cache root (:class:`~aiblox.engine.cache.StageCache`) holds one folder per stage, each entry
two files (``<key>.meta.json`` and its output) or one of many in a pack (``packs/*.pack``, a
sweep's points: :mod:`aiblox.engine.cache_packs`), and folders of files kept beside the entries:
``doc_tables`` (derived from signals entries: each one's document table, ``<key>.txt``, and
fusion index, ``<key>.index``; removed with it, and a file of any other name never), ``studies``
(search studies) and ``models`` (fine-tuned models), which pruning never touches. A folder
holding files but none of these is not a stage cache, and is refused (a mistyped
``--cache-dir``, a source folder: nothing in it is listed as the cache's, or removed).

Nothing is lost by removing an entry: the cache is a memo, and a removed stage is computed
again, with the same key and the same bytes, the next time a sweep needs it. What is lost is
time: signals entries hold retrieval runs (and a dense retrieval's embeddings are cached
elsewhere), fusion and metrics entries cost milliseconds each. A dense fusion sweep writes
tens of kilobytes a point (its metrics; its fused runs are recorded, not stored: a meta
file each), and a sweep of pipelines keeps each point's chunks and answers, which is why
``prune`` exists.

An entry's age is when it was written (its meta's modification time): a re-run that reuses an
entry does not renew it. An entry held both in its own files and in a pack (a writer outside a
batch stored it again) counts both copies' bytes, and is as old as the newer. Files an
interrupted write left behind (an output without its meta, a temporary file) are leftovers,
removed by ``prune`` once an hour old (a write in flight takes milliseconds).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from aiblox.engine.cache import FileInfo, StageCache, StageCacheCorrupt
from aiblox.engine.cache_packs import PACKS
from aiblox.progress import progress_bar

__all__ = ["CacheEntry", "FolderUsage", "PruneResult", "VerifyResult", "cache_entries",
           "cache_usage", "check_stage_cache", "parse_age", "parse_size", "prune_cache",
           "verify_cache"]

DOC_TABLES = "doc_tables"
"""The folder of files derived from signals entries: a split's document table
(``<signals key>.txt``) and its fusion index (``<signals key>.index``,
:meth:`~aiblox.engine.outputs.StageReader.index`)."""
KEPT = ("models", "studies")
"""Folders ``prune`` never touches: fine-tuned models and search studies (costly to make
again, and not keyed entries)."""
LEFTOVER_AGE_S = 3600.0
"""A leftover of an interrupted write older than this is removed by ``prune``."""

_ENTRY_FILE = re.compile(r"^([0-9a-f]{64})\.(meta\.json|bin|json\.gz)$")
_TEMP_FILE = re.compile(r"^\..+\.tmp$")
_DOC_TABLE = re.compile(r"^(\.?)([0-9a-f]{64})\.(txt|index)(\..+\.tmp)?$")
"""A file of ``doc_tables`` the cache writes: ``<signals key>.txt`` or ``.index``, or the
temporary file of an interrupted write of one (``.<name>.<writer>.tmp``)."""


@dataclass(frozen=True)
class CacheEntry:
    """One stored stage output: its stage, key, bytes on disk (meta and output) and when it
    was written (seconds since the epoch; None where the filesystem does not say)."""

    stage: str
    key: str
    size: int
    written: float | None


@dataclass(frozen=True)
class Leftover:
    """A file an interrupted write left in a stage folder (a temporary file, or an output
    whose meta was never written)."""

    stage: str
    file: str
    size: int
    written: float | None


@dataclass
class FolderUsage:
    """One folder of a cache root: ``kind`` is ``stage`` (keyed entries), ``derived``
    (``doc_tables``: removed with their signals entries) or ``kept`` (never pruned)."""

    folder: str
    kind: str
    entries: int = 0
    size: int = 0
    oldest: float | None = None
    newest: float | None = None
    leftovers: int = 0
    leftover_size: int = 0

    def add(self, size: int, written: float | None) -> None:
        self.entries += 1
        self.size += size
        if written is not None:
            self.oldest = written if self.oldest is None else min(self.oldest, written)
            self.newest = written if self.newest is None else max(self.newest, written)


@dataclass
class _Folder:
    entries: list[CacheEntry] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)


def _stage_folder(stage: str, files: list[FileInfo], cache: StageCache | None = None
                  ) -> _Folder:
    """A stage folder's complete entries and leftovers, from its listing (and, with the
    ``cache``, its packs: their entries, an entry also held in its own files counted with both
    copies' bytes, and as leftovers the temporary files of interrupted pack writes and the
    packs whose index does not parse)."""
    metas: dict[str, tuple[int, float | None]] = {}
    outputs: dict[str, list[tuple[str, int, float | None]]] = defaultdict(list)
    out = _Folder()
    for name, size, written in files:
        m = _ENTRY_FILE.match(name)
        if m is None:
            if _TEMP_FILE.match(name) and size >= 0:
                out.leftovers.append(Leftover(stage, name, size, written))
            continue
        if m.group(2) == "meta.json":
            metas[m.group(1)] = (size, written)
        else:
            outputs[m.group(1)].append((name, size, written))
    packs = cache is not None and any(n == PACKS and size < 0 for n, size, _ in files)
    packed = cache.packed(stage) if cache is not None and packs else {}
    for key, (size, written) in metas.items():  # held in a pack too: both copies, the newer
        in_pack, when = packed.get(key, (0, None))
        times = [t for t in (written, when) if t is not None]
        out.entries.append(CacheEntry(stage, key, size + sum(s for _, s, _ in outputs[key])
                                      + in_pack, max(times) if times else None))
    for key, files_ in outputs.items():
        if key not in metas:
            out.leftovers += [Leftover(stage, n, s, w) for n, s, w in files_]
    out.entries += [CacheEntry(stage, key, size, written)
                    for key, (size, written) in packed.items() if key not in metas]
    if cache is not None and packs:
        bad = cache.bad_packs(stage)
        out.leftovers += [Leftover(stage, f"{PACKS}/{n}", size, written)
                          for n, size, written in cache.pack_files(stage)
                          if size >= 0 and (_TEMP_FILE.match(n) or n in bad)]
    out.entries.sort(key=lambda e: e.key)
    out.leftovers.sort(key=lambda x: x.file)
    return out


def _is_stage_folder(name: str, files: list[FileInfo]) -> bool:
    """A folder of entries: not one of the named others, and holding entry files (a stray
    file of another kind beside them is ignored, never removed) or nothing at all."""
    return name not in (DOC_TABLES, *KEPT) and (
        not files or any((size >= 0 and _ENTRY_FILE.match(n)) or (size < 0 and n == PACKS)
                         for n, size, _ in files))


def _scan(cache: StageCache, root: list[FileInfo] | None = None) -> dict[str, _Folder]:
    """Every stage folder's entries, by stage name (``root``: the root's listing, when the
    caller has it already); ``ValueError`` for a root that is not a stage cache
    (:func:`check_stage_cache`)."""
    root = cache.listing() if root is None else root
    folders = {name: cache.listing(name) for name, size, _ in root if size < 0}
    _check_layout(cache, root, folders)
    return {name: _stage_folder(name, folders[name], cache) for name in sorted(folders)
            if _is_stage_folder(name, folders[name])}


def check_stage_cache(cache: StageCache) -> None:
    """Refuse (``ValueError``, one line) a root that holds files but nothing of a stage
    cache's layout: no folder of entries or packs, no ``doc_tables``, ``models`` or
    ``studies``, and not only empty folders (a cache pruned of everything). A mistyped or
    wrong ``--cache-dir`` (a source folder, a folder of one's own files) is not listed as a
    cache of kept folders, and nothing in it is ever removed. An empty root is an empty cache."""
    root = cache.listing()
    _check_layout(cache, root, {n: cache.listing(n) for n, size, _ in root if size < 0})


def _check_layout(cache: StageCache, root: list[FileInfo],
                  folders: dict[str, list[FileInfo]]) -> None:
    """:func:`check_stage_cache` of the root's listing and its folders' listings."""
    if any(name in (DOC_TABLES, *KEPT) or (files and _is_stage_folder(name, files))
           for name, files in folders.items()):
        return
    mine = [n for n, size, _ in root if size >= 0 or folders[n]]
    if mine:
        shown = ", ".join(sorted(mine)[:3]) + (", ..." if len(mine) > 3 else "")
        raise ValueError(f"{cache.root} is not a stage cache: it holds {shown} and none of a "
                         f"stage cache's folders (a stage's <key>.meta.json entries or packs, "
                         f"doc_tables, models, studies)")


def _named(cache: StageCache, scanned: dict[str, _Folder],
           stages: Sequence[str] | None) -> dict[str, _Folder]:
    """``scanned`` cut to ``stages`` (all of it when None). A name in ``stages`` that is not a
    stage folder of this cache is refused (``ValueError``, naming the stages there)."""
    for name in stages or ():
        if name not in scanned:
            folders = {n for n, size, _ in cache.listing() if size < 0}
            why = "holds no stage entries" if name in folders else "is not there"
            if name == "cut":  # a sweep's counts name it; its entries are fusion's
                why += (" (a sweep counts a single list cut to top_k_items as 'cut': its "
                        "entries are in fusion)")
            raise ValueError(f"stage {name!r} of the cache {cache.root} {why}; its stages: "
                             f"{', '.join(scanned) or 'none (nothing cached yet)'}")
    return {name: f for name, f in scanned.items() if stages is None or name in stages}


def cache_entries(cache: StageCache, stages: Sequence[str] | None = None) -> list[CacheEntry]:
    """Every complete entry of the cache (of ``stages`` only when given), by stage and key."""
    return [e for f in _named(cache, _scan(cache), stages).values() for e in f.entries]


def cache_usage(cache: StageCache) -> list[FolderUsage]:
    """Entries, bytes and age of every folder of the cache, stage folders first (by name),
    then ``doc_tables`` and the kept folders; [] for a cache never written. An entry of a
    kept folder is what it holds: a file, or a folder of files (a trained model, counted once,
    its size all its files', its time its newest file's)."""
    root = cache.listing()
    scanned = _scan(cache, root)
    rows = []
    for name, folder in scanned.items():
        row = FolderUsage(name, "stage")
        for e in folder.entries:
            row.add(e.size, e.written)
        row.size += cache.pack_overhead(name)  # so that a folder's size is what its files hold
        row.leftovers = len(folder.leftovers)
        row.leftover_size = sum(x.size for x in folder.leftovers)
        rows.append(row)
    others = sorted((name for name, size, _ in root if size < 0 and name not in scanned),
                    key=lambda n: (n != DOC_TABLES, n))
    for name in others:  # an entry is what the folder holds: a file, or a model's folder
        row = FolderUsage(name, "derived" if name == DOC_TABLES else "kept")
        for child, size, written in cache.listing(name):
            if size < 0:
                files = list(_files_below(cache, f"{name}/{child}"))
                times = [w for _, w in files if w is not None]
                row.add(sum(s for s, _ in files), max(times) if times else None)
            else:
                row.add(size, written)
        rows.append(row)
    return rows


def _files_below(cache: StageCache, folder: str) -> Iterable[tuple[int, float | None]]:
    """Size and time of every file under ``folder`` (a model is a folder of files)."""
    for name, size, written in cache.listing(folder):
        if size < 0:
            yield from _files_below(cache, f"{folder}/{name}")
        else:
            yield size, written


@dataclass
class PruneResult:
    """What :func:`prune_cache` removed (or, dry run, would remove) and what it kept."""

    removed: list[CacheEntry]
    kept: list[CacheEntry]
    """The entries of the stages pruned that stay."""
    leftovers: list[Leftover]
    doc_tables: list[str]
    doc_table_size: int
    dry_run: bool
    others: list[CacheEntry] = field(default_factory=list)
    """The entries of the stages not pruned (not named in ``stages``): all stay."""
    pack_size: int = 0
    """Bytes of packs emptied that were no entry's."""
    damaged: list[CacheEntry] = field(default_factory=list)
    """Damaged entries of the stages pruned (by age or size: their meta, read for its inputs,
    does not parse or lies past the end of a pack cut short; and those a pack written again
    without the removed entries left out, their bytes not whole), removed with them; a dry
    run finds only the first kind (``cache verify`` checks every entry's bytes)."""

    @property
    def freed(self) -> int:
        """Bytes removed (entries, damaged entries, leftovers, document tables and emptied
        packs)."""
        return (sum(e.size for e in (*self.removed, *self.damaged))
                + sum(x.size for x in self.leftovers) + self.doc_table_size + self.pack_size)


def prune_cache(cache: StageCache, *, stages: Sequence[str] | None = None,
                older_than: float | None = None, max_size: int | None = None,
                everything: bool = False, dry_run: bool = False,
                now: float | None = None) -> PruneResult:
    """Remove stage entries (of ``stages``, default every stage).

    With ``everything``, all of them (also those a kept entry of another stage was computed
    from: naming stages, the caller chose them). Else entries go oldest first, and never one
    that a remaining entry was computed from (a signals entry stays while a fusion entry made from
    it stays): first every entry written more than ``older_than`` seconds ago, then, while the
    entries of those stages pass ``max_size`` bytes, the oldest left. An entry is as old as the
    newest entry computed from it (its last use: entries packed together share one time, and
    a sweep's retrieval is older than its points). So a pruned cache never holds an output
    whose inputs are gone, and the retrieval that every fusion point reuses goes last.
    Leftovers of interrupted writes in those folders older than
    :data:`LEFTOVER_AGE_S` go too, and the document tables whose signals entry no longer
    exists (only files named as the cache names them: anything else there stays). Damaged
    entries met reading the metas (by age or size) go, as :attr:`PruneResult.damaged`, not
    among the entries removed by age or size. ``dry_run``: remove nothing (a damaged entry
    too: metas are read without repairing), report what would go.

    ``ValueError`` when nothing says what to remove, for a negative age or size, for an age
    or size where the filesystem reports no times, for a name in ``stages`` that is not a
    stage folder of this cache, or for a root that is not a stage cache."""
    if not everything and older_than is None and max_size is None:
        raise ValueError("say what to remove: an age (older_than), a size to keep under "
                         "(max_size) or everything")
    if (older_than is not None and older_than < 0) or (max_size is not None and max_size < 0):
        raise ValueError("an age or a size cannot be negative")
    now = time.time() if now is None else now
    scanned = _scan(cache)
    scope = set(_named(cache, scanned, stages))
    entries = [e for name in sorted(scope) for e in scanned[name].entries]
    damaged: list[CacheEntry] = []
    if everything:
        removed, kept = entries, []
    else:
        if any(e.written is None for e in entries):
            raise ValueError(f"{cache.root} does not report when its files were written: "
                             f"prune it by stage (everything) instead of by age or size")
        inputs, bad = _read_inputs(cache, scanned)
        damaged = [e for e in entries if e.key in bad]
        removed = _leaves_first(scanned, scope, inputs, older_than, max_size, now)
        gone = {e.key for e in removed} | bad
        kept = [e for e in entries if e.key not in gone]
    removed.sort(key=lambda e: (e.stage, e.key))
    leftovers = [x for name in sorted(scope) for x in scanned[name].leftovers
                 if x.written is not None and now - x.written > LEFTOVER_AGE_S]
    signals_left = ({e.key for e in scanned.get("signals", _Folder()).entries}
                    - {e.key for e in (*removed, *damaged) if e.stage == "signals"})
    tables = _doc_tables_to_remove(cache, signals_left, now)
    others = [e for name in sorted(set(scanned) - scope) for e in scanned[name].entries]
    by_stage: dict[str, list[str]] = defaultdict(list)
    for e in (*removed, *damaged):
        by_stage[e.stage].append(e.key)
    result = PruneResult(removed, kept, leftovers, [name for name, _ in tables],
                         sum(size for _, size in tables), dry_run, others,
                         sum(cache.pack_overhead(s, keys) for s, keys in by_stage.items()),
                         damaged)
    if not dry_run:
        lost: set[str] = set()
        for stage, keys in by_stage.items():  # a pack holding several written again once
            lost |= cache.remove_many(stage, keys, report=False)
        # the damaged entries of the packs written again, left out of them: reported too
        result.damaged += [e for e in kept if e.key in lost]
        result.kept = [e for e in kept if e.key not in lost]
        for x in leftovers:
            cache.remove_file(x.stage, x.file)
        for name, _ in tables:
            cache.remove_file(DOC_TABLES, name)
    result.damaged.sort(key=lambda e: (e.stage, e.key))
    return result


def _doc_tables_to_remove(cache: StageCache, signals_left: set[str], now: float
                          ) -> list[tuple[str, int]]:
    """The files of ``doc_tables`` (name, bytes) whose signals entry is not in
    ``signals_left``, and the leftovers of interrupted writes there older than
    :data:`LEFTOVER_AGE_S`: only files named as the cache names them (a file of another name
    is not the cache's, and stays)."""
    out = []
    for name, size, written in cache.listing(DOC_TABLES):
        m = _DOC_TABLE.match(name)
        if size < 0 or m is None or bool(m.group(1)) != bool(m.group(4)):
            continue
        old = written is not None and now - written > LEFTOVER_AGE_S
        if (old if m.group(4) else m.group(2) not in signals_left):
            out.append((name, size))
    return out


def _read_inputs(cache: StageCache, scanned: dict[str, _Folder]
                 ) -> tuple[dict[str, list[str]], set[str]]:
    """Every entry's input keys (those among the entries), from its meta read without any
    repair (a dry run changes nothing; a look at a damaged entry would remove it), and the
    keys of the damaged ones: a meta that does not parse, or lies past a pack's end."""
    everyone = {e.key for f in scanned.values() for e in f.entries}
    inputs, bad = {}, set()
    for e in (e for f in scanned.values() for e in f.entries):
        try:
            inputs[e.key] = [k for k in cache.meta(e.stage, e.key, repair=False)["inputs"]
                             if k in everyone]
        except StageCacheCorrupt:
            bad.add(e.key)
    return inputs, bad


def _leaves_first(scanned: dict[str, _Folder], scope: set[str],
                  inputs: dict[str, list[str]], older_than: float | None,
                  max_size: int | None, now: float) -> list[CacheEntry]:
    """The entries :func:`prune_cache` removes by age and size: repeatedly the oldest entry
    of ``scope`` that no remaining entry (of any stage) lists among its ``inputs``. An entry
    without inputs read (damaged: removed apart, or computed again when next read) is none:
    nothing is kept for it, nor counted in the size."""
    import heapq

    everyone = {e.key: e for f in scanned.values() for e in f.entries if e.key in inputs}
    inputs = {key: [k for k in keys if k in everyone] for key, keys in inputs.items()}
    users = dict.fromkeys(everyone, 0)
    made_from: dict[str, list[str]] = defaultdict(list)
    for key, keys in inputs.items():
        for k in keys:
            users[k] += 1
            made_from[k].append(key)
    last_use: dict[str, float] = {}

    def used(key: str) -> float:
        """When ``key`` or the newest entry computed from it (through any chain) was written."""
        if key not in last_use:
            last_use[key] = everyone[key].written or 0.0  # a cycle (none in a cache) stops here
            last_use[key] = max([last_use[key], *(used(k) for k in made_from[key])])
        return last_use[key]

    def order(e: CacheEntry) -> tuple[float, str, str]:
        return (used(e.key), e.stage, e.key)

    heap = [(order(e), e.key) for e in everyone.values() if e.stage in scope and not users[e.key]]
    heapq.heapify(heap)
    total = sum(e.size for e in everyone.values() if e.stage in scope)
    removed = []
    while heap:
        _, key = heapq.heappop(heap)
        e = everyone[key]
        too_old = older_than is not None and now - (used(key) or now) > older_than
        too_big = max_size is not None and total > max_size
        if not (too_old or too_big):
            break  # the leaves left are newer still, and nothing more frees up below them
        removed.append(e)
        total -= e.size
        for k in inputs[key]:
            users[k] -= 1
            if not users[k] and everyone[k].stage in scope:
                heapq.heappush(heap, (order(everyone[k]), k))
    return removed


@dataclass
class VerifyResult:
    """What :func:`verify_cache` read: entries checked, their bytes, and the damaged ones
    (stage, key, why), each removed."""

    checked: int
    size: int
    damaged: list[tuple[str, str, str]]


def verify_cache(cache: StageCache, stages: Sequence[str] | None = None,
                 progress: bool = True) -> VerifyResult:
    """Read every entry (of ``stages``) back and check its output against the sha256 its meta
    recorded, as every read does; a damaged entry is removed (computed again when next
    needed) and reported, as is a pack whose index does not parse (its entries unnamed, by
    ``packs/<file>``). A progress bar over the entries."""
    folders = _named(cache, _scan(cache), stages)
    entries = [e for f in folders.values() for e in f.entries]
    damaged = []
    for stage in folders:  # a pack whose index does not parse: no entry of it can be named
        for name, why in sorted(cache.bad_packs(stage).items()):
            cache.remove_file(f"{stage}/{PACKS}", name)
            damaged.append((stage, f"{PACKS}/{name}",
                            f"the pack does not parse ({why}); the entries it held are lost "
                            f"(computed again when next needed)"))
    bar = progress_bar(len(entries), "verify", unit="entry", enabled=progress)
    try:
        with cache.batched():  # a pack's damaged entries: it is written again once, at the end
            for e in entries:
                try:  # a meta that does not parse is one damaged entry among the others
                    reason = cache.check(e.stage, e.key)
                except StageCacheCorrupt as exc:
                    reason = exc.reason
                if reason is not None:
                    damaged.append((e.stage, e.key, reason))
                bar.update(1)
    finally:
        bar.close()
    return VerifyResult(len(entries), sum(e.size for e in entries), damaged)


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_age(text: str) -> float:
    """Seconds of an age such as ``30d``, ``12h``, ``90m``, ``45s`` or ``2w``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if m is None:
        raise ValueError(f"not an age: {text!r} (a number and a unit: s, m, h, d or w, "
                         f"e.g. 30d)")
    return float(m.group(1)) * _AGE_UNITS[m.group(2)]


def parse_size(text: str) -> int:
    """Bytes of a size such as ``500MB``, ``2GiB`` or ``1000000`` (KB, MB, GB, TB: powers of
    1000; KiB, MiB, GiB, TiB: powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r} (a number of bytes, or with a unit: KB, MB, "
                         f"GB, TB, KiB, MiB, GiB or TiB, e.g. 2GiB)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])
