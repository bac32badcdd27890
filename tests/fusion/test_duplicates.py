"""A document listed twice in one input list is fused the same way by every route: its first
entry is kept, its rank (its position in the list as given) and its score, and a later entry is
dropped before anything is normalised or fused (:func:`aiblox.fusion.types.first_occurrences`;
the retriever seed's one ``rank_text`` and one ``rank_vec`` per document).

Before, RRF ranked such a document at its first position while the linear blend, the
HybridScorer's reported ranks and scores and :class:`BatchFusion` (the sweep's route) took its
last entry, and the linear blend normalised over both entries: the same lists gave a sweep and
``aiblox search`` different runs. aiblox's retrievers never list a document twice; lists given
from outside can (a user's pipeline stage, :class:`~aiblox.retrieval.SignalRuns` built by hand).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.contracts import ScoringConfig
from aiblox.fusion import BatchFusion, FusedHit, HybridScorer, linear, rrf
from aiblox.fusion.types import first_occurrences
from aiblox.hashing import canonical_json
from aiblox.retrieval import HybridRetriever, SignalRuns

# ``a`` twice in the text list (its later entry scored lower), ``c`` twice in the vector list
# (its later entry the list's lowest score, which a min-max over both entries would take as 0)
TEXT = [("a", 3.0), ("b", 2.0), ("a", 1.0), ("c", 0.5)]
VEC = [("c", 0.9), ("b", 0.6), ("d", 0.3), ("c", 0.1)]
# each document's first entry: (rank as given, score)
TEXT_FIRST = {"a": (1, 3.0), "b": (2, 2.0), "c": (4, 0.5)}
VEC_FIRST = {"c": (1, 0.9), "b": (2, 0.6), "d": (3, 0.3)}

NORMALISERS = ("minmax", "zscore", "sigmoid", "none")
CONFIGS = [ScoringConfig(blend="rrf", rrf_k=60), ScoringConfig(blend="rrf", rrf_k=0,
                                                                rrf_w_text=2.0, rrf_w_vec=0.5)]
CONFIGS += [ScoringConfig(blend="linear", w_text=0.5, w_vec=0.5, normalize=n, missing=m)
            for n in NORMALISERS for m in ("zero", "list_min")]


def direct(text: list[Any], vec: list[Any], cfg: ScoringConfig) -> list[tuple[str, float]]:
    """The fused run by the plain functions (as the pipeline's ``fuse`` stage calls them)."""
    if cfg.blend == "rrf":
        return rrf([text, vec], k=cfg.rrf_k, weights=[cfg.rrf_w_text, cfg.rrf_w_vec])
    return linear([text, vec], weights=[cfg.w_text, cfg.w_vec], normalize=cfg.normalize,
                  missing=cfg.missing)


def every_route(text: list[Any], vec: list[Any], cfg: ScoringConfig,
                top_k: int | None = None) -> dict[str, list[list[Any]]]:
    """``{route: [[doc, score], ...]}`` of one query by each fusion route."""
    hits = HybridScorer(cfg).fuse(text, vec, top_k)
    prefs_hits = HybridRetriever.fuse([_prefs(cfg, top_k)], SignalRuns(text=[text], vec=[vec]))
    index = BatchFusion(["q"], [[list(h) for h in text]], [[list(h) for h in vec]])
    plain = direct(text, vec, cfg)
    return {
        "function": [[d, s] for d, s in (plain[:top_k] if top_k else plain)],
        "HybridScorer": [[h.doc_id, h.score] for h in hits],
        "HybridRetriever.fuse": [[h.doc_id, h.score] for h in prefs_hits[0]],
        "BatchFusion.fuse": index.fuse(cfg, top_k)["q"],
        "BatchFusion.fuse_arrays": index.decode(index.fuse_arrays(cfg, top_k))["q"],
    }


def _prefs(cfg: ScoringConfig, top_k: int | None) -> Any:
    from aiblox.contracts import RetrievalPrefs

    return RetrievalPrefs(query_text="q", mode="hybrid", scoring=cfg,
                          top_k_items=top_k or 1000)


def assert_one_run(text: list[Any], vec: list[Any], cfg: ScoringConfig,
                   top_k: int | None = None) -> list[list[Any]]:
    routes = every_route(text, vec, cfg, top_k)
    want = canonical_json(routes["function"])
    assert {r: canonical_json(run) == want for r, run in routes.items()} == dict.fromkeys(
        routes, True), (cfg, routes)
    return routes["function"]


def _id(c: ScoringConfig) -> str:
    return f"rrf-k{c.rrf_k}" if c.blend == "rrf" else f"linear-{c.normalize}-{c.missing}"


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_every_route_keeps_the_first_entry(cfg):
    run = assert_one_run(TEXT, VEC, cfg)
    # and that is the fusion of the lists without the later entries, at the ranks given
    if cfg.blend == "linear":  # ranks play no part: the lists with the repeats struck out
        text = [(d, s) for d, (_r, s) in TEXT_FIRST.items()]
        vec = [(d, s) for d, (_r, s) in VEC_FIRST.items()]
        assert run == [[d, s] for d, s in direct(text, vec, cfg)]
    hits = HybridScorer(cfg).fuse(TEXT, VEC)
    for h in hits:  # the ranks and raw scores reported are the first entry's
        assert (h.rank_text, h.score_text) == TEXT_FIRST.get(h.doc_id, (None, None))
        assert (h.rank_vec, h.score_vec) == VEC_FIRST.get(h.doc_id, (None, None))


def test_hand_worked_values():
    """RRF k 60: ``c`` is 4th in the text list (its position as given, after ``a``'s repeat)
    and 1st in the vector list; min-max over each list's first entries: text a 1, b 0.6, c 0
    (scores 3, 2, 0.5), vector c 1, b 0.5, d 0 (0.9, 0.6, 0.3; the repeat's 0.1 is not the
    list's minimum)."""
    fused = dict(assert_one_run(TEXT, VEC, ScoringConfig(blend="rrf", rrf_k=60)))
    assert fused == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 1 / 62, "c": 1 / 64 + 1 / 61,
                                   "d": 1 / 63})
    cfg = ScoringConfig(blend="linear", w_text=0.5, w_vec=0.5, normalize="minmax")
    run = assert_one_run(TEXT, VEC, cfg)
    assert [d for d, _ in run] == ["b", "a", "c", "d"]  # a and c tie at 0.5: by id
    assert dict(run) == pytest.approx({"b": 0.5 * 0.6 + 0.5 * 0.5, "a": 0.5, "c": 0.5,
                                       "d": 0.0})


