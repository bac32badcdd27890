"""Byte-bounded text: cut and split UTF-8 text at byte limits without splitting a character."""

from __future__ import annotations

__all__ = ["split_utf8", "truncate_utf8", "utf8_len"]


def utf8_len(text: str) -> int:
    """Number of UTF-8 bytes of ``text``."""
    return len(text.encode("utf-8"))


def _boundary(data: bytes, limit: int) -> int:
    """Largest offset <= ``limit`` that starts a character (or ends the data)."""
    if limit >= len(data):
        return len(data)
    cut = max(limit, 0)
    while cut > 0 and (data[cut] & 0xC0) == 0x80:  # continuation byte: step back
        cut -= 1
    return cut


def truncate_utf8(text: str, max_bytes: int, *, prefer_newline: bool = False) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes``.

    With ``prefer_newline`` the cut moves back to just after the last newline when one lies in
    the second half of the kept bytes (tables stay whole rows).
    """
    data = text.encode("utf-8")
    cut = _boundary(data, max_bytes)
    if prefer_newline and cut < len(data):
        nl = data.rfind(b"\n", 0, cut)
        if nl >= 0 and nl + 1 >= cut // 2:
            cut = nl + 1
    return data[:cut].decode("utf-8")


def split_utf8(text: str, chunk_bytes: int, overlap_bytes: int = 0) -> list[tuple[int, int]]:
    """Byte ranges ``(start, end)`` of chunks of at most ``chunk_bytes`` bytes, consecutive
    chunks sharing about ``overlap_bytes``; every boundary falls between characters.

    Empty text gives one empty chunk ``[(0, 0)]`` so that a document always has chunk 0.
    """
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    if not 0 <= overlap_bytes < chunk_bytes:
        raise ValueError(f"overlap_bytes must be in [0, {chunk_bytes}), got {overlap_bytes}")
    data = text.encode("utf-8")
    if not data:
        return [(0, 0)]
    ranges: list[tuple[int, int]] = []
    start = 0
    while True:
        end = _boundary(data, start + chunk_bytes)
        if end <= start:  # a single character wider than chunk_bytes: take it whole
            end = start + 1
            while end < len(data) and (data[end] & 0xC0) == 0x80:
                end += 1
        ranges.append((start, end))
        if end >= len(data):
            return ranges
        nxt = _boundary(data, end - overlap_bytes)
        start = nxt if nxt > start else end
