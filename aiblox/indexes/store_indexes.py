"""A store's derived indexes: built from its items, saved beside it, never served stale.

The store (DuckDB or PostgreSQL) is the system of record; the BM25 index and the vector indexes
are derived data, each in a folder of its own under the store's index root::

    <store>.duckdb.indexes/bm25-<key>/     manifest.json, data.npy, indices.npy, ...
    <store>.duckdb.indexes/knn-<key>/      manifest.json, vectors.npy, ids.json[, hnsw.faiss]
    <store>.duckdb.indexes/terms-<key>/    manifest.json, doc_ptr.npy, cols.npy, tfs.npy, ...

(a PostgreSQL store's root is ``$AIBLOX_INDEX_DIR`` or ``.aiblox/indexes/<db>-<hash>``; an
in-memory store's, a temporary folder). A key is the sha256 of the index kind and version, its
configuration and the digest of what it was built from (the items, or one model's vectors:
:func:`aiblox.stores.identity.store_fingerprint`), so a store whose items changed asks for
another key and gets a freshly built index; an index is never served for content it was not
built from. Builds are published atomically (a temporary folder renamed into place) and show a
progress bar; the manifest records each file's size and sha256, checked before an index is first
used in a process, so a corrupt, truncated or foreign index is rebuilt, never trusted. The sha256
check is not repeated while the files keep the size and modification time they had when it last
passed (:data:`VERIFIED`).

A build's temporary folder (``.tmp-<pid>-<name>-<random>``, and an in-memory store's root,
``aiblox-index-root-<pid>-<random>`` in the system's temporary folder) is held by its process: an
exclusive ``flock`` on its ``.lock`` file, which the kernel releases when the process ends,
killed or not. The next build (and ``drop``) removes the temporary folders no live process
holds, and never one a concurrent builder holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.compiled import usable_cores
from aiblox.contracts.retrieval import FtsConfig, VectorConfig
from aiblox.hashing import sha256_hex
from aiblox.indexes.bm25 import BM25_VERSION, BM25Index
from aiblox.indexes.bm25_counts import PARALLEL_FROM_DOCS
from aiblox.indexes.knn import KNN_VERSION, VectorIndex, effective_kind
from aiblox.indexes.passages import PassageIndex, PassageStats, passage_chunker_id
from aiblox.indexes.term_stats import TERMS_VERSION, TermStats, term_stats_spec
from aiblox.processes import pid_alive
from aiblox.progress import phase, progress_bar
from aiblox.stores.base import Store, StoreError
from aiblox.stores.identity import store_fingerprint, stored_counts

__all__ = ["IndexInfo", "StoreIndexes", "forget_loaded", "index_root", "read_index_manifest",
           "remove_abandoned"]

_LOADED: dict[tuple[str, str], Any] = {}
"""Indexes loaded (and checked) in this process, by (root, folder name)."""
_LOCK = threading.Lock()


def forget_loaded() -> None:
    """Drop every index this process loaded: the next use reads (and checks) the files again."""
    with _LOCK:
        _LOADED.clear()


@dataclass(frozen=True)
class IndexInfo:
    """One index folder, as ``aiblox index list`` shows it."""

    name: str
    kind: str
    size_bytes: int
    built_at: str
    n: int
    config: dict[str, Any]
    current: bool
    """True when the store's content is what the index was built from (and it is not damaged)."""
    ok: bool
    """False when the index is damaged, rebuilt when next used: the manifest is missing,
    unreadable or not of the shape a build writes (:func:`read_index_manifest`), or a file it
    lists is missing or of another size (what a listing can see without reading every byte; a
    file of the right size whose sha256 differs is found when the index is next used)."""
    problem: str | None = None
    """Why the index is damaged (``data.npy has the wrong size``); None when it is not."""


def index_root(store: Store) -> Path:
    """Where a store's indexes live (see the module doc)."""
    env = os.environ.get("AIBLOX_INDEX_DIR")
    digest = hashlib.sha256(store.location.encode("utf-8")).hexdigest()[:12]
    if store.kind == "duckdb" and store.location != ":memory:":
        return Path(f"{store.location}.indexes")
    if env:
        return Path(env) / f"{store.kind}-{digest}"
    if store.kind == "duckdb":  # in memory: a temporary folder that lives as long as the store
        own = getattr(store, "_aiblox_index_tmp", None)
        if own is None:
            temp = Path(tempfile.gettempdir())
            remove_abandoned(temp, MEMORY_ROOT_PREFIX)  # of processes gone (killed)
            own = tempfile.mkdtemp(prefix=f"{MEMORY_ROOT_PREFIX}{os.getpid()}-", dir=temp)
            held = _hold(Path(own))
            weakref.finalize(store, _release, Path(own), held)
            store._aiblox_index_tmp = own  # type: ignore[attr-defined]
        return Path(own)
    return Path(".aiblox") / "indexes" / f"{store.kind}-{digest}"


