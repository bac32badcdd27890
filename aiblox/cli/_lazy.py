"""Subcommands imported when they run, so ``aiblox --help`` imports none of them.

A :class:`LazyGroup` knows each subcommand by name, where it lives (``module:attribute``: a
command function or a ``typer.Typer`` group) and the one line its group's help lists; it imports
the module only when the command runs or its own ``--help`` is asked. The command is then built
the way ``Typer.command`` and ``Typer.add_typer`` build it (same options, help and errors):
``tests/cli/test_startup.py`` checks every listed line against the loaded command's help.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    from typer._click import Command, Context, HelpFormatter

__all__ = ["LazyCommand", "LazyGroup"]


@dataclass(frozen=True)
class LazyCommand:
    """A subcommand not imported yet: ``target`` (``"aiblox.cli.search:search"``, or the
    function or ``typer.Typer`` itself), ``summary`` (the first paragraph of its help, as the
    group's help lists it) and ``help`` (given to typer in place of the function's docstring,
    as ``app.command(name, help=...)`` does; None: the docstring)."""

    target: str | Any
    summary: str
    help: str | None = None

    def load(self, name: str) -> Command:
        """The click command, built from the imported target as typer builds it."""
        obj = self.target
        if isinstance(obj, str):
            module, attr = obj.split(":")
            obj = getattr(importlib.import_module(module), attr)
        holder = typer.Typer(add_completion=False)
        if isinstance(obj, typer.Typer):
            holder.add_typer(obj, name=name)
        else:
            holder.command(name, help=self.help)(obj)
        return typer.main.get_group(holder).commands[name]

    def stub(self, name: str) -> Command:
        """A stand-in with the name and summary alone, for the group's help listing (one line
        of prose, as :func:`~aiblox.cli._groups.tidy_help` lists a loaded command)."""
        return TyperCommand(name, help=self.summary, short_help=" ".join(self.summary.split()))


class _Commands(MutableMapping[str, "Command"]):
    """A group's commands by name: every lazy one listed, each imported on first access."""

    def __init__(self, lazy: dict[str, LazyCommand], loaded: MutableMapping[str, Command]
                 ) -> None:
        self._lazy = lazy
        self._loaded = dict(loaded)

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded:
            spec = self._lazy[name]  # KeyError: no such command
            from aiblox.cli._groups import tidy_help

            try:
                self._loaded[name] = tidy_help(spec.load(name))
            except KeyError as exc:  # not "no such command": a fault while importing it
                raise LookupError(f"loading command {name!r}: {exc}") from exc
        return self._loaded[name]

    def loaded(self) -> list[Command]:
        """The commands imported so far (the others are tidied when they load)."""
        return list(self._loaded.values())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._lazy, *self._loaded]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*self._lazy, *self._loaded]))

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("a lazy group's commands cannot be removed")


class LazyGroup(TyperGroup):
    """A typer group whose subcommands in :attr:`lazy` are imported on use; its help lists them
    from their summaries without importing them."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands(self.lazy, self.commands)
        self._listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        commands = self.commands
        if (self._listing and cmd_name in self.lazy and isinstance(commands, _Commands)
                and not commands.is_loaded(cmd_name)):
            return self.lazy[cmd_name].stub(cmd_name)
        return commands.get(cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True  # the listing needs names and summaries only
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
