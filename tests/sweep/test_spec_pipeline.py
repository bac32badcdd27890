"""Pipeline sweep specs: chunking and selection axes, policy overrides checked against the
policy model, seeded random search, and fusion spec hashes left as they were."""

from __future__ import annotations

import pytest
from spec_text import MINIMAL, write

from aiblox.sweep import SweepSpec, SweepSpecError, load_spec


def test_chunking_axes_multiply_only_chunkers_that_take_sizes(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + """
chunk_k = [1, 5]
[grid.chunking]
chunker_id = ["sentences", "token_window", "whole"]
max_chunk_tokens = [64, 128]
overlap_tokens = [0, 64]
top_k_chunks = [5, 10]
"""))
    assert spec.has_pipeline_axes
    pts = spec.pipeline_points()
    by = {}
    for p in pts:
        by.setdefault(p.prefs.chunking.chunker_id, []).append(p)
    # (64, 64) is left out (overlap must be below max): 3 size pairs x 2 depths
    assert len(by["sentences"]) == len(by["token_window"]) == 3 * 2
    assert len(by["whole"]) == 2  # sizes do not apply: one per top_k_chunks
    assert {p.prefs.top_k_chunks for p in pts} == {5, 10}
    assert all(p.policy is None for p in pts)
    assert len({p.key() for p in pts}) == len(pts)
    assert len(spec.points()) == len(pts)  # distinct retrieval prefs


def test_selection_axes_and_overrides(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + """
primary = "answer_f1"
[grid.selection]
policy = ["R2_POLICY_V1", "R2_POLICY_V2"]
max_chunks = [2, 4]
overlap_ratio_threshold = { start = 0.6, stop = 0.8, step = 0.2 }
[baseline]
policy = "R2_POLICY_V1"
"""))
    pts = spec.pipeline_points()
    assert len(pts) == 2 * 2 * 2
    assert pts[0].selection == {"policy": "R2_POLICY_V1",
                                "overrides": {"max_chunks": 2, "overlap_ratio_threshold": 0.6}}
    assert isinstance(pts[0].overrides["max_chunks"], int)
    assert len(spec.points()) == 1  # one retrieval config shared by every selection point
    base = spec.baseline_point()
    assert base is not None and base.policy == "R2_POLICY_V1" and base.overrides == {}


@pytest.mark.parametrize("extra, field, message", [
    ("[grid.selection]\nmax_chunkz = [3]\n", "grid.selection", "max_chunkz"),
    ("[grid.selection]\nmax_chunks = [0]\n", "grid.selection", "max_chunks"),
    ("[grid.selection]\npolicy = [\"R2_POLICY_V9\"]\n", "grid.selection", "R2_POLICY_V9"),
    ("[grid.chunking]\nchunker_id = [\"paragraphz\"]\n", "grid.chunking.chunker_id",
     "paragraphz"),
    ("[grid.chunking]\ntop_k_chunks = []\n", "grid.chunking.top_k_chunks", "at least one"),
    ("primary = \"answer_f1\"\n[grid.chunking]\ntop_k_chunks = [3]\n", "primary",
     "answer_f1"),  # answer metrics need selection axes
    ("query_limit = 5\n", "query_limit", "pipeline"),
    ("[search]\nstrategy = \"random\"\n", "search", "needs n"),
    ("[grid.chunking]\ntop_k_chunks = [3]\n[baseline]\nmax_chunks = 3\n", "baseline",
     "max_chunks"),
])
def test_bad_pipeline_specs_name_file_and_field(tmp_path, extra, field, message):
    path = write(tmp_path, MINIMAL + extra)
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    text = str(err.value)
    assert str(path) in text and message in text
    assert field in text


def test_bad_policy_combination_is_rejected(tmp_path):
    # reserved output must stay below the total prompt budget
    with pytest.raises(SweepSpecError, match="reserved_output_tokens"):
        load_spec(write(tmp_path, MINIMAL + """
[grid.selection]
reserved_output_tokens = [4000]
"""))


