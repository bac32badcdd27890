"""Only the settings that apply to a run are logged as its MLflow params (issue 29 item 3): the
config hash and the manifest keep every setting; the params leave out PostgreSQL's full-text
settings on DuckDB, chunking settings without chunk stages, ``vector.*`` on a BM25 run,
``fts.*`` on a dense one, the other blend's scoring settings."""

from __future__ import annotations

import re

import pytest

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.result import config_hash
from aiblox.engine.settings import PipelinePoint, SweepSettings, point_config
from aiblox.engine.tracking import PointLog, flatten, logged_params, point_record


def _params(backend: str = "duckdb", embedder: str | None = "m", **prefs) -> tuple[dict, dict]:
    _, config = config_hash(RetrievalPrefs(query_text="", **prefs), embedder, backend)
    return flatten(config), logged_params(config)


def test_a_bm25_run_on_duckdb_logs_its_full_text_settings_only():
    every, logged = _params(mode="bm25")
    assert len(every) == 51 and len(logged) == 17
    # field weighting is written out at its defaults (a config leaves it out: its hash)
    assert set(logged) - set(every) == {"prefs.fts.title_weight", "prefs.fts.title_b"}
    assert {"backend", "prefs.mode", "prefs.fts.k1", "prefs.fts.b", "prefs.fts.method",
            "prefs.fts.top_k", "prefs.top_k_items"} <= set(logged)
    for gone in ("embedder", "prefs.fts.config", "prefs.fts.rank_func", "prefs.fts.mode",
                 "prefs.fts.min_rank", "prefs.fts.delta", "prefs.scoring.rrf_k",
                 "prefs.top_k_chunks", "prefs.per_item_chunk_cap"):
        assert gone not in logged, gone
    assert not [k for k in logged if k.startswith(("prefs.vector.", "prefs.chunking.",
                                                   "prefs.cache.", "prefs.snippet."))]
    assert all(logged[k] == every[k] for k in logged if k in every)  # the values as flattened


def test_scoring_settings_follow_the_blend_and_the_fields_follow_the_mode():
    _, rrf = _params(mode="hybrid", scoring={"blend": "rrf"})
    _, linear = _params(mode="hybrid", scoring={"blend": "linear"})
    assert "prefs.scoring.rrf_k" in rrf and "prefs.scoring.w_text" not in rrf
    assert "prefs.scoring.w_text" in linear and "prefs.scoring.rrf_k" not in linear
    assert "prefs.vector.top_k" in linear and "prefs.fts.k1" in linear
    _, dense = _params(mode="dense")
    assert "prefs.vector.top_k" in dense and "embedder" in dense
    assert not [k for k in dense if k.startswith("prefs.fts.")]


def test_postgres_full_text_settings_apply_to_its_native_search_only():
    _, native = _params("postgres", mode="bm25", fts={"engine": "native"})
    assert {"prefs.fts.config", "prefs.fts.rank_func", "prefs.fts.mode",
            "prefs.fts.min_rank"} <= set(native)
    assert "prefs.fts.title_weight" not in native
    _, duck_native = _params(mode="bm25", fts={"engine": "native"})
    assert "prefs.fts.min_rank" in duck_native and "prefs.fts.rank_func" not in duck_native
    _, bm25l = _params(mode="bm25", fts={"method": "bm25l"})
    assert "prefs.fts.delta" in bm25l


def test_a_retrieval_pipeline_keeps_both_fields_and_chunk_stages_keep_chunking():
    _, config = config_hash(RetrievalPrefs(query_text="", mode="bm25"), "m", "duckdb")
    rm3 = {"then": [{"stage": "bm25", "name": "bm25", "params": {}},
                    {"stage": "rm3", "name": "rm3", "params": {"fb_docs": 5, "fb_terms": 20}},
                    {"stage": "bm25", "name": "bm25", "params": {}}]}
    piped = logged_params({**config, "pipeline": rm3})
    assert "prefs.vector.top_k" in piped and "prefs.fts.k1" in piped
    # the pipeline as a report groups it: its shape, then each stage parameter it sets
    assert {k: v for k, v in piped.items() if k.startswith("pipeline")} == {
        "pipeline": "bm25 >> rm3 >> bm25", "pipeline.rm3.fb_docs": "5",
        "pipeline.rm3.fb_terms": "20"}
    chunked = logged_params({**config, "chunk_k": 5})
    assert "prefs.chunking.chunker_id" in chunked and "prefs.top_k_chunks" in chunked


