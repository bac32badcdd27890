"""The evidence package's public API: sorted, complete ``__all__``; imports stay in layer."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import aiblox.evidence as ev

MODULES = [m.name for m in pkgutil.iter_modules(ev.__path__)]


def test_all_sorted_and_resolvable():
    assert ev.__all__ == sorted(ev.__all__)
    assert [n for n in ev.__all__ if not hasattr(ev, n)] == []
    for name in MODULES:
        mod = importlib.import_module(f"aiblox.evidence.{name}")
        assert mod.__all__ == sorted(mod.__all__), name
        assert [n for n in mod.__all__ if not hasattr(mod, n)] == [], name


def test_package_exports_every_public_model_and_builder():
    for name in (
        "EvidencePackOptions",
        "SourceItem",
        "DefaultEvidencePacker",
        "EvidencePack",
        "rag_sources_event",
        "verify_pack",
    ):
        assert name in ev.__all__


def test_evidence_imports_only_lower_layers():
    # assembly is the same layer (DESIGN.md): only answer_audit_pack reads its AnswerResult; the
    # evidence bundles (aiblox.bundles) stand apart: neither package imports the other
    allowed = ("aiblox.contracts", "aiblox.hashing", "aiblox.text", "aiblox.evidence",
               "aiblox.assembly.records")
    root = Path(ev.__file__).parent
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("aiblox")
            ):
                assert node.module.startswith(allowed), f"{path.name}: {node.module}"
            if isinstance(node, ast.Import):
                for a in node.names:
                    assert not a.name.startswith("aiblox") or a.name.startswith(allowed)
