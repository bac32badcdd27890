"""Each package exports a curated, sorted, complete ``__all__``; imports go one way only."""

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import aiblox

PACKAGES = sorted(
    name for _, name, ispkg in pkgutil.walk_packages(aiblox.__path__, "aiblox.") if ispkg
)


@pytest.mark.parametrize("name", ["aiblox", *PACKAGES])
def test_all_is_sorted_and_importable(name):
    mod = importlib.import_module(name)
    exported = getattr(mod, "__all__", None)
    if name == "aiblox.cli":
        return  # the CLI is an entry point, not an API
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    missing = [n for n in exported if not hasattr(mod, n)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"


# The layer order README.md states under "Layout" ("Imports go one way"), left to right: a
# module may import only from its own layer or layers to its left. The helper modules hashing,
# compiled and memory import nothing from aiblox and sit with contracts.
LAYERS = [
    {"hashing", "contracts", "compiled", "memory"},
    {"text", "chunking", "fusion"},
    {"embedding", "stores", "indexes"},
    {"retrieval", "evidence", "assembly", "bundles"},
    {"eval"},
    {"cli"},
]


def _layer(part):
    for i, names in enumerate(LAYERS):
        if part in names:
            return i
    return None


def test_imports_go_one_way():
    root = Path(aiblox.__file__).parent
    bad = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).parts
        own = _layer(rel[0].removesuffix(".py"))
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith("aiblox."):
                target = _layer(node.module.split(".")[1])
                if target is not None and target > own:
                    bad.append(f"{'/'.join(rel)} imports {node.module}")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)
