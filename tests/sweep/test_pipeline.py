"""Pipeline sweeps on the sample dataset (gold answers, hashing embedder): chunking and
selection stages memoised by key, recomputed exactly when their settings change."""

from __future__ import annotations

import pytest

from aiblox.sweep import SweepSpec, run_sweep

STAGES = ["signals", "fusion", "metrics", "chunks", "chunk_metrics", "selection", "prompt",
          "reader", "validation", "answer_metrics"]


def pipeline_spec(sample_spec, chunking=None, selection=None, **extra):
    data = sample_spec.model_dump()
    data["base"] = {**data["base"], "top_k_chunks": 6}
    data["chunk_k"] = [1, 5]  # 6 chunks returned: answer_recall@k for k <= 6 (issue 25)
    data.update({"grid": {"chunking": chunking or {"chunker_id": ["sentences"]},
                          "selection": selection or {"policy": ["R2_POLICY_V1",
                                                                "R2_POLICY_V2"],
                                                     "max_chunks": [2, 4]}},
                 "baseline": {"policy": "R2_POLICY_V1", "max_chunks": 2},
                 "primary": "answer_f1", "query_limit": 4, "metrics": ["ndcg@10"],
                 "significance_top": 2, **extra})
    return SweepSpec.model_validate(data)


@pytest.fixture(scope="module")
def first(tmp_path_factory, sample_spec, sweep_db, sample_dataset):
    cache = tmp_path_factory.mktemp("pipeline-stages")
    spec = pipeline_spec(sample_spec)
    result = run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False,
                       dataset=sample_dataset)
    return spec, cache, result


def test_first_run_shares_retrieval_and_chunks_across_policies(first):
    _, _, r = first
    assert len(r.points) == 4  # 2 policies x 2 max_chunks; the baseline is a grid point
    assert r.computed == {"signals": 2, "fusion": 2, "metrics": 2, "chunks": 2,
                          "chunk_metrics": 2, "selection": 8, "prompt": 8, "reader": 8,
                          "validation": 8, "answer_metrics": 8}
    assert r.reused == {}
    base = r.baseline
    assert base is not None and base.is_baseline
    assert base.selection["policy"] == "R2_POLICY_V1"
    assert base.selection["overrides"] == {"max_chunks": 2}
    assert base.selection["params"] == {"max_chunks": 2}
    assert base.chunking["chunker_id"] == "sentences" and base.chunking["top_k_chunks"] == 6


def test_manifest_lists_every_stage_in_order_with_the_prompt_hash(first):
    _, _, r = first
    for p in r.points:
        for sm in p.manifest.splits.values():
            assert [s["name"] for s in sm.stages] == STAGES
            assert sm.n_queries == 4
            assert sm.prompts_sha256 and len(sm.prompts_sha256) == 64
            keys = {s["name"]: s["key"] for s in sm.stages}
            stage = {s["name"]: s for s in sm.stages}
            assert stage["chunks"]["inputs"] == [keys["fusion"]]
            assert stage["selection"]["inputs"] == [keys["chunks"]]
            assert stage["validation"]["inputs"] == [keys["prompt"], keys["reader"]]
        assert p.manifest.config["selection"]["policy"] == p.selection["policy"]
        assert p.manifest.config["query_limit"] == 4
    # a policy with more chunks selects more evidence on the same chunks
    by = {(p.selection["policy"], p.selection["overrides"]["max_chunks"]): p for p in r.points}
    assert by[("R2_POLICY_V1", 4)].metrics["test"]["selected_chunks"] > \
        by[("R2_POLICY_V1", 2)].metrics["test"]["selected_chunks"]
    assert by[("R2_POLICY_V1", 4)].manifest.splits["test"].prompts_sha256 != \
        by[("R2_POLICY_V1", 2)].manifest.splits["test"].prompts_sha256


