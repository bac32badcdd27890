"""The package type-checks: ``mypy aiblox`` (settings in pyproject.toml, mypy pinned in the
``test`` extra) reports no error, so an annotation that lies fails CI like a wrong value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_mypy_reports_no_errors():
    pytest.importorskip("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy", "aiblox"], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout
