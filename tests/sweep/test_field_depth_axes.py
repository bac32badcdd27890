"""BM25 field weighting (``title_weight``, ``title_b``) and per-signal depths (``fts_depth``,
``vector_depth``) are sweep axes (bad values: tests/sweep/test_spec_limits.py): each weight is
a BM25 index and a retrieval stage of its own; depths expand per signal; the TPE space holds
them; and a spec without them keeps its hashes."""

from __future__ import annotations

import pytest
from spec_text import AS_LOGGED_HASH, MINIMAL, as_logged, write

from aiblox.contracts import FtsConfig
from aiblox.engine.settings import point_label
from aiblox.sweep import load_spec, run_sweep


def test_per_signal_depths_expand_apart(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + 'metrics = ["ndcg@10"]\nprimary = "ndcg@10"\n'
                                               '[base]\nscoring = { blend = "rrf" }\n'
                                               '[grid]\nfts_depth = [5, 20]\n'
                                               'vector_depth = { start = 10, stop = 30, '
                                               'step = 10 }\n'))
    pts = spec.points()
    assert [(p.fts.top_k, p.vector.top_k) for p in pts] == [
        (5, 10), (5, 20), (5, 30), (20, 10), (20, 20), (20, 30)]
    assert spec.grid_size() == 6
    assert [point_label(p) for p in pts][:2] == ["rrf-k60-d5v10", "rrf-k60-d5v20"]
    assert point_label(pts[4]) == "rrf-k60-d20"  # equal depths: the label of a `depth` point
    only_fts = load_spec(write(tmp_path, MINIMAL + '[grid]\nfts_depth = [5, 20]\n'))
    assert [(p.fts.top_k, p.vector.top_k) for p in only_fts.points()] == [(5, 100), (20, 100)]


def test_title_weights_are_indexes_and_stages_of_their_own(tmp_path, sample_spec, small_spec,
                                                           sample_dataset):
    spec = small_spec(sample_spec, title_weight=[0, 1, 2.5], title_b=None,
                      blend=["rrf"], rrf_k=[60], depth=[20])
    bm25 = spec.model_copy(update={"base": {**spec.base, "mode": "bm25"}})
    pts = bm25.points()
    assert [p.fts.title_weight for p in pts] == [0.0, 1.0, 2.5]
    assert [point_label(p) for p in pts] == ["bm25-tw0.0-d20", "bm25-d20", "bm25-tw2.5-d20"]
    db = str(tmp_path / "s.duckdb")
    first = run_sweep(bm25, cache_dir=tmp_path / "c", db=db, progress=False,
                      dataset=sample_dataset)
    assert first.computed["signals"] == 6  # 3 weights x 2 splits
    runs = [p.manifest.splits["test"].run_hash for p in first.points]
    assert len(set(runs)) == 3
    # weight 1 is the plain sweep's point: the same config hash and run as without the axis
    plain = run_sweep(small_spec(sample_spec, blend=["rrf"], rrf_k=[60], depth=[20]).model_copy(
        update={"base": {**spec.base, "mode": "bm25"}}), cache_dir=tmp_path / "c", db=db,
        progress=False, dataset=sample_dataset)
    assert plain.computed == {}  # read back: the weight-1 point's stages are the plain ones
    assert plain.points[0].config_hash == first.points[1].config_hash
    assert plain.points[0].manifest.splits["test"].run_hash == runs[1]
    # each weight's BM25 index is its own folder, keyed by the weight
    from aiblox.indexes import StoreIndexes
    from aiblox.stores import DuckDBStore

    store = DuckDBStore(db)
    try:
        ix = StoreIndexes(store)
        keys = [ix.lexical_key(FtsConfig(title_weight=w, title_b=tb))[0]
                for w, tb in ((1.0, None), (0.0, None), (2.5, None), (2.5, 0.75), (2.5, 0.5))]
        assert len(set(keys)) == 5
        assert ix.lexical_key(FtsConfig())[0] == keys[0]
        built = {i.name for i in ix.infos() if i.kind == "bm25"}
        assert {f"bm25-{k[:16]}" for k in keys[:3]} <= built
    finally:
        store.close()


