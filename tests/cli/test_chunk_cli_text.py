"""``aiblox chunk``'s table shows document text, heading paths and file names as text: they
were read as Rich markup (``[/b]`` in a heading was an internal error, ``[bold]`` vanished, a
file named ``[red]x.md`` lost its name) and control characters reached the terminal raw."""

from typer.testing import CliRunner

from aiblox.cli.main import app

runner = CliRunner()


def _chunk(*args: str):
    return runner.invoke(app, ["chunk", *args], env={"AIBLOX_NO_PROGRESS": "1",
                                                     "COLUMNS": "300"})


def test_markup_in_a_heading_is_shown_not_read(tmp_path):
    doc = tmp_path / "m.md"
    doc.write_text("# Intro [/b]\nText [/foo].\n")
    r = _chunk("--text", str(doc), "--chunker", "headings")
    assert r.exit_code == 0, r.output  # was: error: internal error (MarkupError ...)
    assert "│ Intro [/b]" in r.stdout and "# Intro [/b] Text [/foo]." in r.stdout


def test_brackets_in_text_and_file_name_are_kept(tmp_path):
    doc = tmp_path / "[red]x.md"
    doc.write_text("plain [bold]bold[/bold] text.\n")
    r = _chunk("--text", str(doc))
    assert r.exit_code == 0, r.output
    assert "plain [bold]bold[/bold] text." in r.stdout  # was: "plain bold text."
    assert r.stdout.splitlines()[0].startswith("[red]x.md (30 chars): sentences(")


def test_control_characters_are_escaped(tmp_path):
    doc = tmp_path / "c.md"
    doc.write_text("red \x1b[31mtext\x00 here.\n")
    r = _chunk("--text", str(doc))
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout and "\x00" not in r.stdout
    assert "red \\x1b[31mtext\\x00 here." in r.stdout
