"""``bm25`` and ``dense`` after feedback search as the first stage does (QA): the first stage's
metadata filters, their own ``min_rank``, ``engine`` and passage scoring; before, they searched
the plain index whatever was set (the values keyed and labelled, the run the plain one's), and a
filtered pipeline's feedback retrieval returned documents outside the filter. Vector feedback
and rescoring compare vectors with the base's distance (``rocchio`` with that of the ``dense``
after it), not always cosine. Real DuckDB store, sample dataset, hashing embedder."""

from __future__ import annotations

import pytest

from aiblox.contracts.retrieval import RetrievalPrefs, VectorConfig
from aiblox.engine.algebra import PipelineError
from aiblox.engine.evaluate import evaluate_retrieval
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.plan import check_pipeline
from aiblox.engine.stage_bases import step_bases

TOPIC = {"metadata.topic": "lexical-retrieval"}


@pytest.fixture(scope="module")
def ws(tmp_path_factory, sample_dataset):
    from aiblox.engine.workspace import open_workspace

    db = str(tmp_path_factory.mktemp("after-feedback") / "sample.duckdb")
    with open_workspace(sample_dataset, db, "hashing", progress=False) as w:
        yield w


def _run(ws, ds, pipeline, **prefs):
    r = evaluate_retrieval(ws, ds, "test", RetrievalPrefs(query_text="", **prefs),
                           ["ndcg@10"], pipeline=pipeline, progress=False)
    return r.run


@pytest.mark.parametrize("pipeline", ["bm25 >> rm3 >> bm25", "bm25 >> bo1 >> bm25",
                                      "dense >> rocchio >> dense"])
def test_retrieval_after_feedback_keeps_the_first_stage_s_filters(ws, sample_dataset, pipeline):
    outside = {d for d, it in sample_dataset.corpus.items()
               if (it.metadata or {}).get("topic") != "lexical-retrieval"}
    filtered = _run(ws, sample_dataset, pipeline, filters=TOPIC)
    docs = {d for hits in filtered.values() for d, _ in hits}
    assert docs and not docs & outside
    plain = _run(ws, sample_dataset, pipeline)  # unfiltered, the same pipeline finds them
    assert {d for hits in plain.values() for d, _ in hits} & outside
    # the filters written on the first stage itself, the base unfiltered
    own = _run(ws, sample_dataset, pipeline.replace(
        pipeline.split(" >> ")[0], f"retrieve(mode={pipeline.split(' >> ')[0]!r}, "
                                   f"filters={TOPIC!r})", 1))
    assert not {d for hits in own.values() for d, _ in hits} & outside


def test_bm25_after_feedback_applies_its_min_rank(ws, sample_dataset):
    plain = _run(ws, sample_dataset, "bm25 >> rm3 >> bm25")
    floor = sorted(s for hits in plain.values() for _, s in hits)[len(plain)]
    cut = _run(ws, sample_dataset, f"bm25 >> rm3 >> bm25(min_rank={floor!r})")
    assert cut == {q: [h for h in hits if h[1] >= floor] for q, hits in plain.items()}
    assert cut != plain


def test_dense_after_feedback_searches_as_its_settings_say(ws, sample_dataset):
    """Rocchio that gives the query vector back (alpha 1, beta 0): the dense stage after it
    gives the first stage's run under each setting, passage scoring and the native engine."""
    for dense in ("dense(doc_score='maxp', passage_tokens=32, passage_overlap=0)",
                  "dense(engine='native')", "dense(min_score=0.1)"):
        first = _run(ws, sample_dataset, dense)
        again = _run(ws, sample_dataset, f"bm25 >> rocchio(alpha=1, beta=0) >> {dense}")
        assert again == first, dense
    assert _run(ws, sample_dataset, "dense(doc_score='maxp', passage_tokens=32, "
                                    "passage_overlap=0)") != _run(ws, sample_dataset, "dense")


def test_native_bm25_after_lexical_feedback_is_refused_before_any_work():
    base = RetrievalPrefs(query_text="")
    with pytest.raises(PipelineError, match=r"^stage bm25\(engine='native'\) after rm3: "
                                            r"bm25\(engine='native'\) cannot score the weighted"):
        check_pipeline(parse_pipeline("bm25 >> rm3 >> bm25(engine='native')"), base)
    native = base.model_copy(update={"fts": base.fts.model_copy(update={"engine": "native"})})
    with pytest.raises(PipelineError, match="cannot score the weighted terms"):
        check_pipeline(parse_pipeline("bm25 >> bo1 >> bm25"), native)  # the base's engine


def test_runs_fused_under_different_filters_give_feedback_no_filter_to_choose(
        ws, sample_dataset):
    pipe = ("(retrieve(mode='bm25', filters={'metadata.topic': 'lexical-retrieval'}) + bm25) "
            ">> rm3 >> bm25")
    with pytest.raises(PipelineError, match="filtered differently"):
        _run(ws, sample_dataset, pipe)


def test_vector_feedback_and_rescoring_compare_vectors_with_the_dense_distance(
        ws, sample_dataset):
    l2 = {"vector": VectorConfig(distance="l2")}
    dense = _run(ws, sample_dataset, "dense", **l2)
    rescored = _run(ws, sample_dataset, "bm25 >> dense_rescore(top_n=100)", **l2)
    by_dense = {q: dict(hits) for q, hits in dense.items()}
    pairs = [(s, by_dense[q][d]) for q, hits in rescored.items() for d, s in hits
             if d in by_dense[q]]
    assert pairs and all(a == b for a, b in pairs)  # alpha 1: the dense score, bit for bit
    assert any(s > 0 for hits in _run(ws, sample_dataset, "bm25 >> dense_rescore(top_n=100, "
                                                          "distance='cosine')", **l2).values()
               for _, s in hits)  # cosine would have been positive where l2 is not
    base = RetrievalPrefs(query_text="")
    bases = step_bases(parse_pipeline("dense(distance='l2') >> rocchio >> dense(distance='l2')"),
                       base)
    assert [b.vector.distance for b in bases] == ["cosine", "l2", "cosine"]
    with pytest.raises(PipelineError, match="compare vectors differently"):
        check_pipeline(parse_pipeline("dense >> rocchio >> (dense(distance='l2') + dense)"),
                       base)
    own = step_bases(parse_pipeline("dense >> rocchio(distance='ip') >> dense(distance='l2')"),
                     base)
    assert own[1].vector.distance == "cosine"  # its own distance set: the base untouched


def test_retrieval_after_a_researcher_s_query_stage_searches_under_the_base_s_filters(
        ws, sample_dataset, monkeypatch):
    """A stage of one's own that rewrites the topics (queries in, queries out), then ``bm25``:
    no first stage is upstream, so the base's filters apply (not an error about fused runs)."""
    import aiblox.engine.registry as registry
    from aiblox.engine.builtin import IdentityConfig

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @registry.register_stage("same_queries", version="1", takes="queries", gives="queries",
                             config=IdentityConfig)
    def same_queries(cfg, inputs, ctx):
        return inputs.queries

    outside = {d for d, it in sample_dataset.corpus.items()
               if (it.metadata or {}).get("topic") != "lexical-retrieval"}
    run = _run(ws, sample_dataset, "same_queries >> bm25", filters=TOPIC)
    docs = {d for hits in run.values() for d, _ in hits}
    assert docs and not docs & outside
    assert run == _run(ws, sample_dataset, "bm25", filters=TOPIC)
