"""A sweep spec's pipeline parameters, refused when the spec loads in one line naming the file,
the line and the field (a set, Bo1's ``beta`` past its bound, ``retrieve`` after feedback, an
``fts`` key feedback does not read, an expression too deep to parse), and a table parameter
layered key by key where a ``[stages]`` table, an expression and an axis meet, the point's key
following the layered value."""

from __future__ import annotations

import pytest
from spec_text import MINIMAL, write

from aiblox.sweep import SweepSpecError, load_spec

HEAD = MINIMAL + 'metrics = ["ndcg@10"]\n'  # the pipeline on line 8


def refused(tmp_path, extra: str, line: int, field: str, words: str) -> str:
    path = write(tmp_path, HEAD + extra)
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    said = str(err.value)
    assert said.startswith(f"{path}:{line}: field {field!r}: "), said
    assert words in said and "\n" not in said, said
    return said


def test_a_set_of_weights_is_refused_not_an_internal_error(tmp_path):
    """It ended in ``internal error (TypeError: unhashable type: 'set')``."""
    refused(tmp_path, "pipeline = [\"fuse(bm25, dense, weights={0.7, 0.3}, blend='linear')\"]\n",
            8, "pipeline[0]", "fuse(weights=...): {0.7, 0.3} is a set, which has no order")


@pytest.mark.parametrize("values, words", [
    ("[0.4, inf]", "got inf: stage bo1 (bo1): beta: Input should be a finite number"),
    ("[0.4, 1e300]", "stage bo1 (bo1): beta: Input should be less than or equal to 1000000000"),
])
def test_a_bo1_beta_axis_past_its_bound_is_refused_when_the_spec_loads(tmp_path, values, words):
    refused(tmp_path, f'pipeline = "bm25 >> bo1 >> bm25"\n[grid.stages.bo1]\nbeta = {values}\n',
            10, "grid.stages.bo1.beta[1]", words)


def test_retrieve_after_feedback_is_refused_when_the_spec_loads(tmp_path):
    """The sweep printed its point count and ran bm25 and RM3 before failing, without the
    spec's field."""
    refused(tmp_path, "pipeline = [\"bm25\", \"bm25 >> rm3 >> retrieve(mode='bm25')\"]\n", 8,
            "pipeline[1]", "retrieve cannot read the weighted terms rm3 gives")


def test_an_expression_too_deep_is_refused_in_one_line(tmp_path):
    said = refused(tmp_path, f'pipeline = "{" + ".join(["bm25"] * 3000)}"\n', 8, "pipeline",
                   "the expression is nested too deeply or too long to read")
    assert len(said) < 400 + len(str(tmp_path))


@pytest.mark.parametrize("extra, line, field", [
    ('pipeline = "bm25 >> rm3 >> bm25"\n[stages.rm3]\nfts = { k1 = 0.1 }\n', 9, "stages.rm3"),
    ('pipeline = "bm25 >> rm3 >> bm25"\n[grid.stages.rm3]\nfts = [{ k1 = 0.1 }]\n', 10,
     "grid.stages.rm3.fts"),
    ("pipeline = \"bm25 >> rm3(fts={'k1': 0.1}) >> bm25\"\n", 8, "pipeline"),
])
def test_an_fts_key_feedback_does_not_read_is_refused(tmp_path, extra, line, field):
    refused(tmp_path, extra, line, field, "stage rm3 (rm3): fts: sets k1, which feedback does "
                                          "not read")


def test_a_table_parameter_is_layered_key_by_key_and_keyed_so(tmp_path):
    """``[stages.rm3] fts = {stemmer = "porter"}`` with ``rm3(fts={'lower': True})`` ran
    ``fts={'lower': True}``: the table's stemmer dropped, silently (the README says key by
    key)."""
    table = '[stages.rm3]\nfb_docs = 5\nfts = { stemmer = "porter" }\n'
    layered = load_spec(write(tmp_path, HEAD + "pipeline = \"bm25 >> rm3(fts={'lower': "
                              "False}) >> bm25\"\n" + table)).grid_points()
    both = load_spec(write(tmp_path, HEAD + "pipeline = \"bm25 >> rm3(fb_docs=5, fts="
                           "{'lower': False, 'stemmer': 'porter'}) >> bm25\"\n")).grid_points()
    one = load_spec(write(tmp_path, HEAD + "pipeline = \"bm25 >> rm3(fb_docs=5, fts="
                          "{'lower': False}) >> bm25\"\n")).grid_points()
    assert str(layered[0].pipeline) == ("bm25 >> rm3(fb_docs=5, fts={'lower': False, "
                                        "'stemmer': 'porter'}) >> bm25")
    assert layered[0].key() == both[0].key() != one[0].key()
    # a [grid.stages.rm3] axis over the table's fts: each value over it, key by key
    axis = load_spec(write(tmp_path, HEAD + 'pipeline = "bm25 >> rm3 >> bm25"\n' + table
                           + '[grid.stages.rm3]\nfts = [{ lower = false }, { lower = true }]\n'))
    assert [str(p.pipeline) for p in axis.grid_points()] == [
        f"bm25 >> rm3(fb_docs=5, fts={{'lower': {v}, 'stemmer': 'porter'}}) >> bm25"
        for v in ("False", "True")]
    assert axis.grid_points()[0].key() == layered[0].key()