def test_choice_on_tune_with_answer_metric_ci_and_significance(first):
    spec, _, r = first
    top = max(r.points, key=lambda p: (p.metrics[spec.tune_split]["answer_f1"],
                                       [-ord(c) for c in p.config_hash]))
    assert r.best.metrics[spec.tune_split]["answer_f1"] == \
        top.metrics[spec.tune_split]["answer_f1"]
    for split in (spec.tune_split, spec.report_split):
        mean, low, high = r.ci[split]
        assert low <= mean <= high
        assert mean == pytest.approx(r.best.metrics[split]["answer_f1"])
    assert r.significance and {c.metric for c in r.significance} >= {"answer_f1",
                                                                    "max_passage:ndcg@10"}
    for p in r.points:
        m = p.metrics["test"]
        assert sum(m[f"status:{s}"] for s in ("ANSWERED", "REFUSED", "NO_EVIDENCE", "INVALID",
                                                "FAILED")) == pytest.approx(1.0)
        assert 0.0 <= m["answer_f1"] <= 1.0 and 0.0 <= m["evidence_answer_recall"] <= 1.0
        assert "answer_recall@5" in m and "max_passage:ndcg@10" in m


def test_rerun_recomputes_nothing(first, sample_dataset):
    spec, cache, r = first
    again = run_sweep(spec, cache_dir=cache, db=":memory:", progress=False,
                      dataset=sample_dataset)  # no store needed: every stage is cached
    assert again.computed == {}
    assert again.reused == r.computed
    assert [p.manifest.manifest_hash for p in again.points] == \
        [p.manifest.manifest_hash for p in r.points]


def test_changing_a_selection_parameter_reruns_selection_and_after_only(first, sample_spec,
                                                                        sample_dataset):
    _, cache, _ = first
    spec = pipeline_spec(sample_spec, selection={"policy": ["R2_POLICY_V1", "R2_POLICY_V2"],
                                                 "max_chunks": [2, 3]})
    r = run_sweep(spec, cache_dir=cache, db=":memory:", progress=False, dataset=sample_dataset)
    new = 2 * 2  # max_chunks=3 under two policies, on two splits
    assert r.computed == {s: new for s in STAGES[5:]}
    assert r.reused["chunks"] == 2 and r.reused["signals"] == 2


def test_changing_the_chunker_reruns_chunks_and_after_only(first, sample_spec, sweep_db,
                                                           sample_dataset):
    _, cache, _ = first
    spec = pipeline_spec(sample_spec, chunking={"chunker_id": ["token_window"],
                                                "max_chunk_tokens": [64]},
                         selection={"policy": ["R2_POLICY_V1"], "max_chunks": [2]},
                         baseline=None)
    r = run_sweep(spec, cache_dir=cache, db=sweep_db, progress=False, dataset=sample_dataset)
    assert set(r.computed) == set(STAGES[3:])
    assert r.reused == {"signals": 2, "fusion": 2, "metrics": 2}
    ev = r.points[0].chunking
    assert ev["chunker"].startswith("token_window(max=64")


def test_chunking_only_sweep_stops_after_chunk_metrics(tmp_path, sample_spec, sweep_db,
                                                       sample_dataset):
    data = sample_spec.model_dump()
    data.update({"grid": {"chunking": {"chunker_id": ["sentences", "whole"]}},
                 "baseline": None, "primary": "answer_recall@5", "query_limit": 3,
                 "metrics": ["ndcg@10"]})
    spec = SweepSpec.model_validate(data)
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, dataset=sample_dataset)
    assert len(r.points) == 2
    assert [s["name"] for s in r.points[0].manifest.splits["test"].stages] == STAGES[:5]
    assert r.points[0].selection is None
    assert r.points[0].manifest.splits["test"].prompts_sha256 is None
    assert r.best.metrics["train"]["answer_recall@5"] == \
        max(p.metrics["train"]["answer_recall@5"] for p in r.points)


