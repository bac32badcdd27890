"""A deterministic feature-hashing embedder for fast tests and offline runs.

Lower-cased word unigrams and bigrams are hashed (blake2b, so no dependence on
``PYTHONHASHSEED``) into ``dim`` signed buckets, weighted by ``1 + log(tf)`` and L2-normalised.
It has no semantics beyond shared words, but it is instant and byte-stable everywhere.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = ["HashingEmbedder"]

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.model_id = f"hashing-v1-{dim}"

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, (1.0 if (value >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` as ``(n, dim)`` float32 unit vectors (zeros for a text with no words)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            feats = Counter(words)
            feats.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
            for feat in sorted(feats):
                idx, sign = self._bucket(feat)
                out[row, idx] += sign * (1.0 + math.log(feats[feat]))
            norm = np.linalg.norm(out[row])
            if norm > 0:
                out[row] /= norm
        return out.astype(np.float32)
