"""A pipeline stage's parameters are read as strictly as the rest of a spec: in a ``[stages.NAME]``
table, a ``[grid.stages.NAME]`` axis and a pipeline expression, ``true`` is not 1 and ``"10"``
is not 10 (the stage's config read both leniently, so ``fb_docs = true`` ran RM3 from one
document, labelled ``fb(fb_docs=True)``); a whole number stands for a decimal, and a TOML array
for a tuple. Each error is one line naming the file, the line and the key, and for an
expression the stage and the parameter. A stage built in Python is read as strictly."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_text import MINIMAL, write

from aiblox.sweep import SweepSpecError, load_spec

REPO = Path(__file__).resolve().parents[2]
RM3 = 'pipeline = "bm25 >> fb >> bm25"\n[stages.fb]\nkind = "rm3"\n'  # lines 7-9
MIX = 'pipeline = "mix(bm25, dense)"\n[stages.mix]\nkind = "fuse"\nblend = "linear"\n'


def refused_in_one_line(path, line, field, words):
    """Loading ``path`` fails with one line that names the file, line and field."""
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    said = str(err.value)
    assert said.startswith(f"{path}:{line}: field {field!r}: "), said
    assert words in said and "\n" not in said, said


@pytest.mark.parametrize(("extra", "line", "field", "words"), [
    (RM3 + "fb_docs = true\n", 10, "stages.fb.fb_docs", "got True: expected a whole number"),
    (RM3 + 'fb_docs = "10"\n', 10, "stages.fb.fb_docs", "got '10': expected a whole number"),
    (RM3 + "fb_docs = 10.0\n", 10, "stages.fb.fb_docs", "got 10.0: expected a whole number"),
    (RM3 + "english_terms = 1\n", 10, "stages.fb.english_terms",
     "got 1: expected true or false"),
    (RM3 + 'orig_weight = "0.5"\n', 10, "stages.fb.orig_weight", "got '0.5': expected a number"),
    (MIX + "weights = [1, true]\n", 11, "stages.mix.weights[1]", "got True: expected a number"),
    ('pipeline = "bm25 >> rm3 >> bm25"\n[grid.stages.bm25]\nk1 = [0.9, true]\n', 9,
     "grid.stages.bm25.k1[1]", "got True: expected a number"),
    ('pipeline = "bm25 >> rm3 >> bm25"\n[grid.stages.rm3]\nfb_docs = [\n  5,\n  "10",\n]\n',
     11, "grid.stages.rm3.fb_docs[1]", "got '10': expected a whole number"),
    (MIX + "[grid.stages.mix]\nweights = [[0.3, 0.7], [1, false]]\n", 12,
     "grid.stages.mix.weights[1][1]", "got False: expected a number"),
    ('pipeline = "bm25 >> rm3(fb_docs=True) >> bm25"\n', 7, "pipeline",
     "stage rm3, parameter fb_docs: got True: expected a whole number"),
    ("pipeline = [\"bm25\", \"bm25 >> rm3(fb_terms='10') >> bm25\"]\n", 7, "pipeline[1]",
     "stage rm3, parameter fb_terms: got '10': expected a whole number"),
    ("pipeline = \"fuse(bm25, dense, blend='linear', weights=[1, True])\"\n", 7, "pipeline",
     "stage fuse, parameter weights[1]: got True: expected a number"),
    ('pipeline = "bm25(k1=\'1.2\')"\n', 7, "pipeline",
     "stage bm25, parameter k1: got '1.2': expected a number"),
    ('pipeline = "fb"\n[stages.fb]\npipeline = "bm25 >> rm3(fb_docs=True) >> bm25"\n', 8,
     "stages.fb", "stage rm3, parameter fb_docs: got True"),
    ('pipeline = "bm25"\n[baseline]\npipeline = "bm25(top_k=True)"\n', 9, "baseline.pipeline",
     "stage bm25, parameter top_k: got True: expected a whole number"),
])
def test_a_stage_parameter_of_the_wrong_type_is_refused_in_one_line(tmp_path, extra, line,
                                                                     field, words):
    refused_in_one_line(write(tmp_path, MINIMAL + extra), line, field, words)


def test_numbers_that_are_numbers_and_arrays_for_tuples_still_load(tmp_path):
    path = write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                 'pipeline = ["bm25 >> fb >> bm25", "mix(bm25, dense)",'
                 ' "bm25 >> rm3(orig_weight=1, fb_docs=5) >> bm25"]\n'
                 '[stages.fb]\nkind = "rm3"\norig_weight = 1\nfb_docs = 5\n'
                 '[stages.mix]\nkind = "fuse"\nblend = "linear"\nweights = [1, 2]\n'
                 '[grid.stages.mix]\nrrf_k = { start = 10, stop = 30, step = 10 }\n'
                 '[grid.stages.fb]\nmax_df = [1, 0.5]\n')
    spec = load_spec(path)
    exprs = {p.pipeline.expression() for p in spec.grid_points()}
    assert "mix(bm25, dense, blend='linear', rrf_k=10, weights=[1, 2])" in exprs
    assert "bm25 >> rm3(fb_docs=5, orig_weight=1) >> bm25" in exprs


def test_a_stage_built_in_python_is_as_strict_and_keeps_numbers_that_are_numbers():
    from aiblox.engine import PipelineError, Stage, parse_pipeline

    assert Stage("rm3", fb_docs=10).config().fb_docs == 10  # type: ignore[attr-defined]
    rm3 = parse_pipeline("bm25 >> rm3(fb_docs=10, orig_weight=1) >> bm25").check()
    assert rm3.expression() == "bm25 >> rm3(fb_docs=10, orig_weight=1) >> bm25"
    with pytest.raises(PipelineError) as err:  # coerced to 1 before: a spec refused it
        Stage("rm3", fb_docs=True)
    assert str(err.value) == "stage rm3, parameter fb_docs: got True: expected a whole number"


def test_a_table_parameter_loads_inline_and_in_a_stages_table(tmp_path):
    """``rm3(fts={...})`` was refused with ``Input should be a valid dictionary`` (the table
    read as a list of pairs), and so was ``fts = {...}`` in a ``[stages]`` table; both load,
    read over the base's ``fts`` key by key, and a bad key inside is refused by its path."""
    from aiblox.engine.stage_bases import stage_defaults

    path = write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                 "pipeline = [\"bm25 >> rm3(fts={'title_weight': 2.0}) >> bm25\","
                 ' "bm25 >> fb >> bm25"]\n'
                 '[stages.fb]\nkind = "bo1"\nfts = { stemmer = "porter" }\n'
                 "[base]\nfts = { top_k = 50, k1 = 1.1 }\n")
    spec = load_spec(path)
    feedback = [s for p in spec.grid_points() for s in p.pipeline.stages()  # type: ignore
                if s.kind in ("rm3", "bo1")]
    base = spec.base_prefs()
    assert [s.config(stage_defaults(s.kind, base)).fts for s in feedback] == [  # type: ignore
        base.fts.model_copy(update={"title_weight": 2.0}),
        base.fts.model_copy(update={"stemmer": "porter"})]
    assert [str(p.pipeline) for p in spec.grid_points()] == [
        "bm25 >> rm3(fts={'title_weight': 2.0}) >> bm25",
        "bm25 >> fb(fts={'stemmer': 'porter'}) >> bm25"]
    bad = write(tmp_path, MINIMAL + 'pipeline = "bm25 >> fb >> bm25"\n'
                '[stages.fb]\nkind = "rm3"\nfts = { title_weight = true }\n')
    with pytest.raises(SweepSpecError) as err:
        load_spec(bad)
    assert str(err.value) == (f"{bad}:10: field 'stages.fb.fts.title_weight': got True: "
                              f"expected a number")


