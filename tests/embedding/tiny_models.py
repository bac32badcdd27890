"""Tiny real sentence-transformers models for tests: a one-layer, 32-wide BERT
(:func:`tests.stages.conftest.tiny_bert`) under a pooling module, with or without a ``Dense``
head, saved as sentence-transformers saves them. Made in seconds on the CPU."""

from __future__ import annotations

from pathlib import Path


def st_model(folder: Path, base: Path, dense: int | None = None,
             pooling: str | tuple[str, ...] = "mean") -> Path:
    """A sentence-transformers bi-encoder over the bare BERT ``base``: mean pooling (32
    dimensions), then with ``dense`` a ``Dense`` head projecting to ``dense`` dimensions."""
    import torch
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Dense, Pooling, Transformer

    torch.manual_seed(0)
    modules = [Transformer(str(base)), Pooling(32, pooling)]
    if dense is not None:
        modules.append(Dense(32, dense))
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return folder
