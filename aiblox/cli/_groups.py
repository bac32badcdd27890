"""A command group with a default command, so ``aiblox eval DATASET`` keeps working beside
``aiblox eval verify RUN``; and :func:`tidy_help`, which every ``--help`` passes through."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperGroup

if TYPE_CHECKING:
    # Typer vendors click as ``typer._click``; TyperGroup's methods take its Context and
    # HelpFormatter (not ``click``'s), so the overrides below name the same types.
    from typer._click import Command, Context, HelpFormatter


class DefaultCommandGroup(TyperGroup):
    """Runs ``default`` (the group's first command) when the first word is not a command name."""

    default = "run"
    usage = "DATASET [OPTIONS] | verify RUN [OPTIONS]"
    empty_default = False
    """Whether no words at all run the default too (``aiblox runs`` lists the sweeps)."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if (args and args[0] not in self.commands and args[0] not in ctx.help_option_names) \
                or (not args and self.empty_default):
            args = [self.default, *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: Context, formatter: HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, self.usage)


class RunsGroup(DefaultCommandGroup):
    """``aiblox runs [SWEEP]`` beside ``aiblox runs export REF --trec DIR``."""

    default = "list"
    usage = "[SWEEP] [OPTIONS] | export REF --trec DIR [OPTIONS]"
    empty_default = True


def tidy_help(command: Command) -> Command:
    """``command`` and every command under it made to read well in ``--help``: a flag shows no
    type (``--json`` alone, not ``--json <bool>``), and a group lists each subcommand by its
    help's first paragraph as one line of prose, re-wrapped to the terminal (Typer's rich
    listing kept the docstring's line breaks, cutting sentences in the middle). Idempotent;
    returns ``command``."""
    from typer._click import Context

    # --help itself is made on first use and cached: made here with the names it would get
    # (aiblox sets no help_option_names, so click's default)
    names = (command.context_settings or {}).get("help_option_names")
    help_option = command.get_help_option(Context(command, help_option_names=names))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # Typer shows the metavar in place of its `<bool>`
    if isinstance(command, TyperGroup):
        commands = command.commands
        loaded = getattr(commands, "loaded", None)  # a lazy group: never import to tidy
        for sub in loaded() if callable(loaded) else list(commands.values()):
            if sub.short_help is None and sub.help:
                first = sub.help.split("\f")[0].strip().split("\n\n")[0]
                sub.short_help = " ".join(first.split())
            tidy_help(sub)
    return command
