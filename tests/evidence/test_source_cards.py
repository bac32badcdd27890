"""Evidence packer: the seed's unit tests plus invalid-input and property tests."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from aiblox.contracts.retrieval import CandidateItem, EvidenceChunk
from aiblox.evidence import (
    DefaultEvidencePacker,
    EvidencePacker,
    EvidencePackOptions,
    SourceItem,
    cut_snippet,
    rag_debug_event,
    rag_sources_event,
    retrieval_rank,
)
from aiblox.hashing import canonical_json


def cand(item_id: str, score: float, **kw) -> CandidateItem:
    return CandidateItem(item_id=item_id, kind="doc", source="test", score=score, **kw)


def chunk(item_id: str, score: float, text: str, **kw) -> EvidenceChunk:
    return EvidenceChunk(item_id=item_id, score=score, text=text, **kw)


PACKER = DefaultEvidencePacker()


def test_default_packer_satisfies_protocol():
    assert isinstance(PACKER, EvidencePacker)


def test_chunk_snippet_preference_picks_highest_scoring_chunk():
    cands = [cand("a", 0.9, summary="the summary of a")]
    chunks = [
        chunk("a", 0.2, "low chunk"),
        chunk("a", 0.8, "best   chunk\n text"),
        chunk("b", 0.99, "chunk of another item"),
    ]
    [src] = PACKER.pack(cands, chunks, EvidencePackOptions())
    assert src.snippet == "best chunk text"  # whitespace collapsed
    assert src.snippet_from == "chunk"


def test_chunk_snippet_is_cut_to_max_snippet_chars():
    long = "word " * 200
    [src] = PACKER.pack(
        [cand("a", 1.0)], [chunk("a", 1.0, long)], EvidencePackOptions(max_snippet_chars=20)
    )
    assert src.snippet is not None and len(src.snippet) <= 20
    assert src.snippet.endswith("\u2026")
    assert src.snippet == "word word word word\u2026"


def test_chunk_score_tie_breaks_on_chunk_id():
    chunks = [chunk("a", 0.5, "second", chunk_id="c2"), chunk("a", 0.5, "first", chunk_id="c1")]
    [src] = PACKER.pack([cand("a", 1.0)], chunks, EvidencePackOptions())
    assert src.snippet == "first"


def test_doc_fallback_when_no_chunk_or_chunks_not_preferred():
    cands = [cand("a", 0.9, summary="A summary."), cand("b", 0.5)]
    chunks = [chunk("a", 0.9, "chunk text")]
    a, b = PACKER.pack(cands, chunks, EvidencePackOptions(prefer_chunk_snippets=False))
    assert (a.snippet, a.snippet_from) == ("A summary.", "doc")
    assert (b.snippet, b.snippet_from) == (None, "unknown")
    # no chunk for the item: summary, then the candidate's own snippet
    [c] = PACKER.pack([cand("c", 1.0, snippet="own snippet")], chunks, EvidencePackOptions())
    assert (c.snippet, c.snippet_from) == ("own snippet", "doc")
    [d] = PACKER.pack(
        [cand("d", 1.0, snippet="from chunk", snippet_from="chunk")], None, EvidencePackOptions()
    )
    assert d.snippet_from == "chunk"


def test_blank_chunk_text_falls_back_to_doc():
    [src] = PACKER.pack(
        [cand("a", 1.0, summary="sum")], [chunk("a", 1.0, "   \n ")], EvidencePackOptions()
    )
    assert (src.snippet, src.snippet_from) == ("sum", "doc")


def test_metadata_include_and_exclude():
    meta = {"lang": "en", "year": 2020, "secret": "x", "author": "Ann"}
    c = [cand("a", 1.0, metadata=meta)]
    [inc] = PACKER.pack(c, None, EvidencePackOptions(include_metadata_keys=["lang", "year", "no"]))
    assert inc.metadata == {"lang": "en", "year": 2020}
    [exc] = PACKER.pack(c, None, EvidencePackOptions(exclude_metadata_keys=["secret"]))
    assert exc.metadata == {"author": "Ann", "lang": "en", "year": 2020}
    [both] = PACKER.pack(
        c,
        None,
        EvidencePackOptions(
            include_metadata_keys=["lang", "secret"], exclude_metadata_keys=["secret"]
        ),
    )
    assert both.metadata == {"lang": "en"}


def test_an_exclude_list_narrows_the_safe_subset_never_widens_it():
    """Excluding one key turned the safe subset off: ``_secret``, the document's ``text`` and
    ``content`` and its embedding reached the UI card (QA; the seed: metadata exposure is
    explicitly controlled to avoid accidental leakage, no large content in-band). Keys named
    in ``include_metadata_keys`` are exposed as they are: named one by one, not by accident."""
    meta = {"author": "x", "text": "FULL TEXT", "_secret": "internal-token", "year": 1994,
            "embedding": [0.1] * 5, "content": "raw", "huge": "x" * 5000}
    c = [cand("a", 1.0, metadata=meta)]
    [exc] = PACKER.pack(c, None, EvidencePackOptions(exclude_metadata_keys=["year"]))
    assert exc.metadata == {"author": "x"}
    [none] = PACKER.pack(c, None, EvidencePackOptions(exclude_metadata_keys=[]))
    assert none.metadata == PACKER.pack(c, None, EvidencePackOptions())[0].metadata
    [inc] = PACKER.pack(c, None, EvidencePackOptions(include_metadata_keys=["author", "text"],
                                                     exclude_metadata_keys=["author"]))
    assert inc.metadata == {"text": "FULL TEXT"}


def test_default_metadata_is_safe_subset():
    meta = {
        "lang": "en",
        "_internal": 1,
        "text": "full text of the doc",
        "embedding": [0.1, 0.2],
        "huge": "x" * 5000,
        "tags": ["a", "b"],
        "nan": math.nan,
        "nested": {"a": 1},
        "obj": object(),
    }
    [src] = PACKER.pack([cand("a", 1.0, metadata=meta)], None, EvidencePackOptions())
    assert src.metadata == {"lang": "en", "tags": ["a", "b"]}


def test_ordering_by_score_rank_and_input():
    cands = [
        cand("b", 0.5, rank_text=1),
        cand("a", 0.5, rank_vec=3),
        cand("c", 0.9, rank_text=2, rank_vec=5),
        cand("d", 0.1),
    ]

    def ids(order):
        return [s.source_id for s in PACKER.pack(cands, None, EvidencePackOptions(order_by=order))]

    assert ids("score") == ["c", "a", "b", "d"]  # tie 0.5 broken by item_id asc
    assert ids("rank") == ["b", "c", "a", "d"]  # unranked last
    assert ids("input") == ["b", "a", "c", "d"]
    ranks = [s.rank for s in PACKER.pack(cands, None, EvidencePackOptions())]
    assert ranks == [1, 2, 3, 4]


def test_rank_ordering_uses_the_retrieval_rank_not_stored_metadata():
    """Packer seed: ``order_by="rank"`` uses the retrieval rank. ``metadata`` is the item's
    metadata as stored (a league table's "rank", a priority), not retrieval output: y's stored
    rank 1 must not put it before x, retrieved first."""
    cands = [cand("y", 0.2, metadata={"rank": 1}, rank_text=9), cand("x", 0.1, rank_text=1)]
    out = PACKER.pack(cands, None, EvidencePackOptions(order_by="rank"))
    assert [s.source_id for s in out] == ["x", "y"]
    assert retrieval_rank(cands[0]) == 9
    assert retrieval_rank(cand("z", 0.3, metadata={"rank": 2})) is None
    assert out[1].metadata == {"rank": 1}  # still shown as metadata


def test_infinite_scores_sort_as_descending_scores_and_stay_valid_json():
    """Packer seed: default ordering by descending score. +inf is the highest score (first),
    -inf the lowest (after every finite score), NaN has no place (last); the card's score is
    None when not finite, so the rag.sources payload is valid JSON."""
    cands = [
        cand("fin", 0.5),
        cand("nan", math.nan),
        cand("neg", -math.inf),
        cand("pos", math.inf),
        cand("low", -1e300),
    ]
    out = PACKER.pack(cands, None, EvidencePackOptions())
    assert [s.source_id for s in out] == ["pos", "fin", "low", "neg", "nan"]
    assert [s.score for s in out] == [None, 0.5, -1e300, None, None]
    json.dumps(rag_sources_event(out), allow_nan=False)
    # ties on retrieval rank are broken by the same descending score
    ranked = [cand("a", 0.5, rank_text=1), cand("b", math.inf, rank_vec=1)]
    by_rank = PACKER.pack(ranked, None, EvidencePackOptions(order_by="rank"))
    assert [s.source_id for s in by_rank] == ["b", "a"]
    # the best chunk of an item is its +inf chunk
    [src] = PACKER.pack(
        [cand("a", 1.0)],
        [chunk("a", 0.9, "finite chunk"), chunk("a", math.inf, "infinite chunk")],
        EvidencePackOptions(),
    )
    assert src.snippet == "infinite chunk"


def test_max_sources_and_duplicates():
    cands = [cand("a", 0.9), cand("a", 0.8), cand("b", 0.7), cand("c", 0.6)]
    out = PACKER.pack(cands, None, EvidencePackOptions(max_sources=2))
    assert [s.source_id for s in out] == ["a", "b"]
    assert out[0].score == 0.9
    assert PACKER.pack(cands, None, EvidencePackOptions(max_sources=0)) == []


def test_url_only_from_http_refs():
    [a, b] = PACKER.pack(
        [cand("a", 1.0, source_ref="https://ex.org/a"), cand("b", 0.5, source_ref="/etc/passwd")],
        None,
        EvidencePackOptions(),
    )
    assert a.url == "https://ex.org/a"
    assert b.url is None


def test_determinism_same_bytes_and_input_order_independent():
    cands = [
        cand(f"d{i}", round(1 / (i + 1), 3), title=f"T{i}", summary=f"s{i}", metadata={"k": i})
        for i in range(10)
    ]
    chunks = [chunk(f"d{i}", 0.5, f"chunk {i}") for i in range(0, 10, 2)]
    opts = EvidencePackOptions()
    one = canonical_json(rag_sources_event(PACKER.pack(cands, chunks, opts)))
    two = canonical_json(
        rag_sources_event(PACKER.pack(list(reversed(cands)), list(reversed(chunks)), opts))
    )
    assert one == two
    assert one == canonical_json(rag_sources_event(PACKER.pack(cands, chunks, opts)))


def test_dict_input_accepted():
    out = PACKER.pack(
        [{"item_id": "a", "kind": "doc", "source": "s", "score": 1.0}],
        [{"item_id": "a", "score": 1.0, "text": "t"}],
        {"max_sources": 3},
    )
    assert [(s.source_id, s.snippet) for s in out] == [("a", "t")]


def test_invalid_input_gives_empty_list_and_reason():
    res = PACKER.pack_with_debug([{"item_id": "a"}], None, EvidencePackOptions(debug=True))
    assert res.sources == []
    assert res.debug is not None and "invalid candidate at index 0" in res.debug.reason
    assert PACKER.pack("not a list", None, EvidencePackOptions()) == []
    assert PACKER.pack(None, None, None) == []
    res = PACKER.pack_with_debug([], None, {"max_sources": "many"})
    assert res.sources == [] and "invalid options" in res.debug.reason
    # without debug, no debug record
    assert PACKER.pack_with_debug([{}], None, EvidencePackOptions()).debug is None


def test_invalid_chunks_are_ignored_and_counted():
    res = PACKER.pack_with_debug(
        [cand("a", 1.0, summary="s")], [{"bad": 1}, 3], EvidencePackOptions(debug=True)
    )
    assert [s.snippet_from for s in res.sources] == ["doc"]
    assert res.debug.invalid_chunks == 2 and res.debug.input_chunks == 2


def test_nan_score_orders_last_and_is_exposed_as_none():
    out = PACKER.pack([cand("a", math.nan), cand("b", 0.1)], None, EvidencePackOptions())
    assert [(s.source_id, s.score) for s in out] == [("b", 0.1), ("a", None)]
    canonical_json(rag_sources_event(out))  # serialisable


def test_options_reject_unknown_keys():
    with pytest.raises(ValidationError):
        EvidencePackOptions(max_source=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        SourceItem(source_id="a", kind="doc", extra=1)  # type: ignore[call-arg]


def test_cut_snippet_edges():
    assert cut_snippet(None, 10) is None
    assert cut_snippet("   ", 10) is None
    assert cut_snippet("abcdef", 1) == "\u2026"
    assert cut_snippet("abcdefghij", 5) == "abcd\u2026"


def test_events_shape():
    res = PACKER.pack_with_debug([cand("a", 1.0)], None, EvidencePackOptions(debug=True))
    ev = rag_sources_event(res.sources)
    assert ev["type"] == "rag.sources"
    assert ev["payload"]["sources"][0]["source_id"] == "a"
    dbg = rag_debug_event({"counts": {"fts": 3}}, res.debug)
    assert dbg == {
        "type": "rag.debug",
        "payload": {
            "retrieval": {"counts": {"fts": 3}},
            "packer": res.debug.model_dump(mode="json"),
        },
    }
    assert dbg["payload"]["packer"]["selected"] == 1


# ---- property test: arbitrary, including malformed, input never raises -------------------

_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_cand_dict = st.fixed_dictionaries(
    {
        "item_id": st.text(max_size=5),
        "kind": st.text(max_size=5),
        "source": st.just("s"),
        "score": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers()),
    },
    optional={
        "title": st.one_of(st.none(), st.text(max_size=10)),
        "summary": st.one_of(st.none(), st.text(max_size=50)),
        "metadata": st.dictionaries(st.text(max_size=5), _json, max_size=4),
        "rank_text": st.one_of(st.none(), st.integers(-3, 5)),
        "source_ref": st.one_of(st.none(), st.text(max_size=10)),
        "bogus": _json,
    },
)
_candidate_lists = st.one_of(st.lists(st.one_of(_cand_dict, _json), max_size=6), _json)
_chunk_lists = st.one_of(
    st.none(),
    _json,
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {
                    "item_id": st.text(max_size=5),
                    "score": st.floats(allow_nan=True),
                    "text": st.text(max_size=40),
                }
            ),
            _json,
        ),
        max_size=6,
    ),
)
_opts = st.one_of(
    st.none(),
    _json,
    st.fixed_dictionaries(
        {},
        optional={
            "max_sources": st.integers(-1, 5),
            "max_snippet_chars": st.integers(0, 30),
            "order_by": st.sampled_from(["score", "rank", "input", "other"]),
            "include_metadata_keys": st.one_of(st.none(), st.lists(st.text(max_size=5))),
            "debug": st.booleans(),
        },
    ),
)


@settings(max_examples=150, deadline=None)
@given(_candidate_lists, _chunk_lists, _opts)
def test_property_never_raises_and_is_deterministic(cands, chunks, opts):
    res = PACKER.pack_with_debug(cands, chunks, opts)
    assert isinstance(res.sources, list)
    out = canonical_json([s.model_dump(mode="json") for s in res.sources])
    again = PACKER.pack_with_debug(cands, chunks, opts)
    assert canonical_json([s.model_dump(mode="json") for s in again.sources]) == out
    assert [s.rank for s in res.sources] == list(range(1, len(res.sources) + 1))
    assert len({s.source_id for s in res.sources}) == len(res.sources)