def test_random_search_is_seeded_and_keeps_grid_order(tmp_path):
    grid = """
[grid]
blend = ["linear"]
w_text = { start = 0, stop = 1, step = 0.05 }
"""
    full = load_spec(write(tmp_path, MINIMAL + grid)).points()
    spec = load_spec(write(tmp_path, MINIMAL + grid + "[search]\nstrategy = \"random\"\n"
                                                      "n = 5\nseed = 7\n"))
    pts = spec.points()
    assert len(pts) == 5
    idx = [full.index(p) for p in pts]
    assert idx == sorted(idx)
    assert [p.scoring.w_text for p in spec.points()] == [p.scoring.w_text for p in pts]
    other = SweepSpec.model_validate({**spec.model_dump(), "search": {
        "strategy": "random", "n": 5, "seed": 8}})
    assert [p.scoring.w_text for p in other.points()] != [p.scoring.w_text for p in pts]
    assert other.hash != spec.hash  # the search is part of the spec's identity
    big = SweepSpec.model_validate({**spec.model_dump(), "search": {
        "strategy": "random", "n": 100, "seed": 1}})
    assert len(big.points()) == len(full)


def test_new_fields_at_defaults_keep_the_fusion_hash(tmp_path):
    a = load_spec(write(tmp_path, MINIMAL))
    data = a.model_dump(mode="json")
    for k in ("query_limit", "chunk_k", "reader", "reader_options", "search", "cv",
              "finetune", "pipeline", "stages", "stage_modules", "device", "finetune_reranker",
              "seed", "dataset", "db", "description"):  # the last three: never hashed
        data.pop(k)
    left_out = ("chunking", "selection", "stages", "k1", "b", "method", "title_weight", "title_b",
                "fts_depth", "vector_depth", "doc_score", "passage_chunker", "passage_tokens")
    data["grid"] = {k: v for k, v in data["grid"].items() if k not in left_out}
    from aiblox.hashing import sha256_hex

    assert a.hash == sha256_hex(data)
    b = load_spec(write(tmp_path, MINIMAL + "chunk_k = [1, 3]\n[grid.chunking]\n"
                                            "top_k_chunks = [3]\n"))
    c = load_spec(write(tmp_path, MINIMAL + "chunk_k = [1, 3]\nquery_limit = 4\n"
                                            "[grid.chunking]\ntop_k_chunks = [3]\n"))
    assert len({a.hash, b.hash, c.hash}) == 3


SUB = '[stages.fb]\npipeline = "bm25 >> rm3 >> bm25"\n'  # line 8 after the pipeline's 7


@pytest.mark.parametrize(("extra", "line", "field", "said"), [
    ('pipeline = "fb(fb_docs=5)"\n' + SUB, 7, "pipeline",
     "fb(fb_docs=5): fb is the named pipeline of [stages.fb] (line 8), which takes no "
     "parameters or pipelines: set them on its stages"),
    ('pipeline = ["bm25", "fb >> bm25"]\n' + SUB, 7, "pipeline[1]",
     "bm25 takes queries but follows bm25, which gives a ranked run: a retrieval stage after "
     "a run needs feedback in between (e.g. >> rm3 >>); fb is [stages.fb] (line 8)"),
    ('pipeline = "bm25 >> x(fb_docs=0) >> bm25"\n[stages.x]\nkind = "rm3"\nfb_terms = 5\n', 7,
     "pipeline", "stage x (rm3): fb_docs: Input should be greater than or equal to 1; in the "
     "parameters written here, over those of [stages.x] (line 8)"),
    ('pipeline = "a"\n[stages.a]\npipeline = "fb(x=1)"\n' + SUB, 8,
     "stages.a", "fb(x=1): fb is the named pipeline of [stages.fb] (line 10), which takes no "
     "parameters or pipelines"),
    ('pipeline = "fb"\n[stages.fb]\npipeline = "rm3 >> dense"\n', 8, "stages.fb",
     "dense cannot read the weighted terms rm3 gives"),  # inside it: its own line
])
def test_an_error_about_how_a_named_pipeline_is_used_points_at_its_use(tmp_path, extra, line,
                                                                       field, said):
    """``fb(fb_docs=5)`` for a ``[stages.fb]`` named pipeline pointed at ``[stages.fb]``
    alone, where nothing is wrong: an error about how a named sub-pipeline is used is the
    using field's (``pipeline =``), naming the table's line too; an error inside it stays its
    table's."""
    path = write(tmp_path, MINIMAL + extra)
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    assert str(err.value).startswith(f"{path}:{line}: field {field!r}: {said}"), str(err.value)
    assert "\n" not in str(err.value)


