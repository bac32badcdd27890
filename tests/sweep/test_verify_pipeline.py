"""``verify_point`` on a pipeline point (chunking, selection, prompt, reader, validation): every
stage re-run in a fresh stage cache from the logged config alone."""

from __future__ import annotations

import pytest

from aiblox.sweep import SweepSpec, run_sweep, verify_point

STAGES = ["signals", "fusion", "metrics", "chunks", "chunk_metrics", "selection", "prompt",
          "reader", "validation", "answer_metrics"]


@pytest.fixture(scope="module")
def point(tmp_path_factory, sample_spec, sweep_db, sample_dataset):
    data = sample_spec.model_dump()
    data.update({"grid": {"chunking": {"chunker_id": ["sentences"]},
                          "selection": {"policy": ["R2_POLICY_V2"], "max_chunks": [3]}},
                 "baseline": None, "primary": "answer_f1", "query_limit": 3,
                 "metrics": ["ndcg@10"], "name": "verify_pipeline"})
    spec = SweepSpec.model_validate(data)
    r = run_sweep(spec, cache_dir=tmp_path_factory.mktemp("vp"), db=sweep_db, progress=False,
                  dataset=sample_dataset)
    return r.points[0]


def test_a_pipeline_point_verifies_stage_by_stage(point, sweep_db, sample_dataset):
    rep = verify_point(point.manifest.model_dump(mode="json"), db=sweep_db,
                       dataset=sample_dataset)
    assert rep.identical, [c for c in rep.checks if not c.identical]
    where = [c.where for c in rep.checks]
    assert where[:4] == ["dataset", "config", "selection/policy", "embedder"]
    for split, sm in point.manifest.splits.items():
        mine = [w.split("/", 1)[1] for w in where if w.startswith(f"{split}/")]
        assert mine[:len(STAGES) + 1] == [*STAGES, "prompts"]
        # then every metric value the manifest logged, recomputed exactly
        assert sorted(mine[len(STAGES) + 1:]) == sorted(f"{m} (manifest)" for m in sm.metrics)


def test_a_changed_reader_output_is_named(point, sweep_db, sample_dataset):
    data = point.manifest.model_dump(mode="json")
    split = next(iter(data["splits"]))
    data["splits"][split]["stages"][STAGES.index("reader")]["output_hash"] = "0" * 64
    rep = verify_point(data, db=sweep_db, dataset=sample_dataset)
    assert not rep.identical and rep.first_difference == f"{split}/reader"
    data = point.manifest.model_dump(mode="json")
    data["config"]["selection"]["params"]["max_chunks"] = 2  # not the logged point
    assert verify_point(data, db=sweep_db, dataset=sample_dataset).first_difference == "config"
