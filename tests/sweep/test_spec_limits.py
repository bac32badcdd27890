"""Sweep specs refuse zero or negative depths and sizes, bad metric names, and grids above the
point limit, before building anything; the limit is raised with max_points; hashes stay."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from spec_text import MINIMAL, write

from aiblox.sweep import SweepSpec, SweepSpecError, load_spec
from aiblox.sweep.grid import GridError, decimal_count, decimal_range, simplex
from aiblox.sweep.spec import DEFAULT_MAX_POINTS

REPO = Path(__file__).resolve().parents[2]
CHUNKING = '[grid.chunking]\nchunker_id = ["sentences"]\n'


@pytest.mark.parametrize(("extra", "field", "words"), [
    ("[grid]\ndepth = [0]\n", "grid.depth", "must be in [1, 2147483647], got [0]"),
    ("[grid]\ndepth = [20, -5]\n", "grid.depth", "got [-5]"),
    ("[grid]\ndepth = { start = 0, stop = 20, step = 10 }\n", "grid.depth", "got [0]"),
    ("[grid]\ndepth = { start = 5, stop = 20, step = 2.5 }\n", "grid.depth", "whole"),
    ("[grid]\nrrf_k = [-1, 60]\n", "grid.rrf_k",
     "rrf_k values must be in [0, 2147483647], got [-1]"),
    ("[grid]\nw_text = { start = -0.5, stop = 1, step = 0.5 }\n", "grid.w_text",
     "in [0.0, 1.0], got [-0.5]"),
    ("[base]\nfts = { top_k = 0 }\n", "base.fts.top_k",
     "got 0: out of range; valid: a whole number >= 1"),
    ("[base]\ntop_k_items = -3\n", "base.top_k_items",
     "got -3: out of range; valid: a whole number >= 1"),
    ("[base]\nscoring = { w_text = nan }\n", "base.scoring.w_text",
     "got nan: not a finite number; valid: a finite number >= 0"),
    ('[base]\nscoring = { blend = "linear", w_text = 0, w_vec = 0 }\n', "base.scoring",
     "linear fusion's weights sum to 0 (w_text 0, w_vec 0)"),
    ('[baseline]\nblend = "linear"\nw_text = 0.0\nw_vec = 0\n', "baseline",
     "linear fusion's weights sum to 0"),
    ("alpha = 2.0\n", "alpha", "got 2.0: out of range; valid: a number > 0 and < 1"),
    ("query_limit = 0\n", "query_limit", "got 0: out of range; valid: a whole number >= 1, or "
                                        "none"),
    # every point's run at least as deep as the metrics' cutoffs (aiblox.metrics.depth)
    ("[grid]\ndepth = [50, 200]\n", "grid.depth",
     "recall@100, map@100 read 100 documents per query, but grid.depth = 50 retrieves at "
     "most 50 candidates per list"),
    ("[base]\ntop_k_items = 20\n", "base.top_k_items",
     "recall@100, map@100 read 100 documents per query, but base.top_k_items = 20 cuts the "
     "run at 20"),
    ('metrics = ["ndcg@10"]\n[base]\nmode = "bm25"\nfts = { top_k = 5 }\n', "base.fts.top_k",
     "ndcg@10 reads 10 documents per query, but base.fts.top_k = 5 cuts the run at 5"),
    ('metrics = ["recall@1000"]\nprimary = "recall@1000"\n'
     '[grid]\nfts_depth = [100, 1000]\nvector_depth = [100]\n',
     "grid.fts_depth", "recall@1000 reads 1000 documents per query, but grid.fts_depth = 100 "
     "and grid.vector_depth = 100 retrieve at most 100 candidates per list"),
    ('chunk_k = [1, 10]\n' + CHUNKING + "top_k_chunks = [5, 12]\n", "grid.chunking.top_k_chunks",
     "answer_recall@10 (chunk_k) reads 10 chunks per query, but top_k_chunks = 5 returns at "
     "most 5"),
    ('[base]\ntop_k_chunks = 0\n' + CHUNKING, "base.top_k_chunks", "got 0: must be >= 1"),
    ("[grid.chunking]\ntop_k_chunks = [0, 5]\n", "grid.chunking.top_k_chunks", "got [0]"),
    ("[grid.chunking]\nper_item_chunk_cap = [0]\n", "grid.chunking.per_item_chunk_cap",
     "got [0]"),
    ("[grid.chunking]\nmax_chunk_tokens = [0, 64]\n", "grid.chunking.max_chunk_tokens",
     "got [0]"),
    ("[grid.chunking]\noverlap_tokens = [-1]\n", "grid.chunking.overlap_tokens", "got [-1]"),
    (CHUNKING + "[baseline]\nblend = \"rrf\"\nper_item_chunk_cap = 0\n",
     "baseline.per_item_chunk_cap", "got 0: out of range; valid: a whole number >= 1"),
    ('metrics = ["bogus@10", "ndcg@10"]\n', "metrics", "'bogus@10': unknown metric 'bogus'"),
    ('metrics = ["ndcg@-3", "ndcg@10"]\n', "metrics", "cutoff @k must be a positive integer"),
    ('metrics = ["ndcg@0"]\nprimary = "ndcg@0"\n', "metrics", "got '0'"),
    # BM25 field weighting and per-signal depths
    ("[grid]\ntitle_weight = [1, -0.5]\n", "grid.title_weight",
     "title_weight values must be >= 0.0, got [-0.5]"),
    ("[grid]\ntitle_b = [0.5, 1.5]\n", "grid.title_b", "title_b values must be in [0.0, 1.0]"),
    ("[grid]\ntitle_weight = []\n", "grid.title_weight", "at least one value"),
    ('pipeline = "bm25 >> rm3 >> bm25"\n[grid.stages.rm3]\nfb_docs = []\n',
     "grid.stages.rm3.fb_docs", "an axis needs at least one value"),  # with its line, too
    ("[grid]\nfts_depth = [0, 10]\n", "grid.fts_depth", "must be in [1, 2147483647], got [0]"),
    ("[grid]\nvector_depth = { start = 5, stop = 20, step = 2.5 }\n", "grid.vector_depth",
     "whole"),
    ("[grid]\ndepth = [10]\nfts_depth = [20]\n", "grid",
     "sweep either depth or fts_depth / vector_depth, not both"),
    ("[grid]\ndepth = [10]\nvector_depth = [20]\n", "grid", "not both"),
    ('[base]\nfts = { fields = ["text"] }\n[grid]\ntitle_weight = [2]\n', "grid.title_weight",
     "got 2.0: title_weight and title_b weigh the title against the text"),
    ('[base]\nfts = { engine = "native" }\n[grid]\ntitle_b = [0.5]\n', "grid.title_b",
     "apply to engine 'index' only"),
    # an axis no point's blend reads (QA: w_text under an RRF base gave one RRF point, silently)
    ("[grid]\nw_text = [0.25, 0.75]\nnormalize = [\"minmax\"]\n", "grid.w_text",
     "only the linear blend reads it, and every point fuses by the base's blend, 'rrf': add "
     "'linear' to a grid.blend axis or set [base] scoring = { blend = 'linear' }"),
    ('[grid]\nblend = ["rrf"]\nmissing = ["list_min"]\n', "grid.missing",
     "every point fuses by grid.blend = ['rrf']"),
    ('[base]\nscoring = { blend = "linear" }\n[grid]\nrrf_k = [10, 60]\n', "grid.rrf_k",
     "only the rrf blend reads it"),
])
def test_bad_values_are_refused_naming_the_field(tmp_path, extra, field, words):
    path = write(tmp_path, MINIMAL + extra)
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    message = str(err.value)
    said = re.match(rf"{re.escape(str(path))}(?::(\d+))?: field {re.escape(repr(field))}: ",
                    message)
    assert said, message
    if said.group(1):  # the line where the key (or its table) is written
        written = path.read_text().splitlines()[int(said.group(1)) - 1]
        assert re.sub(r"\[\d+\]$", "", field).split(".")[-1] in written, (written, message)
    assert words in message
    assert "Value error," not in message


def test_a_tiny_step_fails_fast_with_the_count_and_the_limit(tmp_path):
    path = write(tmp_path, MINIMAL + '[grid]\nblend = ["linear"]\n'
                                      'w_text = { start = 0, stop = 1, step = 1e-7 }\n')
    t0 = time.perf_counter()
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    assert time.perf_counter() - t0 < 1.0
    assert f"field 'grid': 10,000,001 points, above the limit of {DEFAULT_MAX_POINTS:,}" in \
        str(err.value)
    assert "--max-points" in str(err.value)


def test_the_limit_counts_the_product_of_the_axes(tmp_path):
    # 101 weights x 2 normalisations x 2 missing x 3 depths + 4 rrf_k x 3 depths = 1224
    text = MINIMAL + ('metrics = ["ndcg@10"]\n[grid]\nblend = ["linear", "rrf"]\n'
                      'w_text = { start = 0, stop = 1, step = 0.01 }\n'
                      'normalize = ["minmax", "zscore"]\nmissing = ["zero", "list_min"]\n'
                      'depth = [10, 20, 50]\nrrf_k = [10, 20, 60, 100]\n')
    path = write(tmp_path, text)
    spec = load_spec(path)
    assert spec.grid_size() == len(spec.points()) == 1224
    with pytest.raises(SweepSpecError,
                       match="field 'grid': 1,224 points, above the limit of 1,223"):
        load_spec(path, max_points=1223)
    assert load_spec(path, max_points=1224).hash == spec.hash  # the limit is not identity


def test_max_points_raises_the_limit(tmp_path):
    path = write(tmp_path, MINIMAL + '[grid]\nblend = ["linear"]\n'
                                      'w_text = { start = 0, stop = 1, step = 0.00005 }\n')
    with pytest.raises(SweepSpecError, match="20,001 points"):
        load_spec(path)
    spec = load_spec(path, max_points=20_001)
    assert spec.grid_size() == 20_001
    data = spec.model_dump()
    with pytest.raises(Exception, match="20,001 points"):
        SweepSpec.model_validate(data)
    assert SweepSpec.model_validate(data, context={"max_points": 30_000}).hash == spec.hash
    with pytest.raises(SweepSpecError, match="max_points must be >= 1"):
        load_spec(path, max_points=0)


def test_pipeline_grids_count_every_stage(tmp_path):
    text = MINIMAL + ('chunk_k = [1, 4]\n[grid]\nrrf_k = [10, 60]\n[grid.chunking]\n'
                      'chunker_id = ["sentences", "token_window"]\n'
                      'max_chunk_tokens = { start = 16, stop = 4096, step = 16 }\n'
                      'top_k_chunks = [4, 8]\n[grid.selection]\npolicy = ["R2_POLICY_V1"]\n'
                      'max_chunks = [2, 4, 6]\n')
    with pytest.raises(SweepSpecError,
                       match=r"field 'grid': 6,144 points, above the limit of 6,000"):
        load_spec(write(tmp_path, text), max_points=6000)


def test_a_huge_selection_axis_is_refused_before_it_is_built(tmp_path):
    path = write(tmp_path, MINIMAL + CHUNKING
                 + '[grid.selection]\nmax_chunks = { start = 1, stop = 1e9, step = 1 }\n')
    t0 = time.perf_counter()
    with pytest.raises(SweepSpecError, match="field 'grid.selection.max_chunks': "
                                             "1,000,000,000 values, above the limit"):
        load_spec(path)
    assert time.perf_counter() - t0 < 1.0


def test_grid_helpers_count_before_building():
    assert decimal_count(0, 1, "1e-7") == 10_000_001
    assert decimal_count(0, 1, 0.05) == len(decimal_range(0, 1, 0.05)) == 21
    with pytest.raises(GridError, match="10,000,001 values, above the limit of 100"):
        decimal_range(0, 1, 1e-7, limit=100)
    with pytest.raises(GridError, match="points, above the limit of 1,000"):
        simplex(6, 0.001, limit=1000)
    assert len(simplex(3, 0.1, limit=66)) == 66
    with pytest.raises(GridError, match="finite"):
        decimal_count(0, "Infinity", 1)


HASHES = {  # the shipped specs' hashes: the limits did not move them; the depth rule did
    # (issue 25: each computed metrics over runs shallower than their cutoffs, and now names
    # cutoffs its runs hold: sample_fusion depth 10 not 5, scifact_fusion recall@25/map@25,
    # scifact_chunking @5, squad_selection @3), and so did leaving out of the hash where the
    # data and the store lie and the description, with the metrics in canonical order (QA,
    # 2026-11-29; were 2e2aae61..., 93b831d5..., 95e3c9b7..., 759f84fd...)
    "sample_fusion.toml": "2e2f8dd9a75a3c20d9402a23d671d07472e440eb3b138f3f663745eedd234d07",
    "scifact_chunking.toml": "3adf31bb5188c7dfa6b1794171f41502cef96bb8196e75f62e0e391b106c3fcd",
    "scifact_fusion.toml": "ce3388448811a1fcf35573a9d88167cce49a5750b194e467730c3959bf73cc63",
    "squad_selection.toml": "6d465103e3b0681fa01e51ab67447c71ad5449222de1a497b5d47d5ccd5416f3",
}


@pytest.mark.parametrize("name", sorted(HASHES))
def test_shipped_specs_keep_their_hashes_and_fit_the_limit(name):
    spec = load_spec(REPO / "evals" / "sweeps" / name)
    assert spec.hash == HASHES[name]
    built = spec.pipeline_points() if spec.has_pipeline_axes else spec.points()
    assert len(built) <= spec.grid_size() <= DEFAULT_MAX_POINTS
