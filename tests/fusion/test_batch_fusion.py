"""Batch fusion (every query of a split at once) gives the same bytes as the HybridScorer
(the reference)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiblox.contracts.retrieval import ScoringConfig
from aiblox.engine.cache import decode_arrays, encode_arrays
from aiblox.fusion import BatchFusion, HybridScorer
from aiblox.hashing import canonical_json
from tests.fusion.lists import ranked

DOCS = [f"d{i}" for i in range(12)]
# scores on a coarse grid so that ties (within and across lists) are common; -0.0 and 0.0
# are equal but must keep their signs
score = st.sampled_from([-1.5, -0.25, -0.0, 0.0, 0.25, 0.5, 1.0, 2.0, 7.5])


lists = st.lists(st.tuples(st.sampled_from(DOCS), score), max_size=10).map(ranked)
configs = st.one_of(
    # RRF weights both 0 are refused (every document would score 0): not a configuration
    st.tuples(st.integers(0, 100), st.sampled_from([0.0, 0.5, 1.0]),
              st.sampled_from([0.0, 1.0, 2.5])).filter(lambda t: t[1] + t[2] > 0).map(
        lambda t: ScoringConfig(blend="rrf", rrf_k=t[0], rrf_w_text=t[1], rrf_w_vec=t[2])),
    st.builds(lambda w, n, m: ScoringConfig(blend="linear", w_text=w, w_vec=1.0 - w,
                                            normalize=n, missing=m),
              st.sampled_from([0.0, 0.05, 0.15, 0.35, 0.5, 0.7, 1.0]),
              st.sampled_from(["minmax", "zscore", "sigmoid", "none"]),
              st.sampled_from(["zero", "list_min"])),
)


def reference(text, vec, cfg, top_k):
    out = {}
    for i, (t, v) in enumerate(zip(text, vec, strict=True)):
        hits = HybridScorer(cfg).fuse(t, v, top_k)
        out[f"q{i}"] = [[h.doc_id, h.score] for h in hits]
    return out


@settings(max_examples=150, deadline=None)
@given(pairs=st.lists(st.tuples(lists, lists), min_size=1, max_size=5), cfg=configs,
       top_k=st.sampled_from([None, 1, 3, 20]))
def test_same_bytes_as_hybrid_scorer(pairs, cfg, top_k):
    text = [[[d, s] for d, s in t] for t, _ in pairs]
    vec = [[[d, s] for d, s in v] for _, v in pairs]
    index = BatchFusion([f"q{i}" for i in range(len(pairs))], text, vec)
    fast = index.fuse(cfg, top_k)  # the compiled per-query sort, decoded
    assert canonical_json(fast) == canonical_json(reference(
        [list(t) for t, _ in pairs], [list(v) for _, v in pairs], cfg, top_k))
    # the compact form round-trips: encode(decode(x)) == x, array for array
    arrays = index.fuse_arrays(cfg, top_k)
    again = index.encode(fast)
    for a, b in zip(arrays, again, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    # the index kept as arrays (a sweep's <signals key>.index file) and read back fuses the
    # same bytes, query and document ids included
    stored = BatchFusion.from_arrays(decode_arrays(encode_arrays(index.to_arrays())))
    assert stored.qids == index.qids and stored.docs.tolist() == index.docs.tolist()
    assert canonical_json(stored.fuse(cfg, top_k)) == canonical_json(fast)
    for a, b in zip(arrays, stored.fuse_arrays(cfg, top_k), strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_an_index_kept_as_arrays_refuses_arrays_that_do_not_fit():
    index = BatchFusion(["q1", "q2"], [[["b", 2.0], ["a", 1.0]], []], [[["c", 0.5]], [["a", 0.1]]])
    arrays = index.to_arrays()
    assert index.docs.tolist() == ["a", "b", "c", "a"]
    assert BatchFusion.from_arrays(arrays).fuse(ScoringConfig(), None) == \
        index.fuse(ScoringConfig(), None)
    for name, bad in (("counts", arrays["counts"][:1]), ("pos_t", arrays["pos_t"] + 10),
                      ("doc_code", arrays["doc_code"] + 3), ("off_v", arrays["off_v"][:-1])):
        with pytest.raises(ValueError, match="do not fit together"):
            BatchFusion.from_arrays({**arrays, name: bad})
    # ids that are not strings are not kept as arrays (built from the signals each time)
    assert BatchFusion(["q1"], [[[7, 1.0]]], [[]]).to_arrays() is None


def test_a_batch_of_no_query_fuses_to_nothing():
    """Its starts were ``[0]`` for no count, and the compiled sort read past the counts (the
    process died: a segmentation fault)."""
    index = BatchFusion([], [], [])
    for cfg in (ScoringConfig(), ScoringConfig(blend="linear", normalize="minmax")):
        fused = index.fuse_arrays(cfg, 10)
        assert [len(a) for a in fused] == [0, 0, 0]
        assert index.fuse(cfg, None) == {}


def test_lists_naming_a_document_twice_or_ids_of_two_types_index_as_the_reference():
    text = [[["b", 3.0], ["a", 2.0], ["b", 1.0], ["c", 0.5]], [[2, 1.0], [1, 0.5]]]
    vec = [[["c", 0.9], ["c", 0.8], ["a", 0.1]], [[1, 0.7]]]
    index = BatchFusion(["q0", "q1"], text, vec)
    assert index.docs.tolist() == ["a", "b", "c", 1, 2]
    assert index.rank_t.tolist() == [2.0, 1.0, 4.0, 2.0, 1.0]  # b's later entry dropped
    assert index.rank_v.tolist() == [3.0, 0.0, 1.0, 1.0, 0.0]
    cfg = ScoringConfig()
    assert canonical_json(index.fuse(cfg, None)) == canonical_json(
        reference(text, vec, cfg, None))


def test_by_hand_rrf_and_linear():
    sf = BatchFusion(["q"], [[["a", 3.0], ["b", 1.0]]], [[["b", 0.9], ["c", 0.1]]])
    rrf = sf.fuse(ScoringConfig(blend="rrf", rrf_k=60), None)["q"]
    assert rrf == [["b", 1 / 62 + 1 / 61], ["a", 1 / 61], ["c", 1 / 62]]
    lin = sf.fuse(ScoringConfig(blend="linear", w_text=0.5, w_vec=0.5, normalize="minmax"),
                  2)["q"]
    # minmax: a 1, b 0 (text); b 1, c 0 (vec); a 0.5, b 0.5 tie -> id order
    assert lin == [["a", 0.5], ["b", 0.5]]


def test_normalisation_is_computed_once_per_normaliser():
    sf = BatchFusion(["q"], [[["a", 3.0]]], [[["b", 0.9]]])
    for w in (0.1, 0.2, 0.3):
        sf.fuse(ScoringConfig(blend="linear", w_text=w, w_vec=1 - w, normalize="zscore"), None)
    assert list(sf._norm) == ["zscore"]


@settings(max_examples=120, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(0, 40), st.integers(0, 400)), min_size=1,
                     max_size=6),
       levels=st.integers(1, 50), top_k=st.sampled_from([-1, 0, 1, 5, 16, 17, 100, 500]),
       seed=st.integers(0, 2**32 - 1))
def test_partial_segment_sort_is_the_stable_lexsort_order(sizes, levels, top_k, seed):
    """Segment sorting, compiled (the partial quicksort below 32 positions, longer than its
    insertion-sort cut-off of 16; the radix sort from 32; few distinct scores so ties are
    everywhere) gives numpy's stable order, cut to top_k."""
    import numpy as np

    from aiblox.fusion import kernels

    rng = np.random.default_rng(seed)
    counts = np.asarray(sizes, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    neg = rng.integers(0, levels, int(counts.sum())).astype(np.float64) / 7.0
    neg[rng.random(neg.size) < 0.05] = -0.0  # -0.0 ties with 0.0
    positions, kept, ordered = kernels.segment_order(-neg, starts, counts, top_k)
    assert ordered.tolist() == (-neg)[positions].tolist()
    expect = []
    for s, n in zip(starts.tolist(), counts.tolist(), strict=True):
        order = s + np.argsort(neg[s:s + n], kind="stable")
        expect.extend(order[:n if top_k < 0 else min(n, top_k)].tolist())
    assert positions.tolist() == expect
    assert kept.tolist() == [n if top_k < 0 else min(n, top_k) for n in sizes]


@settings(max_examples=200, deadline=None)
@given(lists=st.lists(st.lists(score, max_size=8), min_size=1, max_size=6))
def test_compiled_minmax_is_the_normaliser_bit_for_bit(lists):
    import numpy as np

    from aiblox.fusion import kernels
    from aiblox.fusion.normalize import minmax

    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    flat = np.asarray([x for xs in lists for x in xs], dtype=np.float64)
    normed, mins = kernels.minmax_lists(flat, offsets)
    expect = [x for xs in lists for x in minmax(xs)]
    assert normed.tobytes() == np.asarray(expect, dtype=np.float64).tobytes()
    assert mins.tobytes() == np.asarray([min(minmax(xs)) if xs else 0.0 for xs in lists],
                                        dtype=np.float64).tobytes()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(96, 700), spread=st.integers(1, 40),  # segments of 32 or more: radix
       top_k=st.sampled_from([-1, 0, 1, 10, 100, 400]),
       seed=st.integers(0, 2**32 - 1))
