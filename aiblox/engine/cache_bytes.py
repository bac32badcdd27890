"""The bytes of a stage cache entry: an ``arrays`` output's canonical encoding (named numpy
arrays, for outputs such as a fused run or per-query metrics) and a meta's checksum
(:class:`~aiblox.engine.cache.StageCache` writes and checks both)."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from typing import Any

import numpy as np

from aiblox.hashing import canonical_plain_json, sha256_bytes

__all__ = ["HashedArrays", "arrays_sha256", "decode_arrays", "encode_arrays", "encoded_output",
           "entry_whole", "meta_bytes", "meta_sum_ok"]

_ARRAYS_MAGIC = b"aiblox-arrays/1\n"
_META_SUM = re.compile(rb'"meta_sha256":"([0-9a-f]{64})",')
"""A meta's checksum field, as its canonical JSON writes it (``meta_sha256`` sorts between
``key`` and ``name``, so a comma always follows it)."""


def meta_bytes(meta: dict[str, Any]) -> bytes:
    """A meta's file: its canonical JSON with ``meta_sha256``, the sha256 of that JSON without
    the field, so that a meta damaged into other JSON (a flipped hex digit of an input key or an
    output hash) is caught when read, not passed on into a point's manifest."""
    plain = canonical_plain_json(meta).encode("utf-8")
    return canonical_plain_json({**meta, "meta_sha256": sha256_bytes(plain)}).encode("utf-8")


def meta_sum_ok(data: bytes) -> bool:
    """Whether a meta file's checksum matches the rest of its bytes (True for a meta written
    before metas carried one)."""
    found = _META_SUM.search(data)
    if found is None:
        return b'"meta_sha256"' not in data
    rest = data[:found.start()] + data[found.end():]
    return sha256_bytes(rest) == found.group(1).decode("ascii")


class HashedArrays(dict[str, np.ndarray]):
    """Named arrays with their :func:`arrays_sha256` already computed (outputs computed ahead
    hash on several threads at once: :func:`aiblox.engine.ahead.batches_ahead`). It holds
    read-only views, so no reader can change what the hash is of; the caller hands over
    arrays it no longer writes."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        super().__init__()
        for name, a in arrays.items():
            a = a.view()
            a.flags.writeable = False
            self[name] = a
        self.sha256 = arrays_sha256(dict(self))


def arrays_sha256(arrays: dict[str, np.ndarray]) -> str:
    """sha256 of :func:`encode_arrays`' bytes, fed array by array (no joined copy: a recorded
    entry, a hybrid point's fused run, needs only its hash)."""
    import hashlib

    if isinstance(arrays, HashedArrays):
        return arrays.sha256
    digest = hashlib.sha256()
    for part in _parts(arrays):
        digest.update(part)
    return digest.hexdigest()


def _parts(arrays: dict[str, np.ndarray]) -> list[Any]:
    """:func:`encode_arrays`' bytes in pieces: the magic line, the header line, each array's
    buffer."""
    names = sorted(arrays)
    arrs = [np.ascontiguousarray(arrays[n]) for n in names]
    arrs = [a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a for a in arrs]
    header = canonical_plain_json([[n, a.dtype.newbyteorder("<").str, list(a.shape)]
                                   for n, a in zip(names, arrs, strict=True)])
    return [_ARRAYS_MAGIC, header.encode("utf-8") + b"\n",
            *(a.data.cast("B") if a.size else b"" for a in arrs)]


def encode_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    """Canonical bytes of named arrays: a magic line, one canonical-JSON header line (names in
    sorted order with dtype and shape), then each array's raw little-endian C-order bytes."""
    return b"".join(_parts(arrays))


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


def encoded_output(output: Any, codec: str, need_bytes: bool = True) -> tuple[bytes, str]:
    """A stage output's canonical bytes (before compression; b"" for an ``arrays`` output when
    not ``need_bytes``) and their sha256, its output hash."""
    if codec == "arrays":
        if not need_bytes:
            return b"", arrays_sha256(output)
        data = encode_arrays(output)
        return data, sha256_bytes(data)
    data = canonical_plain_json(output).encode("utf-8")
    return data, sha256_bytes(data)


def entry_whole(name: str, key: str, meta: bytes, out: bytes) -> bool:
    """Whether a packed entry's bytes are whole: its meta parses, names it and matches its
    checksum; its output (when stored) has the recorded size and sha256."""
    try:
        m = json.loads(meta.decode("utf-8"))
        if not isinstance(m, dict) or m.get("key") != key or m.get("name") != name \
                or not meta_sum_ok(meta):
            return False
        if m.get("stored") is False:
            return True
        if m.get("size", len(out)) != len(out):
            return False
        data = out if m.get("codec") == "arrays" else gzip.decompress(out)
        return bool(sha256_bytes(data) == m.get("output_hash"))
    except (ValueError, OSError, EOFError, zlib.error):
        return False
