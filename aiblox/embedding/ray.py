"""Embedding on a Ray cluster (``aiblox ingest --executor ray``): the texts a
:class:`~aiblox.embedding.CachedEmbedder` misses are embedded as Ray tasks, one batch each,
and come back to the driver, which writes them into the store's embedding cache.

The embedding cache is keyed by (model id, sha256 of the text), so the driver looks every text
up first and sends out only the texts not cached, each once (duplicates within a batch are one
text); the workers never touch the store. A batch is the slice the local embedder would embed
(:data:`BATCH`, the cache's own order: unique text hashes, sorted), so a model that pads a batch
to its longest text sees the same batches as on one machine. Each task may be run again
(``max_retries``) when its worker dies; a worker builds its embedder (loads the model) once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aiblox.cluster import MAX_RETRIES, connect
from aiblox.embedding import CachedEmbedder, Embedder, get_embedder
from aiblox.embedding.cache import EmbeddingCache
from aiblox.progress import progress_bar

__all__ = ["BATCH", "RayEmbedder", "ray_cached_embedder"]

BATCH = 256
"""Texts per task: the local :class:`CachedEmbedder`'s batch."""

_MODELS: dict[str, Embedder] = {}
"""In a Ray worker: the embedders it built, by registry name."""


def embed_batch(name: str, texts: list[str]) -> np.ndarray:
    """A Ray task: ``texts`` embedded by the registry embedder ``name`` (built once per
    worker process)."""
    model = _MODELS.get(name)
    if model is None:
        model = _MODELS[name] = get_embedder(name)
    return np.asarray(model.embed(texts), dtype=np.float32)


class RayEmbedder:
    """An :class:`Embedder` whose :meth:`embed` runs batches of :data:`BATCH` texts as Ray
    tasks on the cluster this process is attached to, the vectors in the texts' order."""

    def __init__(self, name: str, embedder: Embedder, progress: bool = False) -> None:
        import ray

        self.name, self.embedder, self.progress = name, embedder, progress
        self._task = ray.remote(embed_batch).options(max_retries=MAX_RETRIES,
                                                      retry_exceptions=False, num_cpus=1,
                                                      scheduling_strategy="SPREAD",
                                                      name="aiblox_embed_batch")

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import ray

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        starts = range(0, len(texts), BATCH)
        refs = {self._task.remote(self.name, list(texts[s:s + BATCH])): s for s in starts}
        out: dict[int, np.ndarray] = {}
        pending: list[Any] = list(refs)
        with progress_bar(len(texts), f"embedding on the cluster ({self.model_id})",
                          unit="text", enabled=self.progress) as bar:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    out[refs[ref]] = ray.get(ref)
                    bar.update(len(out[refs[ref]]))
        return np.concatenate([out[s] for s in starts])


def ray_cached_embedder(name: str, cache: EmbeddingCache, address: str | None = None,
                        progress: bool = True) -> CachedEmbedder:
    """The registry embedder ``name`` on the Ray cluster at ``address`` (None: a local Ray
    instance) behind ``cache``: every text the cache misses, once, in batches of
    :data:`BATCH` across the workers."""
    connect(address)
    remote = RayEmbedder(name, get_embedder(name), progress=progress)
    # one call of the inner embedder per lookup: it cuts the misses into BATCH-text tasks
    return CachedEmbedder(remote, cache, batch_size=10**9, progress=False)