def test_radix_sort_orders_scores_equal_to_seven_digits(n, spread, top_k, seed):
    """Long segments (radix sorted) whose scores differ only in their last bits (equal high
    halves of the sort keys: the insertion-sort fix-up), with exact ties, negatives and -0.0:
    numpy's stable order of the negated scores."""
    import numpy as np

    from aiblox.fusion import kernels

    rng = np.random.default_rng(seed)
    base = rng.choice([0.5, -0.25, 3.0, 0.0], n)
    neg = -(base + rng.integers(0, spread, n) * 2.0 ** -50)
    neg[rng.random(n) < 0.05] = -0.0
    counts = np.asarray([n // 3, n - n // 3], dtype=np.int64)
    starts = np.asarray([0, n // 3], dtype=np.int64)
    positions, kept, ordered = kernels.segment_order(-neg, starts, counts, top_k)
    assert ordered.tolist() == (-neg)[positions].tolist()
    expect = []
    for s, c in zip(starts.tolist(), counts.tolist(), strict=True):
        order = s + np.argsort(neg[s:s + c], kind="stable")
        expect.extend(order[:c if top_k < 0 else min(c, top_k)].tolist())
    assert positions.tolist() == expect


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(lists=st.lists(st.lists(st.one_of(finite, st.sampled_from([0.0, -0.0, 1e-300, 0.5])),
                               max_size=12), min_size=1, max_size=6))
def test_compiled_zscore_and_sigmoid_are_the_normalisers_bit_for_bit(lists):
    """CPython's fsum, ``** 2``, sqrt and exp, step for step: the same doubles as the Python
    normalisers (constant lists, empty lists, signed zeros and tiny values included)."""
    import math

    import numpy as np

    from aiblox.fusion import kernels
    from aiblox.fusion.normalize import sigmoid, zscore

    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    flat = np.asarray([x for xs in lists for x in xs], dtype=np.float64)
    for logistic, norm in ((False, zscore), (True, sigmoid)):
        normed, mins = kernels.zscore_lists(flat, offsets, logistic, 2.0)
        expect = [x for xs in lists for x in norm(xs)]
        assert normed.tobytes() == np.asarray(expect, dtype=np.float64).tobytes()
        assert mins.tobytes() == np.asarray([min(norm(xs)) if xs else 0.0 for xs in lists],
                                            dtype=np.float64).tobytes()
    for xs in lists:
        assert kernels.fsum(np.asarray(xs, dtype=np.float64),
                            np.empty(len(xs) + 1)) == math.fsum(xs)


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(lists, lists), min_size=1, max_size=5),
       w=st.sampled_from([0.0, 0.01, 0.37, 0.5, 0.99, 1.0]),
       norm=st.sampled_from(["minmax", "zscore", "sigmoid", "none"]),
       list_min=st.booleans())
def test_linear_blend_over_filled_lists_is_linear_scores_bit_for_bit(pairs, w, norm, list_min):
    from aiblox.fusion import kernels

    index = BatchFusion([f"q{i}" for i in range(len(pairs))],
                        [[[d, s] for d, s in t] for t, _ in pairs],
                        [[[d, s] for d, s in v] for _, v in pairs])
    nt, nv, min_t, min_v = index._normalised(norm)
    want = kernels.linear_scores(nt, nv, min_t, min_v, index.has_t, index.has_v,
                                 index.starts, index.counts, w, 1.0 - w, list_min)
    got = kernels.linear_blend(*index._filled(norm, list_min), w, 1.0 - w)
    assert got.tobytes() == want.tobytes()


def test_fusion_settings_that_would_tie_every_document_are_refused():
    """At ``rrf_k`` 10**23 every ``1 / (k + rank)`` was one float: all documents tied and the
    sample's nDCG@10 fell from 0.81 to 0.30 without a word; weights of 1e308 fused to inf (then
    a JSON error), zscore or raw scores times 1e307 past a TREC file's 32-bit range."""
    from pydantic import ValidationError

    from aiblox.contracts.retrieval import MAX_DEPTH
    from aiblox.data.trec import trec_scores
    from aiblox.engine.builtin import FuseConfig
    from aiblox.fusion.linear import linear

    for model in (ScoringConfig, FuseConfig):
        with pytest.raises(ValidationError, match="less than or equal to 2147483647"):
            model(rrf_k=10**23)
    # at the bound RRF still orders by the weighted ranks (a Borda count as k grows)
    text = [(f"d{i}", 10.0 - i) for i in range(8)]
    vec = [(f"d{i}", float(i)) for i in (3, 0, 1, 2, 7, 6, 5, 4)]
    sf = BatchFusion(["q"], [text], [vec])
    top = sf.fuse(ScoringConfig(rrf_k=MAX_DEPTH), None)["q"]
    rank_sum = {d: text.index(next(h for h in text if h[0] == d)) + [v[0] for v in vec].index(d)
                for d, _ in text}
    assert [d for d, _ in top] == sorted(rank_sum, key=lambda d: (rank_sum[d], d))
    assert len({s for _, s in top}) == len(set(rank_sum.values()))

    with pytest.raises(ValidationError, match=r"w_text 1e\+308 \+ w_vec 1e\+308 sum past"):
        ScoringConfig(blend="linear", w_text=1e308, w_vec=1e308)
    with pytest.raises(ValidationError, match="rrf_w_text 1e\\+308 \\+ rrf_w_vec"):
        ScoringConfig(rrf_w_text=1e308, rrf_w_vec=1e308)
    huge = ScoringConfig(blend="linear", w_text=1e39, w_vec=1.0, normalize="zscore")
    for fuse in (lambda: sf.fuse(huge, None), lambda: sf.blend_inputs(huge),
                 lambda: linear([text, vec], [1e39, 1.0], "zscore")):
        with pytest.raises(ValueError, match=r"zscore-normalised scores reach .* past the "
                                             r"largest run score 3.4e\+38"):
            fuse()
    assert sf.fuse(huge.model_copy(update={"w_text": 1e30}), 2)["q"][0][0] == "d0"
    with pytest.raises(ValueError, match=r"score 1e\+39 at rank 2 is past the largest run "):
        trec_scores([5.0, 1e39])
    assert trec_scores([3.0e38, 1.0]) == [3.0e38, 1.0]


@settings(max_examples=150, deadline=None)
@given(pairs=st.lists(st.tuples(lists, lists), max_size=5),
       top_k=st.sampled_from([None, 1, 3, 20]), mode=st.sampled_from(["bm25", "dense"]))
def test_one_list_passed_through_is_the_retriever_s_route(pairs, top_k, mode):
    """The fusion stage of a bm25 or dense point takes its compact run from the index
    (``single_arrays``), where it fused the signals through HybridRetriever.fuse and encoded
    the result: the same arrays, repeats in a list (its first entry kept) included."""
    from aiblox.contracts.retrieval import RetrievalPrefs
    from aiblox.engine.compute import fused_arrays, reference_fused_arrays

    qids = [f"q{i}" for i in range(len(pairs))]
    sig = {"qids": qids, "text": [[[d, s] for d, s in t] for t, _ in pairs],
           "vec": [[[d, s] for d, s in v] for _, v in pairs]}
    index = BatchFusion.from_signals(sig)
    prefs = RetrievalPrefs(query_text="", mode=mode, top_k_items=top_k or 100)
    got, want = fused_arrays(prefs, index), reference_fused_arrays(prefs, index, sig)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
