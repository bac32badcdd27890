"""A command group with a default command, so ``aiblox eval DATASET`` keeps working beside
``aiblox eval verify RUN``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperGroup

if TYPE_CHECKING:
    # Typer vendors click as ``typer._click``; TyperGroup's methods take its Context and
    # HelpFormatter (not ``click``'s), so the overrides below name the same types.
    from typer._click import Context, HelpFormatter


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
