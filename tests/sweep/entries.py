"""Stage cache entries where they lie, for tests that damage them: in a pack (a sweep's points:
:mod:`aiblox.engine.cache_packs`) or in their own two files (``<key>.meta.json`` and
``<key>.bin`` / ``<key>.json.gz``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from aiblox.engine.cache_packs import PACKS, pack_bytes, read_pack


def _out_name(key: str, meta: bytes) -> str:
    return f"{key}.bin" if json.loads(meta).get("codec") == "arrays" else f"{key}.json.gz"


def unpack(root: Path) -> None:
    """Every pack of the cache at ``root`` written out as its entries' own files (the layout
    of a cache written outside a batch), the packs removed."""
    for packs in sorted(root.glob(f"*/{PACKS}")):
        for pack in sorted(packs.glob("*.pack")):
            for key, meta, out in read_pack(pack.read_bytes()):
                if json.loads(meta).get("stored", True) is not False:
                    (packs.parent / _out_name(key, meta)).write_bytes(out)
                (packs.parent / f"{key}.meta.json").write_bytes(meta)
            pack.unlink()
        packs.rmdir()


def keys(root: Path, stage: str) -> list[str]:
    """The keys of every entry of ``stage``, packed or not, sorted."""
    found = {p.name.removesuffix(".meta.json") for p in (root / stage).glob("*.meta.json")}
    for pack in (root / stage).glob(f"{PACKS}/*.pack"):
        found.update(k for k, _, _ in read_pack(pack.read_bytes()))
    return sorted(found)


def read(root: Path, stage: str, key: str) -> tuple[bytes, bytes]:
    """An entry's meta and output bytes (b"" for a recorded entry's output)."""
    meta = root / stage / f"{key}.meta.json"
    if meta.exists():
        m = meta.read_bytes()
        out = root / stage / _out_name(key, m)
        return m, out.read_bytes() if out.exists() else b""
    for pack in sorted((root / stage).glob(f"{PACKS}/*.pack")):
        for k, m, o in read_pack(pack.read_bytes()):
            if k == key:
                return m, o
    raise KeyError(f"{stage}/{key} is in no file and no pack")


def change(root: Path, stage: str, key: str, which: str,
           damage: Callable[[bytes], bytes | None]) -> None:
    """``damage`` an entry's ``meta`` or ``out`` bytes where they lie (its own file, or its
    place in its pack, the pack's index saying the new length); None removes them."""
    meta = root / stage / f"{key}.meta.json"
    if meta.exists():
        path = meta if which == "meta" else root / stage / _out_name(key, meta.read_bytes())
        new = damage(path.read_bytes())
        if new is None:
            path.unlink()
        else:
            path.write_bytes(new)
        return
    for pack in sorted((root / stage).glob(f"{PACKS}/*.pack")):
        entries = read_pack(pack.read_bytes())
        if all(k != key for k, _, _ in entries):
            continue
        kept = []
        for k, m, o in entries:
            if k == key:
                new = damage(m if which == "meta" else o)
                if new is None and which == "meta":
                    continue  # the entry gone from its pack
                m, o = (new, o) if which == "meta" else (m, new or b"")
            kept.append((k, m, o))
        pack.write_bytes(pack_bytes(kept))
        return
    raise KeyError(f"{stage}/{key} is in no file and no pack")
