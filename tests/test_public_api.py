"""Each package exports a curated, sorted, complete ``__all__``; imports go one way only."""

import importlib
import pkgutil

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
