"""The artifact lake: a folder of evidence artifacts addressed by lake-relative URIs.

Security: a lake URI resolves inside the lake root only. Empty URIs, absolute paths (POSIX, a
Windows drive or UNC path), backslashes, NUL bytes, ``..`` segments, URI schemes other than
``lake://`` and symlinks whose target leaves the root are refused with :class:`LakePathError`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "LakePathError",
    "normalize_lake_uri",
    "resolve_lake_uri",
    "write_lake_bytes",
]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DRIVE = re.compile(r"^[A-Za-z]:")


class LakePathError(ValueError):
    """A lake URI that is malformed or would leave the lake root."""


def normalize_lake_uri(uri: str) -> str:
    """The canonical lake-relative form of ``uri`` (``lake://`` stripped, ``.`` and empty
    segments removed); raises :class:`LakePathError` for anything that could leave the root."""
    if not isinstance(uri, str) or not uri.strip():
        raise LakePathError(f"lake URI must be a non-empty string, got {uri!r}")
    raw = uri
    if raw.startswith("lake://"):
        raw = raw[len("lake://") :]
    elif _DRIVE.match(raw):
        raise LakePathError(
            f"lake URI {uri!r} is an absolute (drive) path; use a lake-relative path"
        )
    elif _SCHEME.match(raw):
        raise LakePathError(f"lake URI {uri!r} has a scheme; only lake-relative paths or lake://")
    if "\x00" in raw:
        raise LakePathError(f"lake URI {uri!r} contains a NUL byte")
    if "\\" in raw:
        raise LakePathError(f"lake URI {uri!r} contains a backslash; use '/' separators")
    if raw.startswith("/") or _DRIVE.match(raw):
        raise LakePathError(f"lake URI {uri!r} is an absolute path; use a lake-relative path")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise LakePathError(f"lake URI {uri!r} contains a '..' segment")
    if not parts:
        raise LakePathError(f"lake URI {uri!r} names no file")
    return "/".join(parts)


def resolve_lake_uri(
    lake_root: str | os.PathLike[str], uri: str, *, must_exist: bool = True
) -> Path:
    """The real path of ``uri`` under ``lake_root``; raises :class:`LakePathError` when the URI
    is refused or its resolved path (symlinks followed) lies outside the root, and
    ``FileNotFoundError`` when ``must_exist`` and nothing is there."""
    rel = normalize_lake_uri(uri)
    root = Path(lake_root).resolve(strict=False)
    target = (root / rel).resolve(strict=False)
    if target != root and root not in target.parents:
        raise LakePathError(f"lake URI {uri!r} resolves outside the lake root {str(root)!r}")
    if must_exist and not target.is_file():
        raise FileNotFoundError(f"lake URI {uri!r}: no file at {str(target)!r}")
    return target


def write_lake_bytes(lake_root: str | os.PathLike[str], uri: str, data: bytes) -> Path:
    """Write ``data`` at ``uri`` in the lake (atomically, parents created) unless a file with
    the same bytes is already there; returns the path."""
    target = resolve_lake_uri(lake_root, uri, must_exist=False)
    if target.is_file() and target.read_bytes() == data:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # re-check after creating parents: a symlinked parent must not lead outside the root
    target = resolve_lake_uri(lake_root, uri, must_exist=False)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return target
