"""Names a package exports, imported on first use (PEP 562), so importing the package stays
fast: ``aiblox`` (the front door) and ``aiblox.sweep`` both keep a name -> module table and
take their module ``__getattr__`` and ``__dir__`` from :func:`lazy_exports`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(namespace: dict[str, Any], exports: Mapping[str, str], names: Sequence[str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose ``globals()`` is ``namespace``:
    a name of ``exports`` (name -> the module that defines it) is imported on first use and
    kept in the package; any other is an :class:`AttributeError`; ``names`` (its ``__all__``)
    are listed before they are imported."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value  # imported once
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
