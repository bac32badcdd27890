"""Packs: many stage cache entries in one file, written by a batch (:meth:`StageCache.batched`,
a sweep's points), so that a sweep of a thousand points writes a few files, not six thousand.

A pack lives in its stage's folder, ``<root>/<stage>/packs/<name>.pack``::

    aiblox-pack/1
    [[key, meta bytes, output bytes], ...]       one canonical-JSON line, the pack's index
    meta 0, output 0, meta 1, output 1, ...      each entry's two files' bytes, as written alone

An entry in a pack is the entry it would be as two files: the same meta (with its
``meta_sha256``) and the same output bytes (its output hash checked on every read), so reading,
checking and counting it is the same; only where its bytes lie differs. A pack is published
atomically like any file (:func:`~aiblox.engine.cache_files.atomic_write`, or one put) and
never appended to; its name is the sha256 of its bytes, so two writers never collide. Removing
an entry (damaged, or pruned) writes the pack again without it, keeping only entries whose
bytes check (two processes repairing one pack at once each drop every damaged entry; the
damaged ones no reader had found are named to the caller, which counts them as repaired), and
removes the old pack (and a pack left empty); inside a batch, once per pack at its end.

A damaged pack loses nothing silently. One cut short (a full or failing disk) still names every
entry its index holds: those its bytes do not cover are damaged entries, found when read (a
sweep computes them again, counted as repaired, with a warning; ``aiblox cache verify`` reports
and removes them; their listed size is the bytes left of them). A pack whose index does not
parse holds entries no one can name: a sweep warns once and computes them again,
``aiblox cache verify`` reports and removes the pack, ``aiblox cache prune`` lists it as a
leftover.

Each :class:`StageCache` indexes a stage's packs on first need and looks again, at most once a
second, when a key is not found (another process's packs, published since), and at once when
a pack it indexed is gone (written again by another process). Two processes computing one
entry at once pack it twice: its size counts both copies, and removing it removes both.
"""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

from aiblox.engine.cache_files import FileInfo, Files
from aiblox.hashing import canonical_plain_json, sha256_bytes

__all__ = ["PACKS", "PackCutShort", "PackEntry", "Packs", "pack_bytes", "read_pack"]

PACKS = "packs"
"""The folder of a stage's packs, inside the stage's folder."""
_MAGIC = b"aiblox-pack/1\n"
_SUFFIX = ".pack"
_REFRESH_S = 1.0
"""A stage's packs are listed again on a missing key at most this often."""


class PackEntry(NamedTuple):
    """Where one entry's bytes lie: its pack (the file's name in the stage's packs folder),
    the meta's offset and length, the output's length (it follows the meta)."""

    pack: str
    at: int
    meta_len: int
    out_len: int


class PackCutShort(OSError):
    """An entry's bytes lie past the end of its pack (a pack cut short)."""


def pack_bytes(entries: list[tuple[str, bytes, bytes]]) -> bytes:
    """A pack's file of ``(key, meta bytes, output bytes)`` entries, in the order given."""
    index = canonical_plain_json([[k, len(m), len(o)] for k, m, o in entries])
    return b"".join([_MAGIC, index.encode("utf-8"), b"\n",
                     *(b for _, m, o in entries for b in (m, o))])


def _entry_bytes(key: str, meta_len: int, out_len: int, left: int | None = None) -> int:
    """An entry's bytes in a pack: its meta, its output and its row of the index line (with
    the comma or bracket after it); a pack holds 16 bytes more than its entries. ``left``:
    the pack's bytes from the entry's meta on (a pack cut short: only those there count)."""
    held = meta_len + out_len if left is None else min(meta_len + out_len, max(0, left))
    return held + len(canonical_plain_json([key, meta_len, out_len])) + 1


def read_pack(data: bytes) -> list[tuple[str, bytes, bytes]]:
    """The ``(key, meta bytes, output bytes)`` entries of a pack's bytes, in order
    (``ValueError`` when they are not a pack's)."""
    return [(k, data[at:at + m], data[at + m:at + m + o]) for k, at, m, o in _parse(data)]


