"""Metadata filters on array and object fields agree across backends (QA4 #5): an array field
matches when one of its scalar elements does, by the scalar rule (text, and numbers by value);
an object field, and an array's nested arrays and objects, match nothing, whatever JSON text a
filter spells (DuckDB writes ``["a","b"]``, PostgreSQL ``["a", "b"]``); a dict or nested list
as a filter value is refused. Paths step into objects only, number fields match by value
exactly, never by a store's own JSON text, and ``None``, NaN or a date is refused (QA8 s7: the
rule is :mod:`aiblox.contracts.filter_rule`)."""

from __future__ import annotations

import datetime

import pytest

from aiblox.contracts import ItemRecord
from aiblox.stores import StoreError, ingest_items

META = {
    "arr": {"tags": ["a", "b"]},
    "mixed": {"tags": ["x", 2, 2.5, True, None, ["a"], {"k": "a"}]},
    "scalar": {"tags": "a"},
    "obj": {"tags": {"a": 1}},
    "nested": {"src": {"tags": ["a", 7]}},
    "none": {},
    "empty": {"tags": []},
    "num": {"tags": 2},
}

CASES = [  # filters -> ids matched, on every backend
    ({"metadata.tags": "a"}, ["arr", "scalar"]),
    ({"metadata.tags": ["b", "x"]}, ["arr", "mixed"]),
    ({"metadata.tags": 2}, ["mixed", "num"]),
    ({"metadata.tags": 2.0}, ["mixed", "num"]),
    ({"metadata.tags": "2"}, ["mixed", "num"]),
    ({"metadata.tags": 2.5}, ["mixed"]),
    ({"metadata.tags": True}, ["mixed"]),
    ({"metadata.tags": "k"}, []),
    ({"metadata.tags": '["a","b"]'}, []),
    ({"metadata.tags": '["a", "b"]'}, []),
    ({"metadata.tags": '{"a":1}'}, []),
    ({"metadata.tags": '{"a": 1}'}, []),
    ({"metadata.tags": '["a"]'}, []),
    ({"metadata.tags": "[]"}, []),
    ({"metadata.src.tags": 7}, ["nested"]),
    ({"metadata.src.tags": "a", "kind": "doc"}, ["nested"]),
]


@pytest.fixture()
def filled(store):
    ingest_items(store, [ItemRecord(id=i, text=f"text of {i}", metadata=m)
                         for i, m in META.items()], None, progress=False)
    return store


def test_array_and_object_fields_match_alike_on_every_backend(filled):
    got = [(f, filled.matching_ids(f)) for f, _ in CASES]
    assert got == [(f, sorted(ids)) for f, ids in CASES]


def test_search_filters_follow_the_same_rule(filled):
    hits = filled.fts_search_many(["text"], 10, filters={"metadata.tags": "a"})[0]
    assert sorted(i for i, _ in hits) == ["arr", "scalar"]


@pytest.mark.parametrize("value", [{"a": 1}, [["a", "b"]], [{"k": "a"}]])
def test_a_dict_or_nested_list_filter_value_is_refused(filled, value):
    with pytest.raises(StoreError, match="is not a string, number or boolean"):
        filled.matching_ids({"metadata.tags": value})


# QA8 s7: PostgreSQL read ``tags.0`` as an array's first element (``#>``), DuckDB raised a
# BinderException on a key ``*`` (``$."*"`` is a wildcard), number fields matched by each
# store's own JSON text (``"1e-7"`` on DuckDB only, ``"0.0000001"`` on PostgreSQL only, 10**20
# against a stored 1e20 on PostgreSQL only), and 2**53 matched a stored 2**53 + 1 (float64)
RULE_META = {
    "arr": {"tags": ["a", "b"], "m": [[1, 2], {"k": "v"}]},
    "arr2": {"tags": ["b", "a"]},
    "objkeys": {"m": {"1": {"k": "v"}}, "tags": {"0": "a"}},
    "star": {"*": "x", "s": {"*": "y"}},
    "odd": {"$": "d", "/": "sl", "~": "t", "a/b": 1},
    "big": {"n": 9007199254740993}, "f20": {"x": 1e20}, "e23": {"x": 1e23},
    "tiny": {"x": 1e-7}, "negz": {"x": -0.0}, "two": {"x": 2.0}, "int2": {"x": 2},
    "s2": {"x": "2"}, "huge": {"x": 10**40}, "half": {"x": 2.5},
    "nums": {"ns": [1e-7, 9007199254740993, "1e-7", 1e20]},
    "nonestr": {"v": "None"}, "nullv": {"v": None}, "truth": {"v": True}, "strtrue": {"v": "true"},
}

