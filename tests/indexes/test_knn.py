"""Exact kNN equals the numpy reference (scores and order, ties by id) for every distance and
under filters; HNSW finds the exact neighbours on structured vectors; both persist."""

from __future__ import annotations

import numpy as np
import pytest

from aiblox.contracts import VectorConfig
from aiblox.indexes import VectorIndex, effective_kind, exact_reference
from aiblox.indexes import knn as knn_module


def _clustered(n: int, dim: int = 48, seed: int = 0) -> np.ndarray:
    """Vectors with the structure of real embeddings: clusters in a low-dimensional subspace
    (one layout for every ``seed``: queries come from the documents' distribution)."""
    layout = np.random.default_rng(12345)
    basis = layout.normal(size=(8, dim))
    centres = layout.normal(size=(20, 8)) * 3
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 20, size=n)
    x = (centres[labels] + rng.normal(scale=0.6, size=(n, 8))) @ basis
    return (x + rng.normal(scale=0.05, size=(n, dim))).astype(np.float32)


@pytest.mark.parametrize("distance", ["cosine", "ip", "l2"])
def test_exact_search_equals_numpy(distance, monkeypatch):
    monkeypatch.setattr(knn_module, "BLOCK", 97)  # many blocks: the merge across blocks counts
    vecs = _clustered(1000)
    vecs[10] = vecs[3]  # exact ties: the lower id comes first
    ids = [f"i{i:05d}" for i in range(len(vecs))]
    queries = np.vstack([vecs[3], _clustered(20, seed=1)])
    cfg = VectorConfig(distance=distance, index="exact")
    index = VectorIndex.build(ids, vecs, cfg)
    got = index.search(queries, k=25)
    want = exact_reference(vecs, queries, ids, 25, distance)
    for g, w in zip(got, want, strict=True):
        assert [h[0] for h in g] == [h[0] for h in w]
        assert np.allclose([h[1] for h in g], [h[1] for h in w], rtol=1e-5, atol=1e-5)
    if distance == "cosine":
        assert got[0][0][0] == "i00003" and got[0][1][0] == "i00010"


def test_exact_search_under_a_filter_and_small_collections():
    vecs = _clustered(300)
    ids = [f"i{i:05d}" for i in range(300)]
    index = VectorIndex.build(ids, vecs, VectorConfig(index="exact"))
    allowed = np.zeros(300, dtype=bool)
    allowed[::7] = True
    got = index.search(vecs[:5], k=10, allowed=allowed)
    keep = np.flatnonzero(allowed)
    want = exact_reference(vecs[keep], vecs[:5], [ids[i] for i in keep], 10, "cosine")
    assert [[h[0] for h in g] for g in got] == [[h[0] for h in w] for w in want]
    assert [len(h) for h in index.search(vecs[:2], k=1000)] == [300, 300]


def test_hnsw_recall_on_structured_vectors(tmp_path):
    vecs = _clustered(20000, dim=64)
    ids = [f"i{i:06d}" for i in range(len(vecs))]
    queries = _clustered(200, dim=64, seed=7)
    exact = VectorIndex.build(ids, vecs, VectorConfig(index="exact")).search(queries, k=10)
    cfg = VectorConfig(index="hnsw", hnsw_m=16, ef_construction=100, ef_search=128)
    hnsw = VectorIndex.build(ids, vecs, cfg, threads=1)
    approx = hnsw.search(queries, k=10)
    recall = np.mean([len({h[0] for h in a} & {h[0] for h in e}) / 10
                      for a, e in zip(approx, exact, strict=True)])
    assert recall >= 0.98, recall
    for hits in approx:  # ordered like every list: score desc, id asc
        assert hits == sorted(hits, key=lambda h: (-h[1], h[0]))
    hnsw.save(tmp_path / "h")
    again = VectorIndex.load(tmp_path / "h", cfg, "hnsw")
    assert again.search(queries, k=10) == approx


def test_size_rule_and_persistence(tmp_path):
    assert effective_kind(VectorConfig(), 1000) == "exact"
    assert effective_kind(VectorConfig(), 10_000_000) == "hnsw"
    assert effective_kind(VectorConfig(index="exact"), 10_000_000) == "exact"
    vecs = _clustered(50)
    ids = [f"i{i:03d}" for i in range(50)]
    index = VectorIndex.build(ids, vecs, VectorConfig())
    index.save(tmp_path / "x")
    loaded = VectorIndex.load(tmp_path / "x", VectorConfig(), "exact")
    assert loaded.search(vecs[:3], k=5) == index.search(vecs[:3], k=5)


