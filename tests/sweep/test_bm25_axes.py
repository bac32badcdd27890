"""BM25's own parameters are sweep axes: each (k1, b, method) is one retrieval stage, the
points differ, a re-run computes nothing, and a spec without them keeps its hash."""

from __future__ import annotations

import pytest
from spec_text import AS_LOGGED_HASH, as_logged


def test_bm25_axes_expand_and_rerun_free(tmp_path, sample_spec, small_spec):
    from aiblox.sweep import run_sweep

    spec = small_spec(sample_spec, k1=[0.9, 1.5], method=["lucene", "bm25+"])
    base = spec.model_copy(update={"base": {**spec.base, "mode": "bm25"}})
    pts = base.points()
    assert [(p.fts.k1, p.fts.method) for p in pts] == [
        (0.9, "lucene"), (0.9, "bm25+"), (1.5, "lucene"), (1.5, "bm25+")]
    first = run_sweep(base, cache_dir=tmp_path / "c", db=str(tmp_path / "s.duckdb"),
                      progress=False)
    assert first.computed["signals"] == 8  # 4 settings x 2 splits
    assert len({p.manifest.splits["test"].run_hash for p in first.points}) == 4
    assert {p.label for p in first.points} >= {"bm25-lucene-k1=0.9-b=0.75-d20",
                                                "bm25-bm25+-k1=1.5-b=0.75-d20"}
    again = run_sweep(base, cache_dir=tmp_path / "c", db=str(tmp_path / "s.duckdb"),
                      progress=False)
    assert again.computed == {} and [p.metrics for p in again.points] == \
        [p.metrics for p in first.points]


def test_bad_bm25_axes_and_unchanged_hashes(sample_spec, small_spec):
    from aiblox.sweep import SweepSpec

    data = sample_spec.model_dump()
    with pytest.raises(ValueError, match="b values must be in"):
        SweepSpec.model_validate({**data, "grid": {"b": [0.5, 1.5]}})
    with pytest.raises(ValueError, match="k1 values must be"):
        SweepSpec.model_validate({**data, "grid": {"k1": [-1]}})
    with pytest.raises(ValueError):
        SweepSpec.model_validate({**data, "grid": {"method": ["bm26"]}})
    # NaN passed every bound and an infinity or a value past the contract's bound reached
    # the contract models, whose error named no field of the spec (QA, 2026-11-29)
    for grid, said in (({"k1": [float("inf"), 1.2]}, "k1 values must be finite numbers"),
                       ({"b": [float("nan")]}, "b values must be finite numbers"),
                       ({"blend": ["linear"], "w_text": [float("nan")]},
                        "weights must be finite numbers"),
                       ({"k1": [1e10]}, r"k1 values must be in \[0.0, 1000000000.0\]"),
                       ({"rrf_k": [10**20]}, r"rrf_k values must be in \[0, 2147483647\]"),
                       ({"depth": [2**31]}, r"depths \(candidates per signal\) must be in")):
        with pytest.raises(ValueError, match=said):
            SweepSpec.model_validate({**data, "grid": grid})
    # a spec written before these axes keeps its hash (the value before they existed)
    assert as_logged(sample_spec).hash == AS_LOGGED_HASH


def test_an_axis_the_base_mode_never_reads_is_refused_and_hashed_at_its_default(sample_spec):
    """In ``mode = "bm25"`` a ``blend`` axis (in ``dense`` a ``k1`` axis) made points with one
    label, one run and two config hashes; ``aiblox eval --mode bm25 --blend linear`` gave a
    config hash of its own for the same run (QA, 2026-11-29)."""
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.configs import fusion_config
    from aiblox.engine.evaluate import config_hash
    from aiblox.sweep import SweepSpec

    data = sample_spec.model_dump()
    for mode, grid, axis in (("bm25", {"blend": ["linear", "rrf"]}, "blend"),
                             ("bm25", {"rrf_k": [10, 60]}, "rrf_k"),
                             ("bm25", {"doc_score": ["maxp"]}, "doc_score"),
                             ("dense", {"k1": [0.9, 1.2]}, "k1"),
                             ("dense", {"fts_depth": [10, 20]}, "fts_depth")):
        with pytest.raises(ValueError, match=rf"grid\.{axis}: the base's mode is '{mode}', "
                                             r"which reads no"):
            SweepSpec.model_validate({**data, "base": {**data["base"], "mode": mode},
                                      "grid": grid})
    # the axis in hybrid mode, or in a spec whose pipeline reads it, is a sweep
    SweepSpec.model_validate({**data, "grid": {"blend": ["linear", "rrf"]}})
    plain = RetrievalPrefs(query_text="", mode="bm25")
    linear = RetrievalPrefs(query_text="", mode="bm25", scoring={"blend": "linear",
                                                                 "rrf_k": 5})
    assert config_hash(plain, "e", "duckdb")[0] == config_hash(linear, "e", "duckdb")[0]
    assert fusion_config(plain) == fusion_config(linear)
    hybrid = linear.model_copy(update={"mode": "hybrid"})
    assert config_hash(hybrid, "e", "duckdb")[0] != config_hash(
        plain.model_copy(update={"mode": "hybrid"}), "e", "duckdb")[0]
