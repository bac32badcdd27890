"""The CLI's rich consoles: ``out`` (stdout) for results people read or pipe (tables,
reports), ``console`` (stderr) for progress and informational lines (silenced by ``aiblox
--quiet``), ``errors`` (stderr) for ``error:`` and ``warning:`` lines, which always print.

``out`` on a terminal wraps to its width like any rich console; piped or redirected it never
cuts, folds or elides a cell or a line (a table is as wide as its widest row), so
``aiblox sweep SPEC > out.txt`` keeps every label whole."""

from __future__ import annotations

from rich.console import Console, ConsoleDimensions

__all__ = ["console", "errors", "out", "set_quiet"]

UNBOUNDED_WIDTH = 100_000
"""The width ``out`` renders at when stdout is not a terminal: wide enough that no table cell
is truncated (a table is only as wide as its content)."""


class _ResultConsole(Console):
    """A console whose width is the terminal's, or :data:`UNBOUNDED_WIDTH` when its file is
    not a terminal (a file, a pipe, a test runner's buffer; ``COLUMNS`` is ignored there)."""

    @property
    def size(self) -> ConsoleDimensions:
        dims = super().size
        if self.is_terminal:
            return dims
        return ConsoleDimensions(UNBOUNDED_WIDTH, dims.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = Console(stderr=True)
errors = Console(stderr=True)
# results: stdout; soft_wrap so that a line piped to a file is never folded
out = _ResultConsole(soft_wrap=True)


def set_quiet(quiet: bool) -> None:
    """Quiet mode (``aiblox --quiet``): no progress, no informational lines on stderr; results
    on stdout and ``error:`` lines still print."""
    from aiblox.progress import set_quiet as set_progress_quiet

    console.quiet = quiet
    set_progress_quiet(quiet)
