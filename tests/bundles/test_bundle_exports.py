"""The bundles package's public API: sorted, complete ``__all__``; it stands apart: it imports
the core (hashing, text, stores), the core and the answer path never import it."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import aiblox
import aiblox.bundles as bundles

MODULES = [m.name for m in pkgutil.iter_modules(bundles.__path__)]


def _aiblox_imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aiblox"):
            names.append(node.module)
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.startswith("aiblox")]
    return names


def test_all_sorted_and_resolvable():
    assert bundles.__all__ == sorted(bundles.__all__)
    assert [n for n in bundles.__all__ if not hasattr(bundles, n)] == []
    for name in MODULES:
        mod = importlib.import_module(f"aiblox.bundles.{name}")
        assert mod.__all__ == sorted(mod.__all__), name
        assert [n for n in mod.__all__ if not hasattr(mod, n)] == [], name


def test_package_exports_the_models_the_builder_and_the_artifact():
    for name in ("EvidencePolicy", "EvidenceItem", "EvidenceBundle", "build_evidence_bundle",
                 "write_evidence_bundle", "read_evidence_bundle", "tracking_rows"):
        assert name in bundles.__all__


def test_bundles_import_only_the_core():
    allowed = ("aiblox.bundles", "aiblox.hashing", "aiblox.text", "aiblox.stores")
    for path in Path(bundles.__file__).parent.glob("*.py"):
        bad = [m for m in _aiblox_imports(path) if not m.startswith(allowed)]
        assert bad == [], f"{path.name}: {bad}"


def test_nothing_outside_the_bundles_imports_them():
    root = Path(aiblox.__file__).parent
    bad = [f"{path.relative_to(root)}: {m}"
           for path in root.rglob("*.py") if "bundles" not in path.relative_to(root).parts
           for m in _aiblox_imports(path) if m.startswith("aiblox.bundles")]
    assert bad == []
