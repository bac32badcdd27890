"""Hand-worked cases for the heading-aware chunker."""

from __future__ import annotations

from aiblox.chunking import get_chunker, split_sections

DOC = (
    "Preface line.\n"
    "\n"
    "# Intro\n"
    "Intro text.\n"
    "## Details\n"
    "Detail text.\n"
    "```\n"
    "# not a heading\n"
    "```\n"
    "### Deep ###\n"
    "Deep text.\n"
    "# Next\n"
    "Next text.\n"
)


def spans(text: str, chunks: list) -> list[tuple[list[str] | None, str]]:
    for c in chunks:
        assert text[c.start_idx:c.end_idx] == c.text
    return [(c.heading_path, c.text) for c in chunks]


def test_sections_and_heading_paths() -> None:
    sections = split_sections(DOC)
    assert [s.path for s in sections] == [
        [], ["Intro"], ["Intro", "Details"], ["Intro", "Details", "Deep"], ["Next"],
    ]
    assert [DOC[s.heading[0]:s.heading[1]] if s.heading else None for s in sections] == [
        None, "# Intro", "## Details", "### Deep ###", "# Next",
    ]


def test_without_headers_each_section_body_is_its_own_chunk() -> None:
    chunks = get_chunker("headings", include_headers=False).chunk("d", DOC, "h")
    assert spans(DOC, chunks) == [
        ([], "Preface line."),
        (["Intro"], "Intro text."),
        (["Intro", "Details"], "Detail text.\n```\n# not a heading\n```"),
        (["Intro", "Details", "Deep"], "Deep text."),
        (["Next"], "Next text."),
    ]


def test_with_headers_a_section_groups_with_the_subsections_that_follow_it() -> None:
    # Everything fits in 256 tokens and every section lies under the preface: one chunk.
    chunks = get_chunker("headings", include_headers=True).chunk("d", DOC, "h")
    assert spans(DOC, chunks) == [([], DOC.strip())]
    # 8 tokens: "# Intro\nIntro text." is 6 tokens ("#", " Intro", "\n", "Intro", " text",
    # "."), so no section merges and the Details section (14 tokens) is split in two.
    chunks = get_chunker("headings", max_chunk_tokens=8).chunk("d", DOC, "h")
    assert spans(DOC, chunks) == [
        ([], "Preface line."),
        (["Intro"], "# Intro\nIntro text."),
        (["Intro", "Details"], "## Details\nDetail text."),
        (["Intro", "Details"], "```\n# not a heading\n```"),
        (["Intro", "Details", "Deep"], "### Deep ###\nDeep text."),
        (["Next"], "# Next\nNext text."),
    ]
    # 30 tokens: the preface takes Intro and Details (24 tokens) but Deep does not fit; Deep
    # is not a parent of Next, so they stay apart although together they would fit.
    chunks = get_chunker("headings", max_chunk_tokens=30).chunk("d", DOC, "h")
    assert spans(DOC, chunks) == [
        ([], DOC[:DOC.index("### Deep")].strip()),
        (["Intro", "Details", "Deep"], "### Deep ###\nDeep text."),
        (["Next"], "# Next\nNext text."),
    ]
    assert chunks[0].token_count == 24


def test_a_section_takes_its_subsections_but_not_its_siblings() -> None:
    text = "# A\nAlpha.\n## A1\nOne.\n## A2\nTwo.\n# B\nBeta.\n"
    chunks = get_chunker("headings").chunk("d", text, "h")
    assert spans(text, chunks) == [
        (["A"], "# A\nAlpha.\n## A1\nOne.\n## A2\nTwo."),
        (["B"], "# B\nBeta."),
    ]
    chunks = get_chunker("headings", include_headers=False).chunk("d", text, "h")
    assert spans(text, chunks) == [
        (["A"], "Alpha."), (["A", "A1"], "One."), (["A", "A2"], "Two."), (["B"], "Beta."),
    ]


def test_a_long_section_is_split_and_only_its_first_chunk_shows_the_heading() -> None:
    text = "# Title\n" + " ".join(f"Sentence number {i} is here." for i in range(6))
    chunks = get_chunker("headings", max_chunk_tokens=14).chunk("d", text, "h")
    assert all(c.heading_path == ["Title"] for c in chunks)
    assert chunks[0].text.startswith("# Title\n")
    assert not any(c.text.startswith("#") for c in chunks[1:])
    assert all(c.token_count <= 14 for c in chunks)
    no_headers = get_chunker("headings", max_chunk_tokens=14, include_headers=False)
    assert all("#" not in c.text for c in no_headers.chunk("d", text, "h"))


def test_text_without_headings_has_an_empty_path() -> None:
    chunks = get_chunker("headings").chunk("d", "Just prose. No headings here.", "h")
    assert spans("Just prose. No headings here.", chunks) == [
        ([], "Just prose. No headings here.")
    ]


def test_hash_without_space_is_not_a_heading() -> None:
    text = "#hashtag line\nbody\n####### seven is too many\n"
    assert [s.path for s in split_sections(text)] == [[]]


def test_lines_end_only_at_commonmark_line_endings() -> None:
    """str.splitlines also broke at \\x0b, \\x0c, \\x1c-\\x1e, \\x85, \\u2028 and \\u2029: a
    ``#`` after one of them inside a paragraph line became a heading."""
    for sep in ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"):
        text = f"para{sep}# fake\nx"
        assert [s.path for s in split_sections(text)] == [[]], repr(sep)
    for sep in ("\n", "\r\n", "\r"):  # CommonMark's own line endings still end a line
        text = f"para{sep}# real{sep}x"
        assert [s.path for s in split_sections(text)] == [[], ["real"]], repr(sep)


def test_a_fence_closes_only_at_a_bare_fence_line() -> None:
    """``` with text after it is no closing fence (it closed the open fence, and the
    ``#`` lines of the code after it became headings)."""
    text = "```\n# in\n``` not-close\n# still in\n```\n# out\nbody"
    assert [s.path for s in split_sections(text)] == [[], ["out"]]
    assert [s.path for s in split_sections("~~~~\n# in\n~~~\n# in too\n~~~~  \n# out\n")] == \
        [[], ["out"]]
    # a backtick fence's info string holds no backtick: that line opens nothing
    assert [s.path for s in split_sections("```a`b\n# real\nx")] == [[], ["real"]]


def test_a_title_of_closing_hashes_alone_is_empty() -> None:
    assert [s.path for s in split_sections("# #\nbody")] == [[""]]
    assert [s.path for s in split_sections("### ###\nbody")] == [[""]]
    assert [s.path for s in split_sections("# a #\nb\n# foo#\nc")] == [["a"], ["foo#"]]


def test_the_version_names_the_new_rules() -> None:
    assert get_chunker("headings").chunker_id.endswith(",v=4)")
