"""``aiblox.text`` exports a sorted, complete public API and imports nothing to its right."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import aiblox.text as text


def test_all_is_sorted_and_complete() -> None:
    assert text.__all__ == sorted(text.__all__)
    for info in pkgutil.iter_modules(text.__path__):
        module = importlib.import_module(f"aiblox.text.{info.name}")
        assert module.__all__ == sorted(module.__all__), info.name
        missing = sorted(set(module.__all__) - set(text.__all__))
        assert not missing, f"aiblox.text.{info.name}: {missing}"


def test_imports_stay_in_the_pure_layer() -> None:
    allowed = ("aiblox.text", "aiblox.contracts", "aiblox.hashing")
    for path in Path(text.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module and module.startswith("aiblox"):
                assert module.startswith(allowed), f"{path.name} imports {module}"
