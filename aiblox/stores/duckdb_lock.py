"""A DuckDB file shared by several processes: waiting for its lock, saying who holds it, and
how a store holds it (:class:`SharedFile`, with a full disk met while writing).

DuckDB lets one process open a file to write, or several to read (``read_only``), never both.
A workspace (``aiblox eval``, a sweep, a notebook's) opens its store *shared*
(:class:`~aiblox.stores.DuckDBStore` ``shared=True``): reading, and holding the file alone only
for the time of a write (:meth:`~aiblox.stores.DuckDBStore.writable`: a sync, an evidence pack,
new embeddings), so a notebook left open on a store and a sweep in a terminal read it side by
side. Opening waits a while for a lock another process holds (``$AIBLOX_STORE_WAIT`` seconds,
30 unless set: another command's sync ends), then raises :class:`StoreBusy` naming the process.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from aiblox.stores.base import StoreError, is_disk_full

__all__ = ["WAIT_ENV", "SharedFile", "StoreBusy", "connect_waiting", "lock_holder",
           "store_wait_s"]

WAIT_ENV = "AIBLOX_STORE_WAIT"
_WAIT_S = 30.0
_LOCKED = re.compile(r"Could not set lock on file|Conflicting lock is held")
_PID = re.compile(r"\(PID (\d+)\)")

T = TypeVar("T")


class StoreBusy(StoreError):
    """Another process holds the store's file (DuckDB's lock) past the wait."""

    def __init__(self, message: str, holder: str = "another process") -> None:
        super().__init__(message)
        self.holder = holder


def store_wait_s() -> float:
    """How long opening a store waits for another process's lock (``$AIBLOX_STORE_WAIT``)."""
    text = os.environ.get(WAIT_ENV, "").strip()
    try:
        return max(0.0, float(text)) if text else _WAIT_S
    except ValueError:
        raise StoreError(f"${WAIT_ENV} must be a number of seconds, got {text!r}") from None


def lock_holder(exc: BaseException) -> str | None:
    """Who holds the file when ``exc`` is DuckDB's lock conflict (``process 123``, or
    ``another process`` when DuckDB does not say); None for any other error."""
    text = str(exc)
    if not _LOCKED.search(text):
        return None
    pid = _PID.search(text)
    return f"process {pid.group(1)}" if pid else "another process"


def connect_waiting(connect: Callable[[], T], location: str, wait_s: float,
                    writing: bool) -> T:
    """``connect()``, tried again while another process holds the file's lock, for up to
    ``wait_s`` seconds (one warning when it waits a second or more); then :class:`StoreBusy`.
    Other errors are raised at once."""
    deadline = time.monotonic() + wait_s
    delay, said = 0.02, False
    while True:
        try:
            return connect()
        except Exception as exc:
            holder = lock_holder(exc)
            if holder is None:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreBusy(
                    f"store {location} is in use by {holder}: DuckDB lets one process write a "
                    f"file, or several read it{' (this needs to write it)' if writing else ''}; "
                    f"close the store there (a notebook: its workspace's close()) or let it "
                    f"finish, then run again (waited {wait_s:g} s; ${WAIT_ENV} sets how long)",
                    holder) from exc
            if not said and left >= 1:
                warnings.warn(f"store {location} is in use by {holder}: waiting up to "
                              f"{left:.0f} s for it", stacklevel=4)
                said = True
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.5)


class _File:
    """A DuckDB file as this process holds it: one connection and its lock, the
    :meth:`SharedFile.writable` blocks entered, however many shared stores are open on it (in
    one process DuckDB opens a file to read or to write, not both: they switch together)."""

    def __init__(self, con: Any, key: tuple[int, str] | None) -> None:
        self.con, self.key = con, key
        self.lock = threading.RLock()
        self.writers, self.users, self.fts_loaded = 0, 1, False


_FILES: dict[tuple[int, str], _File] = {}
_FILES_LOCK = threading.Lock()


def open_file(location: str | None, connect: Callable[[], Any]) -> tuple[_File, bool]:
    """The file a shared store at ``location`` uses (None: a store's own, not shared): the one
    this process holds already, else ``connect()``'s; and whether it is new."""
    if location is None:
        return _File(connect(), None), True
    key = (os.getpid(), os.path.realpath(location))  # a forked child opens its own
    with _FILES_LOCK:
        held = _FILES.get(key)
        if held is not None:
            held.users += 1
            return held, False
        _FILES[key] = made = _File(connect(), key)
        return made, True


def release_file(file: _File) -> bool:
    """One store fewer on ``file``: True when it was the last (its connection is to close)."""
    with _FILES_LOCK:
        file.users -= 1
        if file.users > 0:
            return False
        if file.key is not None and _FILES.get(file.key) is file:
            del _FILES[file.key]
        return True


