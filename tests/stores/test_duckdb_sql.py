"""Plain parameters written into the SQL text read back as DuckDB binds them."""

from __future__ import annotations

import random

import duckdb
import pytest

from aiblox.stores.duckdb_sql import INLINE_LIST_MAX, Connection, inline_parameters

TEXTS = ["", "plain", "it's", "''", "'; DROP TABLE t; --", "back\\slash\\'", "?", "a ? b",
         "line\nbreak\ttab", "Ünïcode 日本語 🙂", '"double"', "$1", "\\x00 (spelled)", " "]


@pytest.fixture()
def con():
    raw = duckdb.connect()
    yield Connection(raw)
    raw.close()


def _both(con, sql, params):
    inlined = inline_parameters(sql, params)
    assert inlined is not None, (sql, params)
    return con._con.execute(inlined).fetchall(), con._con.execute(sql, params).fetchall()


@pytest.mark.parametrize("text", TEXTS)
def test_strings_read_back_exactly(con, text):
    got, bound = _both(con, "SELECT ?, typeof(?)", [text, text])
    assert got == bound == [(text, "VARCHAR")]


def test_random_strings_numbers_and_lists_read_back_as_bound(con):
    rng = random.Random(0)
    alphabet = "ab'\"?\\ \n;-–ü🙂"
    for _ in range(200):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        i = rng.randrange(-2**63, 2**63)
        f = rng.choice([0.1, -0.0, 1e-300, 1.7976931348623157e308, rng.uniform(-1e9, 1e9)])
        ids = [rng.choice(TEXTS) + str(k) for k in range(rng.randrange(1, 20))]
        got, bound = _both(con, "SELECT ?, ?, ?, ?, ?, ?::VARCHAR[], ?", [s, i, f, True, None, ids,
                                                                          [3, 1, 2]])
        assert got == bound and repr(got[0][2]) == repr(f)


def test_placeholders_inside_quotes_are_text(con):
    sql = "SELECT '?' AS \"x?\", ? AS y, 'it''s ?' AS z"
    assert inline_parameters(sql, ["v"]) == "SELECT '?' AS \"x?\", 'v' AS y, 'it''s ?' AS z"
    assert con.execute(sql, ["v"]).fetchall() == [("?", "v", "it's ?")]


@pytest.mark.parametrize("params", [
    ["a", "b"],                      # more parameters than placeholders
    [],                              # fewer
    {"a": 1},                        # named
    [b"bytes"], ["nul\x00"], [float("nan")], [[]], [["a", 1]], [2**64],
    [list(range(INLINE_LIST_MAX + 1))],
])
def test_anything_else_is_bound(con, params):
    """Not plain, or not matching: left to DuckDB's binding (which still runs or refuses)."""
    assert inline_parameters("SELECT ?", params) is None


def test_a_store_on_the_connection_runs_as_before(tmp_path):
    from aiblox.stores import DuckDBStore

    store = DuckDBStore(tmp_path / "s.duckdb")
    try:
        assert isinstance(store.con, Connection)
        store.put_embeddings("m'1", [("h'1", [1.0, 2.0]), ("h2", [3.0, 4.0])])
        got = store.get_embeddings("m'1", ["h'1", "h2", "missing"])
        assert {k: v.tolist() for k, v in got.items()} == {"h'1": [1.0, 2.0], "h2": [3.0, 4.0]}
        assert store.get_embeddings("m'1", []) == {}
    finally:
        store.close()
