"""``dense_rescore``: the dense model rescoring another stage's top N, on a real DuckDB store with
the hashing embedder: with ``alpha = 1`` a BM25 run's documents get exactly their dense scores,
the interpolation by hand, the documents below N kept in order, the vectors of dense feedback
used, and ``top_n`` beyond the incoming depth refused."""

from __future__ import annotations

import pytest

from aiblox.contracts.retrieval import FtsConfig, RetrievalPrefs, VectorConfig
from aiblox.engine import PipelineError, Queries, Run, StageContext, StageInputs, parse_pipeline
from aiblox.engine.plan import check_pipeline
from aiblox.engine.registry import get_stage_kind
from aiblox.engine.retrieval import retrieve
from aiblox.fusion.normalize import minmax, zscore
from tests.stages.dense_fixtures import DOCS, open_tiny


@pytest.fixture()
def tiny(tmp_path):
    ds, ws = open_tiny(tmp_path)
    yield StageContext(ws), Queries.of(ds.split_queries("test"))
    ws.close()


def rescore(ctx, queries, run, **params):
    kind = get_stage_kind("dense_rescore")
    return kind.compute(kind.make_config(params), StageInputs(queries, queries, run), ctx)


def fake_run(qids, ids):
    """Every document for every query, scores descending in ``ids`` order."""
    return Run.from_lists(qids, [[(d, float(len(ids) - i)) for i, d in enumerate(ids)]
                                 for _ in qids])


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_alpha_one_gives_each_bm25_document_its_dense_score(tiny, index):
    ctx, topics = tiny
    bm25 = retrieve("bm25", FtsConfig(top_k=6), topics, ctx)
    dense = retrieve("dense", VectorConfig(top_k=len(DOCS), index=index), topics, ctx).as_dict()
    out = rescore(ctx, topics, bm25, top_n=bm25.depth())
    assert out.qids == bm25.qids
    for qid, docs, hits in zip(bm25.qids, bm25.docs, out.as_dict().values(), strict=True):
        assert sorted(d for d, _ in hits) == sorted(docs)  # the same documents
        want = {d: s for d, s in dense[qid] if d in docs}
        assert dict(hits) == want  # exactly the dense run's scores
        assert hits == sorted(hits, key=lambda h: (-h[1], h[0]))  # best first, ties by id


def test_documents_below_top_n_follow_in_their_order(tiny):
    ctx, topics = tiny
    ids = ["c2", "b1", "a2", "a1", "c1", "b2"]
    run = fake_run(topics.qids, ids)
    out = rescore(ctx, topics, run, top_n=2)
    for docs, scores in zip(out.docs, out.scores, strict=True):
        assert sorted(docs[:2]) == ["b1", "c2"] and list(docs[2:]) == ids[2:]
        assert list(scores[2:]) == [min(scores[:2]) - j for j in range(1, 5)]
        assert list(scores) == sorted(scores, reverse=True)


@pytest.mark.parametrize("normalize, norm", [("minmax", minmax), ("zscore", zscore)])
def test_interpolation_normalises_both_scores_first(tiny, normalize, norm):
    ctx, topics = tiny
    bm25 = retrieve("bm25", FtsConfig(top_k=6), topics, ctx)
    dense = rescore(ctx, topics, bm25, top_n=4).as_dict()
    mixed = rescore(ctx, topics, bm25, top_n=4, alpha=0.3, normalize=normalize).as_dict()
    for qid, docs, scores in zip(bm25.qids, bm25.docs, bm25.scores, strict=True):
        head = list(docs[:4])
        d = dict(dense[qid])
        nd, ns = norm([d[x] for x in head]), norm(list(scores[:4]))
        want = {x: 0.3 * a + 0.7 * b for x, a, b in zip(head, nd, ns, strict=True)}
        got = dict(mixed[qid][:len(head)])
        assert got.keys() == want.keys()
        assert all(got[x] == pytest.approx(want[x], abs=1e-12) for x in head)


def test_alpha_zero_keeps_the_incoming_order(tiny):
    ctx, topics = tiny
    bm25 = retrieve("bm25", FtsConfig(top_k=6), topics, ctx)
    out = rescore(ctx, topics, bm25, top_n=bm25.depth(), alpha=0.0)
    # distinct BM25 scores keep their order (equal ones are ordered by id, as BM25's are)
    assert out.docs == bm25.docs


def test_the_vectors_of_dense_feedback_score_the_documents(tiny):
    ctx, topics = tiny
    plain = retrieve("dense", VectorConfig(top_k=6), topics, ctx)
    kind = get_stage_kind("rocchio")
    moved = kind.compute(kind.make_config({"k": 2}), StageInputs(topics, topics, plain), ctx)
    run = retrieve("dense", VectorConfig(top_k=6), moved, ctx)
    # the moved queries' own dense run, rescored with their vectors: unchanged, bit for bit
    assert rescore(ctx, moved, run, top_n=6) == run
    assert rescore(ctx, topics, run, top_n=6) != run  # the text's vector scores otherwise


def test_a_document_without_a_vector_is_named(tiny):
    ctx, topics = tiny
    run = fake_run(topics.qids, ["a1", "zz-missing"])
    with pytest.raises(ValueError, match="document 'zz-missing' has no vector"):
        rescore(ctx, topics, run, top_n=2)


def test_top_n_beyond_the_incoming_depth_is_refused_in_one_line():
    base = RetrievalPrefs(query_text="")
    ok = parse_pipeline("bm25 % 100 >> dense_rescore(top_n=100)").check()
    assert check_pipeline(ok, base, n_docs=40) == 100
    bad = parse_pipeline("bm25 % 50 >> dense_rescore(top_n=100)").check()
    with pytest.raises(PipelineError) as err:
        check_pipeline(bad, base, n_docs=40)
    assert str(err.value) == ("stage dense_rescore: top_n = 100 but its input run holds at "
                              "most 50 documents per query")