def test_an_override_equal_to_the_policy_value_is_the_same_point(sample_spec):
    from aiblox.engine.settings import PipelinePoint, pipeline_config

    spec = pipeline_spec(sample_spec)
    prefs = spec.pipeline_points()[0].prefs
    settings = spec.settings()
    plain = pipeline_config(settings, PipelinePoint(prefs, "R2_POLICY_V1", {}), "h", "duckdb")
    same = pipeline_config(settings, PipelinePoint(prefs, "R2_POLICY_V1", {"max_chunks": 6}),
                           "h", "duckdb")  # V1's own max_chunks
    other = pipeline_config(settings, PipelinePoint(prefs, "R2_POLICY_V1", {"max_chunks": 4}),
                            "h", "duckdb")
    assert plain == same
    assert other[0] != plain[0]
    assert plain[1]["selection"]["params"] == {"max_chunks": 6}


def test_a_warm_chunk_cache_gives_the_same_bytes(first, tmp_path, sweep_db, sample_dataset):
    spec, _, r = first  # the first run embedded the chunks; the store's chunk cache holds them
    again = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert again.computed == r.computed  # every stage recomputed (empty stage cache) ...
    assert [p.manifest.manifest_hash for p in again.points] == \
        [p.manifest.manifest_hash for p in r.points]  # ... to the same bytes


def test_cli_runs_a_pipeline_spec(tmp_path, sweep_db):
    import json

    from typer.testing import CliRunner

    from aiblox.cli.main import app

    spec = tmp_path / "sel.toml"
    spec.write_text("""
name = "cli_selection"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10"]
primary = "evidence_answer_recall"
query_limit = 3
[grid.selection]
policy = ["R2_POLICY_V1", "R2_POLICY_V2"]
""")
    r = CliRunner().invoke(app, ["sweep", str(spec), "--db", sweep_db, "--cache-dir",
                                 str(tmp_path / "stages"), "--no-tracking", "--json"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["n_points"] == 2 and out["primary"] == "evidence_answer_recall"
    assert out["computed"]["answer_metrics"] == 4 and out["computed"]["chunks"] == 2


def test_a_primary_the_dataset_cannot_give_is_a_clear_error(tmp_path, sample_spec, sweep_db):
    from aiblox.data import load_dataset

    ds = load_dataset(sample_spec.dataset, splits=["train", "test"])
    ds.answers = {}  # as a dataset without answers.jsonl (scifact)
    data = sample_spec.model_dump()
    data.update({"grid": {"chunking": {"chunker_id": ["whole"]}}, "baseline": None,
                 "primary": "answer_recall@5", "query_limit": 2, "metrics": ["ndcg@10"]})
    spec = SweepSpec.model_validate(data)
    with pytest.raises(ValueError, match="answer_recall@5.*gold answers"):
        run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False, dataset=ds)


def test_logged_per_query_and_selected_evidence(first):
    from aiblox.engine.cache import StageCache
    from aiblox.engine.outputs import logged_per_query, selected_evidence

    _, cache_dir, r = first
    cache = StageCache(cache_dir)
    p = r.points[0]
    stages = p.manifest.splits["test"].stages
    per_query = logged_per_query(cache, stages)
    assert {"ndcg@10", "answer_recall@5", "max_passage:ndcg@10", "answer_f1",
            "status:ANSWERED"} <= set(per_query)
    assert sum(per_query["answer_f1"].values()) / len(per_query["answer_f1"]) == \
        pytest.approx(p.metrics["test"]["answer_f1"])
    rows = selected_evidence(cache, stages)
    sel = next(s for s in stages if s["name"] == "selection")
    kept = cache.load("selection", sel["key"])["queries"]
    assert {row["query_id"] for row in rows} == set(kept)
    for qid, q in kept.items():
        assert [row["chunk_id"] for row in rows if row["query_id"] == qid and
                row["rank"] >= 0] == q["selected"]
    assert selected_evidence(cache, stages[:5]) is None  # no selection stage


def rescore_spec(sample_spec) -> SweepSpec:
    """BM25 alone and BM25's run rescored by the dense model at three alphas: every rescore
    point reads the run the BM25 point computed (one first-stage key per split)."""
    data = sample_spec.model_dump()
    data.update({"pipeline": ["bm25", "bm25 >> dense_rescore"], "baseline": {"pipeline": "bm25"},
                 "stages": {"dense_rescore": {"top_n": 20}},
                 "grid": {"stages": {"dense_rescore": {"alpha": [0.0, 0.5, 1.0]}}}})
    return SweepSpec.model_validate(data)


def test_a_stage_several_pipeline_points_read_counts_once(tmp_path, sample_spec, sweep_db,
                                                          sample_dataset):
    """A stage counts once per sweep, computed or reused, however many points read it: the
    rescore points' reads of BM25's fused run (without loading it) counted it again as reused,
    11 times on adi_dense_rescore, where the Ray executor (one count per key) counted none."""
    spec = rescore_spec(sample_spec)
    first = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert len(first.points) == 4
    # BM25's one list cut to its depth: no fusion, counted as a cut (its entry is the
    # fusion stage's, key unchanged)
    assert first.computed == {"signals": 2, "cut": 2, "dense_rescore": 6, "metrics": 8}
    assert first.reused == {}
    # and labelled without a fusion it does not have: the base's BM25 settings, not rrf-k60
    assert sorted(p.label for p in first.points)[:2] == [
        "bm25 >> dense_rescore(alpha=0.0,top_n=20) @ bm25-d20",
        "bm25 >> dense_rescore(alpha=0.5,top_n=20) @ bm25-d20"]
    assert all("rrf" not in p.label for p in first.points)
    assert all(s["name"] == "fusion" for p in first.points
               for s in p.manifest.splits["test"].stages[1:2])
    again = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                      dataset=sample_dataset)
    assert again.computed == {} and again.reused == first.computed