def test_ties_beyond_the_candidate_window_keep_the_lowest_ids():
    """Sixty copies of one vector: faiss keeps any of the tied copies, the index keeps the
    lowest ids (the compiled path takes over for such a query), whatever the batch."""
    vecs = _clustered(500)
    vecs[100:160] = vecs[7]
    ids = [f"i{i:05d}" for i in range(500)]
    index = VectorIndex.build(ids, vecs, VectorConfig(index="exact"))
    alone = index.search(vecs[7:8], k=10)[0]
    assert [h[0] for h in alone] == ["i00007", *[f"i{i:05d}" for i in range(100, 109)]]
    batch = index.search(np.vstack([_clustered(30, seed=2), vecs[7:8]]), k=10)
    assert batch[-1] == alone
    allowed = np.ones(500, dtype=bool)
    assert index.search(vecs[7:8], k=10, allowed=allowed)[0] == alone


@pytest.mark.parametrize("distance", ["cosine", "l2"])
def test_on_a_gpu_with_faiss_gpu_the_candidates_come_from_knn_gpu_with_the_same_hits(
        distance, monkeypatch):
    """faiss-gpu is not installed here: its three names are played by faiss's CPU search (the
    same contract: distances and positions of the ``k`` nearest), so the routing is what is
    checked: a CUDA device goes to ``knn_gpu`` on its GPU, the CPU and a filter do not, and
    the hits are the CPU's."""
    import faiss

    calls: list[tuple[int, int]] = []

    class Resources:  # faiss.StandardGpuResources
        pass

    def knn_gpu(res, xq, xb, k, metric=faiss.METRIC_L2, device=-1):
        assert isinstance(res, Resources)
        calls.append((device, k))
        return faiss.knn(xq, xb, k, metric=metric)

    vecs = _clustered(500)
    ids = [f"i{i:05d}" for i in range(len(vecs))]
    queries = _clustered(12, seed=2)
    index = VectorIndex.build(ids, vecs, VectorConfig(distance=distance, index="exact"))
    on_cpu = index.search(queries, k=20)
    assert knn_module.gpu_index("cuda:0") is None  # the real faiss here: CPU only
    assert index.search(queries, k=20, device="cuda:0") == on_cpu

    monkeypatch.setattr(faiss, "StandardGpuResources", Resources, raising=False)
    monkeypatch.setattr(faiss, "knn_gpu", knn_gpu, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 2)
    monkeypatch.setattr(knn_module, "_GPU_RESOURCES", {})
    assert [knn_module.gpu_index(d) for d in ("cuda:1", "cuda", "cuda:2", "cpu", None)] == [
        1, 0, None, None, None]
    assert index.search(queries, k=20, device="cuda:1") == on_cpu
    assert calls and {d for d, _ in calls} == {1} and calls[0][1] >= 20
    n = len(calls)
    assert index.search(queries, k=20, device="cpu") == on_cpu
    allowed = np.ones(len(ids), dtype=bool)
    assert index.search(queries, k=20, allowed=allowed, device="cuda:1") == on_cpu
    assert len(calls) == n  # the CPU, and a filtered search, never reach the GPU path
    assert list(knn_module._GPU_RESOURCES) == [1]  # one set of GPU resources, reused


@pytest.mark.parametrize("distance", ["cosine", "ip", "l2"])
@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_one_query_is_rescored_as_in_a_batch(distance, kind):
    """A single query's candidates are rescored in numpy (float64, rounded once: no numba to
    load), a batch's by the compiled kernel: the same hits and float32 scores, bit for bit."""
    vecs = _clustered(2000)
    ids = [f"i{i:05d}" for i in range(len(vecs))]
    index = VectorIndex.build(ids, vecs, VectorConfig(distance=distance, index=kind))
    queries = _clustered(40, seed=3)
    batch = index.search(queries, k=30)
    for q, want in zip(queries, batch, strict=True):
        got = index.search(q[None, :], k=30)[0]
        assert [h[0] for h in got] == [h[0] for h in want]
        assert np.array([h[1] for h in got], np.float32).tobytes() == \
            np.array([h[1] for h in want], np.float32).tobytes()

