"""The chunking lab at slider positions its defaults never reach: the overlap slider goes to 64
while the token budget goes down to 16, and an overlap at or past the budget raised in the
table cell (``headings: overlap_tokens (16) must be smaller than max_chunk_tokens (16)``)
and in the comparison. The overlap is now cut to fit, and each says so."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
from _notebook_runs import NOTEBOOKS_DIR

from aiblox.explore import chunk_table

pytest.importorskip("marimo")


def test_chunk_table_cuts_an_overlap_the_budget_cannot_hold():
    table = chunk_table("d", "a. b.", "sentences", 16, 16)  # raised ValueError
    assert list(table["text"]) == ["a. b."]
    assert table.attrs["note"] == ("sentences: overlap_tokens 16 is not below "
                                   "max_chunk_tokens 16; cut with overlap_tokens 15")
    text = "One two three four five six seven eight nine ten. " * 6
    cut = chunk_table("d", text, "token_window", 16, 64)
    assert cut.equals(chunk_table("d", text, "token_window", 16, 15))
    assert chunk_table("d", text, "token_window", 16, 8).attrs["note"] == ""
    assert chunk_table("d", text, "whole", 16, 16).attrs["note"] == ""  # whole: no overlap
    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_table("d", text, "token_window", None, 300)  # the budget's default: not cut


def test_the_chunking_lab_runs_with_the_overlap_past_the_budget():
    spec = importlib.util.spec_from_file_location("aiblox_notebook_chunking_lab_sliders",
                                                  NOTEBOOKS_DIR / "chunking_lab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def widget(value):
        return SimpleNamespace(value=value)

    # the widgets cell's definitions: the smallest budget, the largest overlap
    outputs, defs = module.app.run(defs={
        "chunkers": widget(["headings", "sentences", "token_window", "whole"]),
        "dataset": widget("sample"), "embedder": widget("hashing"),
        "include_headers": widget(True), "max_tokens": widget(16), "overlap": widget(64)})
    tables, comparison = defs["tables"], defs["comparison"]
    assert set(tables) == {"headings", "sentences", "token_window", "whole"}
    for name in ("headings", "sentences", "token_window"):
        assert tables[name].attrs["note"] == (f"{name}: overlap_tokens 64 is not below "
                                              f"max_chunk_tokens 16; cut with overlap_tokens 15")
        assert (tables[name]["tokens"] <= 16).all()
    assert tables["whole"].attrs["note"] == ""
    assert len(comparison) == 4 and (comparison["queries"] == 12).all()
    assert comparison.attrs["note"].count("cut with overlap_tokens 15") == 3
    shown = "\n".join(str(getattr(o, "text", "")) for o in outputs)
    assert "cut with overlap_tokens 15" in shown
