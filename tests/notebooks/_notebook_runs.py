"""Helpers of the notebook tests: the notebooks' paths and their headless runs (imported by
the test modules beside it; pytest puts this folder on sys.path)."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO / "notebooks"
NOTEBOOKS = ("fusion_explorer", "chunking_lab", "policy_compare", "query_inspector",
             "sweep_board")



@cache
def run_notebook(name: str) -> dict[str, Any]:
    """Run ``notebooks/<name>.py`` headless in this process (what ``python <name>.py`` does:
    ``app.run()``, every widget at its default) and return the cells' definitions. Cached,
    so each notebook runs once per test session."""
    pytest.importorskip("marimo")
    spec = importlib.util.spec_from_file_location(f"aiblox_notebook_{name}",
                                                  NOTEBOOKS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _outputs, defs = module.app.run()
    return dict(defs)
