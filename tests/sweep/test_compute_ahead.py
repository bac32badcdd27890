"""A sweep's fusion points computed ahead, many at a time (``aiblox.engine.ahead``), give
every stage key, output hash, run hash and metric value that the points computed one by one
give, and a rerun computes nothing ahead."""

from __future__ import annotations

import pytest


@pytest.fixture
def counted(monkeypatch):
    """How many fused runs each batch computed ahead, in the order computed."""
    from aiblox.engine import ahead

    calls: list[int] = []
    real = ahead.compute_groups

    def spy(groups, pool):
        out = real(groups, pool)
        calls.append(sum(name == "fusion" for name, _, _ in out))
        return out

    monkeypatch.setattr(ahead, "compute_groups", spy)
    monkeypatch.setattr(ahead, "AHEAD_POINTS", 7)  # several batches, the last one short
    return calls


def manifests(result):
    return {p.config_hash: (p.label, p.manifest.manifest_hash, p.metrics)
            for p in result.points}


@pytest.mark.parametrize("overlap", [True, False], ids=["on-a-worker-thread", "in-turn"])
def test_points_computed_ahead_are_the_points_computed_one_by_one(
        tmp_path, sample_spec, sweep_db, sample_dataset, counted, monkeypatch, overlap):
    from aiblox.sweep import run_sweep

    # the next batch computed while this one's points run (OpenMP's layer), or after them
    monkeypatch.setattr("aiblox.engine.ahead._two_callers_safe", lambda: overlap)
    ahead = run_sweep(sample_spec, cache_dir=tmp_path / "ahead", db=sweep_db, progress=False,
                      dataset=sample_dataset)
    n_points = len(ahead.points)
    # every point is a hybrid fusion point, on two splits; batches of 7
    assert sum(counted) == 2 * n_points
    assert len(counted) == -(-n_points // 7)
    monkeypatch.setattr("aiblox.engine.ahead.plan_ahead", lambda ctx, points: [])
    alone = run_sweep(sample_spec, cache_dir=tmp_path / "alone", db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert manifests(ahead) == manifests(alone)
    assert ahead.computed == alone.computed


def test_a_rerun_computes_nothing_ahead_and_missing_metrics_are_computed_again(
        tmp_path, sample_spec, sweep_db, sample_dataset, counted):
    from aiblox.engine.cache import StageCache
    from aiblox.sweep import run_sweep

    cache = tmp_path / "stages"
    first = run_sweep(sample_spec, cache_dir=cache, db=sweep_db, progress=False,
                      dataset=sample_dataset)
    counted.clear()
    again = run_sweep(sample_spec, cache_dir=cache, db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert set(counted) == {0}
    assert manifests(again) == manifests(first)
    # the metrics entries gone, the fused runs only recorded: both computed ahead again, the
    # fused runs checked against their recorded hashes
    store = StageCache(cache)
    keys = {s["key"] for p in first.points for m in p.manifest.splits.values()
            for s in m.stages if s["name"] == "metrics"}
    store.remove_many("metrics", keys)
    counted.clear()
    third = run_sweep(sample_spec, cache_dir=cache, db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert sum(counted) == len(keys)
    assert third.computed.get("metrics") == len(keys)
    assert not third.repaired
    assert manifests(third) == manifests(first)


def test_batches_hold_at_most_so_many_points_and_bytes(monkeypatch, tmp_path, sample_spec,
                                                      sample_dataset):
    from aiblox.engine import ahead
    from aiblox.engine.cache import StageCache
    from aiblox.engine.context import RunContext
    from aiblox.sweep.runner import sweep_points

    grid, _ = sweep_points(sample_spec)
    ctx = RunContext(sample_spec.settings(), sample_dataset, StageCache(tmp_path), None,
                     "duckdb", sample_spec.splits, embedder="e")
    queries = sum(len(ctx.qids(s)) for s in ctx.splits)
    size = 12 * queries * 10  # top_k_items 10 of 20 + 20 candidates
    assert [len(b) for b in ahead.point_batches(ctx, grid)] == [len(grid)]
    monkeypatch.setattr(ahead, "AHEAD_BYTES", 3 * size)
    batches = list(ahead.point_batches(ctx, grid))
    assert [p for b in batches for p in b] == grid
    assert {len(b) for b in batches[:-1]} == {3} and 1 <= len(batches[-1]) <= 3
    monkeypatch.setattr(ahead, "AHEAD_BYTES", 1)  # a point bigger than the limit: alone
    assert {len(b) for b in ahead.point_batches(ctx, grid)} == {1}


@pytest.mark.parametrize(("grid", "metrics"), [
    # list-min filling, sigmoid and raw scores, two depths; bpref is not in the compiled
    # pass: the fused runs are computed ahead, the metrics by each point
    ({"blend": ["linear"], "w_text": [0.1, 0.3, 0.6, 0.9], "normalize": ["sigmoid", "none"],
      "missing": ["list_min"], "depth": [10, 20]}, ["ndcg@10", "bpref", "map"]),
    # RRF k far apart, fts and vector depths apart (segments of unequal lists)
    ({"blend": ["rrf"], "rrf_k": [1, 60, 1000], "fts_depth": [10, 20], "vector_depth": [20]},
     ["ndcg@10", "recall@10", "precision@5"]),
    # BM25's own settings: new signals per point, each point a group of its own
    ({"blend": ["linear"], "k1": [0.9, 1.2, 1.5], "w_text": [0.5]}, ["ndcg@10", "mrr"]),
], ids=["list-min-bpref", "rrf-depths", "bm25-settings"])
def test_other_grids_give_the_same_manifests_ahead_or_not(tmp_path, sample_spec, sweep_db,
                                                          sample_dataset, monkeypatch, counted,
                                                          grid, metrics):
    from aiblox.sweep import SweepSpec, run_sweep

    data = sample_spec.model_dump()
    data.update(grid=grid, baseline=None, metrics=metrics, primary="ndcg@10")
    spec = SweepSpec.model_validate(data)
    ahead = run_sweep(spec, cache_dir=tmp_path / "ahead", db=sweep_db, progress=False,
                      dataset=sample_dataset)
    monkeypatch.setattr("aiblox.engine.ahead.plan_ahead", lambda ctx, points: [])
    alone = run_sweep(spec, cache_dir=tmp_path / "alone", db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert len(ahead.points) >= 3
    assert sum(counted) == 2 * len(ahead.points)  # every fused run computed ahead
    assert manifests(ahead) == manifests(alone)
    assert ahead.computed == alone.computed
