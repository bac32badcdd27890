"""Chunk selection gates, drop reason codes, ordering, sanitisation, citation anchors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from assembly_fixtures import FRANCE, QUESTION, make_input, policy_v1, result

from aiblox.assembly import (
    DROP_BELOW_SIMILARITY_FLOOR,
    DROP_BUDGET,
    DROP_DUP,
    DROP_EMPTY_AFTER_SANITIZE,
    DROP_PER_KNOWLEDGE_CAP,
    DROP_REASONS,
    assemble_answer_bundle,
    build_prompt,
    overlap_ratio,
    render_evidence_block,
    safe_normalize,
)
from aiblox.text.tokens import count_tokens


def _ids(bundle) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.chunk_id for e in bundle.selected_evidence]


def test_ok_bundle_fields_and_anchor_map() -> None:
    bundle = assemble_answer_bundle(QUESTION, make_input(FRANCE), policy_v1())
    assert bundle.assembly_status == "OK"
    assert _ids(bundle) == ["c-paris", "c-lyon", "c-wine"]
    assert [e.citation_anchor for e in bundle.selected_evidence] == ["C0", "C1", "C2"]
    assert bundle.anchor_map == {"C0": "c-paris", "C1": "c-lyon", "C2": "c-wine"}
    assert bundle.allowed_anchors == ["C0", "C1", "C2"]
    assert bundle.evidence_block_text == (
        "[C0 | chunk_id=c-paris | knowledge_id=france | source=wiki/France]\n"
        "Paris is the capital and largest city of France.\n\n"
        "[C1 | chunk_id=c-lyon | knowledge_id=lyon | source=wiki/Lyon]\n"
        "Lyon is the third-largest city of France, on the Rhone.\n\n"
        "[C2 | chunk_id=c-wine | knowledge_id=france | source=wiki/France]\n"
        "France produces many wines; Bordeaux is a famous region."
    )
    trace = bundle.trace
    assert trace is not None
    assert (
        trace.index_version,
        trace.policy_version,
        trace.embedding_model,
        trace.retrieval_top_k,
    ) == ("idx-test-1", "R2_POLICY_V1", "test-embedder", 12)
    assert trace.thresholds["overlap_ratio_threshold"] == 0.8
    m = bundle.metrics
    assert (m.retrieved_k, m.selected_k) == (3, 3)
    assert m.drop_reasons == dict.fromkeys(DROP_REASONS, 0)
    assert m.evidence_token_count == count_tokens(bundle.evidence_block_text or "")
    assert m.truncation_applied is False


def test_rank_strict_ignores_input_order_and_breaks_ties_by_chunk_id() -> None:
    rows = [
        result("z", "Zeta alpha words.", 1),
        result("b", "Beta gamma words.", 0),
        result("a", "Alpha delta words.", 1),
    ]
    forward = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    backward = assemble_answer_bundle(QUESTION, make_input(rows[::-1]), policy_v1())
    assert _ids(forward) == ["b", "a", "z"]
    assert forward.evidence_block_text == backward.evidence_block_text


def test_near_duplicates_keep_the_better_ranked_chunk() -> None:
    rows = [
        result("x1", "The Eiffel Tower is in Paris and is 330 metres tall.", 0),
        result("x2", "Some other sentence about rivers and mountains.", 1),
        # contained in x1 (overlap ratio 1.0 > 0.8)
        result("x3", "The Eiffel Tower is in Paris.", 2),
        # 4 of 5 words shared with x2: ratio 0.8, not above the threshold -> kept
        result("x4", "other sentence about rivers lakes.", 3),
    ]
    assert overlap_ratio(rows[2]["chunk_text"], rows[0]["chunk_text"]) == 1.0
    assert overlap_ratio(rows[3]["chunk_text"], rows[1]["chunk_text"]) == pytest.approx(0.8)
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["x1", "x2", "x4"]
    assert bundle.metrics.dedup_dropped_count == 1
    assert [(d.chunk_id, d.reason) for d in bundle.metrics.dropped] == [("x3", DROP_DUP)]
    stricter = assemble_answer_bundle(
        QUESTION, make_input(rows), policy_v1(overlap_ratio_threshold=0.6)
    )
    assert _ids(stricter) == ["x1", "x2"]
    assert stricter.metrics.drop_reasons[DROP_DUP] == 2


def test_a_duplicate_is_kept_when_the_chunk_it_copies_is_dropped_by_the_cap() -> None:
    """Seed R2.2: of near-duplicates the best-ranked *kept* chunk stays. c (doc k1) is over k1's
    cap; d (doc k2) copies c's words: d was dropped as c's duplicate and c by the cap, losing
    both. Now the duplicate check sees only chunks the cap keeps, so d stays."""
    rows = [
        result("a", "alpha one", 0, knowledge_id="k1"),
        result("b", "beta two", 1, knowledge_id="k1"),
        result("c", "gamma three delta four", 2, knowledge_id="k1"),
        result("d", "gamma three delta four epsilon", 3, knowledge_id="k2"),
    ]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["a", "b", "d"]
    assert [(d.chunk_id, d.reason) for d in bundle.metrics.dropped] == [
        ("c", DROP_PER_KNOWLEDGE_CAP)
    ]
    # a chunk both a duplicate and over the cap is recorded as the duplicate, as before
    rows.append(result("e", "gamma three delta four epsilon", 4, knowledge_id="k1"))
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert [(d.chunk_id, d.reason) for d in bundle.metrics.dropped] == [
        ("e", DROP_DUP), ("c", DROP_PER_KNOWLEDGE_CAP)
    ]


@pytest.mark.parametrize("text", ["🙂🙂", "→ ← ↑", "¡¿", "🙂 🙂"])
def test_identical_texts_without_words_are_duplicates(text: str) -> None:
    """``overlap_ratio`` of two word-less texts is 0.0 (no words to share); identical sanitised
    texts are full overlap all the same: the better-ranked copy stays."""
    rows = [result("a", text, 0, knowledge_id="k1"), result("b", text, 1, knowledge_id="k2")]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["a"]
    assert [(d.chunk_id, d.reason) for d in bundle.metrics.dropped] == [("b", DROP_DUP)]
    assert overlap_ratio(text, text) == 1.0 and overlap_ratio(text, "🙂") == 0.0
    # differently cased copies are one text too; different word-less texts are not
    rows = [result("a", "ΣΑΣ 🙂", 0), result("b", "σας 🙂", 1), result("c", "🙃🙃", 2)]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["a", "c"]


@pytest.mark.parametrize(
    "text", ["\u200b", "\u200b\u200d\u2060", " \u200c \ufeff\u2060 ", "\ufe0f\u034f\u3164"]
)
def test_text_of_only_invisible_characters_is_empty_after_sanitize(text: str) -> None:
    """Seed R2.3: a chunk empty after sanitisation is dropped. Zero width and other default
    ignorable characters show nothing, so a chunk of only them is empty (it was citable
    evidence) and a question of only them fails as empty (it built an OK prompt)."""
    assert safe_normalize(text) == ""
    rows = [result("z", text, 0), result("p", "Paris is the capital of France.", 1)]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["p"]
    assert [(d.chunk_id, d.reason) for d in bundle.metrics.dropped] == [
        ("z", DROP_EMPTY_AFTER_SANITIZE)
    ]
    failed = assemble_answer_bundle(text, make_input(rows), policy_v1())
    assert failed.assembly_status == "FAILED" and "empty" in (failed.failure_reason or "")


def test_invisible_characters_inside_visible_text_are_kept() -> None:
    """Only text with nothing visible is emptied: a zero width joiner inside an emoji sequence,
    a zero width space between words, a variation selector stay untouched."""
    for text in ("family 👨\u200d👩\u200d👧", "a\u200bb", "❤\ufe0f", "\u200b👍"):
        assert safe_normalize(text) == text


def test_per_knowledge_cap_is_a_cap_not_single_chunk() -> None:
    rows = [
        result(f"d{i}", f"Document one distinct words number {w}.", i, knowledge_id="doc1")
        for i, w in enumerate(["alpha", "bravo", "charlie", "delta"])
    ]
    rows.append(result("e0", "Another document entirely here.", 4, knowledge_id="doc2"))
    # words overlap a lot between d*, so disable dedup for this test
    bundle = assemble_answer_bundle(
        QUESTION, make_input(rows), policy_v1(overlap_ratio_threshold=1.0)
    )
    assert _ids(bundle) == ["d0", "d1", "e0"]
    assert bundle.metrics.per_knowledge_cap_dropped_count == 2
    assert bundle.metrics.drop_reasons[DROP_PER_KNOWLEDGE_CAP] == 2


def test_max_chunks_drops_lowest_ranked_with_budget_code() -> None:
    rows = [result(f"c{i}", f"Unique {w} sentence.", i) for i, w in enumerate("abcdefghij")]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == [f"c{i}" for i in range(6)]
    assert bundle.metrics.budget_dropped_count == 4
    assert {d.chunk_id for d in bundle.metrics.dropped} == {f"c{i}" for i in range(6, 10)}


def test_empty_after_sanitize_is_dropped_and_all_empty_is_no_evidence() -> None:
    rows = [result("blank", " \x00\t\n\r\x07 ", 0), result("ok", "Real text.", 1)]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["ok"]
    assert bundle.selected_evidence[0].citation_anchor == "C0"
    assert bundle.metrics.empty_after_sanitize_dropped_count == 1
    only_blank = assemble_answer_bundle(QUESTION, make_input(rows[:1]), policy_v1())
    assert only_blank.assembly_status == "NO_EVIDENCE"
    assert only_blank.evidence_block_text is None
    assert only_blank.metrics.drop_reasons[DROP_EMPTY_AFTER_SANITIZE] == 1


def test_similarity_floor_and_top_gate() -> None:
    rows = [
        result("a", "High score text.", 0, score=0.9),
        result("b", "Low score text here.", 1, score=0.2),
    ]
    floor = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1(min_similarity_score=0.5))
    assert _ids(floor) == ["a"]
    assert floor.metrics.below_similarity_floor_dropped_count == 1
    gate = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1(top_similarity_gate=0.95))
    assert gate.assembly_status == "NO_EVIDENCE"
    assert gate.metrics.drop_reasons[DROP_BELOW_SIMILARITY_FLOOR] == 2
    assert "DROP_BELOW_SIMILARITY_FLOOR=2" in (gate.failure_reason or "")


def test_per_chunk_cap_truncates_to_a_word_prefix() -> None:
    long_text = " ".join(f"word{i}" for i in range(400))
    policy = policy_v1(max_evidence_tokens=200, max_chunk_token_ratio=0.25)  # cap 50 tokens
    bundle = assemble_answer_bundle(QUESTION, make_input([result("a", long_text, 0)]), policy)
    ev = bundle.selected_evidence[0]
    assert ev.truncated and bundle.metrics.truncation_applied
    assert bundle.metrics.truncated_count == 1
    assert ev.token_count <= 50
    assert long_text.startswith(ev.sanitized_text + " ")
    # the next word would not fit
    next_word = long_text[len(ev.sanitized_text) + 1 :].split(" ")[0]
    assert count_tokens(ev.sanitized_text + " " + next_word) > 50


@pytest.mark.parametrize("word", [
    "ก" * 4 + "ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำแน่นอน" * 40,  # Thai vowel signs, no spaces
    "e\u0301" * 300,  # a decomposed é
    "\u2764\ufe0f" * 200,  # a heart and its emoji variation selector
    "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 60,  # a family: a ZWJ sequence
    "\U0001f1eb\U0001f1f7\U0001f1e9\U0001f1ea" * 80,  # flags: pairs of regional indicators
    "\u0915\u094d\u0937" * 200,  # Devanagari: a virama joins two consonants
], ids=["thai", "decomposed-accent", "emoji-selector", "zwj-family", "flags", "devanagari"])
def test_a_word_cut_by_the_cap_keeps_whole_characters(word: str) -> None:
    """A first word beyond the cap is cut between grapheme clusters, never inside one: a prefix
    of code points dropped the Thai vowel sign, the accent, the variation selector, half a
    flag (QA)."""
    import regex

    from aiblox.assembly.selection.token_truncation import truncate_to_token_budget

    clusters = regex.findall(r"\X", word)
    for cap in (1, 2, 3, 5, 8, 13, 50):
        cut, truncated = truncate_to_token_budget(word, cap, "cl100k_base")
        assert truncated and count_tokens(cut) <= cap
        n = len(regex.findall(r"\X", cut))
        assert cut == "".join(clusters[:n])  # whole clusters, a prefix of them
        if n < len(clusters):  # and the longest such prefix
            assert count_tokens(cut + clusters[n]) > cap


def test_a_chunk_whose_first_character_exceeds_the_cap_is_pruned_not_sent_empty() -> None:
    # U+0F80 alone is 3 cl100k tokens; with a 2-token cap no prefix of it survives. It used to
    # be kept as an empty evidence line, which the prompt builder then rejected (FAILED).
    assert count_tokens("\u0f80") == 3
    rows = [result("a-tib", "\u0f80", 0), result("ok", "x", 0)]
    policy = policy_v1(max_chunks=2, max_evidence_tokens=20, max_chunk_token_ratio=0.125,
                       overlap_ratio_threshold=1.0)  # cap 2 tokens
    assert policy.per_chunk_token_cap == 2
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy)
    assert bundle.assembly_status == "OK"
    assert _ids(bundle) == ["ok"]
    assert bundle.selected_evidence[0].citation_anchor == "C0"  # anchors stay sequential
    assert [(d.chunk_id, d.reason) for d in bundle.metrics.dropped] == [("a-tib", DROP_BUDGET)]
    bundle, build = build_prompt(bundle, QUESTION, policy)
    assert build.build_status == "OK"
    alone = assemble_answer_bundle(QUESTION, make_input(rows[:1]), policy)
    assert alone.assembly_status == "NO_EVIDENCE"


def test_evidence_token_budget_stops_and_prunes_lowest_ranked() -> None:
    rows = [result(f"c{i}", " ".join(f"topic{i}x{j}" for j in range(60)), i) for i in range(5)]
    policy = policy_v1(max_evidence_tokens=450, max_chunk_token_ratio=1.0)
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy)
    kept = len(bundle.selected_evidence)
    assert 0 < kept < 5
    assert _ids(bundle) == [f"c{i}" for i in range(kept)]
    assert bundle.metrics.evidence_token_count <= 450
    assert bundle.metrics.budget_dropped_count == 5 - kept
    one_more = render_evidence_block(
        [
            *bundle.selected_evidence,
            bundle.selected_evidence[0].model_copy(
                update={"citation_anchor": f"C{kept}", "chunk_id": f"c{kept}"}
            ),
        ]
    )
    assert count_tokens(one_more) > 450


def test_total_budget_limits_the_evidence_budget() -> None:
    rows = [result(f"c{i}", " ".join(f"subject{i}x{j}" for j in range(120)), i) for i in range(6)]
    # the evidence budget plus the reserve fill the total: the prompt's overhead and the
    # question come out of the evidence's share
    policy = policy_v1(max_total_prompt_tokens=3000, max_chunk_token_ratio=1.0)
    assert policy.max_evidence_tokens + policy.reserved_output_tokens == 3000
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy)
    assert bundle.metrics.evidence_token_budget < policy.max_evidence_tokens
    assert bundle.metrics.evidence_token_count <= bundle.metrics.evidence_token_budget
    assert bundle.metrics.drop_reasons[DROP_BUDGET] > 0


def test_question_and_overhead_failures() -> None:
    data = make_input(FRANCE)
    assert assemble_answer_bundle(" \n\t", data, policy_v1()).assembly_status == "FAILED"
    long_q = "why " * 600
    failed = assemble_answer_bundle(long_q, data, policy_v1())
    assert failed.assembly_status == "FAILED" and "max_question_tokens" in (
        failed.failure_reason or ""
    )
    # a policy with room for one chunk beside a one-word question, not beside a long one
    tight = policy_v1(max_total_prompt_tokens=800 + 361 + 20, max_evidence_tokens=20)
    assert assemble_answer_bundle("why?", data, tight).assembly_status != "FAILED"
    long = assemble_answer_bundle("why " * 100, data, tight)
    assert long.assembly_status == "FAILED" and "without evidence" in (long.failure_reason or "")


@pytest.mark.parametrize(("changes", "said"), [
    ({"max_evidence_tokens": 1}, "max_evidence_tokens (1) is below the smallest evidence entry "
                                 "(15 tokens: its header and one word)"),
    ({"max_total_prompt_tokens": 1000, "max_evidence_tokens": 200},
     "leaves -161 for evidence, under the smallest evidence entry (15 tokens): no prompt could "
     "ever be built"),
    ({"reserved_output_tokens": 0}, "field 'reserved_output_tokens': Input should be greater "
                                    "than or equal to 1"),
])
def test_a_policy_that_can_never_hold_a_chunk_is_refused_when_loaded(tmp_path, changes, said):
    """Such a policy loaded, then refused every question (NO_EVIDENCE, exit 0) or failed it
    after retrieval, storing the pack; with 0 reserved tokens every answer was cut off."""
    from aiblox.assembly.policy import PolicyError, load_policy

    text = (Path(__file__).parents[2] / "evals" / "policies" / "R2_POLICY_V1.toml").read_text()
    text = text.replace('"R2_POLICY_V1"', '"R2_POLICY_TINY"')
    for key, value in changes.items():
        text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    assert str(err.value).startswith(f"{path}: invalid selection policy: ")
    assert said in str(err.value)


def test_a_policy_file_that_is_not_utf8_is_named(tmp_path):
    from aiblox.assembly.policy import PolicyError, load_policy

    path = tmp_path / "p.toml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match=r"p\.toml: not UTF-8 \(TOML is\): byte 0: invalid "
                                          r"start byte"):
        load_policy(path)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\x00b", "ab"),
        ("line one\nline two", "line one line two"),
        ("  tabs\t\tand\r\nCRLF  ", "tabs and CRLF"),
        ("bell\x07 and esc\x1b[31m", "bell and esc[31m"),
        ("bidi \u202egnp.exe\u202c here", "bidi gnp.exe here"),
        ("nbsp\u00a0and\u2028sep", "nbsp and sep"),
        ("Café 中文 😀, punctuation! KEEP Case.", "Café 中文 😀, punctuation! KEEP Case."),
        ("\ufeffBOM start", "BOM start"),
    ],
)
def test_safe_normalize_v1(raw: str, clean: str) -> None:
    assert safe_normalize(raw) == clean
    assert safe_normalize(clean) == clean  # idempotent


def test_a_longer_chunk_containing_a_short_kept_one_is_no_duplicate() -> None:
    """The symmetric overlap coefficient counted "Results are shown." (rank 0) and a paragraph
    that contains its three words as duplicates, dropped the paragraph, and the question was
    refused; the ratio is now the candidate's share of words the kept chunk has."""
    from aiblox.assembly import answer_from_input, get_llm

    short = "Results are shown."
    long = ("Vitamin D supplementation reduced hip fractures by 20 percent in older adults; "
            "results are shown in table 2.")
    assert overlap_ratio(long, short) == pytest.approx(3 / 17)
    assert overlap_ratio(short, long) == 1.0  # the other way round it is one
    rows = [result("c0", short, 0, knowledge_id="docA"),
            result("c1", long, 1, knowledge_id="docB")]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["c0", "c1"] and bundle.metrics.dedup_dropped_count == 0
    res = answer_from_input("does vitamin D reduce hip fractures in older adults?",
                            make_input(rows), policy_v1(), get_llm("extractive"))
    assert res.answer_text == f"{long} [C1]"
    # the short one after the long one is its duplicate, as before
    rows = [result("c0", long, 0, knowledge_id="docB"),
            result("c1", short, 1, knowledge_id="docA")]
    bundle = assemble_answer_bundle(QUESTION, make_input(rows), policy_v1())
    assert _ids(bundle) == ["c0"] and bundle.metrics.dedup_dropped_count == 1