DEPTH = 'metrics = ["ndcg@10"]\n[base]\nfts = { top_k = 100 }\n'


@pytest.mark.parametrize(("extra", "line", "said"), [
    ('pipeline = "bm25 >> cutoff(k=20) >> dense_rescore(top_n=50)"\n', 8,
     "field 'pipeline': bm25 >> cutoff(k=20) >> dense_rescore(top_n=50): stage dense_rescore: "
     "top_n = 50 but its input run holds at most 20 documents per query"),
    ('pipeline = "bm25 % 20 >> rr"\n[stages.rr]\nkind = "dense_rescore"\ntop_n = 50\n', 8,
     "field 'pipeline': bm25 % 20 >> rr(top_n=50): stage rr: top_n = 50 but its input run "
     "holds at most 20 documents per query; rr's top_n is written in [stages.rr] (line 9)"),
    ('pipeline = ["bm25", "bm25 >> cutoff(k=20) >> dense_rescore"]\n'
     "[grid.stages.dense_rescore]\ntop_n = [10, 50]\n", 8,
     "field 'pipeline[1]': bm25 >> cutoff(k=20) >> dense_rescore(top_n=50): stage "
     "dense_rescore: top_n = 50 but its input run holds at most 20 documents per query; "
     "dense_rescore's top_n is written in [grid.stages.dense_rescore] (line 9)"),
    ('pipeline = "bm25 % 5 >> rm3 >> bm25"\n[grid.stages.rm3]\nfb_terms = [5, 10]\n', 8,
     "field 'pipeline': bm25 % 5 >> rm3(fb_terms=5) >> bm25: stage rm3: fb_docs = 10 but its input "
     "run holds at most 5 documents per query; fb_docs is rm3's default"),  # QA 25: not written
    ('pipeline = "bm25"\n[baseline]\npipeline = "bm25 % 10 >> rocchio(k=20) >> dense"\n', 10,
     "field 'baseline.pipeline': bm25 % 10 >> rocchio(k=20) >> dense: stage rocchio: k = 20 "
     "feedback documents but its input run holds at most 10 documents per query"),
])
def test_a_stage_asked_for_more_than_its_input_holds_is_refused_when_the_spec_loads(
        tmp_path, extra, line, said):
    """``cutoff(k=20) >> dense_rescore(top_n=50)`` was refused by the runner before any work,
    but loaded: the stage's own check runs on the depths when the spec loads, one line naming
    the field, the stage and the file line (and where the stage's parameters are written)."""
    path = write(tmp_path, MINIMAL + DEPTH.replace("[base]", extra + "[base]"))
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    assert str(err.value) == f"{path}:{line}: {said}"


def test_what_needs_the_store_or_a_model_is_left_to_the_run(tmp_path):
    """A check that fails without the depths too (a cross-encoder folder not there) is the
    runner's to refuse, with the store and after any training; a depth within the input's
    loads."""
    from aiblox.engine import PipelineError, parse_pipeline
    from aiblox.engine.settings import PipelinePoint
    from aiblox.sweep.runner import check_pipelines

    for pipeline in ("bm25 % 20 >> cross_encoder(model='/nowhere', top_n=50)",
                     "bm25 >> cutoff(k=20) >> dense_rescore(top_n=20)",
                     "bm25 >> rm3(fb_docs=50) >> bm25"):
        assert load_spec(write(tmp_path, MINIMAL + f'pipeline = "{pipeline}"\n' + DEPTH))
    # at the run: refused there, before any work
    spec = load_spec(write(tmp_path, MINIMAL + 'pipeline = "bm25"\n' + DEPTH))
    with pytest.raises(PipelineError, match="stage dense_rescore: top_n = 50 but its input "
                                            "run holds at most 20"):
        check_pipelines(None, [PipelinePoint(p.prefs, pipeline=parse_pipeline(
            "bm25 % 20 >> dense_rescore(top_n=50)")) for p in spec.grid_points()])
