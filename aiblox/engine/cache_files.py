"""Where a stage cache's files live: a local (or mounted shared) folder through ``os``, or any
fsspec filesystem (``s3://``, ``gs://``, ``memory://``, ...), both publishing every file
atomically (:class:`~aiblox.engine.cache.StageCache` keeps its entries through them).

A local folder writes a temporary file unique to the process and thread and renames it; an
object store writes each file with one put, which a reader sees whole or not at all; other
fsspec filesystems (sftp, smb, hdfs, ...) write a temporary name then rename it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from pathlib import Path
from typing import Any, Protocol

__all__ = ["FileInfo", "Files", "FsspecFiles", "LocalFiles", "StageCacheCorrupt", "StageCacheError",
           "StageOutputNotStored", "atomic_write", "local_cache_root"]

_TMP_SEQ = itertools.count()


class StageCacheError(OSError):
    """The stage cache cannot be written (a read-only or full disk, a path through a file, an
    unknown URI protocol); the message names the folder or URI."""


class StageCacheCorrupt(StageCacheError):
    """A cache entry that does not hold what its meta recorded (a flipped bit, a truncated or
    missing file, a meta that does not parse). The entry has been removed when this is raised
    (``removed``), so computing the stage again stores a good one; a look that repairs nothing
    (:meth:`~aiblox.engine.cache.StageCache.meta` with ``repair=False``: ``cache prune``, a
    dry run above all) leaves it in place (``removed`` False)."""

    def __init__(self, name: str, key: str, path: Path | str, reason: str,
                 removed: bool = True) -> None:
        super().__init__(f"stage cache entry {name}/{key[:16]} ({path}) is damaged: {reason}")
        self.name, self.key, self.path, self.reason = name, key, path, reason
        self.removed = removed


class StageOutputNotStored(StageCacheError):
    """A recorded entry (its meta and output hash only) read without a way to compute its
    output again: the caller recomputes it from the entry's inputs and config."""

    def __init__(self, name: str, key: str) -> None:
        super().__init__(f"stage cache entry {name}/{key[:16]} keeps no output (it is recorded "
                         f"and computed again from its inputs when read)")
        self.name, self.key = name, key


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write ``data`` under a temporary name unique to this process and thread, then rename it
    into place: a reader never sees a partial file, a killed process never leaves one under
    the real name, and parallel writers of one key (same bytes) simply replace each other. No
    ``fsync``: every read checks the output's sha256 against its meta (a meta without its
    output, or an output cut short by a power loss, is a damaged entry, computed again), and
    two syncs per file cost a sweep more than its fusion and metrics. The folder is made when
    missing. Failures are a :class:`StageCacheError` naming the folder."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-{threading.get_ident()}-"
                               f"{next(_TMP_SEQ)}.tmp")
    try:
        try:
            f = open(tmp, "wb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            f = open(tmp, "wb")  # noqa: SIM115
        with f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise StageCacheError(f"cannot write the stage cache in {folder}: "
                              f"{exc.strerror or exc}") from exc
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def local_cache_root(root: str | Path) -> Path | None:
    """The local folder of a cache root (a path, or a ``file://`` URI); None for any other
    fsspec URI (``s3://``, ``memory://``, ...)."""
    if isinstance(root, Path):
        return root
    if root.startswith("file://"):
        return Path(root.removeprefix("file://"))
    return Path(root) if "://" not in root else None


_PUT_IS_ATOMIC = frozenset({"memory", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl",
                            "oci", "oss", "r2", "b2", "tos", "cos"})
"""fsspec protocols where one put publishes the whole file or nothing (object stores, and the
in-process ``memory`` store): written directly. Elsewhere (sftp, smb, hdfs, ...) a temporary
name then a rename."""


class Files(Protocol):
    """Where the cache's files live: the local folder or an fsspec filesystem."""

    def path(self, name: str, file: str) -> Any: ...
    def read(self, path: Any) -> bytes: ...
    def read_range(self, path: Any, start: int, end: int) -> bytes: ...
    def write(self, path: Any, data: bytes) -> None: ...
    def exists(self, path: Any) -> bool: ...
    def size(self, path: Any) -> int: ...
    def unlink(self, path: Any) -> None: ...
    def remove_folder(self, folder: str) -> None: ...
    def set_time(self, path: Any, when: float) -> None: ...
    def listing(self, folder: str) -> list[FileInfo]: ...


FileInfo = tuple[str, int, float | None]
"""A file in a cache folder: its name, its size in bytes and when it was last written (seconds
since the epoch; None where the filesystem does not say)."""

_MODIFIED_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")
"""Where fsspec filesystems report a file's modification time (local and sftp ``mtime``, S3
``LastModified``, GCS ``updated``, the memory filesystem ``created``)."""


def _epoch(value: Any) -> float | None:
    """Seconds since the epoch from a listing's time field (a number, a datetime or an ISO
    string); None when it is none of these."""
    import datetime as dt

    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    return None


class LocalFiles:
    """A local (or mounted shared) folder, through ``os`` directly: the fast path (paths are
    strings: a sweep point touches a dozen, and ``pathlib`` costs more than ``os`` here)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._prefix = os.fspath(root)

    def path(self, name: str, file: str) -> str:
        return os.path.join(self._prefix, name, file)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_range(self, path: str, start: int, end: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def write(self, path: str, data: bytes) -> None:
        atomic_write(path, data)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def remove_folder(self, folder: str) -> None:
        """Remove an empty folder (nothing when it is absent or not empty)."""
        with contextlib.suppress(OSError):
            os.rmdir(self.root / folder)

    def set_time(self, path: str, when: float) -> None:
        """Set a file's modification time (a pack written again keeps its entries' age)."""
        with contextlib.suppress(OSError):
            os.utime(path, (when, when))

    def listing(self, folder: str) -> list[FileInfo]:
        """The folder's files ([] when it is absent). A file gone between the folder's read
        and its own stat (another process renamed a temporary file into place, or removed a
        pack) is left out, not the whole folder: a stage's packs listed as none would be
        forgotten, and their entries computed again."""
        found = []
        try:
            with os.scandir(self.root / folder if folder else self.root) as it:
                for e in it:
                    try:
                        found.append((e.name, e.is_dir(), e.stat()))
                    except FileNotFoundError:
                        continue
        except FileNotFoundError:
            return []
        return [(name, -1 if is_dir else st.st_size, st.st_mtime)
                for name, is_dir, st in found]


class FsspecFiles:
    """An fsspec filesystem (``s3://``, ``gs://``, ``memory://``, ...)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        try:
            import fsspec

            self.fs, base = fsspec.core.url_to_fs(uri)
        except ImportError as exc:  # the protocol's package: s3fs, gcsfs, adlfs, ...
            raise StageCacheError(f"stage cache {uri}: {exc}") from None
        except ValueError as exc:  # "Protocol not known: foo"
            raise StageCacheError(f"stage cache {uri}: {exc}") from None
        self.base = base.rstrip("/")
        protocol = self.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        self.direct = bool(protocols & _PUT_IS_ATOMIC)
        self._made: set[str] = set()

    def path(self, name: str, file: str) -> str:
        return f"{self.base}/{name}/{file}" if name else f"{self.base}/{file}"

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def read_range(self, path: str, start: int, end: int) -> bytes:
        return bytes(self.fs.cat_file(path, start=start, end=end))

    def write(self, path: str, data: bytes) -> None:
        folder = path.rsplit("/", 1)[0]
        try:
            if self.direct:  # object stores have no folders (makedirs could make a bucket)
                self.fs.pipe_file(path, data)
                return
            if folder not in self._made:
                self.fs.makedirs(folder, exist_ok=True)
                self._made.add(folder)
            name = path.rsplit("/", 1)[1]
            tmp = (f"{folder}/.{name}.{os.getpid()}-{threading.get_ident()}-"
                   f"{next(_TMP_SEQ)}.tmp")
            try:
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    self.fs.rm_file(tmp)
                raise
        except OSError as exc:
            raise StageCacheError(f"cannot write the stage cache in "
                                  f"{self.fs.unstrip_protocol(folder)}: "
                                  f"{exc.strerror or exc}") from exc

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def size(self, path: str) -> int:
        return int(self.fs.size(path))

    def unlink(self, path: str) -> None:
        self.fs.rm_file(path)

    def remove_folder(self, folder: str) -> None:
        """Remove an empty folder where the filesystem has folders (nothing otherwise)."""
        if not self.direct:
            with contextlib.suppress(OSError, NotImplementedError):
                self.fs.rmdir(self.path("", folder))

    def set_time(self, path: str, when: float) -> None:
        """Nothing: an object store sets a file's time when it is written."""

    def listing(self, folder: str) -> list[FileInfo]:
        try:
            infos = self.fs.ls(self.path("", folder) if folder else self.base, detail=True)
        except FileNotFoundError:
            return []
        out: list[FileInfo] = []
        for info in infos:
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            when = next((_epoch(info[k]) for k in _MODIFIED_KEYS if info.get(k) is not None),
                        None)
            out.append((name, -1 if info.get("type") == "directory" else int(info["size"]),
                        when))
        return out
