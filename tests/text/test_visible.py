"""``escape_controls``: stored text as a listing shows it, what acts on a terminal escaped."""

from __future__ import annotations

import pytest

from aiblox.text import escape_controls, has_controls


@pytest.mark.parametrize(("raw", "shown"), [
    ("who\x1b]0;PWNED\x07\x1b[2J?", "who\\x1b]0;PWNED\\x07\\x1b[2J?"),  # OSC title, clear
    ("a\x00b\x7fc\x9bd", "a\\x00b\\x7fc\\x9bd"),  # NUL, DEL, a C1 control (CSI)
    ("line\nnext\ttab\r", "line\\nnext\\ttab\\r"),  # a newline broke a table's row
    ("exe.\u202etxt \u2066x\u2069 \u200f", "exe.\\u202etxt \\u2066x\\u2069 \\u200f"),  # bidi
    ("\ud800 \u2028 \u2029", "\\ud800 \\u2028 \\u2029"),  # a lone surrogate, separators
])
def test_controls_bidi_and_lone_surrogates_are_escaped(raw, shown):
    assert escape_controls(raw) == shown and has_controls(raw)
    assert not has_controls(shown)
    shown.encode("utf-8")  # always writable as UTF-8


@pytest.mark.parametrize("text", ["plain", "é中文 🙂 👩\u200d💻", "back\\slash [b]x[/b]", ""])
def test_every_other_character_stays_as_it_is(text):
    assert escape_controls(text) == text and not has_controls(text)