def _parse(data: bytes) -> list[tuple[str, int, int, int]]:
    """``(key, meta offset, meta length, output length)`` of every entry of a pack's bytes (or
    of its first bytes, the index line whole); ``ValueError`` when they are not a pack's."""
    if not data.startswith(_MAGIC):
        raise ValueError("not an aiblox pack (bad magic line)")
    end = data.find(b"\n", len(_MAGIC))
    if end < 0:
        raise ValueError("its index line is cut short")
    try:
        rows = json.loads(data[len(_MAGIC):end])
    except ValueError:  # not UTF-8, or not JSON
        raise ValueError("its index line is not JSON") from None
    at = end + 1
    out = []
    for row in rows if isinstance(rows, list) else [None]:
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)
                and all(type(n) is int for n in row[1:])) or row[1] <= 0 or row[2] < 0:
            raise ValueError("its index is not a list of [key, meta bytes, output bytes]")
        key, meta_len, out_len = row
        out.append((key, at, meta_len, out_len))
        at += meta_len + out_len
    return out


def _place(index: dict[str, PackEntry], name: str, rows: list[tuple[str, int, int, int]],
           size: int | None) -> None:
    """Index the pack ``name``'s ``rows`` (its ``size`` bytes, None: whole): a key already
    indexed from another pack is taken from this one unless this one is cut short before its
    bytes' end (a copy held whole is read, not the cut one)."""
    for key, at, m, o in rows:
        if key not in index or size is None or at + m + o <= size:
            index[key] = PackEntry(name, at, m, o)


