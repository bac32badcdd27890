"""``rocchio``: dense pseudo-relevance feedback on the query vector, on a real DuckDB store with
the hashing embedder (deterministic): its vector against a hand computation, ``alpha = 1, beta
= 0`` giving the plain dense run, the exact and the HNSW index, and the check refusing ``k``
beyond the incoming run's depth."""

from __future__ import annotations

import numpy as np
import pytest

from aiblox.contracts.retrieval import RetrievalPrefs, VectorConfig
from aiblox.embedding import HashingEmbedder
from aiblox.engine import PipelineError, Queries, StageContext, StageInputs, parse_pipeline
from aiblox.engine.plan import check_pipeline
from aiblox.engine.registry import get_stage_kind
from aiblox.engine.retrieval import retrieve
from tests.stages.dense_fixtures import DOCS, QUERIES, open_tiny


@pytest.fixture()
def tiny(tmp_path):
    ds, ws = open_tiny(tmp_path)
    yield ds, ws, StageContext(ws), Queries.of(ds.split_queries("test"))
    ws.close()


def rocchio(ctx, queries, run, **params):
    kind = get_stage_kind("rocchio")
    return kind.compute(kind.make_config(params), StageInputs(queries, queries, run), ctx)


def unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_the_vector_is_the_hand_computed_rocchio_vector(tiny):
    ds, ws, ctx, topics = tiny
    plain = retrieve("dense", VectorConfig(top_k=6), topics, ctx)
    out = rocchio(ctx, topics, plain, k=2, alpha=0.4, beta=0.6)
    assert out.qids == topics.qids and out.texts == topics.texts and out.terms is None
    hashing = HashingEmbedder()
    ids, stored = ws.store.item_vectors(hashing.model_id)
    by_id = dict(zip(ids, stored, strict=True))
    for i, qid in enumerate(topics.qids):
        q = hashing.embed([QUERIES[qid]])[0].astype(np.float64)
        top = plain.docs[i][:2]
        # the store's vectors are the hashing embedder's embeddings of the documents' texts
        d = hashing.embed([DOCS[doc] for doc in top]).astype(np.float64)
        assert np.allclose(d, [by_id[doc] for doc in top], atol=1e-7)
        # Rocchio on unit vectors (cosine): alpha q/|q| + beta mean(d/|d|), by hand
        by_hand = 0.4 * q / np.linalg.norm(q) + 0.6 * (unit(d[0]) + unit(d[1])) / 2
        assert np.allclose(unit(out.vectors[i]), unit(by_hand), atol=1e-6)
        # stored at the query's scale: alpha q + beta |q| mean(d)
        assert np.allclose(out.vectors[i], 0.4 * q + 0.6 * np.linalg.norm(q) * unit(d).mean(0),
                           atol=1e-6)
    # the dense run of the new vector is the numpy ranking of it against every document
    moved = retrieve("dense", VectorConfig(top_k=6, index="exact"), out, ctx)
    sims = unit(np.asarray(stored)) @ unit(out.vectors).T
    for i in range(len(topics)):
        order = sorted(range(len(ids)), key=lambda j: (-sims[j, i], ids[j]))
        assert list(moved.docs[i]) == [ids[j] for j in order]
        assert np.allclose(moved.scores[i], [sims[j, i] for j in order], atol=1e-6)


def test_inner_product_combines_the_vectors_as_they_are(tiny):
    _, ws, ctx, topics = tiny
    plain = retrieve("dense", VectorConfig(top_k=6, distance="ip"), topics, ctx)
    out = rocchio(ctx, topics, plain, k=3, alpha=0.9, beta=0.1, distance="ip")
    hashing = HashingEmbedder()
    for i, qid in enumerate(topics.qids):
        q = hashing.embed([QUERIES[qid]])[0].astype(np.float64)
        d = hashing.embed([DOCS[doc] for doc in plain.docs[i][:3]]).astype(np.float64)
        assert np.allclose(out.vectors[i], 0.9 * q + 0.1 * d.mean(0), atol=1e-7)


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_alpha_one_beta_zero_gives_exactly_the_plain_dense_run(tiny, index):
    _, _, ctx, topics = tiny
    cfg = VectorConfig(top_k=5, index=index)
    plain = retrieve("dense", cfg, topics, ctx)
    same = rocchio(ctx, topics, plain, k=3, alpha=1.0, beta=0.0)
    assert retrieve("dense", cfg, same, ctx) == plain  # documents and scores, bit for bit
    assert ctx.indexes.vectors(ctx.embedder.model_id, cfg).kind == index


