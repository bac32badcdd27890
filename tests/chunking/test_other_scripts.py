"""The sentence chunkers end a sentence at another script's terminator (sentences v3, headings
v4): a CJK paragraph, which puts no space after ``。``, was one sentence cut by token windows
wherever the budget fell."""

from __future__ import annotations

import pytest

from aiblox.assembly.sentence_split import sentence_offsets
from aiblox.chunking import get_chunker
from aiblox.chunking._spans import sentence_spans

CJK = "検索は重要です。密な検索も重要です！本当に？はい。「引用です。」次の文です。"
SENTENCES = ["検索は重要です。", "密な検索も重要です！", "本当に？", "はい。", "「引用です。」",
             "次の文です。"]


def test_cjk_and_other_terminators_end_a_sentence_with_no_space_after() -> None:
    assert [CJK[s:e] for s, e in sentence_spans(CJK)] == SENTENCES
    arabic = "هل هذا صحيح؟نعم۔"
    assert [arabic[s:e] for s, e in sentence_spans(arabic)] == ["هل هذا صحيح؟", "نعم۔"]
    hindi = "यह पहला वाक्य है। यह दूसरा है॥"
    assert [hindi[s:e] for s, e in sentence_spans(hindi)] == ["यह पहला वाक्य है।", "यह दूसरा है॥"]


def test_the_chunker_and_the_answer_side_agree_on_a_cjk_text() -> None:
    assert sentence_spans(CJK) == sentence_offsets(CJK, split_ambiguous=False)


@pytest.mark.parametrize("name", ["sentences", "headings"])
def test_a_cjk_chunk_ends_where_a_sentence_ends(name: str) -> None:
    text = CJK * 4
    chunks = get_chunker(name, max_chunk_tokens=24).chunk("d", text, "h")
    assert len(chunks) > 2
    ends = {text[s:e][-1] for s, e in sentence_spans(text)}
    for chunk in chunks:
        assert chunk.token_count <= 24
        assert chunk.text[-1] in ends, chunk.text
    assert "".join(c.text for c in chunks) == text


def test_english_sentences_are_cut_as_before() -> None:
    text = "Dr. Smith said so. e.g. the method works! Does it? Yes… “Quoted.” Next one"
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Dr.", "Smith said so. e.g. the method works!", "Does it?", "Yes…", "“Quoted.”",
        "Next one"]