class SharedFile:
    """How :class:`~aiblox.stores.DuckDBStore` holds its file: opened to read when ``shared``
    (``_shared``), to write only inside :meth:`writable`; else to write, as DuckDB does.
    Shared stores of one file in one process use one connection (:func:`open_file`)."""

    location: str
    dim: int
    _file: _File
    _config: dict[str, Any]
    _shared: bool
    _busy_said: bool = False

    @property
    def con(self) -> Any:
        """The connection (a :class:`~aiblox.stores.duckdb_sql.Connection`, which follows the
        file when it is opened again)."""
        return self._file.con

    @property
    def _lock(self) -> threading.RLock:
        return self._file.lock

    @property
    def _writers(self) -> int:
        return self._file.writers

    @_writers.setter
    def _writers(self, n: int) -> None:
        self._file.writers = n

    @property
    def _fts_loaded(self) -> bool:
        return self._file.fts_loaded

    @_fts_loaded.setter
    def _fts_loaded(self, loaded: bool) -> None:
        self._file.fts_loaded = loaded

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Around a write: DuckDB's error for a full disk becomes one :class:`StoreError`
        naming the store, the file and ENOSPC (what the store held before is intact: a
        transaction is all or nothing, and the write-ahead log's torn tail is dropped when
        the file is next opened)."""
        try:
            yield
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            found = re.search(r'file "([^"]+)"', str(exc))
            raise StoreError(
                f"store {self.location}: the disk is full (ENOSPC, no space left on the "
                f"device) writing {found.group(1) if found else self.location}; nothing stored "
                f"was lost: free space, then run the command again") from exc

    def _checkpoint(self) -> None:
        """Checkpoint now. DuckDB writes the row groups of a large insert to the file before
        its commit and rewrites them at the next checkpoint, leaving the first copy's blocks
        free for good (3,143 of 13,534 blocks after 600k vectors in 250k inserts); a
        checkpoint right after the commit leaves almost none (25), in less time (20 s against
        24 s). Skipped while another connection has a transaction."""
        import duckdb

        with self._lock, contextlib.suppress(duckdb.TransactionException):
            if not self._shared or self._writers:  # (a shared store checkpointed on closing)
                self.con.execute("CHECKPOINT")

    def _create_schema(self, dim: int) -> None:
        raise NotImplementedError

    def _connect(self, read_only: bool, wait_s: float | None = None) -> Any:
        import duckdb

        try:
            return connect_waiting(lambda: duckdb.connect(
                self.location, read_only=read_only, config=self._config), self.location,
                wait_s if wait_s is not None else store_wait_s() if self._shared else 0.0,
                writing=not read_only)
        except (duckdb.ParserException, duckdb.InvalidInputException) as exc:
            raise StoreError(f"DuckDB memory limit {self._config['memory_limit']!r} "
                             f"(memory_limit= or $AIBLOX_DUCKDB_MEMORY_LIMIT): {exc}") from exc

    def _reopen(self, read_only: bool, wait_s: float | None = None) -> None:
        """The file opened again, to read (shared) or to write (alone); closing a writer
        checkpoints. When writing must wait past the wait, reading goes on."""
        with self._writing():
            self.con.close()
        self._fts_loaded = False
        try:
            self.con.replace(self._connect(read_only, wait_s))
        except StoreBusy:
            if not read_only:
                self.con.replace(self._connect(True))
            raise
        if not read_only:
            self._create_schema(self.dim)

    @contextlib.contextmanager
    def writable(self, wait_s: float | None = None) -> Iterator[None]:
        """Inside, this store may write: a shared store holds its file alone (waiting for
        other processes' reads to end, else :class:`StoreBusy`) and shares it again after.
        Every write of the store is inside one; nested blocks are one, so a sync of many
        batches opens the file once. ``wait_s``: how long to wait (None:
        ``$AIBLOX_STORE_WAIT``)."""
        with self._lock:
            alone = self._shared and not self._writers
            if alone:
                self._reopen(read_only=False, wait_s=wait_s)
            self._writers += 1
            try:
                yield
            finally:
                self._writers -= 1
                if alone:
                    self._reopen(read_only=True)

    def _check_shared(self, tables: set[str]) -> None:
        """A shared store opened to read: a file without every one of ``tables`` (made before
        one existed) is opened alone once to make them."""
        held = {r[0] for r in self.con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        if tables - held:
            with self.writable():
                pass

    def _busy_once(self, exc: StoreBusy, what: str) -> None:
        """Warn, once per store, that a cache write was dropped: another process reads it."""
        if not self._busy_said:
            self._busy_said = True
            warnings.warn(f"store {self.location} is in use by {exc.holder}: {what}",
                          stacklevel=3)