@pytest.mark.parametrize(("extra", "field", "words"), [
    ("pipeline = \"bm25 >> rm3(fts={'title_weight': 2.0}) >> bm25\"\n[grid]\n"
     "title_weight = [1.0, 2.0]\n", "grid.title_weight",
     "pipeline sets rm3's fts.title_weight = 2.0 inline, and the axis sweeps the default it "
     "overrides"),
    ("pipeline = \"retrieve(scoring={'rrf_k': 10})\"\n[grid]\nrrf_k = [20, 60]\n",
     "grid.rrf_k", "pipeline sets retrieve's scoring.rrf_k = 10 inline"),
    ("pipeline = \"retrieve(fts={'top_k': 30}, vector={'top_k': 30})\"\n[grid]\n"
     "depth = [20, 40]\n", "grid.depth", "pipeline sets retrieve's fts.top_k = 30 inline"),
    ("pipeline = [\"bm25\", \"bm25 >> rm3(fts={'lower': False}) >> bm25\"]\n"
     "[grid.stages.rm3]\nfts = [{ lower = true }, { stemmer = \"porter\" }]\n",
     "grid.stages.rm3.fts",
     "pipeline[1] sets rm3's fts = {'lower': False} inline, and the axis would override it"),
])
def test_a_table_parameters_key_written_inline_and_swept_is_refused(tmp_path, extra, field,
                                                                    words):
    """A key of a table parameter is read over the base's table key by key, so a ``[grid]``
    axis of that key would be overridden inline as a flat parameter's is: refused alike."""
    refused_in_one_line(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n' + extra), 10,
                        field, words)


def test_a_table_parameter_is_an_axis_and_a_key_no_axis_sweeps_may_be_inline(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                           "pipeline = \"bm25 >> rm3(fts={'stemmer': 'porter'}) >> bm25\"\n"
                           "[grid]\nk1 = [0.9, 1.2]\n"))
    assert [p.prefs.fts.k1 for p in spec.grid_points()] == [0.9, 1.2]
    axis = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\n'
                           'pipeline = "bm25 >> rm3 >> bm25"\n[grid.stages.rm3]\n'
                           'fts = [{ stemmer = "porter" }, { title_weight = 2.0 }]\n'))
    assert [str(p.pipeline) for p in axis.grid_points()] == [
        "bm25 >> rm3(fts={'stemmer': 'porter'}) >> bm25",
        "bm25 >> rm3(fts={'title_weight': 2.0}) >> bm25"]


def test_an_expression_option_names_the_stage_and_the_parameter():
    from aiblox.engine import PipelineError, parse_pipeline

    with pytest.raises(PipelineError) as err:
        parse_pipeline("bm25 >> rm3(fb_docs=True) >> bm25", where="--pipeline")
    assert str(err.value) == ("--pipeline: stage rm3, parameter fb_docs: got True: expected a "
                              "whole number")


@pytest.mark.parametrize("path", sorted((REPO / "evals" / "sweeps").glob("*.toml"))
                         + sorted((REPO / "evals" / "sweeps" / "levers").glob("*.toml")),
                         ids=lambda p: p.stem)
def test_every_shipped_spec_still_loads(path):
    assert load_spec(path).grid_points()
