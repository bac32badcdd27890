"""Pipelines as data: the operators, their precedence, typing, parameters and the spec
expression (aiblox.engine.algebra, aiblox.engine.expression)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from aiblox.engine import (
    Cutoff,
    Fuse,
    PipelineError,
    Stage,
    Then,
    fuse,
    parse_pipeline,
    register_stage,
)
from aiblox.engine.data import Queries, Run


class _Fb(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fb_docs: int = 10
    fb_terms: int = 10


class _Rr(BaseModel):
    model_config = ConfigDict(extra="forbid")
    top_n: int = 100


@register_stage("t_feedback", version="1", takes="run", gives="queries", config=_Fb)
def _feedback(cfg: _Fb, inputs, ctx):  # pragma: no cover - typing only here
    return inputs.queries


@register_stage("t_rerank", version="1", takes="run", gives="run", config=_Rr)
def _rerank(cfg: _Rr, inputs, ctx):  # pragma: no cover - typing only here
    return inputs.run


bm25, dense = Stage("bm25"), Stage("dense")
fb, rr = Stage("t_feedback"), Stage("t_rerank")


def test_operators_build_the_expected_tree_with_pythons_precedence():
    p = bm25 + dense >> rr % 10
    # + binds tighter than >>, % tighter than +: (bm25 + dense) >> (rr % 10)
    assert isinstance(p, Then)
    assert isinstance(p.steps[0], Fuse) and isinstance(p.steps[1], Cutoff)
    assert p.expression() == "bm25 + dense >> t_rerank % 10"
    chain = bm25 >> fb >> bm25 >> rr
    assert isinstance(chain, Then) and len(chain.steps) == 4  # flattened
    assert [s.kind for s in chain.stages()] == ["bm25", "t_feedback", "bm25", "t_rerank"]
    assert chain.names() == ["bm25", "t_feedback", "t_rerank"]
    three = bm25 + dense + Stage("bm25", name="b2", k1=2.0)
    assert isinstance(three, Fuse) and len(three.members) == 3


def test_pipelines_are_values_equal_and_hashable():
    a = Stage("bm25", k1=0.9) >> fb >> bm25
    b = Stage("bm25", k1=0.9) >> fb >> bm25
    assert a == b and hash(a) == hash(b)
    assert a != Stage("bm25", k1=1.0) >> fb >> bm25
    assert a.as_data() == b.as_data()


@pytest.mark.parametrize("build, message", [
    (lambda: (rr >> bm25), "bm25 takes queries but follows t_rerank"),
    (lambda: (bm25 >> bm25), "a retrieval stage after a run needs feedback"),
    (lambda: (bm25 >> fb >> rr), "t_rerank takes a ranked run but follows"),
    (lambda: (bm25 >> fb) + dense, "gives queries, not a ranked run"),
    (lambda: (bm25 >> fb) % 5, "gives queries"),
    (lambda: bm25 % 0, ">= 1"),
    (lambda: Stage("nope"), "unknown stage 'nope'"),
    (lambda: Stage("bm25", k1="high"), "stage bm25"),
    (lambda: Stage("t_rerank", top_k=5), "top_k"),
    # feedback the next retrieval would ignore (once run as plain dense / bm25, silently)
    (lambda: bm25 >> Stage("rm3") >> dense, "dense cannot read the weighted terms rm3 gives"),
    (lambda: bm25 >> Stage("bo1") >> (bm25 + dense), "dense cannot read the weighted terms"),
    (lambda: dense >> Stage("rocchio") >> bm25,
     "bm25 cannot read the query vectors rocchio gives .*follow rocchio with dense"),
    # a kind of one's own that declares no `carries`: retrieve reads the topics, ignoring it
    # (refused only once the first stage and the feedback had run)
    (lambda: bm25 >> fb >> Stage("retrieve"),
     "retrieve reads the topics themselves, not the queries t_feedback gives: follow "
     "t_feedback with bm25 or dense"),
    (lambda: bm25 >> fb >> (bm25 + Stage("retrieve", mode="dense")), "retrieve reads the topics"),
])
def test_a_stage_that_does_not_fit_is_refused_naming_it(build, message):
    with pytest.raises(PipelineError, match=message):
        p = build()
        p.check()


def test_check_refuses_a_reranker_first_and_a_pipeline_ending_in_queries():
    with pytest.raises(PipelineError, match="nothing to rerank"):
        rr.check()
    with pytest.raises(PipelineError, match=r"ends in queries .*\(e\.g\. >> bm25\)"):
        (bm25 >> fb).check()
    with pytest.raises(PipelineError, match=r"\(e\.g\. >> dense\)"):  # the side it read
        (dense >> Stage("rocchio")).check()
    assert (bm25 >> fb >> bm25 >> rr).check()
    # feedback read by the retrieval that follows it, also inside a fusion
    assert (bm25 >> Stage("rm3") >> (bm25 + Stage("bm25", k1=0.9))).check()
    assert (dense >> Stage("rocchio") >> dense).check()


def test_with_params_sets_every_stage_of_a_name_and_refuses_unknown_names():
    p = bm25 >> fb >> bm25
    q = p.with_params({"bm25": {"k1": 2.0}, "t_feedback": {"fb_terms": 30}})
    assert [s.param_dict() for s in q.stages()] == [{"k1": 2.0}, {"fb_terms": 30}, {"k1": 2.0}]
    with pytest.raises(PipelineError, match="no stage named 'rm9'"):
        p.with_params({"rm9": {"x": 1}})
    with pytest.raises(PipelineError, match="fb_terms"):
        p.with_params({"t_feedback": {"fb_terms": "many"}})


def test_expression_round_trips_and_equals_the_python_pipeline():
    text = "bm25(k1=0.9) >> t_feedback(fb_terms=20) >> bm25 + dense >> t_rerank % 10"
    p = parse_pipeline(text)
    assert p == (Stage("bm25", k1=0.9) >> Stage("t_feedback", fb_terms=20)
                 >> (bm25 + dense) >> rr % 10)
    assert parse_pipeline(p.expression()) == p


def test_plus_is_associative_and_an_explicit_fusion_is_a_unit():
    """QA13d #8: ``(bm25 + dense) + x`` (and even ``fuse(bm25 + dense, x)``) was a flat 3-way
    fusion while ``x + (bm25 + dense)`` stayed nested, so ``(A + B) + X`` and ``X + (A + B)``
    were other fusions. ``+`` is n-ary and associative on either side, in Python and in
    expressions; ``fuse(...)`` is one unit, never flattened, written ``fuse(...)`` inside
    another fusion (its labels and shapes were once ``bm25 + (dense + x)``)."""
    from aiblox.engine import fuse
    from aiblox.engine.algebra import label, shape

    x = Stage("bm25", k1=0.9)
    flat = bm25 + dense + x
    for p in ((bm25 + dense) + x, bm25 + (dense + x),
              parse_pipeline("(bm25 + dense) + bm25(k1=0.9)"),
              parse_pipeline("bm25 + (dense + bm25(k1=0.9))")):
        assert p == flat and len(p.members) == 3
    nested = bm25 + fuse(dense, x)
    assert nested != flat and len(nested.members) == 2
    assert parse_pipeline("bm25 + fuse(dense, bm25(k1=0.9))") == nested
    assert parse_pipeline("fuse(bm25 + dense, bm25(k1=0.9))").members[0] == bm25 + dense
    assert (fuse(bm25, dense) + x).members == (bm25 + dense, x)
    assert label(flat) == "bm25 + dense + bm25(k1=0.9)"
    assert label(nested) == "bm25 + fuse(dense, bm25(k1=0.9))"
    assert (shape(flat), shape(nested)) == ("bm25 + dense + bm25", "bm25 + fuse(dense, bm25)")
    assert nested.expression() == "bm25 + fuse(dense, bm25(k1=0.9))"
    for p in (flat, nested, fuse(bm25 + dense, x), fuse(fuse(bm25, dense), x) + dense):
        assert parse_pipeline(p.expression()) == p
        assert parse_pipeline(p.expression()).as_data() == p.as_data()


def test_a_named_stages_expression_shows_its_parameters():
    """Two settings of a named stage once had one expression (``bm25 >> fb >> bm25``), so an
    eval result's ``pipeline`` could not tell them apart; with its kind from a [stages] table
    the expression parses back to the same pipeline."""
    a = bm25 >> Stage("t_feedback", "fb", fb_terms=5) >> bm25
    b = bm25 >> Stage("t_feedback", "fb", fb_terms=30) >> bm25
    assert a.expression() == "bm25 >> fb(fb_terms=5) >> bm25"
    assert a.expression() != b.expression()
    assert parse_pipeline(a.expression(), {"fb": {"kind": "t_feedback"}}) == a
    assert (bm25 >> Stage("t_feedback", "fb") >> bm25).expression() == "bm25 >> fb >> bm25"


@pytest.mark.parametrize("weights, message", [
    ("[0, 0, 0]", r"weights: \[0.0, 0.0, 0.0\] sum to 0"),
    ("[-1, 2, 0]", r"weights: each is a finite number >= 0, got -1.0"),
    ("[1e308, 1e308, 1]", r"weights: \[1e\+308, 1e\+308, 1.0\] sum past the largest "
                          r"float"),
])
def test_fusion_weights_are_checked_for_any_number_of_runs(weights, message):
    """Linear (and RRF) weights summing to 0 or negative were refused for two runs only (and in
    ScoringConfig's words); three runs scored a ranking in document-id order."""
    for blend in ("linear", "rrf"):
        with pytest.raises(PipelineError, match=rf"stage fuse \(fuse\): {message}"):
            parse_pipeline(f"fuse(bm25, dense, bm25(k1=0.9), blend='{blend}', "
                           f"weights={weights})")


def test_spec_tables_name_stages_fusions_and_sub_pipelines():
    tables = {"first": {"kind": "bm25", "k1": 1.5},
              "blend": {"kind": "fuse", "blend": "linear", "weights": [0.3, 0.7]},
              "hybrid": {"pipeline": "blend(first, dense)"}}
    p = parse_pipeline("hybrid >> t_rerank", tables)
    fuse = p.steps[0]
    assert isinstance(fuse, Fuse) and fuse.name == "blend"
    assert fuse.stage.param_dict() == {"blend": "linear", "weights": [0.3, 0.7]}
    assert fuse.members[0] == Stage("bm25", "first", k1=1.5)
    assert parse_pipeline("fuse(bm25, dense, rrf_k=10)").stage.param_dict() == {"rrf_k": 10}


@pytest.mark.parametrize("text, tables, message", [
    ("a", {"a": {"pipeline": "b"}, "b": {"pipeline": "a >> t_rerank"}}, "refers to itself"),
    ("a", {"a": {"pipeline": "a"}}, r"stages.a: refers to itself \(a -> a\)"),
    ("bm25 >> ", {}, r"not a pipeline expression \(it ends with '>>': a stage must follow\)"),
    ("bm25 +", {}, "it ends with '\\+': a stage must follow"),
    ("bm25 % ", {}, "it ends with '%': a depth"),
    ("bm25 >> rm3(fb_terms=", {}, "it ends with '=': a value must follow"),
    ("  bm25 bm25", {}, r"invalid syntax at column 8\)"),  # a column of the text as given
    ("bm25 >> (rm3", {}, r"'\(' was never closed at column 9"),
    ("bm25 - dense", {}, "operator '-' is not a pipeline operator"),
    ("bm25 | dense", {}, "operator '|' is not a pipeline operator"),
    ("bm25(k1=1.2, k1=1.3)", {}, r"bm25\(...\): parameter k1 is given twice"),
    ("bm25 % -5", {}, "% takes a whole number of documents >= 1, got '-5'"),
    ("bm25 % 1e2", {}, "got '1e2'"),  # as written, not 100.0
    ("bm25 >> rm3(5) >> bm25", {}, r"rm3\(5\): a stage's parameters are named, rm3 takes "
                                   r"fb_docs, fb_terms"),
    ("nope(5)", {}, "unknown stage 'nope'"),
    ("bm25 >> rm3(fb_docs==5) >> bm25", {}, r"a parameter is set with one '=' \(fb_docs=5\)"),
    ("x=bm25 >> rm3 >> bm25", {}, "'x'= labels a pipeline outside its expression"),
    ("bm25 >> cross_encoder", {}, r"model is required: cross_encoder\(model=\.\.\.\)"),
    ("bm25(k1=x)", {}, "literals"),
    ("bm25 % 2.5", {}, "whole number"),
    ("fuse(bm25)", {}, "two or more"),
    ("x", {"x": {"kind": "bm25", "k9": 1}}, "stages.x"),
    ("unknown_stage", {}, "unknown stage"),
    ("", {}, "an expression"),
])
def test_bad_expressions_are_refused_naming_the_field(text, tables, message):
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(text, tables)


def test_an_expression_may_be_written_over_lines():
    """QA 25: a newline in an expression was "unexpected indent at column 1"."""
    assert str(parse_pipeline("bm25 >> rm3\n  >> bm25")) == "bm25 >> rm3 >> bm25"


def test_queries_and_runs_round_trip_through_arrays():
    q = Queries.of([("q1", "a b"), ("q2", "c")]).with_terms([{"b": 0.5, "a": 1.0}, {}])
    assert Queries.from_arrays(q.to_arrays()) == q
    r = Run.from_dict({"q2": [("d1", 2.0)], "q1": [("d3", 1.5), ("d2", 1.5)]})
    assert r.qids == ("q1", "q2")
    assert Run.from_arrays(r.to_arrays()) == r
    assert r.cut(1).as_dict() == {"q1": [("d3", 1.5)], "q2": [("d1", 2.0)]}


def test_retrieval_on_the_topics_is_the_first_stage_of_retrieval_prefs():
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.plan import first_stage_prefs

    base = RetrievalPrefs(query_text="", top_k_items=100, fts={"top_k": 200},
                          vector={"top_k": 200}, scoring={"blend": "linear", "w_text": 0.3,
                                                          "w_vec": 0.7, "normalize": "minmax"})
    assert first_stage_prefs(Stage("retrieve"), base) == base
    hybrid = first_stage_prefs(bm25 + dense, base)
    assert hybrid == base.model_copy(update={"mode": "hybrid"})
    swapped = first_stage_prefs(parse_pipeline("fuse(dense, bm25, weights=[0.6, 0.4])"), base)
    assert (swapped.scoring.w_text, swapped.scoring.w_vec) == (0.4, 0.6)
    rrf = first_stage_prefs(parse_pipeline("fuse(bm25, dense, blend='rrf', rrf_k=10) % 20"),
                            base)
    assert (rrf.scoring.blend, rrf.scoring.rrf_k, rrf.top_k_items) == ("rrf", 10, 20)
    one = first_stage_prefs(Stage("bm25", k1=0.9, top_k=1000) % 100, base)
    assert (one.mode, one.fts.k1, one.fts.top_k, one.top_k_items) == ("bm25", 0.9, 1000, 100)
    assert first_stage_prefs(bm25 >> fb >> bm25, base) is None
    assert first_stage_prefs(bm25 + bm25, base) is None


def test_a_fusion_takes_the_signals_weights_only_for_a_lexical_and_a_dense_run():
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.plan import fuse_config

    base = RetrievalPrefs(query_text="", scoring={"blend": "linear", "w_text": 0.3,
                                                  "w_vec": 0.7})
    rrf = base.model_copy(update={"scoring": base.scoring.model_copy(
        update={"blend": "rrf", "rrf_w_vec": 2.0})})
    cases = [("(bm25 % 50) + (dense % 50)", base, (0.3, 0.7)),
             ("dense + (bm25 >> t_feedback >> bm25)", base, (0.7, 0.3)),
             ("retrieve(mode='dense') + bm25", base, (0.7, 0.3)),
             ("(bm25 >> t_rerank) + dense", rrf, (1.0, 2.0)),
             ("bm25 + bm25(k1=0.9)", base, None),           # no pair of signals: equal
             ("retrieve + bm25", base, None),                # a hybrid is neither
             ("fuse(bm25, dense, weights=[1, 1])", base, (1.0, 1.0)),  # explicit: kept
             ("(bm25 >> t_rerank) + dense", base.model_copy(update={  # 0.5/0.5 is None's
                 "scoring": base.scoring.model_copy(update={"w_text": 0.5, "w_vec": 0.5})}),
              None)]
    for text, prefs, weights in cases:
        p = parse_pipeline(text)
        assert isinstance(p, Fuse)
        assert fuse_config(p, prefs).weights == weights, text


def test_a_fusions_weights_are_one_per_input_when_it_is_built():
    """QA13d #4: ``fuse(bm25, dense, bm25 >> rm3 >> bm25, weights=[0.3, 0.7])`` was refused
    only when the fusion computed, after its inputs were computed and cached."""
    three = bm25 + dense + (bm25 >> fb >> bm25)
    message = (r"fuse: weights needs one weight per fused run, in order \(3: bm25, dense, "
               r"bm25 >> t_feedback >> bm25\), got \[0.3, 0.7\]")
    with pytest.raises(PipelineError, match=message):
        Fuse(three.members, (("weights", (0.3, 0.7)),))
    with pytest.raises(PipelineError, match=message):
        three.with_params({"fuse": {"weights": [0.3, 0.7]}})
    with pytest.raises(PipelineError, match="pipeline: " + message):
        parse_pipeline("fuse(bm25, dense, bm25 >> t_feedback >> bm25, weights=[0.3, 0.7])")
    with pytest.raises(PipelineError, match=r"mix: weights needs one weight per fused run, in "
                                            r"order \(2: bm25, dense\), got \[1.0\]"):
        parse_pipeline("mix(bm25, dense)", {"mix": {"kind": "fuse", "weights": [1.0]}})
    assert three.with_params({"fuse": {"weights": [1, 2, 3]}}).stage.param_dict() == {
        "weights": [1, 2, 3]}


def test_a_pipeline_weighted_by_a_number_points_to_a_weighted_fusion():
    """QA13d #9: PyTerrier's ``0.3 * bm25 + 0.7 * dense`` gave a raw ``TypeError: unsupported
    operand`` in Python, and ``'0.3' is not a stage, a call or an operator`` in an
    expression."""
    hint = (r"a pipeline is not weighted by a number here \(\+ is rank fusion, RRF k 60 by "
            r"default, not a sum of scores\); weigh the runs of a fusion with its weights: "
            r"fuse\(bm25, dense, blend=\"linear\", weights=\[0.3, 0.7\]\)")
    with pytest.raises(TypeError, match=r"^0.3 \* bm25: " + hint):
        _ = 0.3 * bm25 + 0.7 * dense
    with pytest.raises(TypeError, match=r"^dense \* 2: "):
        _ = dense * 2
    with pytest.raises(PipelineError, match=r"^pipeline: 0.3 \* bm25: " + hint) as err:
        parse_pipeline("0.3 * bm25 + 0.7 * dense")
    assert "\n" not in str(err.value)


def test_a_stage_error_is_named_by_the_field_parsed_once():
    """QA13d #10: a stage's bad parameter read ``--pipeline x: pipeline: stage bo1 (bo1): ...``
    (and ``pipeline: ...`` for a spec's ``pipeline[1]``)."""
    for where in ("--pipeline", "pipeline[1]", "baseline.pipeline"):
        with pytest.raises(PipelineError) as err:
            parse_pipeline("bm25 >> t_feedback(fb_terms='many') >> bm25", where=where)
        assert str(err.value) == (f"{where}: stage t_feedback, parameter fb_terms: got 'many': "
                                  f"expected a whole number")
        with pytest.raises(PipelineError) as err:
            parse_pipeline("bm25 >> t_feedback(fb_term=5) >> bm25", where=where)
        assert str(err.value).startswith(f"{where}: stage t_feedback (t_feedback): fb_term: ")
    with pytest.raises(PipelineError, match=r"^stages.fb.fb_terms: got 'x': expected a whole"):
        parse_pipeline("bm25 >> fb >> bm25", {"fb": {"kind": "t_feedback", "fb_terms": "x"}})
    with pytest.raises(PipelineError, match=r"^stages.fb: stage fb \(t_feedback\): fb_term:"):
        parse_pipeline("bm25 >> fb >> bm25", {"fb": {"kind": "t_feedback", "fb_term": 5}})


@pytest.mark.parametrize("build, message", [
    (lambda: Stage("rm3", fb_docs=True), "stage rm3, parameter fb_docs: got True: expected a "
                                         "whole number"),
    (lambda: Stage("rm3", "fb", fb_terms="10"), "stage fb (rm3), parameter fb_terms: got '10': "
                                                "expected a whole number"),
    (lambda: Stage("bm25", k1="1.2"), "stage bm25, parameter k1: got '1.2': expected a number"),
    (lambda: Stage("rm3", english_terms=1), "stage rm3, parameter english_terms: got 1: "
                                            "expected true or false"),
    (lambda: Stage("rm3", fts={"title_weight": True}), "stage rm3, parameter "
                                                       "fts.title_weight: got True: expected "
                                                       "a number"),
    (lambda: fuse(Stage("bm25"), Stage("dense"), weights=[1, True]),
     "stage fuse, parameter weights[1]: got True: expected a number"),
    (lambda: Stage("bm25") >> Stage("rm3", fb_docs=10.0) >> Stage("bm25"),
     "stage rm3, parameter fb_docs: got 10.0: expected a whole number"),
])
def test_a_stage_built_in_python_is_read_as_strictly_as_a_spec(build, message):
    """``Stage("rm3", fb_docs=True)`` silently ran RM3 from one document (labelled
    ``rm3(fb_docs=True)``) where a spec refused the value: a stage built in Python is now read
    as strictly (``registry.param_problems``), one error naming the stage and the parameter."""
    with pytest.raises(PipelineError) as err:
        build()
    assert str(err.value) == message


def test_a_python_stage_keeps_numbers_that_are_numbers():
    rm3 = Stage("rm3", fb_docs=10, orig_weight=1, max_df=0.5)  # a whole number for a decimal
    assert (rm3.config().fb_docs, rm3.config().orig_weight) == (10, 1.0)  # type: ignore
    assert fuse(Stage("bm25"), Stage("dense"), weights=(1, 2)).stage.param_dict() == {
        "weights": [1, 2]}
    # with_params (a sweep's stage axes) is read as strictly
    with pytest.raises(PipelineError, match="parameter fb_docs: got True"):
        (Stage("bm25") >> rm3 >> Stage("bm25")).with_params({"rm3": {"fb_docs": True}})


def test_a_table_parameter_is_written_read_and_layered_over_its_default():
    """``rm3(fts={...})`` failed with ``Input should be a valid dictionary``: the table became
    a list of pairs. It is a table again, in Python and in an expression, round trips through
    the expression and the logged form, and is read over the default (the spec's base
    ``fts``) key by key."""
    from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs
    from aiblox.engine.algebra import from_data, label, settings
    from aiblox.engine.stage_bases import stage_defaults

    text = "bm25 >> rm3(fb_docs=5, fts={'stemmer': None, 'title_weight': 2.0}) >> bm25"
    p = parse_pipeline(text).check()
    rm3 = Stage("rm3", fb_docs=5, fts={"title_weight": 2.0, "stemmer": None})
    assert p == Stage("bm25") >> rm3 >> Stage("bm25")
    assert p.expression() == text and parse_pipeline(p.expression()) == p
    assert from_data(p.as_data()) == p and hash(from_data(p.as_data())) == hash(p)
    assert rm3.param_dict() == {"fb_docs": 5, "fts": {"stemmer": None, "title_weight": 2.0}}
    assert label(rm3) == "rm3(fb_docs=5,fts={'stemmer': None, 'title_weight': 2.0})"
    assert settings(p)["rm3.fts"] == {"stemmer": None, "title_weight": 2.0}
    base = RetrievalPrefs(query_text="", fts=FtsConfig(top_k=17, k1=1.5))
    fts = rm3.config(stage_defaults("rm3", base)).fts  # type: ignore[attr-defined]
    assert fts == base.fts.model_copy(update={"stemmer": None, "title_weight": 2.0})
    # a config given whole in Python replaces the default
    whole = Stage("rm3", fts=FtsConfig(stemmer=None))
    assert whole.config(stage_defaults("rm3", base)).fts == FtsConfig(stemmer=None)  # type: ignore
    with pytest.raises(PipelineError, match=r"^pipeline: stage rm3 \(rm3\): fts.k9: Extra "):
        parse_pipeline("bm25 >> rm3(fts={'k9': 1}) >> bm25")


def test_a_named_sub_pipeline_used_with_parameters_is_the_using_fields_error():
    tables = {"fb": {"pipeline": "bm25 >> t_feedback >> bm25"}}
    for where in ("pipeline", "pipeline[1]", "baseline.pipeline"):
        with pytest.raises(PipelineError) as err:
            parse_pipeline("fb(fb_docs=5)", tables, where)
        assert str(err.value) == (f"{where}: fb(fb_docs=5): fb is the named pipeline of "
                                  f"[stages.fb], which takes no parameters or pipelines: set "
                                  f"them on its stages")
    with pytest.raises(PipelineError, match=r"^stages.fb: a named pipeline takes no "):
        parse_pipeline("fb", {"fb": {"pipeline": "bm25", "k1": 1.0}})
    with pytest.raises(PipelineError, match=r"^pipeline: .* gives a ranked run.*; fb is "
                                            r"\[stages.fb\]$"):
        parse_pipeline("fb >> bm25", tables)


def test_entry_stages_are_where_a_pipeline_receives_its_input():
    """One walker (``algebra.entry_stages``) for the feedback check and for the analysis
    feedback reads: a cut-off receives its input where its inner pipeline does, a fusion at
    every member's first stage; the later stages of a cut pipeline receive a run, not it."""
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.algebra import entry_stages
    from aiblox.engine.stage_bases import step_bases

    def names(expr: str) -> list[str]:
        return [s.expression() for s in entry_stages(parse_pipeline(expr))]

    assert names("bm25") == ["bm25"]
    assert names("bm25 >> t_rerank") == ["bm25"]
    assert names("(bm25(k1=1.2) >> t_rerank) % 10") == ["bm25(k1=1.2)"]
    assert names("(bm25 % 50 >> t_rerank) + dense") == ["bm25", "dense"]
    assert names("((bm25 + dense) % 20 >> t_rerank) % 10") == ["bm25", "dense"]

    base = RetrievalPrefs(query_text="")
    p = parse_pipeline("bm25(stemmer=None) >> rm3 >> (bm25(stemmer=None) >> t_rerank) % 10")
    assert isinstance(p, Then)
    assert step_bases(p, base)[1].fts.stemmer is None
    assert step_bases(p, base)[0] == base
    with pytest.raises(PipelineError, match="analyse text differently"):
        step_bases(parse_pipeline("bm25 >> rm3 >> (bm25 % 5 + bm25(stemmer=None)) % 3"), base)


def test_a_parameter_that_is_no_literal_is_quoted_as_written():
    """``-(-5)`` was echoed as ``--5`` (``ast.unparse``), which the user never typed."""
    with pytest.raises(PipelineError, match=r"rm3\(fb_docs=\.\.\.\): parameters are literals "
                                            r"\(numbers, strings, lists\), got '-\(-5\)'$"):
        parse_pipeline("bm25 >> rm3(fb_docs=-(-5)) >> bm25")


def test_stages_of_one_name_set_differently_are_each_in_the_settings():
    """``settings`` kept the first value of a parameter per stage name (its docstring said two
    stages of one name set the same values, but each runs with its own): on adi
    ``bm25(k1=0.5) >> rm3 >> bm25``, ``bm25 >> rm3 >> bm25(k1=0.5)`` and ``bm25(k1=0.5) >>
    rm3 >> bm25(k1=2.0)`` scored nDCG@10 0.4475, 0.4570 and 0.4598 and logged one set of
    params, ``bm25.k1`` 0.5, the third's 2.0 nowhere. A parameter every stage of the name sets
    alike keeps its key (what a sweep's axis addresses); any other is keyed by the stage's
    place among those of its name."""
    from aiblox.engine.algebra import settings

    def of(text: str) -> dict:
        return {k: v for k, v in settings(parse_pipeline(text)).items() if k != "pipeline"}

    assert settings(parse_pipeline("bm25(k1=0.5) >> rm3 >> bm25"))["pipeline"] == \
        "bm25 >> rm3 >> bm25"  # the shape the points share, a report's series
    assert of("bm25(k1=0.5) >> rm3 >> bm25") == {"bm25.1.k1": 0.5}
    assert of("bm25 >> rm3 >> bm25(k1=0.5)") == {"bm25.2.k1": 0.5}
    assert of("bm25(k1=0.5) >> rm3 >> bm25(k1=2.0)") == {"bm25.1.k1": 0.5, "bm25.2.k1": 2.0}
    assert of("bm25(k1=0.5) >> rm3 >> bm25(k1=0.5)") == {"bm25.k1": 0.5}
    assert of("bm25 >> rm3 >> (bm25 + bm25(b=0.3))") == {"bm25.3.b": 0.3}
    # an axis sets every stage of its name: its own key, beside what one stage sets alone
    swept = parse_pipeline("bm25(b=0.3) >> rm3 >> bm25").with_params(
        {"bm25": {"k1": 0.9}, "rm3": {"fb_terms": 5}})
    assert settings(swept) == {"pipeline": "bm25 >> rm3 >> bm25", "bm25.1.b": 0.3,
                               "bm25.k1": 0.9, "rm3.fb_terms": 5}
