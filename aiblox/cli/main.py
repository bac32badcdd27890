"""The ``aiblox`` command line: one module per subcommand, each thin over library calls."""

from __future__ import annotations

import typer

from aiblox.cli.answer import answer
from aiblox.cli.chunk import chunk_command
from aiblox.cli.compare import compare
from aiblox.cli.eval import eval_command
from aiblox.cli.ingest import ingest
from aiblox.cli.pack import pack_app
from aiblox.cli.quickstart import quickstart
from aiblox.cli.report import report
from aiblox.cli.search import search
from aiblox.cli.sweep import sweep

app = typer.Typer(
    name="aiblox",
    help="Research and evaluation harness for retrieval-augmented generation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("quickstart")(quickstart)
app.command("ingest")(ingest)
app.command("search")(search)
app.command("eval")(eval_command)
app.command("chunk")(chunk_command)
app.command("answer")(answer)
app.command("sweep")(sweep)
app.command("report")(report)
app.command("compare")(compare)
app.add_typer(pack_app, name="pack")


if __name__ == "__main__":  # pragma: no cover
    app()
