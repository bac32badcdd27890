"""A pipeline's parameters as the expression, Python and ``aiblox eval --pipeline`` give them
(aiblox.engine.params, algebra, expression): a set is refused (it ran in one order and was
keyed in another), a table parameter is layered key by key wherever two meet, feedback's
``fts`` takes only what feedback reads, Bo1's ``beta`` is finite and bounded, ``retrieve`` after
feedback is refused when the pipeline is built, and an expression too deep to parse is one
line. The sample dataset, the hashing embedder and a real DuckDB file for the runs."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs
from aiblox.engine import PipelineError, Stage, fuse, parse_pipeline
from aiblox.engine.expression import inline_params, referenced_names
from aiblox.engine.stage_bases import stage_defaults

runner = CliRunner()
SET_WORDS = "is a set, which has no order and keeps one of equal values"


def _cli(*args: str):
    return runner.invoke(app, [str(a) for a in args], env={"AIBLOX_NO_PROGRESS": "1"})


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("params") / "sample.duckdb")
    r = _cli("ingest", "sample", "--db", path, "--embedder", "hashing")
    assert r.exit_code == 0, r.output
    return path


# -- 1. sets ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, where", [
    ('fuse(bm25, dense, weights={0.7, 0.3}, blend="linear")', "fuse(weights=...): {0.7, 0.3}"),
    ('fuse(bm25, dense, weights={0.5, 0.5}, blend="linear")', "fuse(weights=...): {0.5, 0.5}"),
    ("bm25 >> rm3(fts={'fields': {'title'}}) >> bm25", "rm3(fts=...): {'title'}"),
])
def test_a_set_literal_is_refused_in_an_expression(text, where):
    """``weights={0.7, 0.3}`` ran as [0.7, 0.3] but was keyed as [0.3, 0.7] (the hash sorts a
    set), and ``{0.5, 0.5}`` was one weight."""
    with pytest.raises(PipelineError) as err:
        parse_pipeline(text)
    assert str(err.value).startswith(f"pipeline: {where} {SET_WORDS}"), err.value
    assert "\n" not in str(err.value)


def test_a_set_is_refused_in_python_and_in_with_params():
    bm25, dense = Stage("bm25"), Stage("dense")
    with pytest.raises(PipelineError, match=rf"^fuse, parameter weights: \{{0.5\}} {SET_WORDS}"):
        fuse(bm25, dense, weights={0.5, 0.5})  # noqa: B033 (the set folds them: the point)
    with pytest.raises(PipelineError, match=r"^stage rm3, parameter fts.fields: frozenset"):
        Stage("rm3", fts={"fields": frozenset({"title"})})
    with pytest.raises(PipelineError, match=r"^fuse, parameter weights: "):
        (bm25 + dense).with_params({"fuse": {"weights": {0.3, 0.7}}})
    # a list or a tuple is the way: its order is the run's and the key's
    a = fuse(bm25, dense, blend="linear", weights=[0.7, 0.3])
    assert a == fuse(bm25, dense, blend="linear", weights=(0.7, 0.3))
    assert a != fuse(bm25, dense, blend="linear", weights=[0.3, 0.7])
    assert a.as_data()["params"]["weights"] == [0.7, 0.3]


def test_eval_refuses_a_set_before_any_work(tmp_path):
    db = tmp_path / "never.duckdb"
    r = _cli("eval", "sample", "--db", db, "--embedder", "hashing",
             "--pipeline", 'a=fuse(bm25, dense, weights={0.7, 0.3}, blend="linear")')
    assert r.exit_code == 2, r.output
    assert r.output.strip() == (f"error: --pipeline a: fuse(weights=...): {{0.7, 0.3}} "
                                f"{SET_WORDS}; write a list or a tuple, in the order meant "
                                f"([...])")
    assert not db.exists()  # refused before the store was opened


# -- 2. bo1's beta, rm3's floats ---------------------------------------------------------
@pytest.mark.parametrize("beta, words", [
    ("1e400", "beta: Input should be a finite number"),
    ("1e300", "beta: Input should be less than or equal to 1000000000"),
    ("1e38", "beta: Input should be less than or equal to 1000000000"),
])
def test_bo1_beta_past_its_bound_is_refused_when_the_pipeline_is_built(beta, words):
    """``bo1(beta=1e400)`` failed after the work with ``Out of range float values are not JSON
    compliant``, 1e300 and 1e38 with a score past the largest float."""
    with pytest.raises(PipelineError) as err:
        parse_pipeline(f"bm25 >> bo1(beta={beta}) >> bm25")
    assert str(err.value) == f"pipeline: stage bo1 (bo1): {words}"
    with pytest.raises(PipelineError, match="beta: Input should be a finite number"):
        Stage("bo1", beta=float("nan"))
    for bad in ({"orig_weight": float("inf")}, {"max_df": float("nan")}):
        with pytest.raises(PipelineError, match=f"stage rm3 \\(rm3\\): {next(iter(bad))}: "):
            Stage("rm3", **bad)


def test_bo1_at_its_largest_beta_scores_finitely(db):
    r = _cli("eval", "sample", "--db", db, "--embedder", "hashing", "--format", "json",
             "--pipeline", "big=bm25 >> bo1(beta=1e9) >> bm25", "--pipeline", "bm25")
    assert r.exit_code == 0, r.output
    systems = {s["name"]: s for s in json.loads(r.stdout)["systems"]}
    ndcg = systems["big"]["metrics"]["ndcg@10"]
    assert math.isfinite(ndcg) and 0 < ndcg <= 1


# -- 3. retrieve after feedback ----------------------------------------------------------
@pytest.mark.parametrize("text, feedback, what, reader", [
    ("bm25 >> rm3 >> retrieve(mode='bm25')", "rm3", "weighted terms", "bm25"),
    ("bm25 >> bo1 >> retrieve", "bo1", "weighted terms", "bm25"),
    ("dense >> rocchio >> retrieve(mode='dense')", "rocchio", "query vectors", "dense"),
])
def test_retrieve_after_feedback_is_refused_when_built(text, feedback, what, reader):
    """``retrieve`` reads the topics' text: it passed the check and failed after the first
    stage and the feedback ran."""
    with pytest.raises(PipelineError) as err:
        parse_pipeline(text).check()
    assert str(err.value) == (f"pipeline: retrieve cannot read the {what} {feedback} gives (it "
                              f"would retrieve by the original query text, ignoring the "
                              f"feedback): follow {feedback} with {reader}")
    assert parse_pipeline("retrieve(mode='bm25') >> rm3 >> bm25").check()  # first: fine


# -- 4. an expression too deep to parse --------------------------------------------------
@pytest.mark.parametrize("text", [" + ".join(["bm25"] * 3000),  # past Python's parser
                                  " >> ".join(["bm25 >> rm3"] * 600) + " >> bm25"],  # past ours
                         ids=["fuse_3000", "then_1201"])
def test_an_expression_too_deep_is_one_line(text):
    """3,000 terms ended in ``internal error (RecursionError...)``. Under Python's default
    recursion limit (a library imported earlier in the process may have raised it: then the
    chain parses, as it should)."""
    import sys

    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(PipelineError) as err:
            parse_pipeline(text)
    finally:
        sys.setrecursionlimit(before)
    said = str(err.value)
    assert said.startswith(f"pipeline: the expression is nested too deeply or too long to read "
                           f"({len(text):,} characters); "), said
    assert "\n" not in said and len(said) < 300
    # what a spec's checks read of it raises nothing (parse_pipeline says why)
    assert referenced_names(text) <= {"bm25", "rm3"} and inline_params(text) == {}
    assert len(parse_pipeline(" + ".join(["bm25"] * 300)).members) == 300  # long is fine


def test_eval_refuses_a_too_deep_expression_in_one_short_line(tmp_path):
    import sys

    text = " + ".join(["bm25"] * 3000)
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # Python's default (see above)
    try:
        r = _cli("eval", "sample", "--db", tmp_path / "never.duckdb", "--embedder", "hashing",
                 "--pipeline", text)
    finally:
        sys.setrecursionlimit(before)
    assert r.exit_code == 2, r.output
    said = r.output.strip()
    assert said.startswith("error: --pipeline bm25 + bm25") and "\n" not in said, said
    assert "nested too deeply or too long" in said and "internal error" not in said
    assert len(said) < 400


# -- 5. a table parameter layered key by key ---------------------------------------------
def test_inline_table_parameters_layer_over_a_stages_table_key_by_key():
    """``[stages.rm3] fts = {stemmer = "porter"}`` and ``rm3(fts={'lower': True})`` kept only
    ``lower``: the table's stemmer was dropped, silently."""
    tables = {"rm3": {"fb_docs": 5, "fts": {"stemmer": "porter", "lower": False}}}
    p = parse_pipeline("bm25 >> rm3(fts={'lower': True}) >> bm25", tables)
    rm3 = Stage("rm3", fb_docs=5, fts={"lower": True, "stemmer": "porter"})
    assert p == Stage("bm25") >> rm3 >> Stage("bm25")
    assert p.expression() == ("bm25 >> rm3(fb_docs=5, fts={'lower': True, 'stemmer': "
                              "'porter'}) >> bm25")
    assert p.as_data()["then"][1]["params"]["fts"] == {"lower": True, "stemmer": "porter"}
    base = RetrievalPrefs(query_text="", fts=FtsConfig(k1=1.5, stopwords="none"))
    fts = rm3.config(stage_defaults("rm3", base)).fts  # type: ignore[attr-defined]
    assert (fts.stemmer, fts.lower, fts.stopwords) == ("porter", True, "none")
    # a named fusion's table and the parameters written where it is used, alike
    mix = parse_pipeline("mix(bm25, dense, weights=[1, 3])",
                         {"mix": {"kind": "fuse", "blend": "linear", "weights": [2, 2]}})
    assert mix.stage.param_dict() == {"blend": "linear", "weights": [1, 3]}  # type: ignore


