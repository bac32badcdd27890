"""The incremental sweep runner on the sample dataset: stage reuse counted, resume, manifests,
choice on the tune split only."""

from __future__ import annotations

import pytest

from aiblox.engine.cache import StageCache, encode_arrays
from aiblox.engine.evaluate import config_hash
from aiblox.engine.outputs import StageReader, load_fused_run
from aiblox.hashing import sha256_bytes
from aiblox.sweep import choose_best, run_sweep

GRID = {"blend": ["linear", "rrf"], "w_text": [0.25, 0.5, 0.75], "normalize": ["minmax"],
        "rrf_k": [60], "depth": [10, 20]}
N_POINTS = 3 * 2 + 1 * 2  # linear (w_text x depth) + rrf (k x depth)


@pytest.fixture(scope="module")
def first(tmp_path_factory, sample_spec, sweep_db, sample_dataset, small_spec):
    """A finished sweep and its cache folder."""
    cache = tmp_path_factory.mktemp("stages")
    spec = small_spec(sample_spec, **GRID)
    result = run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False,
                       dataset=sample_dataset, jobs=1)
    return spec, cache, result


def test_first_run_computes_each_stage_once(first):
    spec, _, r = first
    assert len(r.points) == N_POINTS
    assert r.computed == {"signals": 2 * 2,  # splits x depths, never per fusion point
                          "fusion": N_POINTS * 2, "metrics": N_POINTS * 2}
    assert r.reused == {}


def test_rerun_recomputes_nothing(first, sweep_db, sample_dataset):
    spec, cache, r = first
    again = run_sweep(spec, cache_dir=cache, db=":memory:", progress=False,
                      dataset=sample_dataset)  # the store is never opened: signals are cached
    assert again.computed == {}
    assert again.reused == {"signals": 4, "fusion": N_POINTS * 2, "metrics": N_POINTS * 2}
    assert [p.manifest.manifest_hash for p in again.points] == \
        [p.manifest.manifest_hash for p in r.points]
    assert again.best.config_hash == r.best.config_hash


def test_changing_one_weight_reruns_fusion_and_metrics_only(first, sweep_db, sample_dataset,
                                                             small_spec):
    spec, cache, _ = first
    changed = small_spec(spec, **{**GRID, "w_text": [0.25, 0.5, 0.8]})
    r = run_sweep(changed, cache_dir=cache, db=sweep_db, progress=False, dataset=sample_dataset)
    assert r.computed == {"fusion": 2 * 2, "metrics": 2 * 2}  # w_text=0.8 at 2 depths x 2 splits
    assert r.reused["signals"] == 4


def test_killed_sweep_resumes_with_only_missing_points(tmp_path, sample_spec, sweep_db,
                                                       sample_dataset, small_spec):
    spec = small_spec(sample_spec, **GRID)
    seen = []

    def kill_after_three(point):
        seen.append(point.config_hash)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                  dataset=sample_dataset, on_point=kill_after_three)
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, dataset=sample_dataset)
    assert r.computed == {"fusion": (N_POINTS - 3) * 2, "metrics": (N_POINTS - 3) * 2}
    assert r.reused == {"signals": 4, "fusion": 3 * 2, "metrics": 3 * 2}
    assert len(r.points) == N_POINTS


def test_parallel_jobs_give_identical_results(tmp_path, first, sweep_db, sample_dataset):
    """Two numba threads (jobs=2) and one give the same stages and the same bytes."""
    spec, _, r = first
    par = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                    dataset=sample_dataset, jobs=2)
    assert par.computed == r.computed
    assert [p.manifest.manifest_hash for p in par.points] == \
        [p.manifest.manifest_hash for p in r.points]


def test_manifest_fields_and_hashes(first, sample_dataset):
    spec, cache, r = first
    store = StageCache(cache)
    for p in r.points:
        m = p.manifest
        assert m.dataset_hash == sample_dataset.hash and m.sweep_hash == spec.hash
        assert set(m.splits) == {"train", "test"}
        assert m.environment["packages"]["ranx"] and "python" in m.environment
        assert "git_commit" in m.environment
        assert m.config["embedder"] == "hashing-384" or m.config["embedder"].startswith("hashing")
        for split, sm in m.splits.items():
            assert [s["name"] for s in sm.stages] == ["signals", "fusion", "metrics"]
            sig, fus, met = sm.stages
            assert fus["inputs"] == [sig["key"]] and met["inputs"] == [fus["key"]]
            # a hybrid point's fused run is recorded, not stored: computed again to be read
            assert store.stored("fusion", fus["key"]) is False
            arrays = StageReader(store).fused(sig["key"], fus["key"]).as_dict()
            assert sm.run_hash == fus["output_hash"] == sha256_bytes(encode_arrays(arrays))
            run = load_fused_run(store, sig["key"], fus["key"])
            assert sorted(run) == sorted(sample_dataset.qrels[split])
            assert [len(run[q]) for q in sorted(run)] == arrays["counts"].tolist()
            assert all(len(h) <= p.manifest.config["prefs"]["top_k_items"] for h in run.values())
            assert sm.n_queries == len(sample_dataset.qrels[split])
            assert sm.metrics == p.metrics[split]
    # the same config hash `aiblox eval` reports for the same settings
    prefs = spec.points()[0]
    assert r.points[0].config_hash == config_hash(prefs, r.points[0].manifest.config["embedder"],
                                                  "duckdb")[0]


