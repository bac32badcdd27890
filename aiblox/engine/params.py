"""A stage's parameters as data: the error a pipeline that cannot be built raises, a parameter
value in hashable plain form (lists as tuples, tables as :class:`Table`; a set refused) and back,
and parameters layered over defaults key by key (a table over a table).

:mod:`aiblox.engine.algebra` builds pipelines of them and re-exports these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["PipelineError", "Table", "layered", "plain", "set_message", "unplain"]


class PipelineError(ValueError):
    """A pipeline that cannot be built: an unknown stage, a bad parameter, or a stage whose
    input does not fit where it is placed. The message names the stage."""


class Table(tuple[tuple[str, Any], ...]):
    """A table-valued parameter (``rm3(fts={"stemmer": "none"})``) in plain form: its
    ``(key, value)`` pairs sorted by key, hashable like the rest of a stage's parameters, and
    read back as a table (:meth:`~aiblox.engine.algebra.Stage.param_dict`), never as a list of
    pairs."""

    __slots__ = ()


def plain(value: Any, where: str = "a parameter") -> Any:
    """A parameter value in hashable plain form: a list becomes a tuple, a table a
    :class:`Table`. A set is refused (:class:`PipelineError` naming ``where``, the stage and
    the parameter): it has no order, so ``weights={0.7, 0.3}`` ran in one order and was keyed
    in another, and it keeps one of equal values (``{0.5, 0.5}`` is one weight)."""
    if isinstance(value, set | frozenset):
        raise PipelineError(f"{where}: {set_message(value)}")
    if isinstance(value, Mapping):
        return Table(sorted((str(k), plain(v, f"{where}.{k}")) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(plain(v, f"{where}[{i}]") for i, v in enumerate(value))
    return value


def set_message(written: Any) -> str:
    """Why a set is no parameter value (``written``: the set, or its text as written)."""
    text = written if isinstance(written, str) else repr(written)
    return (f"{text} is a set, which has no order and keeps one of equal values; write a "
            f"list or a tuple, in the order meant ([...])")


def unplain(value: Any) -> Any:
    """A :func:`plain` value as written: tables as dicts, tuples as lists."""
    if isinstance(value, Table):
        return {k: unplain(v) for k, v in value}
    if isinstance(value, tuple):
        return [unplain(v) for v in value]
    return value


def layered(defaults: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` over ``defaults``, a table over a table (or a config) key by key:
    ``rm3(fts={"stemmer": "none"})`` is the base's ``fts`` with another stemmer, not
    :class:`~aiblox.contracts.retrieval.FtsConfig`'s defaults with it; inline parameters over
    a ``[stages]`` table's, and a sweep's stage axis over a stage's own, the same way."""
    out = dict(defaults)
    for key, value in params.items():
        below = out.get(key)
        if isinstance(below, BaseModel):
            below = below.model_dump()
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            value = layered(below, value)
        out[key] = value
    return out
