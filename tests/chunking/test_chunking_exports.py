"""``aiblox.chunking`` exports a sorted, complete public API."""

from __future__ import annotations

import importlib
import pkgutil

import aiblox.chunking as chunking


def test_all_is_sorted_and_resolves() -> None:
    assert chunking.__all__ == sorted(chunking.__all__)
    for name in chunking.__all__:
        assert getattr(chunking, name) is not None


def test_every_public_name_of_every_module_is_exported() -> None:
    for info in pkgutil.iter_modules(chunking.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"aiblox.chunking.{info.name}")
        assert module.__all__ == sorted(module.__all__), info.name
        # Factories are reached through the registry, not re-exported.
        public = [n for n in module.__all__ if n not in chunking.BUILTIN_CHUNKERS]
        missing = sorted(set(public) - set(chunking.__all__))
        assert not missing, f"aiblox.chunking.{info.name}: {missing}"


def test_no_import_from_layers_to_the_right() -> None:
    import ast
    from pathlib import Path

    allowed = ("aiblox.chunking", "aiblox.text", "aiblox.contracts", "aiblox.hashing")
    for path in Path(chunking.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module and module.startswith("aiblox"):
                assert module.startswith(allowed), f"{path.name} imports {module}"
