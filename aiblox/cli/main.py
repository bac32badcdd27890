"""The ``aiblox`` command line: one module per subcommand, each thin over library calls.

Each subcommand's module is imported only when that command runs or its own ``--help`` is
asked (:mod:`aiblox.cli._lazy`): ``aiblox --help`` and ``aiblox eval --help`` list the commands
from the one-line summaries below and import none of them, so they start in a blink.
"""

from __future__ import annotations

from typing import ClassVar

import typer

from aiblox.cli._console import set_quiet
from aiblox.cli._errors import AibloxGroup
from aiblox.cli._groups import DefaultCommandGroup, RunsGroup
from aiblox.cli._lazy import LazyCommand, LazyGroup

EVAL_HELP = ("Score retrieval on a labelled dataset (aiblox eval DATASET), or re-execute a "
             "logged sweep point and check its hashes (aiblox eval verify RUN).")
EVAL_RUN_HELP = ("Score retrieval modes on DATASET's split with ranx (the default: aiblox eval "
                 "DATASET).")


class EvalGroup(LazyGroup, DefaultCommandGroup):
    """``aiblox eval``: ``run`` (the default) and ``verify``, imported on use."""

    lazy: ClassVar[dict[str, LazyCommand]] = {
        "run": LazyCommand("aiblox.cli.eval:eval_command", EVAL_RUN_HELP, help=EVAL_RUN_HELP),
        "verify": LazyCommand(
            "aiblox.cli.verify:verify_command",
            "Re-execute RUN's logged point from its config alone; exit 1 names the first stage "
            "that\ndiffers."),
    }


eval_app = typer.Typer(cls=EvalGroup, no_args_is_help=True, help=EVAL_HELP)

RUNS_HELP = ("List logged sweeps or a sweep's points (aiblox runs [SWEEP]), or write a logged "
             "point's TREC run files (aiblox runs export REF --trec DIR). Their options "
             "(--tracking-uri, --format, ...): aiblox runs list --help, aiblox runs export "
             "--help.")
RUNS_LIST_HELP = ("List logged sweeps, or one sweep's points (the default: aiblox runs "
                  "[SWEEP]).")


class RunsLazyGroup(LazyGroup, RunsGroup):
    """``aiblox runs``: ``list`` (the default) and ``export``, imported on use."""

    lazy: ClassVar[dict[str, LazyCommand]] = {
        "list": LazyCommand("aiblox.cli.runs:runs", RUNS_LIST_HELP, help=RUNS_LIST_HELP),
        "export": LazyCommand(
            "aiblox.cli.runs:export_runs",
            "Write a logged point's TREC run files: the ones its run logged (a sweep logs them "
            "for the\npoints its conclusion names), else written from the stage cache by the "
            "stage keys its\nmanifest records (the run its metrics were computed from, the "
            "same bytes)."),
    }


runs_app = typer.Typer(cls=RunsLazyGroup, help=RUNS_HELP)


class MainGroup(LazyGroup, AibloxGroup):
    """The ``aiblox`` group: its commands imported on use, each run under
    :func:`~aiblox.cli._errors.user_faults`. A summary is the first paragraph of the command's
    help, line breaks included (as the help lists it)."""

    lazy: ClassVar[dict[str, LazyCommand]] = {
        "quickstart": LazyCommand(
            "aiblox.cli.quickstart:quickstart",
            "Ingest the sample dataset, score bm25, dense and hybrid retrieval, print a table."),
        "ingest": LazyCommand(
            "aiblox.cli.ingest:ingest",
            "Make the store hold exactly DATASET (adding, changing and deleting items), with "
            "vectors;\nidempotent (a second run changes nothing). A store holding another "
            "dataset is refused. The\ncorpus streams: documents are read, written and embedded "
            "a batch at a time."),
        "search": LazyCommand("aiblox.cli.search:search",
                              "Search the store for QUERY (results on stdout)."),
        "chunk": LazyCommand("aiblox.cli.chunk:chunk_command",
                             "Split one document with a chunker and show the chunks."),
        "answer": LazyCommand(
            "aiblox.cli.answer:answer",
            "Answer QUESTION from the store's evidence with citations, or give the exact "
            "refusal."),
        "sweep": LazyCommand(
            "aiblox.cli.sweep:sweep",
            "Score every point of SPEC (only stages not cached), choose on the tune split, "
            "report on\nthe report split."),
        "report": LazyCommand(
            "aiblox.cli.report:report",
            "Write report.html (no network needed to view it) and report.md for SWEEP."),
        "compare": LazyCommand(
            "aiblox.cli.compare:compare",
            "Per-metric means and deltas (B - A) over the queries both runs have, with a paired "
            "test on\ntheir per-query values, corrected over the metrics, and win/tie/loss under "
            "each metric's\ndirection (for a cost such as tokens, a decrease is a win); the "
            "queries that moved most;\nfor selection-policy runs, the evidence that entered or "
            "left per query."),
        "runs": LazyCommand(runs_app, RUNS_HELP),
        "eval": LazyCommand(eval_app, EVAL_HELP),
        "pack": LazyCommand("aiblox.cli.pack:pack_app",
                            "Evidence packs: the auditable record of each answered query."),
        "cache": LazyCommand(
            "aiblox.cli.cache:cache_app",
            "The stage cache (.aiblox/stages): what it holds, pruning it, verifying it."),
        "index": LazyCommand(
            "aiblox.cli.index:index_app",
            "A store's derived indexes (BM25, vectors): built from its items, kept beside it, "
            "rebuilt when the items change."),
    }


app = typer.Typer(
    cls=MainGroup,  # one line `error: ...` (exit 2) for every input or environment fault
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


def main() -> None:
    """The ``aiblox`` console script (and ``python -m aiblox.cli``): :data:`app`, in a process
    that skips the interpreter's last garbage collection at exit (``gc.freeze`` from atexit).
    A command that loaded numpy, pandas, DuckDB and faiss spent ~0.2 s of its life in that pass
    (a fifth of a search at 1M) with nothing left to release: stores are closed and files
    flushed by their commands, atexit handlers still run, the OS takes the memory back."""
    import atexit
    import gc

    atexit.register(gc.freeze)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
