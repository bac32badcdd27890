"""Metadata filters as a contract: which fields a filter names, which values it takes, and what
a filter matches on every store.

``{"kind": "doc", "metadata.year": [2020, 2021]}`` means kind = 'doc' AND the metadata field
``year`` is 2020 or 2021. A filter is checked where it is written (:class:`RetrievalPrefs
<aiblox.contracts.RetrievalPrefs>`, so a sweep spec's ``[base]`` and a pipeline's ``retrieve``
stage, with the spec's file and line) by :func:`check_filters`, and again by the store that
reads it (``aiblox.stores.parse_filters``). A store matches it as follows, the same on DuckDB
and PostgreSQL (``tests/stores/test_metadata_filters.py`` holds both to it):

* **Keys.** ``id``, ``kind``, ``source`` and ``source_ref`` (:data:`FILTER_FIELDS`) name item
  columns, compared as text; anything else is ``metadata.<key>``, and a dotted key is a path
  into nested objects (``metadata.source.year``: ``{"source": {"year": 2020}}``), each name a
  key taken whole (``*``, ``$``, ``0``, spaces and quotes included). A step into anything but
  an object finds nothing: ``metadata.tags.0`` never reads an element of an array ``tags``.
* **Values.** A string, a number (finite) or a boolean, or a list of them (any one may match).
  ``None``, NaN and infinities, dicts, nested lists and other objects (a date: write the text
  stored, ``"2021-01-05"``) are refused, naming the key: a null or missing field is matched by
  no filter.
* **String and boolean fields** match by text: the filter's text (a string itself, a boolean
  as JSON spells it, ``true``, a number as Python's ``json`` writes it, ``2``, ``2.0``,
  ``1e-07``) equals the field's (a boolean field's ``true`` or ``false``). So ``2`` matches a
  field ``"2"`` and ``2.0`` does not, ``True`` and ``"true"`` both match a field ``true``.
* **Number fields** match by value, never by text: a number filter, or a string filter that is
  a number written as Python's ``json`` writes it (``"2"``, ``"2.5"``, ``"1e-07"``, ``"-0.0"``;
  not ``"1e-7"``, ``"0.0000001"``, ``"02"`` or ``" 2"``), matches a number field equal to it
  in value (``2`` matches ``2`` and ``2.0``). A number's value is the decimal its JSON text
  writes (a float's text is Python's shortest one, ``1e+23`` for ``1e23``, so ``10**23``
  matches a stored ``1e23``), compared exactly: whole numbers as integers (``2**53`` never
  matches a stored ``2**53 + 1``), other numbers as float64 (exact for them). A whole number of
  magnitude ``2**127`` or more (DuckDB's widest exact integer, HUGEINT, ends below it) never
  matches by value, as a filter or as a field. Two JSON texts of one value are one value,
  which the stores do not tell apart anyway (PostgreSQL keeps ``1e+20`` as
  ``100000000000000000000``, DuckDB writes ``1e-07`` back as ``1e-7``): when number fields
  matched by text, ``"1e-7"`` matched on DuckDB only and ``"0.0000001"`` on PostgreSQL only.
* **Array fields** match when one of their elements (a string, number or boolean) does by the
  rules above (a field ``"tags": ["a", "b"]`` matches ``"a"``); an object field, and an
  array's nested arrays and objects, match nothing.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator

__all__ = [
    "FILTER_FIELDS",
    "FILTER_RULE_VERSION",
    "FilterError",
    "Filters",
    "canonical_filters",
    "check_filters",
    "filter_values",
]

FILTER_FIELDS = ("id", "kind", "source", "source_ref")
"""Item columns a filter may name directly; anything else must be ``metadata.<key>``."""

FILTER_RULE_VERSION = "2"
"""The version of the matching rule above, in the keys of filtered searches only (a search
without filters keeps its key): 2: metadata paths step into objects only (PostgreSQL read
``tags.0`` as an array's element), a key ``*`` is a key (a DuckDB wildcard before), number
fields match by value alone and exactly (by text before, each store's own)."""


class FilterError(ValueError):
    """A filter no store can read; the message names its key and says what is wrong."""


def filter_values(key: str, value: Any) -> list[Any]:
    """The values the filter ``key`` may take (``value``, or its elements when it is a list,
    tuple, set or frozenset), each a string, a finite number or a boolean, and ``key`` one a store
    knows; else a :class:`FilterError`."""
    if key not in FILTER_FIELDS:
        name = key[len("metadata."):] if key.startswith("metadata.") else ""
        if not name:
            raise FilterError(f"unknown filter field {key!r}: use one of {FILTER_FIELDS} or "
                              f"'metadata.<key>'")
        if "" in name.split("."):
            raise FilterError(f"filter field {key!r}: an empty name in the metadata path "
                              f"(two dots in a row, or a dot at the end)")
    values = (list(value) if isinstance(value, list | tuple | set | frozenset)
              else [value])
    for v in values:
        problem = _value_problem(v)
        if problem is not None:
            raise FilterError(f"filter {key!r}: {problem}")
    return values


def _value_problem(v: Any) -> str | None:
    if isinstance(v, str | bool):
        return None
    if isinstance(v, int):
        try:
            str(v)
        except ValueError:  # past Python's int_max_str_digits: no JSON text here holds it
            return f"an integer of {v.bit_length():,} bits is too long to write as text"
        return None
    if isinstance(v, float):
        return None if math.isfinite(v) else (f"{v!r} is not a finite number (JSON metadata "
                                               f"holds no NaN or infinity)")
    if v is None:
        return ("None is not a string, number or boolean (no filter matches a null or "
                "missing field)")
    if isinstance(v, dict | list | tuple | set | frozenset):
        return (f"{v!r} is not a string, number or boolean; a filter matches such values (an "
                f"array field matches when one of its elements does)")
    if isinstance(v, datetime.date | datetime.time):
        return (f"{v!r} is not a string, number or boolean (metadata holds a date as text: "
                f"write the text stored, e.g. {v.isoformat()!r})")
    return f"{v!r} ({type(v).__name__}) is not a string, number or boolean"


def check_filters(filters: Mapping[str, Any]) -> Any:
    """``filters`` itself when every key and value is one a store reads
    (:func:`filter_values`); else a :class:`FilterError` naming the first bad key."""
    for key in sorted(filters):
        filter_values(key, filters[key])
    return filters


def _value_order(v: Any) -> tuple[int, Any]:
    """A total order over filter values: booleans, then numbers, then strings, each by value
    (values of one kind keep the order ``sorted`` gives them)."""
    return (0, v) if isinstance(v, bool) else (1, v) if isinstance(v, int | float) else (2, v)


def canonical_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    """``filters`` checked (:func:`check_filters`), each set or frozenset of values a sorted
    list and each tuple a list: the form a model holds and a cache key hashes. A set has no
    order of its own (its iteration order moves with ``PYTHONHASHSEED``), and one of strings
    and numbers together could not be hashed at all (``sorted`` refused it)."""
    check_filters(filters)
    out: dict[str, Any] = {}
    for key, value in filters.items():
        if isinstance(value, set | frozenset):
            value = sorted(value, key=_value_order)
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


Filters = Annotated[dict[str, Any], AfterValidator(canonical_filters)]
"""A model field of filters, checked as it is set (a pydantic ``ValidationError`` of the field:
a sweep spec reports it with its file and line) and held in canonical form
(:func:`canonical_filters`)."""