def _piped(text: str, **prefs) -> dict[str, str]:
    """The params of ``aiblox eval --pipeline TEXT``'s run (its config as ``point_config``
    makes it)."""
    pt = PipelinePoint(RetrievalPrefs(query_text="", **prefs), pipeline=parse_pipeline(text))
    config = point_config(SweepSettings(name="eval", embedder="m", metrics=("ndcg@10",)), pt,
                          "m", "duckdb")[1]
    return logged_params(config)


def test_stages_of_one_name_set_differently_log_each_ones_values():
    """QA: three pipelines of one shape, scored differently, logged identical params (``pipeline
    = "bm25 >> rm3 >> bm25"``, ``pipeline.bm25.k1 = 0.5``); the third's second k1, 2.0, was
    never logged. Each stage's values are logged now, keyed by its place among the stages of
    its name where they set it differently (MLflow param names: no ``#``), and the run's tag
    ``aiblox.pipeline`` holds the expression; ``pipeline`` stays the shape a report groups
    by."""
    def logged(text: str) -> dict[str, str]:
        return {k: v for k, v in _piped(text).items() if k.startswith("pipeline")}

    shape = {"pipeline": "bm25 >> rm3 >> bm25"}
    assert logged("bm25(k1=0.5) >> rm3 >> bm25") == {**shape, "pipeline.bm25.1.k1": "0.5"}
    assert logged("bm25 >> rm3 >> bm25(k1=0.5)") == {**shape, "pipeline.bm25.2.k1": "0.5"}
    c = "bm25(k1=0.5) >> rm3 >> bm25(k1=2.0)"
    assert logged(c) == {**shape, "pipeline.bm25.1.k1": "0.5", "pipeline.bm25.2.k1": "2.0"}
    assert logged("bm25(k1=0.5) >> rm3 >> bm25(k1=0.5)") == {**shape, "pipeline.bm25.k1": "0.5"}
    assert all(re.fullmatch(r"[/\w.\- ]+", k) for k in _piped(c))  # MLflow's rule for names
    pt = PipelinePoint(RetrievalPrefs(query_text=""), pipeline=parse_pipeline(c))
    config = point_config(SweepSettings(name="eval", embedder="m", metrics=("ndcg@10",)), pt,
                          "m", "duckdb")[1]
    record = point_record(PointLog(kind="point", label="C", metrics={}, config=config))
    assert record.tags["aiblox.pipeline"] == c
    assert record.params["pipeline.bm25.2.k1"] == "2.0"


@pytest.mark.parametrize("text, prefs, read", [
    ("bm25 >> rm3 >> bm25", {}, set()),  # fuses nothing: no fusion setting, whatever the base
    ("bm25", {"scoring": {"blend": "linear"}}, set()),
    ("bm25 >> rm3 >> (bm25 + bm25(b=0.3))", {}, {"blend", "rrf_k"}),
    ("fuse(bm25, dense, blend='linear')", {}, {"normalize", "missing", "w_text", "w_vec"}),
    ("bm25 + dense", {"mode": "bm25"}, {"blend", "rrf_k", "rrf_w_text", "rrf_w_vec"}),
])
def test_a_pipeline_logs_the_fusion_settings_it_reads(text, prefs, read):
    """A pipeline point logged the base's fusion settings by the base's mode and blend: all of
    RRF's for ``bm25 >> rm3 >> bm25`` under a hybrid base (none of them read), none for ``bm25
    + dense`` under a ``bm25`` base (all read). It logs those its fusions read."""
    logged = {k.removeprefix("prefs.scoring.") for k in _piped(text, **prefs)
              if k.startswith("prefs.scoring.")}
    assert logged == read
