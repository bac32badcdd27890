"""The import contracts in ``pyproject.toml`` (import-linter): layers one way, the pipeline's parts
independent, pure layers free of databases and models, no cycles between sibling modules, imports
made for type checking only included. The contracts hold on this checkout, and they do catch an
upward import, a cycle and a cycle one of whose imports is for type checking only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the ``aiblox`` package under ``root``, with this repo's contracts."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run([sys.executable, "-c", code, "--config", str(REPO / "pyproject.toml"),
                           "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_contracts_hold():
    done = lint(REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("layers")
    shutil.copytree(REPO / "aiblox", root / "aiblox",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return root


def test_an_upward_import_breaks_the_layers(package_copy):
    bad = package_copy / "aiblox" / "fusion" / "upward.py"
    bad.write_text("from aiblox.engine import workspace  # noqa: F401\n")
    try:
        done = lint(package_copy)
    finally:
        bad.unlink()
    assert done.returncode != 0
    assert "aiblox.fusion.upward -> aiblox.engine" in done.stdout


def test_a_cycle_between_siblings_is_caught(package_copy):
    a = package_copy / "aiblox" / "text" / "cycle_a.py"
    b = package_copy / "aiblox" / "text" / "cycle_b.py"
    a.write_text("from aiblox.text import cycle_b  # noqa: F401\n")
    b.write_text("from aiblox.text import cycle_a  # noqa: F401\n")
    try:
        done = lint(package_copy)
    finally:
        a.unlink()
        b.unlink()
    assert done.returncode != 0
    assert "No cycles are allowed in aiblox.text" in done.stdout


def test_a_cycle_through_a_type_checking_import_is_caught(package_copy):
    a = package_copy / "aiblox" / "sweep" / "cycle_a.py"
    b = package_copy / "aiblox" / "sweep" / "cycle_b.py"
    a.write_text("from aiblox.sweep import cycle_b  # noqa: F401\n")
    b.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                 "    from aiblox.sweep import cycle_a  # noqa: F401\n")
    try:
        done = lint(package_copy)
    finally:
        a.unlink()
        b.unlink()
    assert done.returncode != 0
    assert "No cycles are allowed in aiblox.sweep" in done.stdout
