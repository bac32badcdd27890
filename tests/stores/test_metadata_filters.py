"""Metadata filters on array and object fields agree across backends (QA4 #5): an array field
matches when one of its scalar elements does, by the scalar rule (text, and numbers by value);
an object field, and an array's nested arrays and objects, match nothing, whatever JSON text a
filter spells (DuckDB writes ``["a","b"]``, PostgreSQL ``["a", "b"]``); scalar fields as before;
a dict or nested list as a filter value is refused."""

from __future__ import annotations

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
