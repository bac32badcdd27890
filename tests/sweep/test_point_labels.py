"""A retrieval pipeline point's label names what ran: after ``@`` only the settings of the
spec's ``[base]`` its stages read and its expression does not set (``settings.base_reads``),
never the base's fusion or depth where no stage uses them; a plain fusion point's label is
what it always was."""

from __future__ import annotations

import pytest

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.settings import PipelinePoint, SweepSettings, point_title
from aiblox.sweep import SweepSpec

SETTINGS = SweepSettings(name="s", embedder="hashing", metrics=())
DEPTHS = {"top_k_items": 100, "fts": {"top_k": 100}, "vector": {"top_k": 100}}
RRF = RetrievalPrefs(query_text="", **DEPTHS)  # the QA's specs' [base]: hybrid, RRF k 60
BM25 = RetrievalPrefs(query_text="", **{**DEPTHS, "mode": "bm25"})
LINEAR = RetrievalPrefs(query_text="", top_k_items=100, fts={"top_k": 100},
                        vector={"top_k": 50}, scoring={"blend": "linear", "w_text": 0.3,
                                                       "w_vec": 0.7, "normalize": "minmax"})
TUNED = RetrievalPrefs(query_text="", mode="bm25", top_k_items=100,
                       fts={"top_k": 100, "k1": 1.5, "b": 0.9})
MIX = {"mix": {"kind": "fuse", "blend": "linear", "normalize": "minmax",
               "weights": [0.3, 0.7]}}


def title(expression: str, base: RetrievalPrefs, stages: dict | None = None) -> str:
    pt = PipelinePoint(base, pipeline=parse_pipeline(expression, stages))
    return point_title(SETTINGS, pt)


@pytest.mark.parametrize(("expression", "base", "expected"), [
    # a cut before a rescore: BM25's settings and depth, no fusion (RRF until 93ed40d)
    ("bm25 >> cutoff(k=20) >> dense_rescore(alpha=0.5, top_n=20)", RRF,
     "bm25 >> cutoff(k=20) >> dense_rescore(alpha=0.5,top_n=20) @ bm25-d100"),
    # ... and BM25's depth only where the base's is the one it fetched (was @ bm25-d100)
    ("bm25(top_k=50) >> cutoff(k=20) >> dense_rescore(alpha=0.5, top_n=20)", RRF,
     "bm25(top_k=50) >> cutoff(k=20) >> dense_rescore(alpha=0.5,top_n=20)"),
    # a cut first stage: the depth each list was fetched to (d: as in every label), then cut
    ("bm25 % 5", RRF, "bm25 % 5 @ bm25-d100"),
    ("(bm25 + dense) % 5", RRF, "(bm25 + dense) % 5 @ rrf-k60-d100"),
    # a fusion under a bm25 [base] fuses by the base's RRF (was @ bm25-d100: no fusion, no
    # dense depth)
    ("(bm25 + dense) % 5", BM25, "(bm25 + dense) % 5 @ rrf-k60-d100"),
    ("bm25 + dense", BM25, "bm25 + dense @ rrf-k60-d100"),
    # a named linear fusion: what it leaves to the base (missing) and the depths, not the
    # base's RRF (was @ rrf-k60-d100)
    ("mix(bm25 % 100, dense % 100)", RRF,
     "mix(bm25 % 100, dense % 100; blend='linear',normalize='minmax',weights=[0.3, 0.7]) "
     "@ linear-zero-d100"),
    ("fuse(bm25, dense, blend='linear')", RRF,
     "fuse(bm25, dense; blend='linear') @ linear-w0.35-sigmoid-zero-d100"),
    ("fuse(bm25, dense, blend='rrf', rrf_k=10)", LINEAR,
     "fuse(bm25, dense; blend='rrf',rrf_k=10) @ d100v50"),
    # three runs weighed equally: no w_text
    ("bm25 + dense + (bm25 >> rm3 >> bm25)", LINEAR,
     "bm25 + dense + (bm25 >> rm3 >> bm25) @ linear-minmax-zero-d100v50"),
    ("bm25 + dense", LINEAR, "bm25 + dense @ linear-w0.3-minmax-zero-d100v50"),
    # BM25 settings the expression sets are not the base's (was k1=1.5)
    ("bm25(k1=0.9) >> rm3 >> bm25(k1=0.9)", TUNED,
     "bm25(k1=0.9) >> rm3 >> bm25(k1=0.9) @ bm25-lucene-b=0.9-d100"),
    ("bm25 >> rm3 >> bm25", TUNED, "bm25 >> rm3 >> bm25 @ bm25-lucene-k1=1.5-b=0.9-d100"),
    # every setting in the expression: nothing after it
    ("bm25(top_k=50) >> rm3 >> bm25(top_k=50)", RRF, "bm25(top_k=50) >> rm3 >> bm25(top_k=50)"),
])
def test_a_pipeline_point_s_label_names_what_ran(expression, base, expected):
    assert title(expression, base, MIX) == expected


