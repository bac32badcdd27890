"""The on-disk stage cache: stage outputs memoised by their key (:mod:`aiblox.engine.task`)::

    <root>/<stage>/<key>.json.gz    the output (canonical JSON, gzip), or
    <root>/<stage>/<key>.bin        the output of an ``arrays`` stage (see :func:`encode_arrays`)
    <root>/<stage>/<key>.meta.json  name, version, config, input keys, output hash, codec,
                                    and meta_sha256, the sha256 of the rest of its bytes

The output hash is the sha256 of the stored bytes before compression: canonical JSON, or for
``arrays`` outputs (named numpy arrays, e.g. a fused run as flat positions and scores) the
header-and-raw-bytes encoding, which costs a few milliseconds where JSON of the same run costs
a quarter of a second.

The meta file is written last (atomically), so it marks a complete entry: a sweep killed
mid-write leaves no meta and the stage is simply recomputed. A batch of entries
(:meth:`StageCache.batched`: a sweep's points) is written as packs instead, one file per stage
now and then, each holding many entries' metas and outputs byte for byte
(:mod:`aiblox.engine.cache_packs`): a killed sweep loses the entries not yet packed, computed
again on the next run (an interrupted one packs them on its way out). The cache counts, per
stage, how many outputs it computed and how many it reused, which is how tests prove a re-run
recomputes nothing.

A stage whose output costs less to compute again than to store (a hybrid point's fused run:
about a millisecond from its signals, against half a megabyte a point on disk) is *recorded*,
not stored: its meta is written with ``"stored": false`` and its output hash, and no output
file. Reading it computes the output again and checks it against the recorded hash (a mismatch
is a damaged entry); :meth:`StageCache.load`, which has nothing to compute it with, raises
:class:`StageOutputNotStored`.

An output its stage may not reuse (a reader's failed generations: :attr:`~aiblox.engine.task.
Task.reusable`) is stored under a key naming its bytes, which its record carries, never under the
stage's key: the next run computes it again, and the stages read from it are keyed anew.

The root is a local folder (a path, or a ``file://`` URI) or any fsspec URI (``s3://bucket/x``,
``gs://``, ``memory://`` in tests; the protocol's package must be installed, e.g. ``s3fs``), so
workers on several machines share one cache (the two kinds of files are in
:mod:`aiblox.engine.cache_files`). A local folder keeps the direct ``os`` calls (a fusion sweep
reads thousands of entries). Publication is atomic everywhere: a local or mounted shared
folder writes a temporary file unique to the process and thread and renames it; an object
store writes each file with one put, which a reader sees whole or not at all. Two workers
computing one stage write the same bytes (stages are deterministic), so the last write wins
harmlessly; a conditional put (create only if absent) would add nothing and would block the
repair of a damaged object. :attr:`StageCache.uri` rebuilds the cache on any worker, and a
cache pickles as its URI.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from aiblox.engine.cache_bytes import (
    decode_arrays,
    encode_arrays,
    encoded_output,
    entry_whole,
    meta_bytes,
    meta_sum_ok,
)
from aiblox.engine.cache_files import (
    FileInfo,
    Files,
    FsspecFiles,
    LocalFiles,
    StageCacheCorrupt,
    StageCacheError,
    StageOutputNotStored,
    local_cache_root,
)
from aiblox.engine.cache_packs import PackCutShort, PackEntry, Packs
from aiblox.engine.task import StageRecord, Task, output_keyed_config, stage_key
from aiblox.hashing import sha256_bytes

__all__ = ["FileInfo", "StageCache", "StageCacheCorrupt", "StageCacheError",
           "StageOutputNotStored", "check_cache_root", "decode_arrays", "encode_arrays",
           "local_cache_root"]

class _Pending(NamedTuple):
    """An entry stored in a batch, not yet packed: its meta's and its output's bytes."""

    meta: bytes
    out: bytes


_FILE = "file"
"""Where an entry lies: its own two files (else a :class:`_Pending` or a
:class:`~aiblox.engine.cache_packs.PackEntry`)."""

_FLUSH_ENTRIES, _FLUSH_BYTES, _FLUSH_S = 2048, 64 << 20, 30.0
"""A batch writes its packs when it holds this many entries, bytes, or seconds of work."""


def check_cache_root(root: str | Path, label: str = "stage cache") -> None:
    """Check, before any work, that a stage cache can be written at ``root`` (a folder or an
    fsspec URI): a probe file is published (as entries are) and removed. Raises
    :class:`StageCacheError`, one line ``<label> <root>: cannot write there: <why>`` (an
    unknown protocol, a missing protocol package, a read-only folder, a path through a regular
    file, refused credentials)."""
    try:
        cache = StageCache(root)
    except StageCacheError as exc:
        raise StageCacheError(f"{label} {root}: cannot write there: "
                              f"{str(exc).split(': ', 1)[-1]}") from None
    probe = cache._files.path("", f".aiblox-write-check-{os.getpid()}-{threading.get_ident()}")
    try:
        cache._files.write(probe, b"aiblox")
        if cache._files.read(probe) != b"aiblox":
            raise StageCacheError("a probe file did not read back")
        cache._files.unlink(probe)
    except StageCacheError as exc:
        raise StageCacheError(f"{label} {root}: cannot write there: "
                              f"{str(exc).rsplit(': ', 1)[-1]}") from None
    except Exception as exc:  # noqa: BLE001 - a filesystem's own errors (auth, network)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StageCacheError(f"{label} {root}: cannot write there: {first}") from None


class StageCache:
    """Content-addressed memo of stage outputs under ``root`` (safe for parallel writers:
    two processes computing the same key write the same bytes).

    Every read is checked: an output is used only when the sha256 of its stored (uncompressed)
    bytes is the ``output_hash`` its meta recorded. A damaged entry (flipped bits, a truncated
    or missing file, a meta that does not parse) is removed and, in :meth:`run`, computed again
    and counted in :attr:`repaired`, with a warning naming it; a direct :meth:`load` raises
    :class:`StageCacheCorrupt`. Nothing damaged is ever returned."""

    def __init__(self, root: str | Path) -> None:
        local = local_cache_root(root)
        self._files: Files = LocalFiles(local) if local is not None else FsspecFiles(str(root))
        self.root: Path | str = local if local is not None else str(root)
        """The local folder, or the fsspec URI as given."""
        proto, _, path = str(root).partition("://")  # local://: fsspec's local folders
        self.uri = (str(local.absolute()) if local is not None else str(root)
                    if proto != "local" else "local://" + str(Path(path).absolute()))
        """A string that opens this cache again on any worker (``StageCache(cache.uri)``): the
        absolute folder (``local://`` one too), or the URI. A ``memory://`` cache is private
        to its process."""
        self.computed: dict[str, int] = {}
        """Per stage name: outputs computed by this cache object."""
        self.reused: dict[str, int] = {}
        """Per stage name: outputs read back instead of computed."""
        self.repaired: dict[str, int] = {}
        """Per stage name: damaged entries found, removed and computed again."""
        self._lock = threading.Lock()
        self._packs = Packs(self._files, whole=entry_whole)
        self._pending: dict[str, dict[str, _Pending]] | None = None
        """Entries stored in a batch and not yet packed, per stage (None: no batch)."""
        self._pending_size = 0
        self._pending_since = 0.0

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Entries stored inside are written as packs (a few files per stage, see the module
        doc), when the batch ends and every few thousand entries or 30 seconds; until then
        they are read from memory. Nested batches are one."""
        if self._pending is not None:
            yield
            return
        self._pending, self._pending_size = {}, 0
        try:
            yield
        finally:
            try:
                self.flush()
            finally:
                self._pending = None

    def flush(self) -> None:
        """Write the batch's entries stored so far as packs (one per stage), after the packs
        holding entries it removed are written again without them (their other damaged
        entries dropped with them: :meth:`dropped_damaged`)."""
        for name, keys in self._packs.commit().items():
            self.dropped_damaged(name, keys)
        with self._lock:
            pending, self._pending_size = self._pending, 0
            if not pending:
                return
            self._pending = {}
        names = sorted(pending)
        for i, name in enumerate(names):
            try:
                self._packs.add(name, [(k, e.meta, e.out) for k, e in pending[name].items()])
            except BaseException:  # e.g. Ctrl-C mid-write: the batch's end writes the rest (CI)
                with self._lock:
                    back = self._pending if self._pending is not None else {}
                    for n in names[i:]:
                        back[n] = {**pending[n], **back.get(n, {})}
                raise

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its URI (a worker opens the same cache; the counters start at zero)."""
        return (StageCache, (self.uri,))

    def read_file(self, folder: str, file: str) -> bytes | None:
        """The bytes of a file kept beside the entries (``<root>/<folder>/<file>``, e.g. a
        search study), None when there is none."""
        try:
            return self._files.read(self._files.path(folder, file))
        except FileNotFoundError:
            return None

    def write_file(self, folder: str, file: str, data: bytes) -> None:
        """Publish a file beside the entries, atomically (as entries are)."""
        self._files.write(self._files.path(folder, file), data)

    def listing(self, folder: str = "") -> list[FileInfo]:
        """The files of one folder of the cache (the root's when ``folder`` is empty): name,
        size (-1 for a folder) and when last written, sorted by name; [] when it is absent."""
        return sorted(self._files.listing(folder))

    def remove_file(self, folder: str, file: str) -> None:
        """Remove a file kept beside the entries (or a leftover of an interrupted write);
        nothing when it is absent."""
        with contextlib.suppress(FileNotFoundError):
            self._files.unlink(self._files.path(folder, file))

    def _paths(self, name: str, key: str, codec: str = "json") -> tuple[Any, Any]:
        out = f"{key}.bin" if codec == "arrays" else f"{key}.json.gz"
        return self._files.path(name, out), self._files.path(name, f"{key}.meta.json")

    def _locate(self, name: str, key: str) -> _Pending | PackEntry | str | None:
        """Where an entry lies: in this batch, in its own files (:data:`_FILE`, its meta there),
        in a pack; None when nowhere."""
        if self._pending is not None:
            got = self._pending.get(name, {}).get(key)
            if got is not None:
                return got
        if self._files.exists(self._paths(name, key)[1]):
            return _FILE
        return self._packs.find(name, key)

    def has(self, name: str, key: str) -> bool:
        """True when an entry's meta exists (its output is checked when read)."""
        return self._locate(name, key) is not None

    def meta(self, name: str, key: str, repair: bool = True) -> dict[str, Any]:
        """The small meta record of an entry (no output); :class:`StageCacheCorrupt` when it
        does not parse or does not describe this entry (or lies past the end of a pack cut
        short), the damaged entry removed; with ``repair=False`` left in place (a look that
        changes nothing on disk)."""
        return self._meta(name, key, repair)[0]

    def _meta(self, name: str, key: str, repair: bool = True) -> tuple[dict[str, Any], Any]:
        """:meth:`meta`, and where the entry lies (:meth:`_locate`)."""
        loc = self._locate(name, key)
        path = self._where(name, key, loc)
        try:
            if loc is None:
                raise FileNotFoundError(path)
            if isinstance(loc, _Pending):
                data = loc.meta
            elif isinstance(loc, PackEntry):
                data, loc = self._pack_read(name, key, loc, output=False)
            else:
                data = self._files.read(path)
            m = json.loads(data.decode("utf-8"))
            if not isinstance(m, dict) or m.get("key") != key or m.get("name") != name \
                    or not isinstance(m.get("output_hash"), str):
                raise ValueError("not this entry's meta record")
            if not meta_sum_ok(data):
                raise ValueError("its bytes do not match the checksum written with them")
            m.pop("meta_sha256", None)
        except FileNotFoundError:
            raise StageCacheCorrupt(name, key, path, "its meta file is missing") from None
        except (OSError, ValueError) as exc:
            if repair:
                self.remove(name, key)
            raise StageCacheCorrupt(name, key, path, f"unreadable meta ({exc})",
                                    removed=repair) from None
        return m, loc

    def _pack_read(self, name: str, key: str, loc: PackEntry, output: bool
                   ) -> tuple[bytes, PackEntry]:
        """An entry's meta or output bytes from its pack, and where they were; a pack gone since
        it was indexed (another process wrote it again without other entries, or pruned it):
        looked for again once (``FileNotFoundError`` when no pack holds the entry now)."""
        try:
            return self._packs.read(name, loc, output=output), loc
        except FileNotFoundError:
            self._packs.refresh(name)
            again = self._packs.find(name, key)
            if again is None:
                raise
            return self._packs.read(name, again, output=output), again

    def _where(self, name: str, key: str, loc: Any, output: str | None = None) -> Any:
        """The path an entry's meta (or, with its codec, its output) is named by in messages:
        its own file's, or its pack's."""
        if isinstance(loc, PackEntry):
            return self._files.path(f"{name}/packs", loc.pack)
        return self._paths(name, key, output or "json")[0 if output else 1]

    def record(self, name: str, key: str) -> StageRecord:
        """The :class:`StageRecord` of a complete entry."""
        m = self.meta(name, key)
        return StageRecord(m["name"], m["version"], m["key"], tuple(m["inputs"]),
                           m["output_hash"])

    def remove(self, name: str, key: str) -> None:
        """Remove an entry, meta first (from then on it no longer exists: a reader computes it
        again), then its output, and from any pack holding it; nothing when it is absent."""
        self.remove_many(name, [key])

    def remove_many(self, name: str, keys: Iterable[str], report: bool = True) -> set[str]:
        """:meth:`remove` of several entries of one stage (each pack holding some written
        again once). Returns the other entries of those packs dropped as damaged (their bytes
        not whole; inside a batch, at its end: none here), each counted as repaired with a
        warning (:meth:`dropped_damaged`) when ``report``."""
        keys = set(keys)
        if self._pending is not None:
            with self._lock:
                for key in keys:
                    self._pending.get(name, {}).pop(key, None)
        for key in sorted(keys):
            meta_path = self._paths(name, key)[1]
            for path in (meta_path, *(self._paths(name, key, c)[0] for c in ("json", "arrays"))):
                try:
                    self._files.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise StageCacheError(f"cannot remove the damaged entry {path}: "
                                          f"{exc.strerror or exc}") from exc
        try:
            if self._pending is not None:  # a batch: each pack written again once, at its end
                self._packs.hide(name, keys)
                return set()
            dropped = self._packs.drop(name, keys)
        except OSError as exc:
            raise StageCacheError(f"cannot remove entries of {name} from its packs: "
                                  f"{exc.strerror or exc}") from exc
        return self.dropped_damaged(name, dropped, report)

    def dropped_damaged(self, name: str, keys: set[str], report: bool = True) -> set[str]:
        """Of the entries of ``name`` a pack written again left out as damaged (its bytes are
        checked as it is written: no reader had looked at them), those the cache no longer
        holds (not in their own files, nor whole in another pack); with ``report`` counted as
        repaired, as a reader that found them would have, with one warning naming them."""
        lost = {k for k in keys if not self.has(name, k)}
        if lost and report:
            self._count(self.repaired, name, len(lost))
            shown = ", ".join(sorted(k[:16] for k in lost)[:3]) + ", ..." * (len(lost) > 3)
            warnings.warn(f"stage cache: {len(lost)} damaged {name} "
                          f"{'entry' if len(lost) == 1 else 'entries'} under {self.root} "
                          f"({shown}) left out when their pack was written again; computed "
                          f"again when next needed", stacklevel=2)
        return lost

    def packed(self, name: str) -> dict[str, tuple[int, float | None]]:
        """The entries of a stage's packs: key -> (its bytes, when its pack was written)."""
        return self._packs.entries(name)

    def pack_overhead(self, name: str, emptied: Iterable[str] | None = None) -> int:
        """The bytes of a stage's packs that are no entry's (with ``emptied``: of the packs
        removing those keys empties)."""
        return self._packs.overhead(name, None if emptied is None else set(emptied))

    def bad_packs(self, name: str) -> dict[str, str]:
        """The packs of a stage whose index does not parse, and why (removed by ``cache
        verify``; leftovers, for ``cache prune``)."""
        return self._packs.bad(name)

    def pack_files(self, name: str) -> list[FileInfo]:
        """The files of a stage's packs folder (packs, and leftovers of interrupted writes)."""
        return sorted(self._packs.listing(name))

    def _raw(self, name: str, key: str, meta: dict[str, Any] | None = None, loc: Any = None
             ) -> tuple[dict[str, Any], bytes]:
        """An entry's meta (``meta`` when the caller read it) and its stored bytes
        (decompressed), checked against the recorded output hash; a damaged entry is removed
        and :class:`StageCacheCorrupt` raised."""
        if meta is None:
            meta, loc = self._meta(name, key)
        elif loc is None:
            loc = self._locate(name, key)
        m = meta
        if m.get("stored") is False:
            raise StageOutputNotStored(name, key)
        codec = m.get("codec", "json")
        path = self._where(name, key, loc, codec)
        try:
            if isinstance(loc, _Pending):
                data = loc.out
            elif isinstance(loc, PackEntry):
                data, loc = self._pack_read(name, key, loc, output=True)
            elif loc is None:
                raise FileNotFoundError(path)
            else:
                data = self._files.read(path)
            if codec != "arrays":
                data = gzip.decompress(data)
        except FileNotFoundError:
            reason = "its output file is missing"
        except PackCutShort as exc:
            reason = str(exc)
        except (OSError, EOFError, zlib.error) as exc:
            reason = f"its output does not decompress ({exc})"
        else:
            if sha256_bytes(data) == m["output_hash"]:
                return m, data
            reason = "its output does not match the sha256 recorded when it was written"
        self.remove(name, key)
        raise StageCacheCorrupt(name, key, path, reason)

    def check(self, name: str, key: str) -> str | None:
        """Read an entry back and check it as every read does: None when its output is what
        its meta recorded (a recorded entry: when its meta is whole; its output is checked
        when it is computed again); else why not (the damaged entry has been removed)."""
        m = self.meta(name, key)
        if m.get("stored") is False:
            return None
        try:
            self._raw(name, key, m)
        except StageCacheCorrupt as exc:
            return exc.reason
        return None

    def stored(self, name: str, key: str) -> bool:
        """Whether an entry keeps its output (False: recorded, computed again when read)."""
        return self.meta(name, key).get("stored", True) is not False

    def recomputed(self, name: str, key: str, output: Any, meta: dict[str, Any] | None = None
                   ) -> Any:
        """``output``, computed again for a recorded entry, when its hash is the one the
        entry recorded; else the entry is removed and :class:`StageCacheCorrupt` raised (its
        inputs or the code changed under the same key)."""
        m = meta if meta is not None else self.meta(name, key)
        if encoded_output(output, m.get("codec", "json"), need_bytes=False)[1] != m["output_hash"]:
            self.remove(name, key)
            raise StageCacheCorrupt(name, key, self._paths(name, key)[1],
                                    "its output, computed again, does not match the sha256 "
                                    "recorded when it was first computed")
        return output

    def load(self, name: str, key: str) -> Any:
        """The output of a complete entry (named arrays for an ``arrays`` stage), checked
        against its recorded hash (:class:`StageCacheCorrupt` when it does not match;
        :class:`StageOutputNotStored` for a recorded entry)."""
        return self._read(name, key)[1]

    def _read(self, name: str, key: str, compute: Callable[[], Any] | None = None
              ) -> tuple[dict[str, Any], Any]:
        """An entry's meta and output; a recorded entry's output computed again with
        ``compute`` and checked (:class:`StageOutputNotStored` without one)."""
        m, loc = self._meta(name, key)
        if compute is not None and m.get("stored") is False:
            return m, self.recomputed(name, key, compute(), m)
        m, data = self._raw(name, key, m, loc)
        if m.get("codec") != "arrays":
            return m, json.loads(data)
        try:
            return m, decode_arrays(data)
        except ValueError as exc:  # a hash match with a bad layout: written by a bug
            self.remove(name, key)
            raise StageCacheCorrupt(name, key, self._paths(name, key, "arrays")[0],
                                    f"not an arrays blob ({exc})") from None

    def intact(self, name: str, key: str) -> bool:
        """Cheap check of an entry not read now: its meta parses and its output file has the
        size recorded (entries written before sizes were recorded: the file exists). A
        damaged entry is removed (False)."""
        try:
            m, loc = self._meta(name, key)
        except StageCacheCorrupt:
            return False
        if m.get("stored") is False:
            return True
        if isinstance(loc, _Pending):
            size = len(loc.out)
        elif isinstance(loc, PackEntry):
            size = loc.out_len
        else:
            try:
                size = self._files.size(self._paths(name, key, m.get("codec", "json"))[0])
            except OSError:
                size = -1
        if size < 0 or ("size" in m and size != m["size"]):
            self.remove(name, key)
            return False
        return True

    def store(self, name: str, version: str | int, config: Any, inputs: Sequence[str],
              output: Any, codec: Literal["json", "arrays"] = "json",
              stored: bool = True) -> StageRecord:
        """Write an output under its key; returns its record. ``codec="arrays"``: ``output`` is
        a dict of numpy arrays, stored (and hashed) as :func:`encode_arrays` bytes.
        ``stored=False``: only the meta, with the output's hash (a recorded entry)."""
        key = stage_key(name, version, config, inputs)
        out_path, meta_path = self._paths(name, key, codec)
        encoded, output_hash = encoded_output(output, codec, need_bytes=stored)
        rec = StageRecord(name, str(version), key, tuple(inputs), output_hash)
        meta: dict[str, Any] = {**rec.as_dict(), "config": config}
        data = b""
        if stored:
            data = encoded if codec == "arrays" else gzip.compress(encoded, compresslevel=1,
                                                                   mtime=0)
            meta["size"] = len(data)
        else:
            meta["stored"] = False
        if codec != "json":
            meta["codec"] = codec
        if self._pending is not None and self._hold(name, key, _Pending(meta_bytes(meta), data)):
            return rec  # a batch: packed later
        if stored:
            self._files.write(out_path, data)
        self._files.write(meta_path, meta_bytes(meta))
        return rec

    def _hold(self, name: str, key: str, entry: _Pending) -> bool:
        """Keep an entry in the batch (written as packs when it grows or ages); False when
        the batch has ended (the caller writes its files)."""
        with self._lock:
            pending = self._pending
            if pending is None:
                return False
            if not self._pending_size and not any(pending.values()):
                self._pending_since = time.monotonic()
            pending.setdefault(name, {})[key] = entry
            self._pending_size += len(entry.meta) + len(entry.out)
            full = (sum(len(v) for v in pending.values()) >= _FLUSH_ENTRIES
                    or self._pending_size >= _FLUSH_BYTES
                    or time.monotonic() - self._pending_since >= _FLUSH_S)
        if full:
            self.flush()
        return True

    def run(self, name: str, version: str | int, config: Any, inputs: Sequence[str],
            compute: Callable[[], Any], load: bool = True,
            codec: Literal["json", "arrays"] = "json",
            count_reuse: bool = True, key: str | None = None,
            counted_as: str | None = None, stored: bool = True,
            reusable: Callable[[Any], bool] | None = None) -> tuple[StageRecord, Any]:
        """Memoised stage: reuse the entry for this key, or ``compute()`` and store it.

        A reused entry's output is checked against its recorded hash; a damaged entry is
        computed again (counted in :attr:`repaired`, with a warning). With ``load=False`` a
        reused entry's output is not read (None is returned in its place: callers that only
        need the record skip the read) and only its meta and size are checked; read it later
        with :meth:`run` again (``load=True``, ``count_reuse=False`` so the reuse counts once)
        to have a damaged one recomputed. ``count_reuse=False``: a reused entry is not counted,
        loaded or not (a key its caller has counted already). ``key``: the stage's key, when
        the caller has it. ``counted_as``: the name it is counted under (None: ``name``,
        :attr:`~aiblox.engine.task.Task.counted_as`). ``stored=False``: a computed output is
        recorded, not stored (:attr:`~aiblox.engine.task.Task.stored`); a recorded entry read
        with ``load`` is computed again and checked against its hash. ``reusable``:
        :attr:`~aiblox.engine.task.Task.reusable` (an output it refuses: under another key).
        """
        key = key or stage_key(name, version, config, inputs)
        counted = counted_as or name
        if self.has(name, key):
            try:
                if load:
                    m, output = self._read(name, key, compute)
                    if count_reuse:
                        self._count(self.reused, counted)
                    return StageRecord(m["name"], m["version"], m["key"], tuple(m["inputs"]),
                                       m["output_hash"]), output
                if self.intact(name, key):
                    if count_reuse:
                        self._count(self.reused, counted)
                    return self.record(name, key), None
                reason = "its meta or output file is missing, unreadable or of the wrong size"
            except StageCacheCorrupt as exc:
                reason = exc.reason
            self._count(self.repaired, counted)
            if not count_reuse:  # counted as reused by an earlier look: it was not reusable
                self._count(self.reused, counted, -1)
            warnings.warn(f"stage cache: {name}/{key[:16]} under {self.root} was damaged "
                          f"({reason}); computing it again", stacklevel=2)
        output = compute()
        if reusable is not None and not reusable(output):
            config = output_keyed_config(config, encoded_output(output, codec, False)[1])
        rec = self.store(name, version, config, inputs, output, codec, stored)
        self._count(self.computed, counted)
        return rec, output

    def _count(self, counter: dict[str, int], name: str, by: int = 1) -> None:
        with self._lock:
            value = max(0, counter.get(name, 0) + by)
            if value:
                counter[name] = value
            else:
                counter.pop(name, None)

    def run_stage(self, stage: Task, load: bool = True,
                  count_reuse: bool = True) -> tuple[StageRecord, Any]:
        """:meth:`run` of a :class:`~aiblox.engine.task.Task` record."""
        return self.run(stage.name, stage.version, stage.config, stage.inputs, stage.compute,
                        load=load, codec=stage.codec, count_reuse=count_reuse, key=stage.key,
                        counted_as=stage.counted_as, stored=stage.stored,
                        reusable=stage.reusable)
