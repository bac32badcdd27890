"""A filtered HNSW search (QA): a sparse filter is scored exactly (the exact index's hits, bit for
bit), a larger one walked, and a walk short of ``k`` hits retried, then scored exactly, so a
query always gets ``min(k, allowed)`` hits. Before, faiss's selector walked the ``efSearch``
nearest nodes whatever the filter: 40 allowed of 20,000 gave 4 to 10 hits, recall@10 0.59.
Cached filtered dense runs that may walk HNSW are keyed by the filtered search's version."""

from __future__ import annotations

import numpy as np
import pytest

from aiblox.contracts import VectorConfig
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.indexes import FILTERED_SEARCH_VERSION, VectorIndex, filtered_search_key
from aiblox.indexes import knn as knn_module
from aiblox.indexes.knn import prepared

N, DIM = 4000, 16


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(N, DIM)).astype(np.float32)  # no structure: hard for the graph
    queries = rng.normal(size=(30, DIM)).astype(np.float32)
    ids = [f"d{i:05d}" for i in range(N)]
    sparse = np.zeros(N, dtype=bool)
    sparse[rng.choice(N, 20, replace=False)] = True
    return vecs, queries, ids, sparse


@pytest.fixture(scope="module")
def indexes(data):
    vecs, _, ids, _ = data
    out = {}
    for distance in ("cosine", "ip", "l2"):
        hnsw = VectorConfig(index="hnsw", distance=distance, hnsw_m=8, ef_construction=40)
        out[distance] = (VectorIndex.build(ids, vecs, hnsw, threads=1),
                         VectorIndex.build(ids, vecs, VectorConfig(index="exact",
                                                                   distance=distance)))
    return out


@pytest.mark.parametrize("distance", ["cosine", "ip", "l2"])
def test_a_sparse_filter_gets_the_exact_search_s_hits(data, indexes, distance, tmp_path):
    _, queries, _, sparse = data
    hnsw, exact = indexes[distance]
    want = exact.search(queries, 10, sparse)
    assert [len(h) for h in want] == [10] * len(queries)
    assert hnsw.search(queries, 10, sparse) == want
    assert [hnsw.search(q, 10, sparse)[0] for q in queries[:3]] == want[:3]  # one at a time
    assert hnsw.search(queries, 50, sparse) == exact.search(queries, 50, sparse)  # all 20
    hnsw.save(tmp_path / "h")
    loaded = VectorIndex.load(tmp_path / "h", hnsw.config, "hnsw")  # memory-mapped
    assert loaded.search(queries, 10, sparse) == want
    none = np.zeros(N, dtype=bool)
    assert hnsw.search(queries[:2], 10, none) == [[], []]


def test_a_walk_short_of_k_is_retried_then_scored_exactly(data, indexes, monkeypatch):
    _, queries, _, sparse = data
    hnsw, exact = indexes["cosine"]
    monkeypatch.setattr(knn_module, "filtered_exact_rows", lambda n, m, ef: 0)  # always walk
    walks: list[int] = []
    exactly: list[np.ndarray] = []
    real_walk, real_exact = VectorIndex._walk, VectorIndex._allowed_exact

    def walk(self, q, k, ef, rows):
        walks.append(ef)
        return real_walk(self, q, k, ef, rows)

    def scored_exactly(self, q, k, rows, threads):
        exactly.append(q)
        return real_exact(self, q, k, rows, threads)

    monkeypatch.setattr(VectorIndex, "_walk", walk)
    monkeypatch.setattr(VectorIndex, "_allowed_exact", scored_exactly)
    got = hnsw.search(queries, 10, sparse)
    assert [len(h) for h in got] == [10] * len(queries)  # the walk alone left queries short
    assert walks == [128, 512] and len(exactly) == 1
    want = exact.search(queries, 10, sparse)
    short = [i for i, q in enumerate(prepared(queries, 'cosine')) if
             any(np.array_equal(q, e) for e in exactly[0])]
    assert short and all(got[i] == want[i] for i in short)  # those short twice: exactly
    allowed_ids = {f"d{i:05d}" for i in np.flatnonzero(sparse)}
    assert all(d in allowed_ids for hits in got for d, _ in hits)
    assert [len(h) for h in hnsw.search(queries, 30, sparse)] == [20] * len(queries)