@pytest.mark.parametrize(("expression", "title"), [
    ("bm25 + dense", "bm25 + dense @ rrf-k60-d20v30"),
    ("retrieve", "retrieve @ rrf-k60-d20v30"),
    ("retrieve(mode='bm25')", "retrieve(mode='bm25') @ bm25-d20"),
    ("bm25", "bm25 @ bm25-d20"),
    ("dense >> rocchio >> dense", "dense >> rocchio >> dense @ dense-d30"),
    ("bm25 >> rocchio >> dense", "bm25 >> rocchio >> dense @ d20v30"),
])
def test_a_point_s_label_names_fusion_only_where_it_fuses(expression, title):
    """A pipeline that fuses nothing (one signal, or one after the other) is labelled with the
    base's settings its retrieval reads, not the base's RRF it never applies."""
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.expression import parse_pipeline
    from aiblox.engine.settings import PipelinePoint, SweepSettings, point_title

    prefs = RetrievalPrefs(query_text="", fts={"top_k": 20}, vector={"top_k": 30})
    pt = PipelinePoint(prefs, pipeline=parse_pipeline(expression))
    assert point_title(SweepSettings(name="s", embedder="hashing", metrics=()), pt) == title


def test_the_extractive_reader_counts_tokens_with_the_point_s_policy_encoding(
        tmp_path, sample_spec, sweep_db, sample_dataset):
    """The reader stage built its extractive reader without the policy: under an
    ``o200k_base`` policy it counted the prompt (and the answer against the reserved output
    tokens) with ``cl100k_base`` (QA, 2026-11-29)."""
    from aiblox.engine.cache import StageCache
    from aiblox.text.tokens import count_tokens

    spec = pipeline_spec(sample_spec, selection={"policy": ["R2_POLICY_V1"],
                                                 "token_encoding": ["o200k_base"]},
                         baseline=None)
    r = run_sweep(spec, cache_dir=tmp_path, db=sweep_db, progress=False,
                  dataset=sample_dataset)
    cache = StageCache(tmp_path)
    stages = {s["name"]: s for s in r.points[0].manifest.splits["test"].stages}
    prompts = cache.load("prompt", stages["prompt"]["key"])["queries"]
    reader = cache.load("reader", stages["reader"]["key"])["queries"]
    counted = [(res["prompt_tokens_actual"], count_tokens(prompts[qid]["prompt_text"],
                                                          "o200k_base"))
               for qid, res in reader.items() if res is not None]
    assert counted and all(got == want for got, want in counted), counted
