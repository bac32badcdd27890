"""A sweep spec takes numbers as numbers: ``true`` is not 1 and ``"10"`` is not 10 (pydantic's lax
mode took both, so ``rrf_k = [true, 60]`` ran a point ``rrf-k1``); and each error is one line
naming the file, the line where the key is written and the field, with no union branch names
(``grid.rrf_k.function-after[_check(), Steps]``)."""

from __future__ import annotations

import pytest
from spec_text import MINIMAL, write

from aiblox.sweep import SweepSpecError, load_spec
from aiblox.sweep.spec_errors import key_lines

GRID = '[grid]\nblend = ["rrf"]\n'  # MINIMAL is 6 lines (a blank first): [grid] is line 7


@pytest.mark.parametrize(("extra", "line", "field", "words"), [
    (GRID + "rrf_k = [true, 60]\n", 9, "grid.rrf_k[0]", "got True: expected a whole number"),
    (GRID + 'rrf_k = ["10", 60]\n', 9, "grid.rrf_k[0]", "got '10': expected a whole number"),
    (GRID + "rrf_k = [10.5, 60]\n", 9, "grid.rrf_k[0]", "got 10.5: expected a whole number"),
    (GRID + "rrf_k = [\n  10,\n  10.5,\n]\n", 11, "grid.rrf_k[1]", "got 10.5"),
    (GRID + "rrf_k = 60\n", 9, "grid.rrf_k",
     "expected a list of whole numbers or steps {start, stop, step}, got 60"),
    (GRID + "rrf_k = { start = true, stop = 60, step = 10 }\n", 9, "grid.rrf_k.start",
     "expected a number or a string, got True"),
    ('[grid]\nblend = ["linear"]\nw_text = [true]\n', 9, "grid.w_text[0]",
     "got True: expected a number"),
    ("[base]\ntop_k_items = true\n", 8, "base.top_k_items", "got True: expected a whole number"),
    ('[base]\nfts = { top_k = "20" }\n', 8, "base.fts.top_k", "got '20': expected a whole number"),
    ("[base]\nignore_identical_ids = 1\n", 8, "base.ignore_identical_ids",
     "got 1: expected true or false"),
    ("[baseline]\nblend = \"rrf\"\nrrf_k = true\n", 9, "baseline.rrf_k",
     "got True: expected a whole number"),
    ('[grid.chunking]\ntop_k_chunks = [true]\n', 8, "grid.chunking.top_k_chunks[0]",
     "got True: expected a whole number"),
    ('[grid.selection]\nmax_chunks = [true, 2]\n', 8, "grid.selection.max_chunks",
     "got True: expected a whole number"),
    ("significance_top = true\n", 7, "significance_top", "got True: expected a whole number"),
    ("[search]\nstrategy = \"random\"\nn = \"5\"\n", 9, "search.n",
     "got '5': expected a whole number"),
    ("[cv]\nfolds = true\n", 8, "cv.folds", "got True: expected a whole number"),
    ('pipeline = [42]\n', 7, "pipeline[0]", "got 42: expected a string"),
    ('pipeline = ["(bm25 + dense"]\n', 7, "pipeline[0]", "is not a pipeline expression"),
    ('pipeline = "bm25 >> frobnicate"\n', 7, "pipeline", "unknown stage 'frobnicate'"),
    ('pipeline = "bm25 >> rm3 >> bm25"\n[grid.stages.rm3]\nfb_docs = ["x"]\n', 9,
     "grid.stages.rm3.fb_docs[0]", "got 'x': expected a whole number"),
    ('[baseline]\nfoo = 1\n', 8, "baseline.foo", "unknown key(s) ['foo']"),
])
def test_a_wrong_type_is_one_line_naming_file_line_and_field(tmp_path, extra, line, field,
                                                             words):
    path = write(tmp_path, MINIMAL + extra)
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    said = str(err.value)
    assert said.startswith(f"{path}:{line}: field {field!r}: "), said
    assert words in said and "\n" not in said
    assert "function-after" not in said and "list[int]" not in said and "(spec)" not in said


def test_numbers_that_are_numbers_still_load(tmp_path):
    """Whole numbers where decimals are expected, and decimal strings in steps, stay fine."""
    spec = load_spec(write(tmp_path, MINIMAL + '[grid]\nblend = ["linear"]\nw_text = [0, 1]\n'
                           'k1 = { start = "0.9", stop = "1.2", step = "0.3" }\n'))
    assert spec.grid.w_text == [0.0, 1.0] and spec.grid.axis("k1") == [0.9, 1.2]


def test_key_lines_reads_tables_dotted_keys_inline_tables_and_arrays():
    text = ('# a comment = 1\nname = "x # not a comment"\n[grid]\nrrf_k = [\n  10, # ten\n'
            '  60,\n]\nstages.rm3.fb_docs = [5]\n[base]\nfts = { top_k = 20, "k1" = 1.2 }\n'
            's = """a\nb = 2\n"""\n[[runs]]\nx = 1\n[[runs]]\nx = 2\n')
    lines = key_lines(text)
    assert lines[("name",)] == 2 and lines[("grid",)] == 3 and lines[("grid", "rrf_k")] == 4
    assert lines[("grid", "rrf_k", 0)] == 5 and lines[("grid", "rrf_k", 1)] == 6
    assert lines[("grid", "stages", "rm3", "fb_docs")] == 8
    assert lines[("base", "fts", "top_k")] == 10 and lines[("base", "fts", "k1")] == 10
    assert lines[("base", "s")] == 11 and ("base", "b") not in lines  # inside a string
    assert lines[("runs",)] is None  # written twice: no one line
    assert ("a comment",) not in lines
