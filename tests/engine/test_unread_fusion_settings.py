"""A retrieval pipeline's config hash, and a fusion stage's key, hold only the fusion settings
the pipeline reads.

QA: ``aiblox eval --mode bm25`` keeps its config hash under ``--rrf-k 10`` or ``--blend linear
--w-text 0.9``, as README promises (a ``bm25`` run fuses nothing), but ``--pipeline bm25``, the
same run, moved it (991f9d8c, f3b99d68, 6e5b4bf4), and so did ``bm25 >> rm3 >> bm25``: a
pipeline point hashed its base's ``scoring`` by the base's mode (hybrid), not by what its
stages read. And under RRF ``bm25 >> rm3 >> (bm25 + bm25(b=0.3))`` moved its fuse and metrics
keys with ``normalize`` or ``missing``, computing one run again, where the first stage's fusion
(``ScoringConfig.canonical``) and ``plan.run_form`` already left them out. The base's
``scoring`` is now hashed with what the pipeline's fusions read (``BaseReads.scoring``), every
other field at its default, and a fusion is keyed with the settings its blend ignores at their
defaults (``FuseConfig.canonical``): every point and key at the defaults is as before
(``tests/sweep/pinned_keys*.json`` unchanged). The same rule keeps apart what the base's mode
had merged: ``bm25 + dense`` under a ``bm25`` base reads ``rrf_k``, and a linear fusion under an
RRF base reads the base's ``normalize``; both had hashed them at their defaults."""

from __future__ import annotations

import pytest

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.builtin import FuseConfig
from aiblox.engine.expression import parse_pipeline
from aiblox.engine.plan import apply_pipeline
from aiblox.engine.settings import PipelinePoint, SweepSettings, point_config
from tests.sweep.test_pinned_keys import KeyContext

SETTINGS = SweepSettings(name="eval", embedder="e", metrics=("ndcg@10",))


def _prefs(mode: str = "hybrid", **scoring) -> RetrievalPrefs:
    return RetrievalPrefs(query_text="", mode=mode, scoring=scoring)


def _hash(text: str, mode: str = "hybrid", **scoring) -> str:
    pt = PipelinePoint(_prefs(mode, **scoring), pipeline=parse_pipeline(text))
    return point_config(SETTINGS, pt, "e", "duckdb")[0]


@pytest.mark.parametrize("text", ["bm25", "bm25 >> rm3 >> bm25", "dense >> rocchio >> dense",
                                  "(bm25 >> rm3 >> bm25) % 10"])
def test_a_pipeline_that_fuses_nothing_hashes_no_fusion_setting(text):
    at_defaults = _hash(text)
    assert _hash(text, rrf_k=10) == at_defaults
    assert _hash(text, blend="linear", w_text=0.9, w_vec=0.1) == at_defaults
    assert _hash(text, mode="bm25", normalize="zscore", missing="list_min") == \
        _hash(text, mode="bm25")


def test_a_fusion_hashes_what_its_blend_reads_of_the_base():
    rrf = "bm25 >> rm3 >> (bm25 + bm25(b=0.3))"
    assert _hash(rrf, normalize="zscore") == _hash(rrf, missing="list_min") == _hash(rrf)
    assert _hash(rrf, w_text=0.9, w_vec=0.1) == _hash(rrf)  # the linear blend's weights
    assert _hash(rrf, rrf_k=10) != _hash(rrf)
    # the first stage's fusion reads all of its blend's settings: hashed as before
    assert _hash("bm25 + dense", normalize="zscore") == _hash("bm25 + dense")
    assert _hash("bm25 + dense", rrf_k=10) != _hash("bm25 + dense")
    # whatever the base's mode: bm25 + dense under a bm25 base fuses by its rrf_k too
    assert _hash("bm25 + dense", "bm25", rrf_k=10) != _hash("bm25 + dense", "bm25")
    # a linear fusion under an RRF base reads the base's normalize and weights, not its rrf_k
    linear = "fuse(bm25, dense, blend='linear')"
    assert _hash(linear, normalize="zscore") != _hash(linear)
    assert _hash(linear, w_text=0.9, w_vec=0.1) != _hash(linear)
    assert _hash(linear, rrf_k=10) == _hash(linear)
    own = "fuse(bm25, dense, blend='linear', weights=[0.3, 0.7], normalize='minmax')"
    assert _hash(own, w_text=0.9, w_vec=0.1, normalize="zscore") == _hash(own)


def _fuse_key(text: str, **scoring) -> str:
    """The key of the last stage of ``text`` (a fusion) on the test split."""
    return apply_pipeline(parse_pipeline(text), _prefs(**scoring), KeyContext("duckdb"),
                          "test").key


AT_DEFAULTS = {  # key of the fusion, config hash: the keys as before the change (no shipped spec
    # has one); the config hashes name the default embedder since none of their stages reads
    # one (test_unread_hash_inputs), not the stand-in "e"
    "bm25 >> rm3 >> (bm25 + bm25(b=0.3))": (
        "bd5a7d959f5127ab2472978818c8e5741a78ab54fa9ff257f55d81173bd92f8a",
        "2d2a6899f107a278164a3198de8c6b5338ab167eea688e1c4f84f7b4bf82751c"),
    "bm25 >> rm3 >> fuse(bm25, bm25(b=0.3), blend='linear')": (
        "421f1f525e879168c844d635b75c15df3ca803b1adf61e0aa52c153d94ec839d",
        "4c9365842d2a6e11609964e36ad252983ee32983abd8b86ff7beb341c665e614"),
}


def test_a_fusions_key_holds_only_what_its_blend_reads():
    assert {text: (_fuse_key(text), _hash(text)) for text in AT_DEFAULTS} == AT_DEFAULTS
    rrf = "bm25 >> rm3 >> (bm25 + bm25(b=0.3))"
    assert _fuse_key(rrf, normalize="zscore") == _fuse_key(rrf, missing="list_min") == \
        _fuse_key(rrf)
    assert _fuse_key(rrf, rrf_k=10) != _fuse_key(rrf)
    linear = "bm25 >> rm3 >> fuse(bm25, bm25(b=0.3), blend='linear')"
    assert _fuse_key(linear, rrf_k=10) == _fuse_key(linear)
    assert _fuse_key(linear, normalize="zscore") != _fuse_key(linear)
    assert _fuse_key(linear, missing="list_min") != _fuse_key(linear)
    cfg = FuseConfig(blend="rrf", normalize="zscore", missing="list_min", weights=(1.0, 2.0))
    assert cfg.canonical() == FuseConfig(weights=(1.0, 2.0))  # weights: read by both blends
    assert FuseConfig(blend="linear", rrf_k=10).canonical() == FuseConfig(blend="linear")
    at_default = FuseConfig(blend="linear", normalize="minmax")
    assert at_default.canonical() is at_default  # nothing unread set: itself
