"""Stage keys and the on-disk stage cache.

A stage's key is the sha256 of its name, its version, its config and the keys of its inputs, so
it changes exactly when something that decides the stage's output changes, and everything
downstream of a changed stage gets a new key too. Outputs are memoised by key on disk::

    <root>/<stage>/<key>.json.gz    the output (canonical JSON, gzip), or
    <root>/<stage>/<key>.bin        the output of an ``arrays`` stage (see :func:`encode_arrays`)
    <root>/<stage>/<key>.meta.json  name, version, config, input keys, output hash, codec

The output hash is the sha256 of the stored bytes before compression: canonical JSON, or for
``arrays`` outputs (named numpy arrays, e.g. a fused run as flat positions and scores) the
header-and-raw-bytes encoding, which costs a few milliseconds where JSON of the same run costs
a quarter of a second.

The meta file is written last (atomically), so it marks a complete entry: a sweep killed
mid-write leaves no meta and the stage is simply recomputed. The cache counts, per stage, how
many outputs it computed and how many it reused, which is how tests prove a re-run recomputes
nothing.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from aiblox.hashing import canonical_json, sha256_bytes, sha256_text

__all__ = ["StageCache", "StageRecord", "decode_arrays", "encode_arrays", "stage_key"]

_ARRAYS_MAGIC = b"aiblox-arrays/1\n"


def encode_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    """Canonical bytes of named arrays: a magic line, one canonical-JSON header line (names in
    sorted order with dtype and shape), then each array's raw little-endian C-order bytes."""
    names = sorted(arrays)
    arrs = [np.ascontiguousarray(arrays[n]) for n in names]
    arrs = [a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a for a in arrs]
    header = canonical_json([[n, a.dtype.newbyteorder("<").str, list(a.shape)]
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


def stage_key(name: str, version: str | int, config: Any, inputs: Sequence[str] = ()) -> str:
    """sha256 of ``{"name", "version", "config", "inputs"}`` in canonical JSON."""
    return sha256_text(_canonical({"name": name, "version": str(version), "config": config,
                                   "inputs": list(inputs)}))


@dataclass(frozen=True)
class StageRecord:
    """What the manifest records of one stage execution (or reuse)."""

    name: str
    version: str
    key: str
    inputs: tuple[str, ...]
    output_hash: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON form (for manifests)."""
        return {"name": self.name, "version": self.version, "key": self.key,
                "inputs": list(self.inputs), "output_hash": self.output_hash}


_TMP_SEQ = itertools.count()


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` under a temporary name unique to this process and thread, then rename it
    into place: a reader never sees a partial file, and parallel writers of one key (same
    bytes) simply replace each other. The folder is made when missing."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}-"
                         f"{next(_TMP_SEQ)}.tmp")
    try:
        try:
            f = open(tmp, "wb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            f = open(tmp, "wb")  # noqa: SIM115
        with f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _canonical(value: Any) -> str:
    """:func:`canonical_json` without its recursive pass over plain data (runs of 10^5 pairs):
    the same bytes for dicts, lists, tuples, str, int, float, bool and None."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except TypeError:  # pydantic models, numpy scalars, sets: the general path
        return canonical_json(value)


class StageCache:
    """Content-addressed memo of stage outputs under ``root`` (safe for parallel writers:
    two processes computing the same key write the same bytes)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.computed: dict[str, int] = {}
        """Per stage name: outputs computed by this cache object."""
        self.reused: dict[str, int] = {}
        """Per stage name: outputs read back instead of computed."""
        self._lock = threading.Lock()

    def _paths(self, name: str, key: str, codec: str = "json") -> tuple[Path, Path]:
        folder = self.root / name
        out = f"{key}.bin" if codec == "arrays" else f"{key}.json.gz"
        return folder / out, folder / f"{key}.meta.json"

    def has(self, name: str, key: str) -> bool:
        """True when a complete entry exists."""
        return self._paths(name, key)[1].exists()

    def meta(self, name: str, key: str) -> dict[str, Any]:
        """The small meta record of an entry (no output)."""
        return json.loads(self._paths(name, key)[1].read_text(encoding="utf-8"))

    def record(self, name: str, key: str) -> StageRecord:
        """The :class:`StageRecord` of a complete entry."""
        m = self.meta(name, key)
        return StageRecord(m["name"], m["version"], m["key"], tuple(m["inputs"]),
                           m["output_hash"])

    def load(self, name: str, key: str) -> Any:
        """The output of a complete entry (named arrays for an ``arrays`` stage)."""
        if self.meta(name, key).get("codec") == "arrays":
            return decode_arrays(self._paths(name, key, "arrays")[0].read_bytes())
        with gzip.open(self._paths(name, key)[0], "rt", encoding="utf-8") as f:
            return json.load(f)

    def store(self, name: str, version: str | int, config: Any, inputs: Sequence[str],
              output: Any, codec: Literal["json", "arrays"] = "json") -> StageRecord:
        """Write an output under its key; returns its record. ``codec="arrays"``: ``output`` is
        a dict of numpy arrays, stored (and hashed) as :func:`encode_arrays` bytes."""
        key = stage_key(name, version, config, inputs)
        out_path, meta_path = self._paths(name, key, codec)
        if codec == "arrays":
            data = encode_arrays(output)
            rec = StageRecord(name, str(version), key, tuple(inputs), sha256_bytes(data))
            _atomic_write(out_path, data)
        else:
            text = _canonical(output)
            rec = StageRecord(name, str(version), key, tuple(inputs), sha256_text(text))
            _atomic_write(out_path, gzip.compress(text.encode("utf-8"), compresslevel=1,
                                                  mtime=0))
        meta = {**rec.as_dict(), "config": config, **({"codec": codec} if codec != "json" else {})}
        _atomic_write(meta_path, _canonical(meta).encode("utf-8"))
        return rec

    def run(self, name: str, version: str | int, config: Any, inputs: Sequence[str],
            compute: Callable[[], Any], load: bool = True,
            codec: Literal["json", "arrays"] = "json") -> tuple[StageRecord, Any]:
        """Memoised stage: reuse the entry for this key, or ``compute()`` and store it.

        With ``load=False`` a reused entry's output is not read (None is returned in its
        place): callers that only need the record skip the decompression.
        """
        key = stage_key(name, version, config, inputs)
        if self.has(name, key):
            self._count(self.reused, name)
            return self.record(name, key), (self.load(name, key) if load else None)
        output = compute()
        rec = self.store(name, version, config, inputs, output, codec)
        self._count(self.computed, name)
        return rec, output

    def _count(self, counter: dict[str, int], name: str) -> None:
        with self._lock:
            counter[name] = counter.get(name, 0) + 1