def test_manifest_hash_ignores_environment_but_not_results(first):
    _, _, r = first
    m = r.points[0].manifest
    env_changed = m.model_copy(update={"environment": {"git_commit": "other"}})
    assert env_changed.manifest_hash == m.manifest_hash
    other = r.points[1].manifest
    assert other.manifest_hash != m.manifest_hash


def test_best_is_chosen_on_tune_split_with_deterministic_ties(first):
    spec, _, r = first
    tune = max(p.metrics["train"]["ndcg@10"] for p in r.points)
    assert r.best.metrics["train"]["ndcg@10"] == tune
    tied = [p for p in r.points if p.metrics["train"]["ndcg@10"] == tune]
    assert r.best.config_hash == min(p.config_hash for p in tied)
    # the report split never decides: choosing on it may differ, choosing on tune is stable
    assert choose_best(list(reversed(r.points)), "train", "ndcg@10") == r.best


def test_baseline_point_is_scored_and_flagged(tmp_path, sample_spec, sweep_db, sample_dataset,
                                              small_spec):
    spec = small_spec(sample_spec, blend=["linear"], w_text=[0.5], depth=[20],
                      baseline={"blend": "rrf", "rrf_k": 60})
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, dataset=sample_dataset)
    assert len(r.points) == 2 and r.baseline is not None and r.baseline.is_baseline
    assert r.baseline.scoring["blend"] == "rrf" and r.best.config_hash != r.baseline.config_hash
    assert r.computed["signals"] == 2  # the baseline shares the base depth (20)
    # the one grid point against the baseline on the report split, one row per metric
    assert [c.metric for c in r.significance] == list(spec.metrics)
    assert all(c.candidate == r.best.label for c in r.significance)
    ndcg = r.significance[0]
    assert ndcg.delta == pytest.approx(r.best.metrics["test"]["ndcg@10"]
                                       - r.baseline.metrics["test"]["ndcg@10"])
    assert ndcg.wins + ndcg.ties + ndcg.losses == len(sample_dataset.qrels["test"])
    mean, low, high = r.ci["test"]
    assert mean == pytest.approx(r.best.metrics["test"]["ndcg@10"]) and low <= mean <= high


def test_a_baseline_that_is_a_grid_point_is_not_tested_against_itself(
        tmp_path, sample_spec, sweep_db, sample_dataset, small_spec):
    """The top points tested against the baseline leave the baseline out, however it ranks:
    in the list it took a slot, tied itself at p = 1 and made Holm's family one larger."""
    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[10, 60], depth=[20],
                      baseline={"blend": "rrf", "rrf_k": 60})
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, dataset=sample_dataset)
    assert len(r.points) == 2 and r.baseline is not None
    assert r.baseline.config_hash in {p.config_hash for p in r.points}  # a grid point
    other = next(p for p in r.points if p.config_hash != r.baseline.config_hash)
    assert [c.candidate for c in r.significance] == [other.label] * len(spec.metrics)


def test_verify_re_executes_a_point_from_its_manifest(first, sweep_db, sample_dataset):
    from aiblox.sweep import verify_point

    _, _, r = first
    point = r.points[0]
    report = verify_point(point.manifest.model_dump(mode="json"), db=sweep_db,
                          dataset=sample_dataset)
    assert report.identical and report.first_difference is None
    values = [f"{m} (manifest)" for m in point.metrics["train"]]
    assert [c.where for c in report.checks] == [
        "dataset", "config", "embedder", "train/signals", "train/fusion", "train/metrics",
        *[f"train/{v}" for v in sorted(values)],
        "test/signals", "test/fusion", "test/metrics", *[f"test/{v}" for v in sorted(values)]]


def test_the_significance_table_draws_with_the_spec_s_seed(first, sweep_db, sample_dataset,
                                                           monkeypatch):
    """Fisher's random sign flips are drawn with the spec's ``seed``; a spec without one draws
    with 42, as before (and keeps its hash: the key is out of it while unset)."""
    import aiblox.sweep.results as results
    from aiblox.metrics import compare_to_baseline

    spec, cache, r = first
    seeds: list[int] = []

    def spy(*args, **kwargs):
        seeds.append(kwargs["seed"])
        return compare_to_baseline(*args, **kwargs)

    monkeypatch.setattr(results, "compare_to_baseline", spy)
    spec = spec.model_copy(update={"baseline": {"blend": "rrf", "rrf_k": 60},
                                   "stat_test": "fisher"})
    seeded = spec.model_copy(update={"seed": 7})
    again = run_sweep(seeded, cache_dir=cache, db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert seeds == [7] and again.significance
    assert seeded.hash != spec.hash == spec.model_copy(update={"seed": None}).hash
    run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False, dataset=sample_dataset)
    assert seeds == [7, 42]


