"""What a corpus file is known to hold, recorded once and trusted while the file is unchanged.

Reading a large corpus costs every command that loads its dataset: hashing its bytes (the
dataset hash is in every stage key and manifest), checking which documents BM25 cannot index
(:mod:`aiblox.text.lexical_gaps`), and parsing a million documents into records. The answers
do not change while the file does not, so the first read (a load, or ``aiblox ingest``) records
them in a small sidecar, :class:`CorpusFacts`, and later reads trust it:

- the corpus hash (:attr:`~aiblox.data.Dataset.corpus_hash`, the same value as before: sha256
  of the same bytes), and the dataset hashes computed over it (keyed by the sha256 of the bytes
  of the other files read: queries, qrels, answers), so the dataset hash is exactly the value
  a full read gives;
- the document ids (file order) and the number of documents;
- the documents :data:`~aiblox.data.LEXICAL_ANALYZER` gives no token.

A record is trusted only while the file's identity matches (:func:`file_identity`: its resolved
path, size, modification time in nanoseconds, and the sha256 of its size with its first and
last MiB); any change reads the file again. Only JSONL corpora of :data:`TRUST_MIN_BYTES` or
more are recorded (a small corpus reads in well under a second). Sidecars live under
``$AIBLOX_CACHE_DIR`` (default ``~/.cache/aiblox``) in ``corpus-facts/``, one per corpus path,
written atomically; an unreadable one is ignored (the file is read again).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiblox.contracts.items import ItemRecord
from aiblox.data.beir import read_lines
from aiblox.data.rules import Both, DatasetError, Hasher
from aiblox.progress import phase
from aiblox.text.lexical_gaps import LexicalGaps, lexical_gaps

Reader = Callable[[Hasher | None], Iterable[ItemRecord]]
"""Reads a corpus file's documents (validated), feeding its bytes to the hasher given:
``functools.partial(iter_corpus, path, name)``."""

__all__ = ["FACTS_VERSION", "TRUST_MIN_BYTES", "CorpusFacts", "LazyCorpus", "corpus_facts",
           "facts_dir", "file_identity"]

FACTS_VERSION = 1
"""Bumped when what a sidecar records (or how) changes: older sidecars are not trusted."""

TRUST_MIN_BYTES = 16 * 2**20
"""Corpus files at least this large have their facts recorded and trusted; smaller ones are
read whole by every load, as before."""

_EDGE = 2**20
"""Bytes read at each end of a file for its fingerprint."""


def facts_dir() -> Path:
    """Where sidecars live: ``$AIBLOX_CACHE_DIR/corpus-facts`` (default
    ``~/.cache/aiblox/corpus-facts``)."""
    root = os.environ.get("AIBLOX_CACHE_DIR") or str(Path.home() / ".cache" / "aiblox")
    return Path(root) / "corpus-facts"


def file_identity(path: Path) -> dict[str, Any]:
    """The identity a record is trusted under: resolved path, size, mtime (ns) and a cheap
    fingerprint (sha256 of the size, the first MiB and the last MiB)."""
    st = path.stat()
    h = hashlib.sha256(str(st.st_size).encode())
    with open(path, "rb") as f:
        h.update(f.read(_EDGE))
        if st.st_size > _EDGE:
            f.seek(max(_EDGE, st.st_size - _EDGE))
            h.update(f.read(_EDGE))
    return {"path": path.resolve().as_posix(), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "fingerprint": h.hexdigest()}


def _sidecar(path: Path) -> Path:
    key = hashlib.sha256(path.resolve().as_posix().encode("utf-8")).hexdigest()[:24]
    return facts_dir() / f"{key}.json"


@dataclass
class CorpusFacts:
    """What one read of a corpus file found (see the module docstring)."""

    identity: dict[str, Any]
    corpus_hash: str
    n_docs: int
    doc_gaps: LexicalGaps
    """The documents the lexical analyser gives no token (``total`` is every document)."""
    ids_file: str = ""
    """The sidecar holding the ids, one a line in file order ("" when not recorded)."""
    dataset_hashes: dict[str, str] = field(default_factory=dict)
    """Dataset hashes over this corpus, by the sha256 of the bytes hashed after it."""
    _ids: list[str] | None = field(default=None, repr=False)

    @property
    def recorded(self) -> bool:
        return bool(self.ids_file)

    def ids(self) -> list[str]:
        """The document ids, in file order."""
        if self._ids is None:
            text = Path(self.ids_file).read_text(encoding="utf-8")
            self._ids = text.split("\n") if text else []
        return self._ids

    def to_json(self) -> dict[str, Any]:
        g = self.doc_gaps
        return {"version": FACTS_VERSION, "identity": self.identity,
                "corpus_hash": self.corpus_hash, "n_docs": self.n_docs,
                "gaps": {"analyzer": g.analyzer, "total": g.total, "ids": list(g.ids),
                         "scripts": g.scripts},
                "ids_file": self.ids_file, "dataset_hashes": self.dataset_hashes}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CorpusFacts:
        g = obj["gaps"]
        return cls(identity=obj["identity"], corpus_hash=obj["corpus_hash"],
                   n_docs=int(obj["n_docs"]),
                   doc_gaps=LexicalGaps(g["analyzer"], int(g["total"]), tuple(g["ids"]),
                                        dict(g["scripts"])),
                   ids_file=obj["ids_file"], dataset_hashes=dict(obj["dataset_hashes"]))

    def still_true(self, path: Path) -> bool:
        """Whether ``path`` is still the file these facts were read from."""
        try:
            return file_identity(path) == self.identity
        except OSError:
            return False

    def save(self) -> None:
        """Write the sidecar atomically (best effort: an unwritable cache is skipped)."""
        if not self.recorded:
            return
        _write_atomic(_sidecar(Path(self.identity["path"])),
                      json.dumps(self.to_json(), sort_keys=True))


def _write_atomic(target: Path, text: str) -> bool:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
        return True
    except OSError:
        return False


def trusted_facts(path: Path, analyzer: str) -> CorpusFacts | None:
    """The recorded facts of ``path`` when its identity still matches them, else None."""
    try:
        obj = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        if obj.get("version") != FACTS_VERSION or obj["gaps"]["analyzer"] != analyzer:
            return None
        facts = CorpusFacts.from_json(obj)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not Path(facts.ids_file).is_file() or not facts.still_true(path):
        return None
    return facts


def trusts(path: Path) -> bool:
    """Whether facts of ``path`` are recorded and trusted (a JSONL corpus, large enough)."""
    if not path.name.endswith((".jsonl", ".jsonl.gz")):
        return False
    try:
        return path.stat().st_size >= TRUST_MIN_BYTES
    except OSError:
        return False


def corpus_facts(path: Path, read: Reader, analyzer: str, feed: Hasher | None = None,
                 progress: bool = True) -> tuple[CorpusFacts, bool]:
    """The facts of the corpus file ``path``: trusted from its sidecar when the file is
    unchanged, else read in one pass (every document validated as :func:`iter_corpus` does)
    and recorded (when :func:`trusts` the file). Returns ``(facts, was_read)``; ``was_read``
    says the file was read, and then ``feed`` was given every byte hashed (as the corpus hash
    is). A read longer than a few seconds says so on stderr (:func:`aiblox.progress.phase`)."""
    if trusts(path):
        found = trusted_facts(path, analyzer)
        if found is not None:
            return found, False
    identity = file_identity(path)
    h = hashlib.sha256()
    ids: list[str] = []

    def texts() -> Iterator[tuple[str, str]]:
        for doc in read(Both(h, feed) if feed is not None else h):
            ids.append(doc.id)
            yield doc.id, f"{doc.title} {doc.text}"

    with phase(f"read {path.name} (its hash, ids and lexical gaps, recorded)",
               progress and trusts(path)):
        gaps = lexical_gaps(texts(), analyzer)
    facts = CorpusFacts(identity=identity, corpus_hash=h.hexdigest(), n_docs=len(ids),
                        doc_gaps=gaps, _ids=ids)
    if trusts(path) and file_identity(path) == identity:  # unchanged while it was read
        side = _sidecar(path)
        ids_path = side.with_name(f"{side.stem}.{facts.corpus_hash[:16]}.ids")
        if _write_atomic(ids_path, "\n".join(ids)):
            facts.ids_file = ids_path.as_posix()
            facts.save()
            for old in side.parent.glob(f"{side.stem}.*.ids"):  # an earlier content's ids
                if old != ids_path:
                    old.unlink(missing_ok=True)
    return facts, True


def remember_dataset_hash(facts: CorpusFacts, tail: str, digest: str) -> None:
    """Record the dataset hash over the corpus whose later bytes hash to ``tail``."""
    if facts.recorded and facts.dataset_hashes.get(tail) != digest:
        keep = dict(list(facts.dataset_hashes.items())[-15:])  # a few combinations of splits
        keep[tail] = digest
        facts.dataset_hashes = keep
        facts.save()


def rehash_corpus(path: Path, hasher: Hasher) -> None:
    """Feed ``hasher`` the corpus bytes as a load does (``corpus.jsonl``'s name, then the
    decompressed bytes), without parsing them."""
    for _ in read_lines(path, hasher, "corpus.jsonl"):
        pass


class LazyCorpus(Mapping[str, ItemRecord]):
    """A corpus whose ids and size come from its recorded facts, read into records only when a
    document itself is asked for (``corpus[id]``, ``.values()``, ``.items()``). The file must
    still be the one the facts were read from: else :class:`DatasetError` (load it again)."""

    def __init__(self, path: Path, read: Reader, facts: CorpusFacts) -> None:
        self.path, self.read, self.facts = path, read, facts
        self._docs: dict[str, ItemRecord] | None = None
        self._idset: frozenset[str] | None = None

    def loaded(self) -> dict[str, ItemRecord]:
        """The documents, read from the file (once)."""
        if self._docs is None:
            if not self.facts.still_true(self.path):
                raise DatasetError(self.path, None, "corpus",
                                   "changed since the dataset was loaded: load it again")
            self._docs = {it.id: it for it in self.read(None)}
        return self._docs

    def __getitem__(self, key: str) -> ItemRecord:
        return self.loaded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs if self._docs is not None else self.facts.ids())

    def __len__(self) -> int:
        return self.facts.n_docs

    def __contains__(self, key: object) -> bool:
        if self._docs is not None:
            return key in self._docs
        if self._idset is None:
            self._idset = frozenset(self.facts.ids())
        return key in self._idset

    def values(self) -> Any:
        return self.loaded().values()

    def items(self) -> Any:
        return self.loaded().items()

    def __repr__(self) -> str:
        return f"LazyCorpus({self.path.as_posix()!r}, {self.facts.n_docs} documents)"

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_idset": None}
