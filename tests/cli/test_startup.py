"""The CLI imports only what a command uses: ``aiblox --help``, ``aiblox eval --help`` and every
command's own ``--help`` import none of the heavy libraries (a fresh process each time: the
test process has them all loaded), and the lazily loaded commands are the ones typer builds.
Timings are not tested: ``benchmarks/cli_startup.py`` measures them."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from aiblox.cli._errors import AibloxGroup
from aiblox.cli._lazy import LazyCommand, LazyGroup
from aiblox.cli.main import EvalGroup, MainGroup, app

HEAVY = ["pandas", "mlflow", "numba", "torch", "duckdb", "ranx", "faiss",
         "sentence_transformers", "pyarrow", "sqlalchemy", "numpy", "scipy", "optuna", "ray",
         "bm25s", "tiktoken", "transformers", "psycopg", "aiblox.engine", "aiblox.stores",
         "aiblox.sweep", "aiblox.experiment", "aiblox.embedding", "aiblox.metrics",
         "aiblox.data", "aiblox.retrieval", "aiblox.assembly", "aiblox.evidence"]
"""Libraries (and aiblox's own layers over them) a command's startup must not import."""

HELPS = [["--help"], [], ["eval", "--help"], ["eval"], ["pack", "--help"], ["index", "--help"],
         ["cache", "--help"],
         *([name, "--help"] for name in MainGroup.lazy
           if name not in ("eval", "pack", "index", "cache")),
         ["eval", "run", "--help"], ["eval", "verify", "--help"], ["pack", "show", "--help"],
         ["pack", "verify", "--help"], ["pack", "export", "--help"], ["index", "list", "--help"],
         ["index", "build", "--help"], ["index", "drop", "--help"], ["cache", "list", "--help"],
         ["cache", "prune", "--help"], ["cache", "verify", "--help"]]

# one fresh process runs every help screen in turn and says, after each, which heavy modules
# are loaded (none may be: they would stay loaded for the next, so the first culprit is named)
DRIVER = """
import json, sys
heavy, helps = json.loads(sys.argv[1]), json.loads(sys.argv[2])
from aiblox.cli.main import app
loaded = {"import aiblox.cli.main": [m for m in heavy if m in sys.modules]}
for args in helps:
    try:
        app(args, prog_name="aiblox")
    except SystemExit:
        pass
    loaded["aiblox " + " ".join(args)] = [m for m in heavy if m in sys.modules]
sys.stderr.write(json.dumps(loaded))
"""


def test_help_and_every_commands_startup_import_no_heavy_module():
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(HEAVY), json.dumps(HELPS)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stderr.splitlines()[-1])
    assert len(loaded) == len(HELPS) + 1
    assert {k: v for k, v in loaded.items() if v} == {}
    assert "Commands" in proc.stdout and "--tracking-uri" in proc.stdout  # the helps ran


def _first_paragraph(command) -> str:
    return inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]


@pytest.mark.parametrize("group", [MainGroup, EvalGroup])
def test_summaries_are_the_loaded_commands_help(group):
    """Each summary the help lists without importing a command is the first paragraph of that
    command's help once loaded (what typer would list), so the two never drift apart."""
    for name, spec in group.lazy.items():
        assert _first_paragraph(spec.load(name)) == spec.summary, name


def test_help_lists_every_command_without_loading_it():
    """The listing comes from the summaries; every name still resolves to its real command."""
    click_app = typer.main.get_command(app)
    ctx = click_app.make_context("aiblox", ["--help"], resilient_parsing=True)
    assert click_app.list_commands(ctx) == list(MainGroup.lazy)
    assert not any(click_app.commands.is_loaded(n) for n in MainGroup.lazy)
    click_app.get_help(ctx)
    assert not any(click_app.commands.is_loaded(n) for n in MainGroup.lazy)
    sweep = click_app.get_command(ctx, "sweep")
    assert sweep is not None and "--tracking-uri" in [o for p in sweep.params for o in p.opts]
    assert click_app.commands.is_loaded("sweep") and not click_app.commands.is_loaded("runs")
    assert click_app.get_command(ctx, "no-such") is None


def test_option_defaults_are_the_librarys():
    """The defaults written in ``aiblox.cli._defaults`` (so that a command's options need none of
    the modules that own them) are their owners' values."""
    from aiblox.cli import _defaults
    from aiblox.engine.tracking import DEFAULT_TRACKING_URI
    from aiblox.experiment.table import EVAL_EXPERIMENT
    from aiblox.metrics import DEFAULT_METRICS
    from aiblox.sweep.axes import DEFAULT_MAX_POINTS
    from aiblox.sweep.runner import DEFAULT_CACHE_DIR
    from aiblox.text.tokens import DEFAULT_ENCODING

    assert _defaults.TRACKING_URI == DEFAULT_TRACKING_URI
    assert _defaults.EVAL_EXPERIMENT == EVAL_EXPERIMENT
    assert _defaults.METRICS == DEFAULT_METRICS
    assert _defaults.MAX_POINTS == DEFAULT_MAX_POINTS
    assert _defaults.STAGE_CACHE_DIR == DEFAULT_CACHE_DIR
    assert _defaults.TOKEN_ENCODING == DEFAULT_ENCODING


class _Broken(LazyGroup, AibloxGroup):
    lazy = {"broken": LazyCommand("aiblox.cli._no_such_module:command", "A broken command."),
            "ok": LazyCommand("aiblox.cli.runs:runs", "ok")}


def test_a_command_that_cannot_be_imported_is_one_error_line():
    """Importing a command happens when it runs, under the group's error handling: a missing
    module (an optional dependency) is one ``error:`` line, exit 2, and the other commands and
    the help still work."""
    broken = typer.Typer(cls=_Broken, add_completion=False)

    @broken.callback()
    def _main() -> None:
        pass

    runner = CliRunner()
    r = runner.invoke(broken, ["broken"], prog_name="aiblox")
    assert r.exit_code == 2, r.output
    assert "error: No module named 'aiblox.cli._no_such_module'" in r.output
    assert "missing optional dependency" in r.output
    r = runner.invoke(broken, ["--help"], prog_name="aiblox")
    assert r.exit_code == 0 and "A broken command." in r.output
    r = runner.invoke(broken, ["ok", "--help"], prog_name="aiblox")
    assert r.exit_code == 0 and "--tracking-uri" in r.output


def test_the_console_script_is_main():
    """The installed ``aiblox`` and ``python -m aiblox.cli`` run ``main`` (the app, in a process
    that skips the last garbage collection at exit), and its output is all there."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"aiblox": "aiblox.cli.main:main"}
    proc = subprocess.run([sys.executable, "-m", "aiblox.cli", "--version"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("aiblox "), proc.stderr