def test_a_broad_filter_is_walked(data, indexes, monkeypatch):
    _, queries, ids, _ = data
    hnsw, exact = indexes["cosine"]
    broad = np.zeros(N, dtype=bool)
    broad[::2] = broad[1::4] = True  # 3,000 allowed, more than sqrt(2 M efSearch n): walked
    assert knn_module.filtered_exact_rows(N, 8, 128) == 2862
    called = []
    monkeypatch.setattr(VectorIndex, "_allowed_exact",
                        lambda self, *a: called.append(a) or pytest.fail("scored exactly"))
    got = hnsw.search(queries, 10, broad)
    assert not called and [len(h) for h in got] == [10] * len(queries)
    assert all(broad[int(d[1:])] for hits in got for d, _ in hits)
    want = exact.search(queries, 10, broad)
    recall = np.mean([len({d for d, _ in g} & {d for d, _ in w}) / 10
                      for g, w in zip(got, want, strict=True)])
    assert recall >= 0.8, recall


def test_the_threshold_and_the_key_of_filtered_searches():
    assert knn_module.filtered_exact_rows(20_000, 32, 128) == 12_800
    assert knn_module.filtered_exact_rows(1_000_000, 32, 128) == 90_509
    assert filtered_search_key(VectorConfig(), True) == FILTERED_SEARCH_VERSION
    assert filtered_search_key(VectorConfig(index="hnsw"), True) == FILTERED_SEARCH_VERSION
    assert filtered_search_key(VectorConfig(), False) is None
    assert filtered_search_key(VectorConfig(index="exact"), True) is None
    assert filtered_search_key(VectorConfig(engine="native"), True) is None
    assert filtered_search_key(VectorConfig(doc_score="maxp"), True) is None


def _first_key(**prefs):
    from aiblox.engine.configs import signals_config

    return signals_config(RetrievalPrefs(query_text="", **prefs), "d" * 64, "test", "duckdb",
                          "emb")


def test_filtered_dense_signals_and_stages_are_keyed_by_the_filtered_search_s_version():
    topic = {"metadata.topic": "x"}
    assert _first_key(mode="dense", filters=topic)["filtered_knn"] == FILTERED_SEARCH_VERSION
    assert _first_key(mode="hybrid", filters=topic)["filtered_knn"] == FILTERED_SEARCH_VERSION
    for prefs in ({"mode": "dense"}, {"mode": "bm25", "filters": topic},
                  {"mode": "dense", "filters": topic, "vector": VectorConfig(index="exact")}):
        assert "filtered_knn" not in _first_key(**prefs), prefs  # keys as before

    from aiblox.engine.expression import parse_pipeline
    from aiblox.engine.plan import apply_pipeline
    from tests.sweep.test_pinned_keys import KeyContext

    class Configs(KeyContext):
        seen: list = []

        def run_stage(self, name, version, config, inputs, compute):
            self.seen.append((name, config))
            return super().run_stage(name, version, config, inputs, compute)

    ctx = Configs("duckdb")
    base = RetrievalPrefs(query_text="", mode="dense", filters=topic)
    apply_pipeline(parse_pipeline("dense >> rocchio >> dense"), base, ctx, "test")
    apply_pipeline(parse_pipeline("dense >> rocchio >> dense"),
                   base.model_copy(update={"filters": {}}), ctx, "test")
    dense = [c for name, c in ctx.seen if name == "dense"]
    assert [c.get("filtered_knn") for c in dense] == [FILTERED_SEARCH_VERSION, None]
