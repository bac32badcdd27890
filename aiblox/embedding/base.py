"""The Embedder protocol and the registry of embedders by name.

An embedder that runs a model on a device (``minilm``, a sentence-transformers folder) takes a
``device`` (``auto``, ``cpu``, ``cuda:N``: :mod:`aiblox.embedding.device`), has a ``device``
attribute (the resolved device) and a model id that carries the device class off the CPU. The
registry passes ``device`` to a factory that takes one and leaves it out for one that runs no
model (``hashing``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "EmbedderRegistry", "get_embedder", "register_embedder", "registry"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    @property
    def model_id(self) -> str:
        """Identifies the model and everything that changes its output (cache key part)."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; returns a ``(len(texts), dim)`` float32 array."""
        ...


class EmbedderRegistry:
    """Embedders by name; built-ins register through the same call as third-party ones."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[..., Embedder]] = {}

    def register(self, name: str, factory: Callable[..., Embedder]) -> None:
        """Register ``factory(**params) -> Embedder`` as ``name``."""
        self._factories[name] = factory

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._factories)

    def name_of(self, model_id: str) -> str | None:
        """The registered name whose embedder's model is ``model_id`` on whatever device (None
        for another model, a folder's or a package's)."""
        from aiblox.embedding.device import split_device

        base = split_device(model_id)[0]
        for name in self.names():
            try:
                if self.get(name, device="cpu").model_id == base:
                    return name
            except (ValueError, ImportError):
                continue
        return None

    def get(self, name: str, device: str | None = None, **params: Any) -> Embedder:
        """Build the embedder registered as ``name``; a name not registered may be a folder
        holding a sentence-transformers model or an installed package that ships one
        (:mod:`aiblox.embedding.sentence_transformers`). ``device`` (None: the embedder's
        default, ``auto``) goes to a factory that takes one."""
        factory = self._factories.get(name)
        if factory is not None:
            if device is not None and _takes_device(factory):
                params["device"] = device
            return factory(**params)
        from aiblox.embedding.sentence_transformers import (
            SentenceTransformerEmbedder,
            find_model,
            is_trained_ref,
            unknown_trained,
        )

        path = find_model(name)
        if path is None and is_trained_ref(name):
            raise ValueError(f"embedder {unknown_trained(name)}")
        if path is None:
            raise ValueError(
                f"unknown embedder {name!r}; known: {', '.join(self.names())}, or a folder "
                f"holding a sentence-transformers model, or an installed package that ships one"
            )
        if device is not None:
            params["device"] = device
        return SentenceTransformerEmbedder(path, **params)


def _takes_device(factory: Callable[..., Embedder]) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "device" or p.kind is p.VAR_KEYWORD for p in params)


registry = EmbedderRegistry()


def register_embedder(name: str, factory: Callable[..., Embedder]) -> None:
    """Register an embedder factory in the default registry."""
    registry.register(name, factory)


def get_embedder(name: str, device: str | None = None, **params: Any) -> Embedder:
    """Build an embedder from the default registry (on ``device``, for one that runs a
    model)."""
    return registry.get(name, device=device, **params)