def test_one_list_passed_through_keeps_the_first_entry():
    """``bm25`` and ``dense`` modes pass one list through: a repeat is dropped there too, the
    others at their ranks as given, ``top_k`` counting documents."""
    for signal in ("text", "vec"):
        hits = HybridScorer.single(TEXT, signal, top_k=3)
        rank = "rank_text" if signal == "text" else "rank_vec"
        assert [(h.doc_id, h.score, getattr(h, rank)) for h in hits] == [
            ("a", 3.0, 1), ("b", 2.0, 2), ("c", 0.5, 4)]
        assert all(isinstance(h, FusedHit) for h in hits)


def test_first_occurrences():
    assert first_occurrences([("x", 1.0), ("x", 0.5), ("y", 0.4)]) == ([("x", 1.0), ("y", 0.4)],
                                                                       [1, 3])
    run = [("x", 1.0), ("y", 0.4)]
    hits, ranks = first_occurrences(run)
    assert hits is run and list(ranks) == [1, 2]  # no repeat: the list itself
    assert first_occurrences([]) == ([], range(1, 1))


DOCS = ["d0", "d1", "d2", "d3", "d4"]
score = st.sampled_from([-1.0, 0.0, 0.25, 0.5, 1.0, 2.0])
# lists in any order, documents repeated: what a list from outside may hold
raw_lists = st.lists(st.tuples(st.sampled_from(DOCS), score), max_size=8)
configs = st.sampled_from(CONFIGS)


@settings(max_examples=200, deadline=None)
@given(text=raw_lists, vec=raw_lists, cfg=configs, top_k=st.sampled_from([None, 1, 3]))
def test_random_lists_with_repeats_fuse_alike(text, vec, cfg, top_k):
    run = assert_one_run(text, vec, cfg, top_k)
    t_first = {d: (r, s) for r, (d, s) in reversed(list(enumerate(text, start=1)))}
    v_first = {d: (r, s) for r, (d, s) in reversed(list(enumerate(vec, start=1)))}
    if cfg.blend == "linear":
        want = direct(list({d: s for d, (_r, s) in sorted(t_first.items(),
                                                           key=lambda kv: kv[1][0])}.items()),
                      list({d: s for d, (_r, s) in sorted(v_first.items(),
                                                          key=lambda kv: kv[1][0])}.items()),
                      cfg)
    else:
        fused: dict[str, float] = {}
        for first, w in ((t_first, cfg.rrf_w_text), (v_first, cfg.rrf_w_vec)):
            for d, (r, _s) in sorted(first.items(), key=lambda kv: kv[1][0]):
                fused[d] = fused.get(d, 0.0) + w / (cfg.rrf_k + r)
        want = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
    assert canonical_json(run) == canonical_json([[d, s] for d, s in want][:top_k])
    for h in HybridScorer(cfg).fuse(text, vec, top_k):
        assert (h.rank_text, h.score_text) == t_first.get(h.doc_id, (None, None))
        assert (h.rank_vec, h.score_vec) == v_first.get(h.doc_id, (None, None))


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_the_pipeline_fuse_stage_keeps_the_first_entry(cfg):
    """The ``+`` operator's stage (:func:`aiblox.engine.plan.fuse_runs`) fuses runs that a
    researcher's own stage may give with a repeat: the HybridScorer's run (``fuse`` version 2;
    the linear blend took the last entry before)."""
    from aiblox.engine.builtin import FuseConfig
    from aiblox.engine.data import Run
    from aiblox.engine.plan import fuse_runs

    fcfg = FuseConfig(blend=cfg.blend, rrf_k=cfg.rrf_k, normalize=cfg.normalize,
                      missing=cfg.missing,
                      weights=(cfg.rrf_w_text, cfg.rrf_w_vec) if cfg.blend == "rrf"
                      else (cfg.w_text, cfg.w_vec))
    fused = fuse_runs([Run.from_lists(["q"], [TEXT]), Run.from_lists(["q"], [VEC])], fcfg)
    want = [[h.doc_id, h.score] for h in HybridScorer(cfg).fuse(TEXT, VEC)]
    assert canonical_json([[d, s] for d, s in fused.as_dict()["q"]]) == canonical_json(want)
