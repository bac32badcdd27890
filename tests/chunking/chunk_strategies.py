"""Shared hypothesis strategies for the chunker tests (imported by the test modules)."""

from __future__ import annotations

from hypothesis import strategies as st

# Letters, punctuation that ends sentences, markdown heading marks, whitespace of several kinds,
# and multi-byte characters: 2-byte (é), 3-byte (中), 4-byte (emoji, often split across tokens)
# and a combining accent; line endings \n, \r\n and \r.
ALPHABET = "abcdefgh XYZ.,!?\n\r\t#é中😀\u0301"

texts = st.one_of(
    st.text(alphabet=ALPHABET, max_size=400),
    st.text(max_size=150),
    st.lists(
        st.sampled_from(["The cat sat.", "Is it?", "# Title", "## Sub heading", "Yes!",
                         "Ünïcödé wörds 😀.", "\n\n", "\n", " ", "e.g. lower", "Done.",
                         "\r\n\r\n", "\r\n", "\r\r"]),
        max_size=40,
    ).map(" ".join),
)
