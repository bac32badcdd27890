"""The one place that decides progress (:mod:`aiblox.progress`): bars only on a terminal,
plain lines on a log or pipe (never ``\\r`` or escape codes), nothing when asked for none, with
``AIBLOX_NO_PROGRESS`` or in quiet mode."""

from __future__ import annotations

import re
import time

import pytest

from aiblox import progress


@pytest.fixture(autouse=True)
def _progress_on(monkeypatch):
    monkeypatch.delenv("AIBLOX_NO_PROGRESS", raising=False)
    progress.set_quiet(False)
    yield
    progress.set_quiet(False)


def test_plain_lines_when_stderr_is_not_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)  # a line at every tick
    bar = progress.progress_bar(3, "embedding (m)", unit="text")
    assert not hasattr(bar, "format_meter")  # not tqdm: capsys's stderr is no terminal
    bar.update(2)
    bar.update(1)
    bar.close()
    bar.close()  # once only
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    assert len(lines) == 3, lines
    assert re.fullmatch(r"embedding \(m\): 2/3 text \([0-9.]+ s\)", lines[0])
    assert re.fullmatch(r"embedding \(m\): 3/3 text \([0-9.]+ s\)", lines[1])
    assert re.fullmatch(r"embedding \(m\): 3/3 text in [0-9.]+ s", lines[2])


def test_a_short_loop_prints_nothing(capsys):
    bar = progress.progress_bar(10, "ingest", unit="doc")
    bar.update(10)
    bar.close()
    assert capsys.readouterr().err == ""


def test_phase_lines(capsys, monkeypatch):
    with progress.phase("signals: d test hybrid"):
        pass
    assert re.fullmatch(r"signals: d test hybrid \.\.\. [0-9.]+ s\n", capsys.readouterr().err)
    monkeypatch.setattr(progress, "PHASE_START_S", 0.01)
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    with progress.phase("signals: d test hybrid"):
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "signals: d test hybrid ... running"
    assert any(line.startswith("signals: d test hybrid ... still running (")
               for line in lines[1:-1])
    assert re.fullmatch(r"signals: d test hybrid \.\.\. [0-9.]+ s", lines[-1])


@pytest.mark.parametrize("off", ["quiet", "env", "caller"])
def test_off_means_silent(capsys, monkeypatch, off):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    monkeypatch.setattr(progress, "MIN_LINE_S", 0.0)
    if off == "quiet":
        progress.set_quiet(True)
    elif off == "env":
        monkeypatch.setenv("AIBLOX_NO_PROGRESS", "1")
    enabled = off != "caller"
    assert progress.progress_on(enabled) is False
    bar = progress.progress_bar(2, "x", enabled=enabled)
    bar.update(2)
    bar.close()
    assert bar.n == 2
    with progress.phase("y", enabled=enabled):
        pass
    assert capsys.readouterr().err == ""


def test_on_a_terminal_a_tqdm_bar(monkeypatch):
    monkeypatch.setattr(progress, "bars_on", lambda: True)
    bar = progress.progress_bar(2, "x")
    try:
        assert type(bar).__module__.startswith("tqdm")
    finally:
        bar.close()
