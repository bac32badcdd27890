"""Embedding on a Ray cluster (``aiblox ingest --executor ray``): the texts a
:class:`~aiblox.embedding.CachedEmbedder` misses are embedded as Ray tasks, one batch each,
and come back to the driver, which writes them into the store's embedding cache.

The embedding cache is keyed by (model id, sha256 of the text), so the driver looks every text
up first and sends out only the texts not cached, each once (duplicates within a batch are one
text); the workers never touch the store. A batch is the slice the local embedder would embed
(:data:`BATCH`, the cache's own order: unique text hashes, sorted), so a model that pads a batch
to its longest text sees the same batches as on one machine. Each task may be run again
(``max_retries``) when its worker dies; a worker builds its embedder (loads the model) once.

The device is the driver's choice (``--device``): ``cuda`` (or ``cuda:N``) makes every task ask
Ray for one GPU and embed on it (the driver itself needs none), ``auto`` is what the driver
sees (its GPU, else the CPU), ``cpu`` the workers' CPUs. The model id carries the device class
as a local embedder's does (:func:`aiblox.embedding.device.with_device`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aiblox.cluster import MAX_RETRIES, completed, connect
from aiblox.embedding import CachedEmbedder, Embedder, get_embedder
from aiblox.embedding.cache import EmbeddingCache
from aiblox.embedding.device import device_class, parse_device, resolve_device, with_device
from aiblox.progress import progress_bar

__all__ = ["BATCH", "RayEmbedder", "ray_cached_embedder"]

BATCH = 256
"""Texts per task: the local :class:`CachedEmbedder`'s batch."""

_MODELS: dict[tuple[str, str], Embedder] = {}
"""In a Ray worker: the embedders it built, by registry name and device."""


def embed_batch(name: str, texts: list[str], device: str = "cpu") -> np.ndarray:
    """A Ray task: ``texts`` embedded by the registry embedder ``name`` on ``device`` (``cpu``
    or ``cuda``: the GPU Ray gave the task; built once per worker process)."""
    model = _MODELS.get((name, device))
    if model is None:
        model = _MODELS[(name, device)] = get_embedder(name, device=device)
    return np.asarray(model.embed(texts), dtype=np.float32)


class RayEmbedder:
    """An :class:`Embedder` whose :meth:`embed` runs batches of :data:`BATCH` texts as Ray
    tasks on the cluster this process is attached to, the vectors in the texts' order.
    ``embedder`` is the registry embedder ``name`` on the CPU (for its id and dimension; its
    model is never loaded here); ``device`` the class the workers embed on (``cpu``, ``cuda``:
    each task asks Ray for one GPU)."""

    def __init__(self, name: str, embedder: Embedder, progress: bool = False,
                 device: str = "cpu") -> None:
        import ray

        self.name, self.embedder, self.progress = name, embedder, progress
        # an embedder that runs no model (hashing) has no device: CPU tasks, its own id
        self.device = device_class(device) if hasattr(embedder, "device") else "cpu"
        self._task = ray.remote(embed_batch).options(
            max_retries=MAX_RETRIES, retry_exceptions=False, num_cpus=1,
            num_gpus=1 if self.device == "cuda" else 0, scheduling_strategy="SPREAD",
            name="aiblox_embed_batch")

    @property
    def model_id(self) -> str:
        return (with_device(self.embedder.model_id, self.device)
                if hasattr(self.embedder, "device") else self.embedder.model_id)

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        starts = range(0, len(texts), BATCH)
        refs = {self._task.remote(self.name, list(texts[s:s + BATCH]), self.device): s
                for s in starts}
        out: dict[int, np.ndarray] = {}
        with progress_bar(len(texts), f"embedding on the cluster ({self.model_id} on the "
                                      f"workers' {self.device})",
                          unit="text", enabled=self.progress) as bar:
            # a lost cluster: one error (ClusterLost); a failed batch: the others cancelled
            for ref, vectors in completed(list(refs), "run the ingest again"):
                out[refs[ref]] = vectors
                bar.update(len(vectors))
        return np.concatenate([out[s] for s in starts])


def ray_cached_embedder(name: str, cache: EmbeddingCache, address: str | None = None,
                        progress: bool = True, device: str = "auto") -> CachedEmbedder:
    """The registry embedder ``name`` on the Ray cluster at ``address`` (None: a local Ray
    instance) behind ``cache``: every text the cache misses, once, in batches of
    :data:`BATCH` across the workers, on ``device`` (see the module doc)."""
    spec = parse_device(device)
    workers = resolve_device(spec) if spec == "auto" else spec  # cuda: the workers' GPUs
    model = get_embedder(name, device="cpu")
    connect(address)
    remote = RayEmbedder(name, model, progress=progress, device=workers)
    # one call of the inner embedder per lookup: it cuts the misses into BATCH-text tasks
    return CachedEmbedder(remote, cache, batch_size=10**9, progress=False)
