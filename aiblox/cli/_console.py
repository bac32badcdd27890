"""The CLI's two rich consoles: ``out`` (stdout) for results people read or pipe (tables,
reports), ``console`` (stderr) for progress, logs and error lines."""

from __future__ import annotations

from rich.console import Console

__all__ = ["console", "out"]

console = Console(stderr=True)
# results: stdout; soft_wrap so that a line piped to a file is never folded
out = Console(soft_wrap=True)