BUILD_PREFIX = ".tmp-"
"""Prefix of a build's temporary folder under the index root."""
MEMORY_ROOT_PREFIX = "aiblox-index-root-"
"""Prefix of an in-memory store's index root in the system's temporary folder."""
LOCK_FILE = ".lock"
"""The file in a temporary folder its process holds an exclusive ``flock`` on."""
LEGACY_TMP_AGE_S = 24 * 3600
"""Temporary build folders of older versions (``.bm25-*``, ``.knn-*``, no lock) are removed
once this old."""


def _hold(folder: Path) -> int | None:
    """Take an exclusive ``flock`` on ``folder/.lock``, held while the returned descriptor is
    open (or until the process ends); None where ``flock`` does not exist."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the pid in the name decides
        return None
    fd = os.open(folder / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _release(folder: Path, held: int | None) -> None:
    """Remove a temporary folder this process holds, then let go of it."""
    shutil.rmtree(folder, ignore_errors=True)
    if held is not None:
        os.close(held)


def _pid_gone(name: str, prefix: str) -> bool:
    """The process whose pid the folder name carries (``<prefix><pid>-...``) has ended."""
    head = name[len(prefix):].split("-", 1)[0]
    return head.isdigit() and not pid_alive(int(head))


def _abandoned(folder: Path, prefix: str) -> bool:
    """True when no live process holds ``folder``: nobody holds the ``flock`` on its lock
    file, or (no lock file yet) the pid in its name has ended."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return _pid_gone(folder.name, prefix)
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:
        return _pid_gone(folder.name, prefix)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its process is alive
        return False
    finally:
        os.close(fd)
    return True


def remove_abandoned(parent: Path, prefix: str) -> list[str]:
    """Remove the temporary folders ``parent/<prefix>*`` whose process has ended (a killed
    build's); never one a live process holds. Returns the names removed."""
    removed: list[str] = []
    try:
        candidates = sorted(p for p in parent.iterdir() if p.name.startswith(prefix))
    except OSError:
        return removed
    for p in candidates:
        if p.is_dir() and not p.is_symlink() and _abandoned(p, prefix):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed


def _remove_legacy(root: Path) -> None:
    """Temporary build folders of older versions (``.bm25-<key>-<random>``, no lock file),
    removed once :data:`LEGACY_TMP_AGE_S` old (a live build of those versions that long is
    implausible)."""
    try:
        folders = [p for p in root.iterdir() if p.name.startswith((".bm25-", ".knn-"))]
    except OSError:
        return
    for p in folders:
        try:
            old = time.time() - p.stat().st_mtime > LEGACY_TMP_AGE_S
        except OSError:
            continue
        if p.is_dir() and old and not (p / LOCK_FILE).exists():
            shutil.rmtree(p, ignore_errors=True)


def _progress_bar(total: int, desc: str) -> Any:
    return progress_bar(total, desc, unit="doc", leave=False)


VERIFIED = "verified.json"
"""Beside an index's manifest: when its files' sha256 last matched the manifest, and the size
and modification time (ns) each had then. While they still match, and the files were last
modified well before that check (:data:`RACY_S`), opening the index trusts them; any change
means a real check, every sha256, again."""

RACY_S = 2.0
"""A file modified less than this before its check is checked again next time: a write in the
same clock tick as the check could keep its recorded modification time (git's "racy" rule)."""


