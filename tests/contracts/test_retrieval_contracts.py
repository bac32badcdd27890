"""The retriever seed's contracts: keys, defaults, strictness, documentation."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

import aiblox.contracts as contracts
from aiblox.contracts import CancellationToken, CancelledError, RequestContext, RetrievalPrefs


def test_seed_defaults():
    p = RetrievalPrefs(query_text="q")
    assert (p.top_k_items, p.top_k_chunks, p.per_item_chunk_cap) == (20, 12, 3)
    assert p.fts.model_dump(include={"mode", "config", "rank_func", "min_rank"}) == {
        "mode": "web", "config": None, "rank_func": "ts_rank_cd", "min_rank": None}
    assert p.vector.model_dump(include={"embed_query", "distance", "min_score"}) == {
        "embed_query": True, "distance": "cosine", "min_score": None}
    assert p.scoring.model_dump(include={"blend", "w_text", "w_vec", "normalize"}) == {
        "blend": "rrf", "w_text": 0.35, "w_vec": 0.65, "normalize": "sigmoid"}
    assert p.chunking.strategy == "late" and p.chunking.include_headers is True
    assert p.cache.model_dump() == {"use_chunk_cache": True, "write_chunk_cache": True,
                                    "ttl_seconds": None}
    assert p.snippet.model_dump() == {"max_chars": 360, "prefer_chunk_snippet": True}
    assert p.filters == {} and p.debug is False


@pytest.mark.parametrize("bad", [
    {"scoring": {"blnd": "rrf"}},
    {"fts": {"mode": "fuzzy"}},
    {"vector": {"distance": "manhattan"}},
    {"unknown_top_level": 1},
    {"top_k_items": 0},
])
def test_unknown_or_invalid_keys_rejected(bad):
    with pytest.raises(ValidationError):
        RetrievalPrefs(query_text="q", **bad)


def _models():
    for name in contracts.__all__:
        obj = getattr(contracts, name)
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            yield obj


@pytest.mark.parametrize("model", list(_models()), ids=lambda m: m.__name__)
def test_every_field_documented(model):
    undocumented = [f for f, info in model.model_fields.items() if not info.description]
    assert not undocumented, f"{model.__name__} fields without a docstring: {undocumented}"


def test_cancellation_token():
    ctx = RequestContext()
    ctx.cancellation.raise_if_cancelled()
    ctx.cancellation.cancel()
    assert ctx.cancellation.cancelled
    with pytest.raises(CancelledError):
        ctx.cancellation.raise_if_cancelled()
    assert RequestContext().request_id != RequestContext().request_id
    assert isinstance(RequestContext(cancellation=CancellationToken()).cancellation,
                      CancellationToken)


@given(title=st.text(st.characters(blacklist_categories=["Cs"])),
       text=st.text(st.characters(blacklist_categories=["Cs"])),
       metadata=st.dictionaries(st.text(min_size=1, max_size=5),
                                st.one_of(st.integers(), st.text(max_size=5), st.none()),
                                max_size=3))
def test_item_content_hash_is_the_canonical_json_hash(title, text, metadata):
    from aiblox.contracts import ItemRecord
    from aiblox.hashing import sha256_hex

    item = ItemRecord(id="x", title=title, text=text, metadata=metadata)
    assert item.content_hash == sha256_hex({"title": title, "text": text, "metadata": metadata})
    # remembered by content, never by object: a copy with other content hashes that content
    other = item.model_copy(update={"text": text + "!"})
    assert other.content_hash == sha256_hex({"title": title, "text": text + "!",
                                             "metadata": metadata})
    assert item.content_hash == sha256_hex({"title": title, "text": text, "metadata": metadata})