def test_the_prompt_overhead_the_policy_checks_is_the_rendered_prompts() -> None:
    from typing import get_args

    from aiblox.assembly.policy import PROMPT_OVERHEAD_TOKENS, SelectionPolicy
    from aiblox.assembly.prompt.contract import render_prompt

    for encoding, tokens in PROMPT_OVERHEAD_TOKENS.items():
        assert count_tokens(render_prompt("", "?"), encoding) == tokens
    assert set(PROMPT_OVERHEAD_TOKENS) == set(
        get_args(SelectionPolicy.model_fields["token_encoding"].annotation))


def test_the_best_chunk_is_cut_to_a_budget_a_long_question_shrank_not_dropped() -> None:
    """With the per-chunk cap near the whole evidence budget, a long question left less room
    than the cap: the top chunk, cut to the cap, did not fit, and it was dropped with every
    chunk after it (NO_EVIDENCE for an answerable question)."""
    policy = policy_v1(max_chunk_token_ratio=1.0, max_evidence_tokens=600,
                       max_total_prompt_tokens=800 + 361 + 600)
    text = " ".join(f"Paris is the capital of France, sentence {i}." for i in range(200))
    rows = [result("c0", text, 0), result("c1", "The Seine flows through Paris.", 1)]
    short = assemble_answer_bundle("what is the capital of France?", make_input(rows), policy)
    assert _ids(short) == ["c0"] and short.selected_evidence[0].truncated
    question = "what is the capital of France? " + "please answer briefly " * 60
    long = assemble_answer_bundle(question, make_input(rows), policy)
    assert long.assembly_status == "OK" and _ids(long) == ["c0"]
    assert long.selected_evidence[0].truncated
    assert long.metrics.evidence_token_count <= long.metrics.evidence_token_budget < 600
    assert [(d.chunk_id, d.reason) for d in long.metrics.dropped] == [("c1", DROP_BUDGET)]


