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
mid-write leaves no meta and the stage is simply recomputed. The cache counts, per stage, how
many outputs it computed and how many it reused, which is how tests prove a re-run recomputes
nothing.

A stage whose output costs less to compute again than to store (a hybrid point's fused run:
about a millisecond from its signals, against half a megabyte a point on disk) is *recorded*,
not stored: its meta is written with ``"stored": false`` and its output hash, and no output
file. Reading it computes the output again and checks it against the recorded hash (a mismatch
is a damaged entry); :meth:`StageCache.load`, which has nothing to compute it with, raises
:class:`StageOutputNotStored`.

The root is a local folder (a path, or a ``file://`` URI) or any fsspec URI (``s3://bucket/x``,
``gs://``, ``memory://`` in tests; the protocol's package must be installed, e.g. ``s3fs``), so
workers on several machines share one cache (the two kinds of files are in
:mod:`aiblox.engine.cache_files`). A local folder keeps the direct ``os`` calls (a fusion sweep
reads thousands of entries). Publication is atomic everywhere: a local or
mounted shared folder writes a temporary file unique to the process and thread and renames
it; an object store writes each file with one put, which a reader sees whole or not at all.
Two workers computing one stage write the same bytes (stages are deterministic), so the last
write wins harmlessly; a conditional put (create only if absent) would add nothing and would
block the repair of a damaged object. :attr:`StageCache.uri` rebuilds the cache on any worker,
and a cache pickles as its URI.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import threading
import warnings
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from aiblox.engine.cache_files import (
    FileInfo,
    Files,
    FsspecFiles,
    LocalFiles,
    StageCacheError,
    local_cache_root,
)
from aiblox.engine.task import StageRecord, Task, stage_key
from aiblox.hashing import canonical_plain_json, sha256_bytes

__all__ = [
    "FileInfo",
    "StageCache",
    "StageCacheCorrupt",
    "StageCacheError",
    "StageOutputNotStored",
    "check_cache_root",
    "decode_arrays",
    "encode_arrays",
    "local_cache_root",
]

_ARRAYS_MAGIC = b"aiblox-arrays/1\n"
_META_SUM = re.compile(rb'"meta_sha256":"([0-9a-f]{64})",')
"""A meta's checksum field, as its canonical JSON writes it (``meta_sha256`` sorts between
``key`` and ``name``, so a comma always follows it)."""


def _meta_bytes(meta: dict[str, Any]) -> bytes:
    """A meta's file: its canonical JSON with ``meta_sha256``, the sha256 of that JSON without
    the field, so that a meta damaged into other JSON (a flipped hex digit of an input key or an
    output hash) is caught when read, not passed on into a point's manifest."""
    plain = canonical_plain_json(meta).encode("utf-8")
    return canonical_plain_json({**meta, "meta_sha256": sha256_bytes(plain)}).encode("utf-8")


def _meta_sum_ok(data: bytes) -> bool:
    """Whether a meta file's checksum matches the rest of its bytes (True for a meta written
    before metas carried one)."""
    found = _META_SUM.search(data)
    if found is None:
        return b'"meta_sha256"' not in data
    rest = data[:found.start()] + data[found.end():]
    return sha256_bytes(rest) == found.group(1).decode("ascii")


def encode_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    """Canonical bytes of named arrays: a magic line, one canonical-JSON header line (names in
    sorted order with dtype and shape), then each array's raw little-endian C-order bytes."""
    names = sorted(arrays)
    arrs = [np.ascontiguousarray(arrays[n]) for n in names]
    arrs = [a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a for a in arrs]
    header = canonical_plain_json([[n, a.dtype.newbyteorder("<").str, list(a.shape)]
                                   for n, a in zip(names, arrs, strict=True)])
    return b"".join([_ARRAYS_MAGIC, header.encode("utf-8"), b"\n", *(a.tobytes() for a in arrs)])


def decode_arrays(data: bytes) -> dict[str, np.ndarray]:
    """Inverse of :func:`encode_arrays` (read-only views into ``data``)."""
    if not data.startswith(_ARRAYS_MAGIC):
        raise ValueError("not an aiblox arrays blob (bad magic line)")
    end = data.index(b"\n", len(_ARRAYS_MAGIC))
    header = json.loads(data[len(_ARRAYS_MAGIC):end])
    out: dict[str, np.ndarray] = {}
    at = end + 1
    for name, dtype, shape in header:
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) if shape else 1
        out[name] = np.frombuffer(data, dtype=dt, count=n, offset=at).reshape(shape)
        at += n * dt.itemsize
    return out


def _encoded(output: Any, codec: str) -> tuple[bytes, str]:
    """An output's canonical bytes (before compression) and their sha256, its output hash."""
    if codec == "arrays":
        data = encode_arrays(output)
        return data, sha256_bytes(data)
    data = canonical_plain_json(output).encode("utf-8")
    return data, sha256_bytes(data)


class StageCacheCorrupt(StageCacheError):
    """A cache entry that does not hold what its meta recorded (a flipped bit, a truncated or
    missing file, a meta that does not parse). The entry has been removed when this is raised,
    so computing the stage again stores a good one."""

    def __init__(self, name: str, key: str, path: Path | str, reason: str) -> None:
        super().__init__(f"stage cache entry {name}/{key[:16]} ({path}) is damaged: {reason}")
        self.name, self.key, self.path, self.reason = name, key, path, reason