def test_verify_names_the_first_stage_that_differs(first, sweep_db, sample_dataset):
    from aiblox.sweep import verify_point

    _, _, r = first
    data = r.points[0].manifest.model_dump(mode="json")
    data["splits"]["test"]["stages"][1]["output_hash"] = "0" * 64  # a tampered fused run
    report = verify_point(data, db=sweep_db, dataset=sample_dataset)
    assert not report.identical and report.first_difference == "test/fusion"
    data = r.points[0].manifest.model_dump(mode="json")
    scoring = data["config"]["prefs"]["scoring"]
    read = "rrf_k" if scoring["blend"] == "rrf" else "w_text"  # a setting its blend reads
    scoring[read] += 1  # a config that is not the logged one
    assert verify_point(data, db=sweep_db, dataset=sample_dataset).first_difference == "config"
    data = r.points[0].manifest.model_dump(mode="json")
    unread = "w_text" if scoring["blend"] == "rrf" else "rrf_k"  # one it does not: hashed at
    data["config"]["prefs"]["scoring"][unread] += 1  # its default, the same point
    assert verify_point(data, db=sweep_db, dataset=sample_dataset).identical


def test_fused_run_reads_back_a_point_s_fusion_stage(first):
    """The fusion stage a sweep point logged: its key from the point's config, its output
    recomputed from the signals to the same bytes, and read back as a ranked run."""
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.compute import fused_arrays
    from aiblox.engine.configs import fusion_config, signals_config
    from aiblox.engine.task import STAGE_VERSIONS, stage_key
    from aiblox.fusion import BatchFusion

    SIGNALS_VERSION = STAGE_VERSIONS["signals"]
    _, cache_dir, r = first
    point = r.points[0]
    sig_stage, fusion_stage = point.manifest.splits["test"].stages[:2]
    cache = StageCache(cache_dir)
    sig = cache.load("signals", sig_stage["key"])
    prefs = RetrievalPrefs.model_validate({**point.manifest.config["prefs"], "query_text": ""})
    assert stage_key("fusion", STAGE_VERSIONS["fusion"], fusion_config(prefs),
                     [sig_stage["key"]]) == fusion_stage["key"]
    arrays = fused_arrays(prefs, BatchFusion.from_signals(sig)).as_dict()
    assert sha256_bytes(encode_arrays(arrays)) == point.manifest.splits["test"].run_hash
    run = load_fused_run(cache, sig_stage["key"], fusion_stage["key"])
    assert sorted(run) == sorted(sig["qids"])
    # a limit enters the signals key only when set
    p = RetrievalPrefs(query_text="")
    assert signals_config(p, "d", "test", "duckdb", "m", limit=None) == \
        signals_config(p, "d", "test", "duckdb", "m")
    assert stage_key("signals", SIGNALS_VERSION, signals_config(p, "d", "test", "duckdb", "m",
                                                                limit=5)) != \
        stage_key("signals", SIGNALS_VERSION, signals_config(p, "d", "test", "duckdb", "m"))


def test_a_cost_primary_chooses_the_cheapest_point():
    """``primary = "evidence_tokens"`` (a valid primary, a cost: its significance table says
    better: lower) chose the most expensive point as best, and the ranking listed the most
    tokens first; k-fold choices and the report's per-value rows ranked the same way."""
    from types import SimpleNamespace

    from aiblox.engine.settings import ranked, ranking_order
    from aiblox.sweep.crossval import cross_validate

    pts = [SimpleNamespace(config_hash=h, label=h, metrics={"train": m})
           for h, m in (("c", {"evidence_tokens": 300.0, "ndcg@10": 0.5}),
                        ("a", {"evidence_tokens": 900.0, "ndcg@10": 0.7}),
                        ("b", {"evidence_tokens": 300.0, "ndcg@10": float("nan")}))]
    assert choose_best(pts, "train", "evidence_tokens").config_hash == "b"  # tie: hash order
    assert [p.config_hash for p in ranked(pts, "train", "evidence_tokens")] == ["b", "c", "a"]
    assert [p.config_hash for p in ranked(pts, "train", "ndcg@10")] == ["a", "c", "b"]  # NaN: last
    assert ranking_order(None, "z", "ndcg@10") > ranking_order(-1e9, "z", "ndcg@10")
    assert ranking_order(None, "z", "evidence_tokens") > ranking_order(1e9, "z",
                                                                       "evidence_tokens")
    qids = [f"q{i}" for i in range(6)]
    values = {"a": dict.fromkeys(qids, 900.0), "c": dict.fromkeys(qids, 300.0)}
    cv = cross_validate([pts[0], pts[1]], values, qids, folds=3, seed=0, split="train",
                        metric="evidence_tokens")
    assert {r.label for r in cv.rows} == {"c"}
