"""The ``aiblox`` command line: one module per subcommand, each thin over library calls."""

from __future__ import annotations

import typer

from aiblox.cli._console import set_quiet
from aiblox.cli._errors import AibloxGroup
from aiblox.cli._groups import DefaultCommandGroup, RunsGroup
from aiblox.cli.answer import answer
from aiblox.cli.chunk import chunk_command
from aiblox.cli.compare import compare
from aiblox.cli.eval import eval_command
from aiblox.cli.index import index_app
from aiblox.cli.ingest import ingest
from aiblox.cli.pack import pack_app
from aiblox.cli.quickstart import quickstart
from aiblox.cli.report import report
from aiblox.cli.runs import export_runs, runs
from aiblox.cli.search import search
from aiblox.cli.sweep import sweep
from aiblox.cli.verify import verify_command

app = typer.Typer(
    cls=AibloxGroup,  # one line `error: ...` (exit 2) for every input or environment fault
    name="aiblox",
    help="Research and evaluation harness for retrieval-augmented generation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from aiblox import __version__

        typer.echo(f"aiblox {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no informational "
                               "lines on stderr (results on stdout and errors still print)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Research and evaluation harness for retrieval-augmented generation. Results go to
    stdout, progress, logs and errors to stderr (progress bars only on a terminal)."""
    set_quiet(quiet)


app.command("quickstart")(quickstart)
app.command("ingest")(ingest)
app.command("search")(search)
eval_app = typer.Typer(
    cls=DefaultCommandGroup, no_args_is_help=True,
    help="Score retrieval on a labelled dataset (aiblox eval DATASET), or re-execute a logged "
         "sweep point and check its hashes (aiblox eval verify RUN).")
eval_app.command("run", help="Score retrieval modes on DATASET's split with ranx (the default: "
                             "aiblox eval DATASET).")(eval_command)
eval_app.command("verify")(verify_command)
app.add_typer(eval_app, name="eval")
app.command("chunk")(chunk_command)
app.command("answer")(answer)
app.command("sweep")(sweep)
app.command("report")(report)
app.command("compare")(compare)
runs_app = typer.Typer(
    cls=RunsGroup, help="List logged sweeps or a sweep's points (aiblox runs [SWEEP]), or write "
                        "a logged point's TREC run files (aiblox runs export REF --trec DIR).")
runs_app.command("list", help="List logged sweeps, or one sweep's points (the default: aiblox "
                              "runs [SWEEP]).")(runs)
runs_app.command("export")(export_runs)
app.add_typer(runs_app, name="runs")
app.add_typer(pack_app, name="pack")
app.add_typer(index_app, name="index")


if __name__ == "__main__":  # pragma: no cover
    app()