def test_a_sweep_axis_layers_over_a_stages_own_table_key_by_key():
    own = Stage("rm3", fts={"stemmer": "porter"})
    swept = (Stage("bm25") >> own >> Stage("bm25")).with_params({"rm3": {"fts": {"lower": False}}})
    assert list(swept.stages())[1] == Stage("rm3", fts={"stemmer": "porter", "lower": False})
    assert own.with_params({"rm3": {"fb_docs": 3}}).param_dict() == {
        "fb_docs": 3, "fts": {"stemmer": "porter"}}


# -- 6. feedback's fts: what feedback reads ----------------------------------------------
@pytest.mark.parametrize("text, keys, pronoun", [
    ("bm25 >> rm3(fts={'k1': 0.1}) >> bm25", "k1", "it"),
    ("bm25 >> bo1(fts={'b': 0.3, 'stemmer': None, 'top_k': 5}) >> bm25", "b, top_k", "them"),
])
def test_feedback_refuses_fts_keys_it_does_not_read(text, keys, pronoun):
    """``rm3(fts={'k1': 0.1})`` changed the stage's key and label, and nothing it computed."""
    kind = text.split(" >> ")[1][:3]
    with pytest.raises(PipelineError) as err:
        parse_pipeline(text)
    assert str(err.value) == (f"pipeline: stage {kind} ({kind}): fts: sets {keys}, which "
                              f"feedback does not read (it reads the term statistics of the "
                              f"analysis: lower, stopwords, stemmer, fields, title_weight, "
                              f"engine); set {pronoun} on the bm25 stage")


def test_feedback_takes_the_analysis_and_the_bases_other_keys_under_it():
    from aiblox.engine.stages.rm3 import Rm3Config

    ok = Stage("rm3", fts={"lower": False, "stopwords": "none", "stemmer": None,
                           "fields": ["text"], "title_weight": 1.0, "engine": "index"})
    base = RetrievalPrefs(query_text="", fts=FtsConfig(k1=0.9, b=0.4, top_k=30))
    fts = ok.config(stage_defaults("rm3", base)).fts  # type: ignore[attr-defined]
    assert (fts.k1, fts.top_k, fts.stemmer) == (0.9, 30, None)  # the base's, under it
    assert Stage("rm3", fts=FtsConfig(stemmer=None))  # a config whole: the keys it moves
    with pytest.raises(PipelineError, match=r"fts: sets k1, which feedback does not read"):
        Stage("rm3", fts=FtsConfig(k1=0.9))
    with pytest.raises(PipelineError, match=r"fts: sets title_b, which feedback"):
        Stage("bo1", fts={"title_b": 0.5})
    assert Rm3Config(fts=FtsConfig(k1=0.9)).fts.k1 == 0.9  # the config a stage computes with