def _read_verified(folder: Path) -> dict[str, list[int]] | None:
    """The files' recorded ``[size, mtime_ns]`` when every one was modified well before its
    check was recorded; None otherwise, or when there is no readable record."""
    try:
        got = json.loads((folder / VERIFIED).read_text(encoding="utf-8"))
        at, files = int(got["at_ns"]), got["files"]
        if not isinstance(files, dict) or any(
                v[1] > at - RACY_S * 1e9 for v in files.values()):
            return None
        return files
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def _write_verified(folder: Path, seen: dict[str, list[int]]) -> None:
    """Record ``seen`` (just checked) atomically; best effort (a read-only index folder is
    checked every time)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{VERIFIED}-", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"at_ns": time.time_ns(), "files": seen}, fh, sort_keys=True)
        os.replace(tmp, folder / VERIFIED)
    except OSError:
        pass


MANIFEST = "manifest.json"
"""An index folder's record of its key, spec and files (written last, by :meth:`_publish`)."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_index_manifest(folder: Path) -> dict[str, Any] | None:
    """``folder``'s manifest when it is readable JSON of the shape a build writes: an object
    with a ``key`` (string), a ``spec`` (object), ``n`` (integer) and ``files``, each a plain
    file name mapped to ``{"size": integer >= 0, "sha256": string}``; None otherwise (no
    readable manifest: such an index is rebuilt as damaged, listed as damaged). Valid JSON of
    another shape (``[]``, a size that is a string) once crashed every command that met it."""
    try:
        m = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(m, dict) or not isinstance(m.get("key"), str) \
            or not isinstance(m.get("spec"), dict) or not _is_int(m.get("n")) \
            or not isinstance(m.get("built_at", ""), str):
        return None
    files = m.get("files")
    if not isinstance(files, dict):
        return None
    for fname, meta in files.items():
        if (fname in ("", ".", "..") or "/" in fname or "\\" in fname
                or not isinstance(meta, dict) or not _is_int(meta.get("size"))
                or meta["size"] < 0 or not isinstance(meta.get("sha256"), str)):
            return None
    return m


def _check_sizes(folder: Path, files: dict[str, Any], seen: dict[str, list[int]]) -> str | None:
    """None when every file a manifest lists is in ``folder`` at its recorded size (each one's
    size and mtime put in ``seen``); else the reason. Cheap: no byte is read."""
    for fname, meta in files.items():
        try:
            st = (folder / fname).stat()
        except OSError:
            return f"{fname} is missing"
        if st.st_size != meta["size"]:
            return f"{fname} has the wrong size"
        seen[fname] = [st.st_size, st.st_mtime_ns]
    return None


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