class Packs:
    """The packs of one cache's stages, indexed on first need (see the module doc)."""

    def __init__(self, files: Files,
                 whole: Callable[[str, str, bytes, bytes], bool] | None = None) -> None:
        self._files = files
        self._whole = whole or (lambda stage, key, meta, out: True)
        """Whether an entry's bytes are whole (its meta's checksum, its output's hash)."""
        self._index: dict[str, dict[str, PackEntry]] = {}
        """Per stage: key -> where its bytes lie (a key in two packs: the one found last)."""
        self._rows: dict[str, dict[str, list[tuple[str, int, int, int]]]] = {}
        """Per stage: pack name -> its entries (key, meta offset, meta and output lengths)."""
        self._bad: dict[str, dict[str, str]] = {}
        """Per stage: packs whose index does not parse, and why (``cache verify`` removes
        them, ``cache prune`` as leftovers)."""
        self._sizes: dict[str, int] = {}
        """Pack name -> its size when indexed (a pack's name is its bytes' sha256)."""
        self._warned: set[tuple[str, str]] = set()
        """(stage, pack) of the damaged packs a reader has been warned of."""
        self._listed: dict[str, float] = {}
        self._hidden: dict[str, dict[str, set[str]]] = {}
        """Per stage, per pack: entries removed but not yet written out (:meth:`hide`)."""

    def _folder(self, stage: str) -> str:
        return f"{stage}/{PACKS}"

    def _path(self, stage: str, pack: str) -> Any:
        return self._files.path(self._folder(stage), pack)

    def _refresh(self, stage: str) -> None:
        """Index the packs of ``stage`` published since the last look, and forget those gone
        since (another process wrote one again without some entries, or pruned it)."""
        self._listed[stage] = time.monotonic()
        index = self._index.setdefault(stage, {})
        known = self._rows.setdefault(stage, {})
        bad = self._bad.setdefault(stage, {})
        listed = {name: size for name, size, _ in self._files.listing(self._folder(stage))
                  if size >= 0 and name.endswith(_SUFFIX)}
        gone = [name for name in known if name not in listed]
        for name in gone:
            del known[name]
        for name in [n for n in bad if n not in listed]:
            del bad[name]
        for name, size in sorted(listed.items()):
            if name in known or name in bad:
                continue
            try:
                rows = _parse(self._head(stage, name, size))
            except FileNotFoundError:  # removed since the listing
                continue
            except (OSError, ValueError) as exc:
                bad[name] = str(exc)
                continue
            # a pack cut short still names its every entry: those past its end are damaged
            # (read from another pack holding them whole, if one does)
            known[name] = rows
            self._sizes[name] = size
            _place(index, name, rows, size)
        if gone:
            self._reindex(stage)

    def refresh(self, stage: str) -> None:
        """Look at the stage's packs again now (a pack read was gone: written again by
        another process)."""
        self._refresh(stage)

    def _head(self, stage: str, name: str, size: int) -> bytes:
        """A pack's first bytes, its index line whole (the whole file when it is short)."""
        path = self._path(stage, name)
        head = self._files.read_range(path, 0, min(size, 1 << 16))
        while b"\n" not in head[len(_MAGIC):] and len(head) < size:
            head = self._files.read_range(path, 0, min(size, 4 * len(head)))
        return head

    def find(self, stage: str, key: str) -> PackEntry | None:
        """Where ``key``'s entry lies in a pack of ``stage``; None when no pack holds it."""
        if stage not in self._index:
            self._refresh(stage)
        found = self._index[stage].get(key)
        if found is None and time.monotonic() - self._listed[stage] >= _REFRESH_S:
            self._refresh(stage)
            found = self._index[stage].get(key)
        for name, why in sorted(self._bad[stage].items()) if self._bad[stage] else ():
            if (stage, name) not in self._warned:
                self._warned.add((stage, name))
                warnings.warn(f"stage cache: the pack {self._path(stage, name)} is damaged "
                              f"({why}): the entries it held are computed again when needed "
                              f"(aiblox cache verify removes it)", stacklevel=3)
        return found

    def entries(self, stage: str) -> dict[str, tuple[int, float | None]]:
        """Every entry of the stage's packs (listed now): key -> its bytes on disk (its meta,
        its output and its row of the pack's index, the same in any pack; an entry two
        processes packed at once: both copies, which removing it frees) and when its newest
        pack was written. A pack holds 16 bytes more than its entries (:meth:`overhead`)."""
        self._refresh(stage)
        listing = self.listing(stage)
        when = {n: w for n, _, w in listing}
        sizes = {n: size for n, size, _ in listing}
        hidden = self._hidden.get(stage, {})
        out: dict[str, tuple[int, float | None]] = {}
        for name in sorted(self._rows[stage]):
            for key, at, m, o in self._rows[stage][name]:
                if key in hidden.get(name, ()):
                    continue
                size = _entry_bytes(key, m, o, sizes[name] - at if name in sizes else None)
                had, written = out.get(key, (0, None))
                times = [t for t in (written, when.get(name)) if t is not None]
                out[key] = (had + size, max(times) if times else None)
        return out

    def overhead(self, stage: str, emptied: set[str] | None = None) -> int:
        """The bytes of the stage's packs that are no entry's (16 a pack, the bytes past a cut
        short pack's last whole entry); with ``emptied``, of the packs whose every entry is
        among those keys only (what removing them frees beside the entries' bytes)."""
        self._refresh(stage)
        sizes = {n: size for n, size, _ in self.listing(stage)}
        total = 0
        for name, rows in self._rows.get(stage, {}).items():
            if name in sizes and (emptied is None or all(k in emptied for k, *_ in rows)):
                total += sizes[name] - sum(_entry_bytes(k, m, o, sizes[name] - at)
                                           for k, at, m, o in rows)
        return total

    def listing(self, stage: str) -> list[FileInfo]:
        """The files of the stage's packs folder (for sizes, ages and leftovers)."""
        return self._files.listing(self._folder(stage))

    def bad(self, stage: str) -> dict[str, str]:
        """The packs of ``stage`` whose index does not parse, and why."""
        self._refresh(stage)
        return dict(self._bad[stage])

    def read(self, stage: str, entry: PackEntry, output: bool) -> bytes:
        """An entry's meta bytes, or its output bytes; ``FileNotFoundError`` when its pack is
        gone, :class:`PackCutShort` when its bytes lie past the pack's end."""
        start = entry.at + (entry.meta_len if output else 0)
        n = entry.out_len if output else entry.meta_len
        data = self._files.read_range(self._path(stage, entry.pack), start, start + n)
        if len(data) != n:
            raise PackCutShort(f"its pack {entry.pack} is cut short: its "
                               f"{'output' if output else 'meta'} ends at byte {start + n}, "
                               f"past the pack's end")
        return data

    def add(self, stage: str, entries: list[tuple[str, bytes, bytes]]) -> str | None:
        """Publish one pack of ``(key, meta bytes, output bytes)`` entries and index it; its
        name (None for no entries)."""
        if not entries:
            return None
        data = pack_bytes(entries)
        name = sha256_bytes(data)[:32] + _SUFFIX
        self._files.write(self._path(stage, name), data)
        if stage not in self._index:
            self._refresh(stage)
        rows = self._rows[stage][name] = _parse(data)
        self._sizes[name] = len(data)
        for key, at, meta_len, out_len in rows:
            self._index[stage][key] = PackEntry(name, at, meta_len, out_len)
        return name

    def hide(self, stage: str, keys: set[str]) -> None:
        """Remove the entries ``keys`` of ``stage`` for this object's readers now, from their
        packs at :meth:`commit` (a batch's repairs: each pack written again once, not once an
        entry)."""
        if stage not in self._index:
            self._refresh(stage)
        for name, rows in self._rows[stage].items():
            held = keys.intersection(r[0] for r in rows)
            if held:
                self._hidden.setdefault(stage, {}).setdefault(name, set()).update(held)
        self._reindex(stage)

    def commit(self) -> dict[str, set[str]]:
        """Write every pack holding hidden entries again without them (:meth:`hide`); per
        stage, the other entries dropped as damaged (:meth:`_rewrite`)."""
        hidden, self._hidden = self._hidden, {}
        dropped = {stage: self._rewrite(stage, hidden[stage]) for stage in sorted(hidden)}
        return {stage: keys for stage, keys in dropped.items() if keys}

    def drop(self, stage: str, keys: set[str]) -> set[str]:
        """Remove the entries ``keys`` from every pack of ``stage`` holding one, now; the
        other entries dropped as damaged (:meth:`_rewrite`)."""
        self.hide(stage, keys)
        return self._rewrite(stage, self._hidden.pop(stage, {}))

    def _rewrite(self, stage: str, packs: dict[str, set[str]]) -> set[str]:
        """Write each pack named in ``packs`` again without its keys there (the new one first,
        with the old one's time: its entries' age is unchanged), then remove it; the packs
        folder too once empty. Returns the keys of the other entries not written again, their
        bytes not whole (damaged entries no reader had looked at: gone, so the caller counts
        them, as a reader that found them would have)."""
        known = self._rows.setdefault(stage, {})
        packs = {n: keys for n, keys in packs.items() if n in known}
        dropped: set[str] = set()
        if not packs:
            return dropped
        when = {n: w for n, _, w in self.listing(stage)}
        for name, keys in sorted(packs.items()):
            path = self._path(stage, name)
            rows = known.pop(name)
            try:
                entries = read_pack(self._files.read(path))
            except FileNotFoundError:  # written again by another process: its entries there
                entries, rows = [], []
            except (OSError, ValueError):  # not a pack any more: nothing to keep
                entries = []
            # only whole entries are written again: a pack another process is repairing at
            # the same time keeps none of the damaged ones either of them found
            kept = [e for e in entries if e[0] not in keys and self._whole(stage, *e)]
            held = {k for k, *_ in kept}
            dropped.update(k for k, *_ in rows if k not in keys and k not in held)
            new = self.add(stage, kept)
            written = when.get(name)
            if new is not None and new != name and written is not None:
                self._files.set_time(self._path(stage, new), written)
            if new != name:
                with contextlib.suppress(FileNotFoundError):
                    self._files.unlink(path)
        self._reindex(stage)
        if not known and not self._bad.get(stage):
            self._files.remove_folder(self._folder(stage))
        still = set(self._index.get(stage, {}))  # held whole by another pack: not lost
        return dropped - still

    def _reindex(self, stage: str) -> None:
        """The stage's index from its packs' rows, hidden entries left out."""
        hidden = self._hidden.get(stage, {})
        index: dict[str, PackEntry] = {}
        for name in sorted(self._rows[stage]):
            _place(index, name, [r for r in self._rows[stage][name]
                                 if r[0] not in hidden.get(name, ())], self._sizes.get(name))
        self._index[stage] = index
