"""A value a contract refuses, said in words: what is wrong with it and which values are valid.

pydantic's own messages name its internal field path and a type tag (``fts.top_k: Input should
be greater than or equal to 1 [type=greater_than_equal, ...]``). :func:`value_problem` reads the
field's constraints instead (its type and ``ge``/``gt``/``le``/``lt`` bounds, whether it takes
NaN and infinities) and says ``out of range; valid: a whole number >= 1``, so a command can
name the option the user typed (``--depth 0: out of range; valid: a whole number >= 1``) and a
sweep spec the key (``base.fts.top_k``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from aiblox.contracts.retrieval import MAX_DEPTH

__all__ = ["field_info", "refuse_coercions", "valid_values", "value_problem"]

_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def field_info(model: type[BaseModel], loc: Sequence[Any]) -> FieldInfo | None:
    """The field of ``model`` at ``loc`` (a pydantic error's ``loc``: ``("fts", "top_k")``),
    through nested models; None when ``loc`` names no field."""
    info: FieldInfo | None = None
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not isinstance(part, str) or not isinstance(fields, Mapping) or part not in fields:
            return None
        info = fields[part]
        current = _model_of(info.annotation)
    return info


def _model_of(annotation: Any) -> Any:
    """The pydantic model an annotation holds (``FtsConfig``, ``FtsConfig | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _kind(annotation: Any) -> str | None:
    args = set(get_args(annotation)) or {annotation}
    args.discard(type(None))
    if args == {int}:
        return "a whole number"
    if args <= {int, float} and args:
        return "a number"
    return None


def valid_values(model: type[BaseModel], loc: Sequence[Any]) -> str | None:
    """The values the numeric field at ``loc`` takes, in words (``a whole number >= 1``, ``a
    finite number from 0 to 1``), or None for another field."""
    info = field_info(model, loc)
    if info is None:
        return None
    kind = _kind(info.annotation)
    if kind is None:
        return None
    bounds: dict[str, Any] = {}
    for meta in info.metadata:
        for name, _ in _BOUNDS:
            value = getattr(meta, name, None)
            if value is not None:
                bounds[name] = value
    finite = kind == "a number" and not _takes_inf_nan(model, loc)
    words = kind.replace("a number", "a finite number") if finite else kind
    low = next(((n, s) for n, s in _BOUNDS[:2] if n in bounds), None)
    high = next(((n, s) for n, s in _BOUNDS[2:] if n in bounds), None)
    if low and high and high[0] == "le" and bounds["le"] >= MAX_DEPTH:  # a machine limit
        words += f" {low[1]} {_num(bounds[low[0]])} (at most {_num(bounds['le'])})"
    elif low and high and low[0] == "ge" and high[0] == "le":
        words += f" from {_num(bounds['ge'])} to {_num(bounds['le'])}"
    else:
        words += " and".join(f" {b[1]} {_num(bounds[b[0]])}" for b in (low, high) if b)
    if getattr(info, "default", ...) is None:
        words += ", or none"
    return words


def _takes_inf_nan(model: type[BaseModel], loc: Sequence[Any]) -> bool:
    owner: Any = model
    for part in loc[:-1]:
        owner = _model_of(owner.model_fields[part].annotation)
        if owner is None:
            return True
    return bool(owner.model_config.get("allow_inf_nan", True))


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_WHY = {
    "greater_than_equal": "out of range", "greater_than": "out of range",
    "less_than_equal": "out of range", "less_than": "out of range",
    "finite_number": "not a finite number", "int_parsing": "not a whole number",
    "int_from_float": "not a whole number", "float_parsing": "not a number",
}


def value_problem(model: type[BaseModel], error: Mapping[str, Any]) -> str:
    """What is wrong with the value of one pydantic ``error`` of ``model`` and, for a numeric
    field, the valid values: ``out of range; valid: a whole number >= 1``. Other errors keep
    pydantic's message (without its ``Value error,`` prefix)."""
    msg = str(error.get("msg", "")).removeprefix("Value error, ")
    why = _WHY.get(str(error.get("type", "")))
    valid = valid_values(model, error.get("loc", ()))
    if why is None:
        return msg
    return f"{why}; valid: {valid}" if valid else msg


def _wanted(annotation: Any) -> str | None:
    """What a field of this annotation takes, when it is a number or a flag (``a whole number``,
    ``a number``, ``true or false``); None for anything else."""
    args = set(get_args(annotation)) or {annotation}
    return "true or false" if args - {type(None)} == {bool} else _kind(annotation)


def refuse_coercions(prefix: str, values: Mapping[str, Any],
                     models: Sequence[type[BaseModel]]) -> None:
    """Refuse a value pydantic would coerce into a number or a flag of one of ``models``: a
    flag or a string where a number is expected (``top_k_items = true`` became 1, ``"10"``
    became 10), anything but ``true``/``false`` where a flag is (whole or decimal numbers where a
    decimal is expected stay fine). Nested tables (``fts = {top_k = 20}``) are walked into;
    ``ValueError`` names the key (``base.top_k_items: got True: expected a whole number``)."""
    for key, value in values.items():
        info = next((m.model_fields[key] for m in models if key in m.model_fields), None)
        if info is None:
            continue
        nested = _model_of(info.annotation)
        if nested is not None and isinstance(value, Mapping):
            refuse_coercions(f"{prefix}.{key}" if prefix else key, value, [nested])
            continue
        wanted = _wanted(info.annotation)
        bad = (not isinstance(value, bool) if wanted == "true or false"
               else isinstance(value, bool | str) if wanted else False)
        if bad and value is not None:
            where = f"{prefix}.{key}" if prefix else key
            raise ValueError(f"{where}: got {value!r}: expected {wanted}")