class StoreIndexes:
    """The BM25 and vector indexes of one store: found, checked, built when missing."""

    def __init__(self, store: Store, root: str | Path | None = None) -> None:
        self.store = store
        self.root = Path(root) if root is not None else index_root(store)
        self.built: list[str] = []
        """Folder names this object built (for reports and tests)."""
        self.rebuilt: list[str] = []
        """Folder names found damaged and built again."""
        self.damage: dict[str, str] = {}
        """Why each folder of :attr:`rebuilt` was found damaged (``data.npy does not match its
        sha256``, ``no readable manifest``)."""
        self.passage_stats: PassageStats | None = None
        """What the last passage build of this object did (None: none built)."""
        self._swept = False

    # -- keys ------------------------------------------------------------------------------------
    def lexical_key(self, cfg: FtsConfig) -> tuple[str, dict[str, Any]]:
        fp = store_fingerprint(self.store, None)
        spec = {"kind": "bm25", "version": BM25_VERSION, "items": fp["items"],
                "analysis": cfg.analysis(), "scoring": cfg.scoring()}
        return sha256_hex(spec), spec

    def vector_key(self, model_id: str, cfg: VectorConfig) -> tuple[str, dict[str, Any]]:
        fp = store_fingerprint(self.store, model_id)
        n = stored_counts(self.store, model_id)[1]  # the sync record's, else counted
        kind = effective_kind(cfg, n or 0)
        spec: dict[str, Any] = {"kind": "knn", "version": KNN_VERSION, "vectors": fp["vectors"],
                                "model": model_id, "distance": cfg.distance, "index": kind}
        if kind == "hnsw":
            spec["hnsw"] = {"m": cfg.hnsw_m, "ef_construction": cfg.ef_construction}
        return sha256_hex(spec), spec

    # -- the indexes -----------------------------------------------------------------------------
    def lexical(self, cfg: FtsConfig) -> BM25Index:
        """The store's BM25 index for ``cfg``'s analysis and scoring (built when missing)."""
        key, spec = self.lexical_key(cfg)
        name = f"bm25-{key[:16]}"

        def build(folder: Path) -> tuple[list[str], int]:
            n = self.store.count_items()
            bar = _progress_bar(n, "index bm25")
            try:
                workers = usable_cores() if n >= PARALLEL_FROM_DOCS else 1
                index = BM25Index.build(self.store.iter_item_texts(), cfg, progress=bar.update,
                                        workers=workers)
            finally:
                bar.close()
            return index.save(folder), index.n_docs

        index: BM25Index = self._get(name, key, spec, build,
                                     lambda folder: BM25Index.load(folder, cfg))
        return index

    def term_stats_key(self, cfg: FtsConfig) -> tuple[str, dict[str, Any]]:
        fp = store_fingerprint(self.store, None)
        spec = {"kind": "terms", "version": TERMS_VERSION, "items": fp["items"],
                **term_stats_spec(cfg)}
        return sha256_hex(spec), spec

    def term_stats(self, cfg: FtsConfig) -> TermStats:
        """The store's raw term statistics under ``cfg``'s analysis (feedback: RM3, Bo1;
        :mod:`aiblox.indexes.term_stats`), built when missing; one per analysis, whatever
        the BM25 scoring settings."""
        key, spec = self.term_stats_key(cfg)
        name = f"terms-{key[:16]}"

        def build(folder: Path) -> tuple[list[str], int]:
            bar = _progress_bar(self.store.count_items(), "index terms")
            try:
                stats = TermStats.build(self.store.iter_item_texts(), cfg, progress=bar.update)
            finally:
                bar.close()
            return stats.save(folder), stats.n_docs

        stats: TermStats = self._get(name, key, spec, build,
                                     lambda folder: TermStats.load(folder, cfg))
        return stats

    def vectors(self, model_id: str, cfg: VectorConfig) -> VectorIndex:
        """The store's vector index of ``model_id`` for ``cfg`` (built when missing)."""
        key, spec = self.vector_key(model_id, cfg)
        name = f"knn-{key[:16]}"

        def build(folder: Path) -> tuple[list[str], int]:
            with phase(f"index vectors {model_id} {cfg.index}"):
                ids, matrix = self.store.item_vectors(model_id)
                index = VectorIndex.build(ids, matrix, cfg)
                return index.save(folder), index.n

        index: VectorIndex = self._get(name, key, spec, build,
                                       lambda folder: VectorIndex.load(folder, cfg,
                                                                       spec["index"]))
        return index

    def passages(self, embedder: Any, cfg: VectorConfig) -> PassageIndex:
        """The store's passages under ``cfg`` (``doc_score`` other than ``first``) with their
        vectors by ``embedder`` (:class:`~aiblox.indexes.passages.PassageIndex`): read from the
        store's chunk cache, chunked and embedded where missing, held in memory for this
        process by (items digest, passage chunker, model)."""
        from aiblox.stores.chunk_cache import default_chunk_cache

        chunker_id = passage_chunker_id(cfg)
        if chunker_id is None:
            raise ValueError("doc_score 'first' uses the vector index, not passages")
        items = store_fingerprint(self.store, None)["items"]
        memo = (str(self.root.resolve()),
                "passages-" + sha256_hex([items, chunker_id, embedder.model_id]))
        with _LOCK:
            if memo in _LOADED:
                return _LOADED[memo]
        bar = _progress_bar(self.store.count_items(), f"passages {chunker_id}")
        stats = PassageStats()
        try:
            items_iter = (it for batch in self.store.iter_items() for it in batch)
            index = PassageIndex.build(items_iter, cfg, embedder,
                                       default_chunk_cache(self.store), bar.update, stats)
        finally:
            bar.close()
        self.passage_stats = stats
        with _LOCK:
            _LOADED[memo] = index
        return index

    def _get(self, name: str, key: str, spec: dict[str, Any], build: Any, load: Any) -> Any:
        cache_key = (str(self.root.resolve()), name)
        with _LOCK:
            if cache_key in _LOADED:
                return _LOADED[cache_key]
        if not self._swept and self.root.is_dir():  # killed builds' folders, once
            remove_abandoned(self.root, BUILD_PREFIX)
            self._swept = True
        folder = self.root / name
        problem = self._check(folder, key) if folder.exists() else "missing"
        if problem is not None:
            if problem != "missing":
                self.rebuilt.append(name)
                self.damage[name] = problem
            self._publish(folder, key, spec, build)
            self.built.append(name)
            self._drop_superseded(name, spec)
        index = load(folder)
        with _LOCK:
            _LOADED[cache_key] = index
        return index

    def _check(self, folder: Path, key: str) -> str | None:
        """None when the folder holds a complete, intact index of ``key``; else the reason."""
        manifest = read_index_manifest(folder)
        if manifest is None:
            return "no readable manifest"
        if manifest["key"] != key:
            return "built from other content or settings"
        files = manifest["files"]
        seen: dict[str, list[int]] = {}
        problem = _check_sizes(folder, files, seen)
        if problem is not None:
            return problem
        if _read_verified(folder) == seen:  # checked before, and untouched since
            return None
        mib = sum(v[0] for v in seen.values()) / 2**20  # a large index says what it does
        with phase(f"check {folder.name} (sha256 of {mib:,.0f} MiB, once)", mib >= 256):
            for fname, meta in files.items():
                if _file_digest(folder / fname) != meta["sha256"]:
                    return f"{fname} does not match its sha256"
        _write_verified(folder, seen)
        return None

    def _publish(self, folder: Path, key: str, spec: dict[str, Any], build: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        remove_abandoned(self.root, BUILD_PREFIX)  # killed builds' folders, never a live one's
        _remove_legacy(self.root)
        tmp = Path(tempfile.mkdtemp(prefix=f"{BUILD_PREFIX}{os.getpid()}-{folder.name}-",
                                    dir=self.root))
        held = None
        try:
            held = _hold(tmp)
            t0 = time.perf_counter()
            files, n = build(tmp)
            manifest = {
                "key": key, "name": folder.name, "spec": spec, "n": n,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_s": round(time.perf_counter() - t0, 3),
                "files": {f: {"size": (tmp / f).stat().st_size, "sha256": _file_digest(tmp / f)}
                          for f in sorted(files)},
            }
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True),
                                        encoding="utf-8")
            (tmp / LOCK_FILE).unlink()  # not part of the index (the pid in the name holds it)
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        except OSError as exc:
            raise StoreError(f"cannot write the index {folder}: {exc.strerror or exc}") from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            if held is not None:
                os.close(held)

    def _drop_superseded(self, name: str, spec: dict[str, Any]) -> None:
        """Remove indexes of the same kind and settings built from older content."""
        same = {k: v for k, v in spec.items() if k not in ("items", "vectors")}
        for info in self._manifests():
            if info.get("name") == name:
                continue
            other = info.get("spec", {})
            if {k: v for k, v in other.items() if k not in ("items", "vectors")} == same:
                self.drop(info["name"])

    # -- listing ---------------------------------------------------------------------------------
    def _manifests(self) -> list[dict[str, Any]]:
        """Every index folder's manifest (:func:`read_index_manifest`), ``name`` its folder's; a
        folder without a readable one as ``{"name": ...}`` alone."""
        out: list[dict[str, Any]] = []
        if not self.root.is_dir():
            return out
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir()
                             and not p.name.startswith(".")):
            m = read_index_manifest(folder)
            out.append({"name": folder.name} if m is None else {**m, "name": folder.name})
        return out

    def infos(self) -> list[IndexInfo]:
        """Every index folder under the root, with its size, age, settings and state."""
        fp_items = store_fingerprint(self.store, None)["items"]
        infos = []
        for m in self._manifests():
            folder = self.root / m["name"]
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            problem = ("no readable manifest" if "key" not in m
                       else _check_sizes(folder, m["files"], {}))
            ok = problem is None
            spec = m.get("spec", {})
            current = False
            if "key" not in m:  # the kind its name says (bm25-, knn-, terms-): rebuilt on next use
                kind = m["name"].split("-", 1)[0] if "-" in m["name"] else "?"
            elif spec.get("kind") == "knn":
                kind = "knn"
                model = spec.get("model")
                current = isinstance(model, str) and spec.get("vectors") == store_fingerprint(
                    self.store, model)["vectors"]
            else:
                kind = str(spec.get("kind", "?"))
                current = spec.get("items") == fp_items
            infos.append(IndexInfo(name=m["name"], kind=kind, size_bytes=size,
                                   built_at=m.get("built_at", "?"), n=int(m.get("n", 0)),
                                   config=spec, current=bool(current) and ok, ok=ok,
                                   problem=problem))
        return infos

    def drop(self, name: str | None = None) -> list[str]:
        """Delete one index folder (or all of them); returns the names deleted."""
        if not self.root.is_dir():
            return []
        remove_abandoned(self.root, BUILD_PREFIX)
        names = [p.name for p in self.root.iterdir() if p.is_dir()
                 and not p.name.startswith(".")  # a live build's temporary folder stays
                 and (name is None or p.name == name)]
        for n in names:
            shutil.rmtree(self.root / n, ignore_errors=True)
            with _LOCK:
                _LOADED.pop((str(self.root.resolve()), n), None)
        return sorted(names)

    # -- filters ---------------------------------------------------------------------------------
    def allowed(self, ids: list[str], filters: dict[str, Any] | None) -> np.ndarray | None:
        """A bool mask over ``ids`` (an index's documents) of the items passing ``filters``."""
        if not filters:
            return None
        keep = set(self.store.matching_ids(filters))
        return np.fromiter((i in keep for i in ids), dtype=np.bool_, count=len(ids))
