"""Texts BM25 cannot see: the DuckDB analyser here gives exactly the tokens of DuckDB's own fts
``tokenize`` macro (a real index built the store's way), and the gaps are the texts with
content but no token."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.text import DUCKDB_FTS, analyzer_tokens, lexical_gaps

SAMPLES = [
    "Hello world", "Café ÅNGSTRÖM Straße", "ﬁne ½ Ⅷ ǅ", "信息检索的评价", "猫が好き",
    "Привет мир", "Ωmega x", "😀 🔍", "1984 2001", "... --- !!!", "", "naïve façade résumé",
    "e.g. U.S.A.", "mañana ÇA", "İstanbul", "ΣΊΣΥΦΟΣ", "x\u0301y", "\u00a0\u2003tab\tnew\nline",
    "한국어 텍스트", "العربية", "हिन्दी", "ǈuto", "ﬀ", "Ⓐⓑ", "𝐁𝐨𝐥𝐝",
    "A\U00016f51A", "a\u0903b", "x\u20ddy",  # spacing and enclosing marks, dropped like accents
]


@pytest.fixture(scope="module")
def duckdb_tokenize():
    """DuckDB's tokenizer from a real fts index made with the DuckDB store's options."""
    from aiblox.stores.duckdb_fts import load_extension

    con = duckdb.connect()
    load_extension(con, "fts")
    con.execute("CREATE TABLE t (id VARCHAR, title VARCHAR, text VARCHAR)")
    con.execute("INSERT INTO t VALUES ('a', '', 'x')")
    con.execute("PRAGMA create_fts_index('t', 'id', 'title', 'text', stemmer='porter', "
                "stopwords='english', ignore='(\\.|[^a-z])+', strip_accents=1, lower=1)")

    def tokenize(text: str) -> list[str]:
        row = con.execute("SELECT fts_main_t.tokenize(?)", [text]).fetchone()
        return [t for t in (row[0] if row else []) if t]

    yield tokenize
    con.close()


@pytest.mark.parametrize("text", SAMPLES)
def test_duckdb_analyser_matches_duckdbs_tokenizer(duckdb_tokenize, text):
    assert analyzer_tokens(DUCKDB_FTS)(text) == duckdb_tokenize(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30))
def test_duckdb_analyser_matches_on_generated_text(duckdb_tokenize, text):
    # NUL is left out: DuckDB's text functions stop at it, and the loader refuses it
    assert analyzer_tokens(DUCKDB_FTS)(text) == duckdb_tokenize(text)


def test_gaps_are_texts_with_content_but_no_token():
    texts = [("en", "Hello world"), ("zh", "信息检索"), ("ja", "猫が好き"), ("ru", "Привет"),
             ("emoji", "😀 🔍"), ("digits", "1984"), ("punct", "... !!!"), ("empty", ""),
             ("mixed", "BM25 与 向量"), ("accent", "ÇA")]
    gaps = lexical_gaps(texts)
    assert gaps.ids == ("zh", "ja", "ru", "emoji", "digits")
    assert gaps.total == 10
    assert gaps.scripts == {"CJK": 2, "HIRAGANA": 1, "CYRILLIC": 1, "symbols/emoji": 1,
                            "digits": 1}
    line = gaps.describe()
    assert line.startswith("5 of 10 documents (e.g. doc 'zh') have text BM25 cannot index "
                           "under duckdb-fts (CJK 2, ")
    assert line.endswith("dense retrieval still sees it")
    assert not lexical_gaps([("en", "Hello")])


def test_the_check_follows_the_named_analyser():
    texts = [("zh", "信息检索"), ("one", "猫"), ("emoji", "😀")]
    assert lexical_gaps(texts, "duckdb-fts").ids == ("zh", "one", "emoji")
    assert lexical_gaps(texts, "bm25s").ids == ("one", "emoji")  # \w\w+: CJK runs count
    assert lexical_gaps(texts, "lexical-v1").ids == ("emoji",)
    with pytest.raises(ValueError, match="unknown lexical analyser 'nope'"):
        lexical_gaps(texts, "nope")