class StageOutputNotStored(StageCacheError):
    """A recorded entry (its meta and output hash only) read without a way to compute its
    output again: the caller recomputes it from the entry's inputs and config."""

    def __init__(self, name: str, key: str) -> None:
        super().__init__(f"stage cache entry {name}/{key[:16]} keeps no output (it is recorded "
                         f"and computed again from its inputs when read)")
        self.name, self.key = name, key


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
        self.uri = str(local.absolute()) if local is not None else str(root)
        """A string that opens this cache again on any worker (``StageCache(cache.uri)``): the
        absolute folder, or the URI. A ``memory://`` cache is private to its process."""
        self.computed: dict[str, int] = {}
        """Per stage name: outputs computed by this cache object."""
        self.reused: dict[str, int] = {}
        """Per stage name: outputs read back instead of computed."""
        self.repaired: dict[str, int] = {}
        """Per stage name: damaged entries found, removed and computed again."""
        self._lock = threading.Lock()

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

    def has(self, name: str, key: str) -> bool:
        """True when an entry's meta exists (its output is checked when read)."""
        return self._files.exists(self._paths(name, key)[1])

    def meta(self, name: str, key: str) -> dict[str, Any]:
        """The small meta record of an entry (no output); :class:`StageCacheCorrupt` when it
        does not parse or does not describe this entry."""
        path = self._paths(name, key)[1]
        try:
            data = self._files.read(path)
            m = json.loads(data.decode("utf-8"))
            if not isinstance(m, dict) or m.get("key") != key or m.get("name") != name \
                    or not isinstance(m.get("output_hash"), str):
                raise ValueError("not this entry's meta record")
            if not _meta_sum_ok(data):
                raise ValueError("its bytes do not match the checksum written with them")
            m.pop("meta_sha256", None)
        except FileNotFoundError:
            raise StageCacheCorrupt(name, key, path, "its meta file is missing") from None
        except (OSError, ValueError) as exc:
            self.remove(name, key)
            raise StageCacheCorrupt(name, key, path, f"unreadable meta ({exc})") from None
        return m

    def record(self, name: str, key: str) -> StageRecord:
        """The :class:`StageRecord` of a complete entry."""
        m = self.meta(name, key)
        return StageRecord(m["name"], m["version"], m["key"], tuple(m["inputs"]),
                           m["output_hash"])

    def remove(self, name: str, key: str) -> None:
        """Remove an entry, meta first (from then on it no longer exists: a reader computes it
        again), then its output; nothing when it is absent."""
        meta_path = self._paths(name, key)[1]
        for path in (meta_path, *(self._paths(name, key, c)[0] for c in ("json", "arrays"))):
            try:
                self._files.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StageCacheError(f"cannot remove the damaged entry {path}: "
                                      f"{exc.strerror or exc}") from exc

    def _raw(self, name: str, key: str, meta: dict[str, Any] | None = None
             ) -> tuple[dict[str, Any], bytes]:
        """An entry's meta (``meta`` when the caller read it) and its stored bytes
        (decompressed), checked against the recorded output hash; a damaged entry is removed
        and :class:`StageCacheCorrupt` raised."""
        m = meta if meta is not None else self.meta(name, key)
        if m.get("stored") is False:
            raise StageOutputNotStored(name, key)
        codec = m.get("codec", "json")
        path = self._paths(name, key, codec)[0]
        try:
            data = self._files.read(path)
            if codec != "arrays":
                data = gzip.decompress(data)
        except FileNotFoundError:
            reason = "its output file is missing"
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
        if _encoded(output, m.get("codec", "json"))[1] != m["output_hash"]:
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
        m = self.meta(name, key)
        if compute is not None and m.get("stored") is False:
            return m, self.recomputed(name, key, compute(), m)
        m, data = self._raw(name, key, m)
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
            m = self.meta(name, key)
        except StageCacheCorrupt:
            return False
        if m.get("stored") is False:
            return True
        path = self._paths(name, key, m.get("codec", "json"))[0]
        try:
            size = self._files.size(path)
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
        encoded, output_hash = _encoded(output, codec)
        rec = StageRecord(name, str(version), key, tuple(inputs), output_hash)
        meta: dict[str, Any] = {**rec.as_dict(), "config": config}
        if stored:
            data = encoded if codec == "arrays" else gzip.compress(encoded, compresslevel=1,
                                                                   mtime=0)
            self._files.write(out_path, data)
            meta["size"] = len(data)
        else:
            meta["stored"] = False
        if codec != "json":
            meta["codec"] = codec
        self._files.write(meta_path, _meta_bytes(meta))
        return rec

    def run(self, name: str, version: str | int, config: Any, inputs: Sequence[str],
            compute: Callable[[], Any], load: bool = True,
            codec: Literal["json", "arrays"] = "json",
            count_reuse: bool = True, key: str | None = None,
            counted_as: str | None = None, stored: bool = True) -> tuple[StageRecord, Any]:
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
        with ``load`` is computed again and checked against its hash.
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
                        counted_as=stage.counted_as, stored=stage.stored)
