"""``--help`` reads as prose at every level (issue 29): a flag shows no ``<bool>``, and a group's
command listing wraps each description to the panel, never keeping a docstring's line break in
the middle of a sentence."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from aiblox.cli.main import app

runner = CliRunner()
WIDTH = 100


def _paths() -> list[list[str]]:
    """Every command and group as the words that name it (``[]``: aiblox itself)."""
    root = typer.main.get_command(app)
    out: list[list[str]] = []

    def walk(cmd, path):
        out.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(root, [])
    return out


def _help(path: list[str]) -> str:
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH), "TERM": "dumb"})
    assert res.exit_code == 0, (path, res.output)
    return res.output


def _commands_panel(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("╭─ Commands"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    return [ln[2:-2] for ln in lines[start + 1:end]]  # inside "│ " ... " │"


def test_no_flag_shows_a_type():
    paths = _paths()
    assert ["eval", "verify"] in paths and ["pack", "show"] in paths and len(paths) > 15
    for path in paths:
        text = _help(path)
        assert "<bool>" not in text, path
    sweep = _help(["sweep"])
    assert any(ln.split("│")[1].split()[:2] == ["--json", "Print"]
               for ln in sweep.splitlines() if "--json" in ln)


def test_command_listings_wrap_as_prose():
    groups = [p for p in _paths() if p == [] or p in (["eval"], ["pack"], ["index"])]
    checked = 0
    for path in groups:
        rows = _commands_panel(_help(path))
        first = rows[0].split()
        col = rows[0].index(first[1], len(first[0]))  # where the descriptions start
        width = len(rows[0])
        for line, nxt in zip(rows, rows[1:], strict=False):
            name, desc, more = line[:col].strip(), line[col:].rstrip(), nxt[col:].split()
            if nxt[:col].strip() or not more:  # the next row is another command
                continue
            # a wrapped line breaks only where the next word would not fit
            assert len(desc) + 1 + len(more[0]) > width - col, (path, name, desc)
            checked += 1
    assert checked >= 5  # ingest, compare, runs ... wrap over lines


def test_no_help_text_loses_words_to_markup():
    """Every command's and option's help shows all its words: rich reads a lowercase
    ``[word]`` as a style tag and drops it (``--device`` once read "Where the embedder runs
    and a  model trains", its ``[finetune]`` gone)."""
    import re

    tag = re.compile(r"\[[a-z#/@][^\]\n]*\]")
    root = typer.main.get_command(app)
    found, seen = [], 0

    def walk(cmd, path):
        nonlocal seen
        for text in [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]:
            seen += 1
            found.extend((" ".join(path), m) for m in tag.findall(text))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(root, ["aiblox"])
    assert seen > 100 and not found, found
    assert "fine-tuned" in _help(["sweep"])