def test_the_hnsw_index_searches_the_moved_vectors_as_the_exact_one_does(tiny):
    _, _, ctx, topics = tiny
    exact, hnsw = VectorConfig(top_k=6, index="exact"), VectorConfig(top_k=6, index="hnsw")
    plain = retrieve("dense", exact, topics, ctx)
    moved = rocchio(ctx, topics, plain, k=2)
    a, b = retrieve("dense", exact, moved, ctx), retrieve("dense", hnsw, moved, ctx)
    assert a == b  # six documents: HNSW visits them all
    assert a.scores != plain.scores  # the vectors moved


def test_a_query_without_feedback_documents_keeps_its_direction(tiny):
    _, _, ctx, topics = tiny
    plain = retrieve("dense", VectorConfig(top_k=6), topics, ctx)
    empty = type(plain).from_lists(plain.qids, [[] for _ in plain.qids])
    out = rocchio(ctx, topics, empty, k=2, alpha=0.4, beta=0.6)
    q = ctx.embedder.embed(list(topics.texts))
    assert np.allclose(out.vectors, 0.4 * q, atol=1e-7)


def test_feedback_after_feedback_starts_from_the_carried_vectors(tiny):
    _, _, ctx, topics = tiny
    plain = retrieve("dense", VectorConfig(top_k=6), topics, ctx)
    once = rocchio(ctx, topics, plain, k=2)
    run = retrieve("dense", VectorConfig(top_k=6), once, ctx)
    twice = rocchio(ctx, once, run, k=2, alpha=1.0, beta=0.0)
    assert np.array_equal(twice.vectors, once.vectors)


def test_config_refuses_no_weight_at_all():
    from aiblox.engine import PipelineError, Stage

    with pytest.raises(ValueError, match="alpha and beta are both 0"):
        get_stage_kind("rocchio").make_config({"alpha": 0.0, "beta": 0.0})
    with pytest.raises(PipelineError) as err:  # a check of two fields: no field named, no "?:"
        Stage("rocchio", alpha=0.0, beta=0.0)
    assert str(err.value) == ("stage rocchio (rocchio): alpha and beta are both 0: the query "
                              "would have no vector")


def test_k_beyond_the_incoming_depth_is_refused_in_one_line():
    base = RetrievalPrefs(query_text="")
    ok = parse_pipeline("dense % 5 >> rocchio(k=5) >> dense").check()
    assert check_pipeline(ok, base, n_docs=40) == 100
    bad = parse_pipeline("dense % 3 >> rocchio(k=5) >> dense").check()
    with pytest.raises(PipelineError) as err:
        check_pipeline(bad, base, n_docs=40)
    assert str(err.value) == ("stage rocchio: k = 5 feedback documents but its input run holds "
                              "at most 3 documents per query")


def test_weights_that_overflow_the_float32_vector_are_refused(tiny):
    """alpha = beta = 1e30 squared past float32 where the index normalises the query: the
    sample's nDCG@10 fell from 0.92 to 0.18 without a word (1e308: a JSON error on NaN)."""
    from aiblox.engine.stages.rocchio import rocchio_vectors

    with pytest.raises(ValueError, match="Input should be a finite number"):
        get_stage_kind("rocchio").make_config({"alpha": float("inf")})
    q = np.asarray([[0.6, 0.8]], dtype=np.float32)
    docs = [np.asarray([[1.0, 0.0]], dtype=np.float32)]
    same = rocchio_vectors(q, docs, 1e18, 1e18, "cosine")
    assert np.allclose(unit(same), unit(rocchio_vectors(q, docs, 1.0, 1.0, "cosine")))
    for w in (1e30, 1e300):
        with pytest.raises(ValueError, match=r"rocchio: alpha 1e\+\d+ and beta 1e\+\d+ move a "
                                             r"query vector past the largest 32-bit float"):
            rocchio_vectors(q, docs, w, w, "cosine")
    ds, ws, ctx, queries = tiny
    run = retrieve("dense", VectorConfig(top_k=6), queries, ctx)
    with pytest.raises(ValueError, match="past the largest 32-bit float"):
        rocchio(ctx, queries, run, alpha=1e30, beta=1e30)
