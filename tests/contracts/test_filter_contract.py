"""Filters are checked where they are written (QA8 s7): ``RetrievalPrefs(filters=...)`` took any
dict, so a date searched fine in ``matching_ids`` but raised a ``TypeError`` in a retriever's
``search_many``, ``None`` matched the string ``"None"``, and a sweep spec's bad ``[base]``
filters failed (without a line) only once its run had started. The keys of filtered searches
carry the version of what a filter matches, so a result cached under the old rule is not
reused."""

from __future__ import annotations

import datetime

import pytest
from pydantic import ValidationError

from aiblox.contracts import RetrievalPrefs
from aiblox.contracts.filter_rule import FILTER_RULE_VERSION, FilterError, check_filters
from aiblox.engine.builtin import RetrieveConfig


@pytest.mark.parametrize(("filters", "words"), [
    ({"lang": "en"}, "unknown filter field 'lang'"),
    ({"metadata.": 1}, "unknown filter field 'metadata.'"),
    ({"metadata.a..b": 1}, "an empty name in the metadata path"),
    ({"metadata.v": None}, "filter 'metadata.v': None is not a string, number or boolean"),
    ({"metadata.v": ["x", None]}, "filter 'metadata.v': None is not"),
    ({"metadata.v": float("nan")}, "filter 'metadata.v': nan is not a finite number"),
    ({"metadata.v": float("-inf")}, "-inf is not a finite number"),
    ({"metadata.v": {"a": 1}}, "{'a': 1} is not a string, number or boolean"),
    ({"metadata.v": [["a"]]}, "['a'] is not a string, number or boolean"),
    ({"metadata.d": datetime.date(2021, 1, 5)}, "write the text stored, e.g. '2021-01-05'"),
    ({"metadata.d": datetime.datetime(2021, 1, 5, 7)}, "e.g. '2021-01-05T07:00:00'"),
    ({"kind": object()}, "(object) is not a string, number or boolean"),
    ({"metadata.n": 10**5000}, "an integer of 16,610 bits is too long to write as text"),
])
def test_a_filter_no_store_reads_is_refused_as_it_is_set(filters, words):
    for model in (lambda: RetrievalPrefs(query_text="q", filters=filters),
                  lambda: RetrieveConfig(filters=filters)):
        with pytest.raises(ValidationError) as err:
            model()
        assert [e["loc"] for e in err.value.errors()] == [("filters",)]
        assert words in str(err.value)
    with pytest.raises(FilterError, match="filter"):
        check_filters(filters)


def test_filters_a_store_reads_are_kept_as_given():
    filters = {"kind": "doc", "metadata.year": [2020, 2021.5], "metadata.ok": True,
               "metadata.*": "x", "metadata.tags.0": ["a", "b"], "id": []}
    assert RetrievalPrefs(query_text="q", filters=filters).filters == filters
    assert RetrieveConfig(filters=filters).filters == filters
    as_tuple = {**filters, "metadata.tags.0": ("a", "b")}  # a tuple is held as a list
    assert RetrievalPrefs(query_text="q", filters=as_tuple).filters == filters


def test_a_set_of_values_is_held_as_a_sorted_list_so_its_key_is_one():
    """A set of strings and numbers together crashed the cache key (``sorted`` refused it, a
    ``TypeError`` from deep in the hashing); a set is held as a list in one order, so its key
    is the key of that list, in every process."""
    from aiblox.engine.configs import signals_config
    from aiblox.hashing import sha256_hex

    values = {"b", 2, "a", True, 1.5}
    held = [True, 1.5, 2, "a", "b"]
    prefs = RetrievalPrefs(query_text="q", filters={"metadata.v": values})
    assert prefs.filters == {"metadata.v": held}
    assert RetrieveConfig(filters={"metadata.v": frozenset(values)}).filters == prefs.filters
    as_list = RetrievalPrefs(query_text="q", filters={"metadata.v": held})
    assert (sha256_hex(signals_config(prefs, "h", "test", "duckdb", "m"))
            == sha256_hex(signals_config(as_list, "h", "test", "duckdb", "m")))


def test_only_filtered_searches_carry_the_filter_rule_in_their_key():
    from aiblox.engine.configs import signals_config

    def config(**kw):
        return signals_config(RetrievalPrefs(query_text="", **kw), "h", "test", "duckdb", "m")

    assert config(filters={"kind": "doc"})["filter_rule"] == FILTER_RULE_VERSION
    assert "filter_rule" not in config()
