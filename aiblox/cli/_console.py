"""The CLI's one stderr console (rich): progress, tables for people and error lines go there,
results to stdout."""

from __future__ import annotations

from rich.console import Console

__all__ = ["console"]

console = Console(stderr=True)