RULE_CASES = [  # filters -> ids matched, on every backend
    ({"metadata.tags.0": "a"}, ["objkeys"]),  # a key "0" of an object, never an array's element
    ({"metadata.tags.-1": "a"}, []),
    ({"metadata.m.1.k": "v"}, ["objkeys"]),
    ({"metadata.*": "x"}, ["star"]),
    ({"metadata.s.*": "y"}, ["star"]),
    ({"metadata.$": "d", "metadata./": "sl", "metadata.~": "t", "metadata.a/b": 1}, ["odd"]),
    ({"metadata.x": 10**20}, ["f20"]),
    ({"metadata.x": 1e20}, ["f20"]),
    ({"metadata.x": "1e+20"}, ["f20"]),
    ({"metadata.x": "100000000000000000000"}, ["f20"]),
    ({"metadata.x": 10**23}, ["e23"]),  # 1e23 writes 10**23 (its float64 is 10**23 - 8388608)
    ({"metadata.x": 1e23}, ["e23"]),
    ({"metadata.x": "1e-7"}, []),
    ({"metadata.x": "0.0000001"}, []),
    ({"metadata.x": "1e-07"}, ["tiny"]),
    ({"metadata.x": 1e-7}, ["tiny"]),
    ({"metadata.x": "-0.0"}, ["negz"]),
    ({"metadata.x": 0}, ["negz"]),
    ({"metadata.x": "2"}, ["int2", "s2", "two"]),
    ({"metadata.x": 2}, ["int2", "s2", "two"]),
    ({"metadata.x": 2.0}, ["int2", "two"]),
    ({"metadata.x": "2.0"}, ["int2", "two"]),
    ({"metadata.x": ["02", " 2", "+2", "2.50", "NaN"]}, []),
    ({"metadata.x": [2.5, 3]}, ["half"]),
    ({"metadata.x": 10**40}, []),  # past 2**127: no number field matches
    ({"metadata.n": 9007199254740992}, []),
    ({"metadata.n": 9007199254740992.0}, []),
    ({"metadata.n": 9007199254740993}, ["big"]),
    ({"metadata.n": "9007199254740993"}, ["big"]),
    ({"metadata.ns": 9007199254740992}, []),
    ({"metadata.ns": 1e-7}, ["nums"]),
    ({"metadata.ns": "1e-7"}, ["nums"]),  # the element "1e-7", a string
    ({"metadata.ns": 10**20}, ["nums"]),
    ({"metadata.v": "None"}, ["nonestr"]),
    ({"metadata.v": True}, ["strtrue", "truth"]),
    ({"metadata.v": "true"}, ["strtrue", "truth"]),
]


@pytest.fixture()
def ruled(store):
    ingest_items(store, [ItemRecord(id=i, text=f"text of {i}", metadata=m)
                         for i, m in RULE_META.items()], None, progress=False)
    return store


def test_paths_and_numbers_match_alike_on_every_backend(ruled):
    got = [(f, ruled.matching_ids(f)) for f, _ in RULE_CASES]
    assert got == [(f, sorted(ids)) for f, ids in RULE_CASES]


def test_search_reads_a_star_key_and_an_object_path(ruled):
    hits = ruled.fts_search_many(["text"], 30, filters={"metadata.*": "x"})[0]
    assert [i for i, _ in hits] == ["star"]
    hits = ruled.fts_search_many(["text"], 30, filters={"metadata.tags.0": "a"})[0]
    assert [i for i, _ in hits] == ["objkeys"]


@pytest.mark.parametrize(("value", "words"), [
    (None, "None is not a string, number or boolean"),
    ([None], "None is not a string, number or boolean"),
    (float("nan"), "nan is not a finite number"),
    (float("inf"), "inf is not a finite number"),
    ([1, float("-inf")], "-inf is not a finite number"),
    (datetime.date(2021, 1, 5), "write the text stored, e.g. '2021-01-05'"),
    (b"x", "(bytes) is not a string, number or boolean"),
])
def test_a_value_no_field_holds_is_refused_naming_its_key(ruled, value, words):
    with pytest.raises(StoreError, match="filter 'metadata.v'") as err:
        ruled.matching_ids({"metadata.v": value})
    assert words in str(err.value)
