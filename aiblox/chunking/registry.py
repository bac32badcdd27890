"""Chunkers by name: the registry built-ins and third-party chunkers go through alike.

A factory takes keyword parameters ``max_chunk_tokens``, ``overlap_tokens`` (None: the
chunker's default), ``include_headers`` and ``encoding`` and returns a :class:`Chunker`. A
chunker that has no use for a parameter accepts and ignores it, and leaves it out of its
``chunker_id`` (so ids differ exactly when chunks can).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiblox.chunking.base import Chunker
from aiblox.chunking.headings import headings
from aiblox.chunking.sentences import sentences
from aiblox.chunking.token_window import token_window
from aiblox.chunking.whole import whole
from aiblox.contracts.retrieval import ChunkingConfig
from aiblox.text.tokens import DEFAULT_ENCODING

__all__ = [
    "BUILTIN_CHUNKERS",
    "ChunkerFactory",
    "ChunkerRegistry",
    "UnknownChunkerError",
    "default_registry",
    "get_chunker",
    "make_chunker",
    "register_chunker",
]

ChunkerFactory = Callable[..., Chunker]
"""``factory(max_chunk_tokens=, overlap_tokens=, include_headers=, encoding=) -> Chunker``."""

PARAMETERS = ("max_chunk_tokens", "overlap_tokens", "include_headers", "encoding")

BUILTIN_CHUNKERS: dict[str, ChunkerFactory] = {
    "headings": headings,
    "sentences": sentences,
    "token_window": token_window,
    "whole": whole,
}
"""The built-in chunkers, registered into :data:`default_registry` with ``register``."""


class UnknownChunkerError(KeyError, ValueError):
    """A chunker name that is not registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ChunkerRegistry:
    """Chunker factories by name."""

    def __init__(self) -> None:
        self._factories: dict[str, ChunkerFactory] = {}

    def register(self, name: str, factory: ChunkerFactory, *, replace: bool = False) -> None:
        """Add ``factory`` under ``name``; re-registering a name needs ``replace=True``."""
        if not isinstance(name, str) or not name or not name.replace("_", "a").isalnum():
            raise ValueError(f"chunker name must be a non-empty identifier, got {name!r}")
        if not callable(factory):
            raise TypeError(f"chunker factory for {name!r} is not callable: {factory!r}")
        if name in self._factories and not replace and self._factories[name] is not factory:
            raise ValueError(f"chunker {name!r} is already registered (pass replace=True)")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        """Remove ``name`` (unknown names raise :class:`UnknownChunkerError`)."""
        self._check(name)
        del self._factories[name]

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def _check(self, name: str) -> None:
        if name not in self._factories:
            known = ", ".join(self.names()) or "(none)"
            raise UnknownChunkerError(f"unknown chunker {name!r}; known chunkers: {known}")

    def create(self, name: str, **params: Any) -> Chunker:
        """A chunker by name; parameters given as None fall back to the chunker's defaults."""
        self._check(name)
        unknown = sorted(set(params) - set(PARAMETERS))
        if unknown:
            raise TypeError(
                f"chunker {name!r}: unknown parameter(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(PARAMETERS)}"
            )
        kwargs = {k: v for k, v in params.items() if v is not None}
        return self._factories[name](**kwargs)

    def from_config(self, config: ChunkingConfig, encoding: str = DEFAULT_ENCODING) -> Chunker:
        """The chunker a retrieval ``ChunkingConfig`` asks for."""
        return self.create(
            config.chunker_id,
            max_chunk_tokens=config.max_chunk_tokens,
            overlap_tokens=config.overlap_tokens,
            include_headers=config.include_headers,
            encoding=encoding,
        )


default_registry = ChunkerRegistry()
"""The process-wide registry; holds the built-ins, and third parties add theirs to it."""

for _name, _factory in BUILTIN_CHUNKERS.items():
    default_registry.register(_name, _factory)


def register_chunker(name: str, factory: ChunkerFactory, *, replace: bool = False) -> None:
    """Register a chunker factory in :data:`default_registry`."""
    default_registry.register(name, factory, replace=replace)


def get_chunker(name: str, **params: Any) -> Chunker:
    """A chunker from :data:`default_registry` by name and parameters."""
    return default_registry.create(name, **params)


def make_chunker(config: ChunkingConfig, encoding: str = DEFAULT_ENCODING,
                 registry: ChunkerRegistry | None = None) -> Chunker:
    """The chunker for a ``ChunkingConfig`` (``chunker_id`` is the registry name)."""
    return (registry or default_registry).from_config(config, encoding)