def _spec(sample_spec, **data) -> SweepSpec:
    spec = sample_spec.model_dump()
    spec.update({"baseline": None, **data})
    return SweepSpec.model_validate(spec)


def _titles(spec: SweepSpec) -> list[str]:
    return [point_title(spec.settings(), pt) for pt in spec.grid_points()]


def test_a_grid_over_stage_axes_labels_every_point_apart(sample_spec):
    """A stage axis is in the expression and a [grid] axis the stages read after ``@``: every
    point its own label."""
    spec = _spec(sample_spec, pipeline="bm25 >> rm3 >> bm25",
                 grid={"k1": [0.9, 1.2], "stages": {"rm3": {"orig_weight": [0.3, 0.7]}}})
    assert _titles(spec) == [
        "bm25 >> rm3(orig_weight=0.3) >> bm25 @ bm25-lucene-k1=0.9-b=0.75-d20",
        "bm25 >> rm3(orig_weight=0.7) >> bm25 @ bm25-lucene-k1=0.9-b=0.75-d20",
        "bm25 >> rm3(orig_weight=0.3) >> bm25 @ bm25-d20",
        "bm25 >> rm3(orig_weight=0.7) >> bm25 @ bm25-d20"]
    # a fusion's own blend swept: each point names the blend it ran
    spec = _spec(sample_spec, pipeline="bm25 + dense",
                 grid={"stages": {"fuse": {"blend": ["rrf", "linear"]}}})
    assert _titles(spec) == ["fuse(bm25, dense; blend='rrf') @ rrf-k60-d20",
                             "fuse(bm25, dense; blend='linear') @ linear-w0.35-sigmoid-zero-d20"]


def test_a_plain_fusion_spec_s_labels_are_unchanged(sample_spec):
    """No pipeline: the labels every fusion point always had (the sample spec's whole grid)."""
    linear = [f"linear-w{w}-{n}-zero-d{d}" for d in (10, 20)
              for w in ("0.0", "0.25", "0.5", "0.75", "1.0") for n in ("minmax", "zscore")]
    assert _titles(sample_spec) == [*linear, "rrf-k10-d10", "rrf-k60-d10", "rrf-k10-d20",
                                    "rrf-k60-d20"]
    spec = _spec(sample_spec, base={**sample_spec.base, "mode": "bm25"},
                 grid={"k1": [0.9, 1.2], "title_weight": [1.0, 2.0], "fts_depth": [20]})
    assert _titles(spec) == ["bm25-lucene-k1=0.9-b=0.75-d20", "bm25-lucene-k1=0.9-b=0.75-tw2.0-d20",
                             "bm25-d20", "bm25-tw2.0-d20"]


def test_a_linear_baseline_follows_the_grid_s_weights_rule_and_its_label_names_both(
        sample_spec):
    """A baseline ``w_text = 0.5`` kept the base's ``w_vec`` 0.65 and was labelled as the grid's
    0.5 / 0.5 point, which it was not (QA: a delta of a point over "itself", and ``compare`` by
    label refused as ambiguous). It takes ``1 - w_text`` as the grid does; a baseline's own
    pair that does not sum to 1 is named in full."""
    from aiblox.engine.settings import point_label

    base = {"blend": "linear", "w_text": 0.5, "normalize": "minmax"}
    same = _spec(sample_spec, baseline=base).baseline_prefs()
    assert (same.scoring.w_text, same.scoring.w_vec) == (0.5, 0.5)
    assert point_label(same) == "linear-w0.5-minmax-zero-d20"  # the grid's point: one config
    assert point_label(same) in _titles(sample_spec)
    own = _spec(sample_spec, baseline={**base, "w_vec": 0.65}).baseline_prefs()
    assert point_label(own) == "linear-w0.5v0.65-minmax-zero-d20"
    assert point_label(own) not in _titles(sample_spec)