def test_tpe_space_holds_the_new_axes(sample_spec, small_spec):
    from aiblox.sweep.runner import sweep_points
    from aiblox.sweep.space import SearchSpace

    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[60], title_weight=[1, 2],
                      title_b=[0.3, 0.75], fts_depth=[5, 20], vector_depth=[10, 20])
    grid, _ = sweep_points(spec)
    space = SearchSpace(grid)
    assert set(space.dimensions) == {"title_weight", "title_b", "depth", "vector_depth"}
    optuna = pytest.importorskip("optuna")
    i = space.point(optuna.trial.FixedTrial({"title_weight": 1, "title_b": 0, "depth": 1,
                                             "vector_depth": 0}))
    p = grid[i].prefs
    assert (p.fts.title_weight, p.fts.title_b, p.fts.top_k, p.vector.top_k) == (2.0, 0.3, 20, 10)
    # the shared `depth` axis moves both depths together: only `depth` is asked, as before
    # (a FixedTrial raises for a parameter it is not given)
    shared, _ = sweep_points(small_spec(sample_spec, blend=["rrf"], depth=[10, 20]))
    j = SearchSpace(shared).point(optuna.trial.FixedTrial({"depth": 1}))
    assert (shared[j].prefs.fts.top_k, shared[j].prefs.vector.top_k) == (20, 20)


def test_specs_without_the_new_axes_keep_their_hash(sample_spec, small_spec):
    # the value before these axes existed (spec_text.AS_LOGGED_HASH)
    assert as_logged(sample_spec).hash == AS_LOGGED_HASH
    weighted = small_spec(sample_spec, title_weight=[1, 2])
    assert "title_weight" in weighted.model_dump(mode="json")["grid"]
    assert weighted.hash != small_spec(sample_spec).hash


def test_lever_specs_load_and_expand():
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "evals" / "sweeps" / "levers"
    sizes = {p.stem: load_spec(p).grid_size() for p in sorted(folder.glob("*.toml"))}
    assert sizes == {"scifact_bm25_hybrid": 360, "scifact_bm25f": 180, "scifact_depth": 324,
                     "scifact_fields": 63, "scifact_fusion_levers": 205,
                     "scifact_levers_combined": 1344, "scifact_fields_bm25": 7,
                     "scifact_bm25f_bm25": 20, "scifact_maxp": 336,
                     "scifact_rerank_ft": 72, "medline_ce_zeroshot": 11, "cisi_ce_zeroshot": 11,
                     "scifact_finetune_e5": 84}
    depth = load_spec(folder / "scifact_depth.toml").points()
    assert {(p.fts.top_k, p.vector.top_k) for p in depth} >= {(1000, 25), (25, 1000)}


def test_tracked_title_weight_points_all_carry_the_param(tmp_path, sample_spec, small_spec,
                                                         sample_dataset, sweep_db, mlflow_uri):
    pytest.importorskip("mlflow")
    from aiblox.engine.tracking import SweepTracker

    spec = small_spec(sample_spec, title_weight=[1, 2], blend=["rrf"], rrf_k=[60], depth=[20])
    tr = SweepTracker(mlflow_uri, "title-weight", spec.hash, spec.model_dump(mode="json"))
    r = run_sweep(spec, cache_dir=tmp_path / "c", db=sweep_db, progress=False,
                  dataset=sample_dataset, tracker=tr)
    params = {c.data.tags["aiblox.config_hash"]: c.data.params for c in tr.children()}
    assert {p["prefs.fts.title_weight"] for p in params.values()} == {"1.0", "2.0"}
    assert {p["prefs.fts.title_b"] for p in params.values()} == {"None"}
    # the config (and its hash) of the unweighted point still leaves the settings out
    plain = next(p for p in r.points if p.label == "rrf-k60-d20")
    assert "title_weight" not in plain.manifest.config["prefs"]["fts"]