@pytest.mark.parametrize(("text", "budget", "kept"), [
    ("One sentence here. Another one is long and goes on", 7, "One sentence here."),
    ('He said "stop." Then more words follow here', 6, 'He said "stop."'),
    ("As e.g. shown by Dr. Smith the rest goes on and on", 6, "As e.g. shown by"),
    ("no terminator in this long run of words at all", 5, "no terminator in this long"),
    ("巴黎是法国的首都。塞纳河流经巴黎市中心和许多地方", 12, "巴黎是法国的首都。"),
    # the splitter's rule: a danda ends a sentence; a list item's number does not; "Jr. on"
    # continues; a sentence ending inside the next run without spaces is reached
    ("यह पहला वाक्य है। दूसरा वाक्य बहुत लंबा है और आगे चलता है", 25, "यह पहला वाक्य है।"),
    ("617. Alveolar cells were studied by light microscopy in rats and mice", 5,
     "617. Alveolar"),
    ("He passed to Ted Ginn Jr. on the line and then ran on to score", 9,
     "He passed to Ted Ginn Jr. on"),
    ("Intro: 巴黎是法国的首都。塞纳河流经巴黎市中心和许多地方", 13, "Intro: 巴黎是法国的首都。"),
    # where the splitter fails closed by splitting ("St. John's"), the cap does not cut
    ("Paris is big. It stands by St. John's Cathedral and more words follow", 12,
     "Paris is big."),
    ("It was patent U.S. Patent 1,655,114 for a biplane that lifts off", 8,
     "It was patent U.S. Patent"),
])
def test_the_per_chunk_cap_cuts_at_the_last_sentence_end_within_it(text, budget, kept):
    """A cut ends a sentence where one ends within the budget (not after an abbreviation or an
    initial): the words before a cut can say the opposite of their sentence; with no sentence
    end within it, the longest word (or character) prefix stays."""
    from aiblox.assembly.selection.token_truncation import truncate_to_token_budget

    assert truncate_to_token_budget(text, budget, "cl100k_base") == (kept, True)
    assert count_tokens(kept, "cl100k_base") <= budget
