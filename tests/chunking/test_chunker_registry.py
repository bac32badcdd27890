"""The chunker registry: built-ins, third-party chunkers, configs, errors."""

from __future__ import annotations

import pytest

from aiblox.chunking import (
    BUILTIN_CHUNKERS,
    Chunk,
    Chunker,
    ChunkerRegistry,
    UnknownChunkerError,
    default_registry,
    get_chunker,
    make_chunk_id,
    make_chunker,
)
from aiblox.contracts.retrieval import ChunkingConfig


class LinesChunker:
    """A third-party chunker: one chunk per non-blank line."""

    def __init__(self, max_chunk_tokens: int = 100, **_: object) -> None:
        self.chunker_id = f"lines(max={max_chunk_tokens})"

    def chunk(self, item_id: str, text: str, content_hash: str) -> list[Chunk]:
        out, pos = [], 0
        for line in text.splitlines(keepends=True):
            if line.strip():
                start = pos + len(line) - len(line.lstrip())
                end = pos + len(line.rstrip())
                out.append(Chunk(item_id=item_id, text=text[start:end], start_idx=start,
                                 end_idx=end, token_count=1, position=len(out),
                                 chunk_id=make_chunk_id(item_id, content_hash, self.chunker_id,
                                                        len(out)),
                                 chunker_id=self.chunker_id, content_hash=content_hash))
            pos += len(line)
        return out


def test_builtins_are_in_the_default_registry() -> None:
    assert default_registry.names() == ["headings", "sentences", "token_window", "whole"]
    assert sorted(BUILTIN_CHUNKERS) == default_registry.names()
    for name in default_registry.names():
        assert isinstance(get_chunker(name), Chunker)


def test_a_third_party_chunker_registers_like_a_builtin() -> None:
    registry = ChunkerRegistry()
    for name, factory in BUILTIN_CHUNKERS.items():
        registry.register(name, factory)
    registry.register("lines", LinesChunker)
    chunker = registry.create("lines", max_chunk_tokens=5, overlap_tokens=None)
    assert chunker.chunker_id == "lines(max=5)"
    assert [c.text for c in chunker.chunk("d", "a\n\n  b c \n", "h")] == ["a", "b c"]
    assert "lines" not in default_registry
    with pytest.raises(ValueError, match="already registered"):
        registry.register("lines", lambda **_: LinesChunker())
    registry.register("lines", lambda **_: LinesChunker(7), replace=True)
    assert registry.create("lines").chunker_id == "lines(max=7)"
    registry.unregister("lines")
    assert "lines" not in registry


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownChunkerError) as err:
        get_chunker("paragraphs")
    assert str(err.value) == (
        "unknown chunker 'paragraphs'; known chunkers: headings, sentences, token_window, whole"
    )
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)


def test_unknown_parameter_is_named() -> None:
    with pytest.raises(TypeError, match="max_tokens"):
        get_chunker("sentences", max_tokens=5)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"max_chunk_tokens": 0}, "max_chunk_tokens must be >= 1"),
        ({"max_chunk_tokens": 8, "overlap_tokens": 8}, "overlap_tokens \\(8\\) must be smaller"),
        ({"overlap_tokens": -1}, "overlap_tokens must be >= 0"),
        ({"encoding": "no_such_encoding"}, "unknown tiktoken encoding"),
    ],
)
def test_bad_parameters_are_refused(params: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_chunker("token_window", **params)


def test_an_encoding_that_is_not_bundled_and_cannot_be_downloaded_says_so(monkeypatch) -> None:
    """Offline, ``--encoding p50k_base`` printed requests' connection error to the blob
    store, naming neither the option nor the encodings that work (QA 23)."""
    from aiblox.chunking import _params

    def offline(name: str) -> None:
        raise ConnectionError("Max retries exceeded with url: ... (NameResolutionError)")

    monkeypatch.setattr(_params, "get_encoding", offline)  # this machine has no network
    with pytest.raises(ValueError, match=r"^token_window: tiktoken encoding 'p50k_base' is not "
                       r"bundled \(offline: cl100k_base, o200k_base\) and could not be "
                       r"downloaded \(ConnectionError\)$"):
        get_chunker("token_window", encoding="p50k_base")
    with pytest.raises(ValueError, match=r"'bogus'; known: cl100k_base, gpt2, .* \(offline: "
                       r"cl100k_base, o200k_base\)$"):
        get_chunker("token_window", encoding="bogus")


def test_none_means_the_chunker_default() -> None:
    c = get_chunker("token_window", max_chunk_tokens=None, overlap_tokens=None)
    assert (c.max_chunk_tokens, c.overlap_tokens) == (256, 32)
    # The default window overlap is an eighth of the window, so small windows stay valid.
    assert get_chunker("token_window", max_chunk_tokens=16).overlap_tokens == 2
    assert get_chunker("sentences", max_chunk_tokens=16).overlap_tokens == 0


def test_make_chunker_from_a_retrieval_config() -> None:
    chunker = make_chunker(ChunkingConfig())
    assert chunker.chunker_id == "sentences(max=256,overlap=0,enc=cl100k_base,v=3)"
    config = ChunkingConfig(chunker_id="headings", include_headers=False, max_chunk_tokens=64,
                            overlap_tokens=8)
    chunker = make_chunker(config, encoding="o200k_base")
    assert chunker.chunker_id == "headings(max=64,overlap=8,headers=false,enc=o200k_base,v=4)"
    with pytest.raises(UnknownChunkerError):
        make_chunker(ChunkingConfig(chunker_id="nope"))


def test_params_rebuild_the_same_chunker() -> None:
    for name in default_registry.names():
        chunker = get_chunker(name, max_chunk_tokens=40, overlap_tokens=3, include_headers=False)
        assert get_chunker(name, **chunker.params).chunker_id == chunker.chunker_id
