"""RM3 and Bo1 on a collection small enough to compute by hand: five documents in a real DuckDB
store, no stemming, every expected weight worked out below from the papers' formulas (RM3:
Lavrenko and Croft's relevance model as Anserini's Rm3Reranker estimates it, interpolated
with the query, Abdul-Jaleel et al. 2004; Bo1: Amati 2003, as Terrier normalises it). Then
the reference outputs the two toolkits' own tests pin: Anserini's BM25+RM3 end-to-end run and
PyTerrier's Bo1 expansion of a vaswani query."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from aiblox.contracts import FtsConfig, ItemRecord
from aiblox.engine.data import Queries, Run
from aiblox.engine.plan import StageInputs
from aiblox.engine.retrieval import StageContext
from aiblox.engine.stages.bo1 import Bo1Config, bo1
from aiblox.engine.stages.rm3 import Rm3Config, rm3

DOCS = {
    "d1": "kiwi kiwi fig lime",
    "d2": "kiwi plum plum",
    "d3": "fig lime pear kiwi",
    "d4": "mango supercalifragilisticexpialidocious café",
    "d5": "pear pear plum kiwi fig",
}
# term counts:   d1 kiwi 2 fig 1 lime 1 | d2 kiwi 1 plum 2 | d3 fig lime pear kiwi 1 each
#                d4 mango, supercalifragilisticexpialidocious (34 characters), café 1 each
#                d5 pear 2, plum 1, kiwi 1, fig 1
# collection frequency F (document frequency): kiwi 5 (4), fig 3 (3), lime 2 (2), plum 3 (2),
# pear 3 (2), mango 1 (1), supercal... 1 (1), café 1 (1); N = 5 documents
FTS = FtsConfig(stemmer=None)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    from aiblox.data import load_dataset
    from aiblox.engine.workspace import open_workspace

    root = tmp_path_factory.mktemp("tiny")
    folder = root / "tiny"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in DOCS.items()))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "kiwi"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    ws = open_workspace(load_dataset(folder), db=str(root / "tiny.duckdb"), embedder="hashing",
                        with_vectors=False, progress=False)
    yield StageContext(ws)
    ws.store.close()


def expand(kind, cfg, ctx, query, ranked):
    queries = Queries.of([("q1", query)])
    run = Run.from_lists(["q1"], [ranked])
    fn = rm3 if kind == "rm3" else bo1
    out = fn(cfg, StageInputs(queries, queries, run), ctx)
    assert out.qids == ("q1",) and out.texts == (query,)
    return dict(out.terms[0])


def close(got, expected):
    assert sorted(got) == sorted(expected), (got, expected)
    for t, w in expected.items():
        assert got[t] == pytest.approx(float(w), rel=1e-12, abs=1e-15), t


def test_the_term_statistics_are_the_counts(ctx):
    stats = ctx.indexes.term_stats(FTS)
    assert stats.doc_terms("d1") == {"kiwi": 2.0, "fig": 1.0, "lime": 1.0}
    assert stats.doc_terms("d4") == {"mango": 1.0, "supercalifragilisticexpialidocious": 1.0,
                                     "café": 1.0}
    cf = dict(zip(stats.terms, stats.cf.tolist(), strict=True))
    df = dict(zip(stats.terms, stats.df.tolist(), strict=True))
    assert cf == {"café": 1, "fig": 3, "kiwi": 5, "lime": 2, "mango": 1, "pear": 3, "plum": 3,
                  "supercalifragilisticexpialidocious": 1}
    assert df == {"café": 1, "fig": 3, "kiwi": 4, "lime": 2, "mango": 1, "pear": 2, "plum": 2,
                  "supercalifragilisticexpialidocious": 1}
    assert stats.doc_lens.tolist() == [4, 3, 4, 3, 5] and stats.total_terms == 19
    # the BM25 index of the same analysis numbers the same vocabulary the same way
    assert stats.vocab == ctx.indexes.lexical(FTS).vocab


def test_rm3_by_hand(ctx):
    """Query "kiwi" (q: kiwi 1); feedback d1 (score 3) and d2 (score 1): P(D|Q) 3/4, 1/4.
    fb_terms 3: d1 keeps kiwi 2, fig 1, lime 1 (L1 4): 1/2, 1/4, 1/4; d2 plum 2, kiwi 1 (L1 3):
    2/3, 1/3. RM1: kiwi 1/2*3/4 + 1/3*1/4 = 11/24; fig = lime = 1/4*3/4 = 3/16; plum 2/3*1/4 =
    1/6. The 3 largest: kiwi, then fig and lime (3/16 > 1/6), summing to 5/6: kiwi 11/20, fig
    9/40, lime 9/40. RM3 at 0.5: kiwi 1/2 * 1 + 1/2 * 11/20 = 31/40, fig and lime 9/80."""
    cfg = Rm3Config(fb_docs=2, fb_terms=3, orig_weight=0.5, max_df=1.0, fts=FTS)
    got = expand("rm3", cfg, ctx, "kiwi", [("d1", 3.0), ("d2", 1.0), ("d5", 0.5)])
    h = Fraction(1, 2)
    close(got, {"kiwi": h * 1 + h * Fraction(11, 20), "fig": h * Fraction(9, 40),
                "lime": h * Fraction(9, 40)})


def test_rm3_prunes_each_document_then_the_model_ties_by_term(ctx):
    """fb_terms 2: d1 keeps kiwi 2 and fig 1 (fig before lime: equal counts, term order), L1
    3; d2 plum 2, kiwi 1, L1 3. RM1: kiwi 2/3*3/4 + 1/3*1/4 = 7/12, fig 1/3*3/4 = 1/4, plum
    2/3*1/4 = 1/6: the 2 largest kiwi and fig sum to 5/6: kiwi 7/10, fig 3/10. Query "kiwi
    fig" (1/2 each), orig_weight 0.3: kiwi 0.3*1/2 + 0.7*7/10, fig 0.3*1/2 + 0.7*3/10."""
    cfg = Rm3Config(fb_docs=2, fb_terms=2, orig_weight=0.3, max_df=1.0, fts=FTS)
    got = expand("rm3", cfg, ctx, "kiwi fig", [("d1", 3.0), ("d2", 1.0)])
    a, b = Fraction(3, 10), Fraction(7, 10)
    close(got, {"kiwi": a / 2 + b * Fraction(7, 10), "fig": a / 2 + b * Fraction(3, 10)})


def test_rm3_leaves_out_terms_of_more_than_max_df_of_the_documents(ctx):
    """max_df 0.5: kiwi (df 4/5) and fig (3/5) are no feedback terms. d1 keeps lime (1), d2
    plum (2): each L1-normalised to 1; RM1 lime 3/4, plum 1/4. The query keeps kiwi:
    kiwi 1/2, lime 3/8, plum 1/8."""
    cfg = Rm3Config(fb_docs=2, fb_terms=3, orig_weight=0.5, max_df=0.5, fts=FTS)
    got = expand("rm3", cfg, ctx, "kiwi", [("d1", 3.0), ("d2", 1.0)])
    close(got, {"kiwi": Fraction(1, 2), "lime": Fraction(3, 8), "plum": Fraction(1, 8)})


def test_rm3_term_filter_and_non_positive_scores(ctx):
    """d4's 34-character term is never a feedback term (Anserini keeps 2 to 20 characters);
    café only without the English filter. A document scoring 0 adds nothing."""
    cfg = Rm3Config(fb_docs=2, fb_terms=10, orig_weight=0.5, max_df=1.0, fts=FTS)
    got = expand("rm3", cfg, ctx, "mango", [("d4", 2.0), ("d1", 0.0)])
    close(got, {"mango": 1})
    cfg = cfg.model_copy(update={"english_terms": False})
    got = expand("rm3", cfg, ctx, "mango", [("d4", 2.0), ("d1", 0.0)])
    close(got, {"mango": Fraction(3, 4), "café": Fraction(1, 4)})
    # orig_weight 1: the query back; 0: the relevance model alone
    assert expand("rm3", cfg.model_copy(update={"orig_weight": 1.0}), ctx, "mango",
                  [("d4", 2.0)]) == {"mango": 1.0}
    close(expand("rm3", cfg.model_copy(update={"orig_weight": 0.0}), ctx, "mango",
                 [("d4", 2.0)]), {"mango": Fraction(1, 2), "café": Fraction(1, 2)})


def bo1_w(tf_x, F, n=5):
    """Amati's Bo1: tf_x log2((1 + f) / f) + log2(1 + f), f = F / N."""
    f = F / n
    return tf_x * math.log2((1 + f) / f) + math.log2(1 + f)


def test_bo1_by_hand(ctx):
    """Query "kiwi" (qtw 1); feedback d1, d2, d5. tf_x (feedback documents holding it): kiwi
    2+1+1 = 4 (3), fig 1+1 = 2 (2), lime 1 (1), plum 2+1 = 3 (2), pear 2 (1). With 3 >= 2
    feedback documents, lime and pear (in one of them) weigh 0. w: kiwi Bo1(4, F 5) = 4 log2(2)
    + log2(2) = 5, plum Bo1(3, F 3), fig Bo1(2, F 3). The largest is kiwi's; parameter-free,
    the normaliser is Bo1 at kiwi's tf_x as its own frequency: Bo1(4, F 4). fb_terms 2: kiwi
    and plum are added."""
    cfg = Bo1Config(fb_docs=3, fb_terms=2, fts=FTS)
    got = expand("bo1", cfg, ctx, "kiwi", [("d1", 3.0), ("d2", 2.0), ("d5", 1.0)])
    norm = bo1_w(4, 4)
    assert bo1_w(4, 5) == 5.0 and bo1_w(4, 5) > bo1_w(3, 3) > bo1_w(2, 3)
    close(got, {"kiwi": 1 + 5.0 / norm, "plum": bo1_w(3, 3) / norm})
    # fb_terms 3: fig too; fb_terms 10: no more (the rest weigh 0)
    got = expand("bo1", cfg.model_copy(update={"fb_terms": 10}), ctx, "kiwi",
                 [("d1", 3.0), ("d2", 2.0), ("d5", 1.0)])
    close(got, {"kiwi": 1 + 5.0 / norm, "plum": bo1_w(3, 3) / norm,
                "fig": bo1_w(2, 3) / norm})


def test_bo1_with_beta_and_with_one_feedback_document(ctx):
    """beta 0.4: weights over the largest (kiwi's 5), times 0.4. One feedback document (d1;
    fewer than min_docs, so no term is zeroed): kiwi Bo1(2, F 5) = 3, lime Bo1(1, F 2), fig
    Bo1(1, F 3); normaliser Bo1(2, F 2): kiwi and lime (the larger of the two) added."""
    cfg = Bo1Config(fb_docs=3, fb_terms=2, beta=0.4, fts=FTS)
    got = expand("bo1", cfg, ctx, "kiwi", [("d1", 3.0), ("d2", 2.0), ("d5", 1.0)])
    close(got, {"kiwi": 1.4, "plum": 0.4 * bo1_w(3, 3) / 5.0})
    cfg = Bo1Config(fb_docs=1, fb_terms=2, fts=FTS)
    got = expand("bo1", cfg, ctx, "kiwi", [("d1", 3.0), ("d2", 2.0)])
    assert bo1_w(2, 5) == 3.0 and bo1_w(1, 2) > bo1_w(1, 3)
    norm = bo1_w(2, 2)
    close(got, {"kiwi": 1 + 3.0 / norm, "lime": bo1_w(1, 2) / norm})


def test_the_expanded_query_is_searched_as_weighted_bm25_terms(ctx):
    """``bm25`` after feedback scores sum_t w_t bm25(t, d), in float32."""
    import numpy as np

    from aiblox.engine.retrieval import retrieve

    cfg = Rm3Config(fb_docs=2, fb_terms=3, orig_weight=0.5, max_df=1.0, fts=FTS)
    queries = Queries.of([("q1", "kiwi")])
    expanded = rm3(cfg, StageInputs(queries, queries,
                                    Run.from_lists(["q1"], [[("d1", 3.0), ("d2", 1.0)]])), ctx)
    run = retrieve("bm25", FTS, expanded, ctx)
    index = ctx.indexes.lexical(FTS)
    weights = dict(expanded.terms[0])
    expect = np.zeros(index.n_docs, dtype=np.float32)
    for t, w in weights.items():  # the terms in sorted order, as the queries carry them
        col = index.vocab[t]
        for j in range(int(index.indptr[col]), int(index.indptr[col + 1])):
            expect[index.indices[j]] += np.float32(w) * index.data[j]
    ranked = sorted((i for i in range(index.n_docs) if expect[i] != 0),
                    key=lambda i: (-expect[i], index.ids[i]))
    assert list(run.docs[0]) == [index.ids[i] for i in ranked]
    assert list(run.scores[0]) == [float(expect[i]) for i in ranked]
    assert "d4" not in run.docs[0]  # holds no expanded term


def test_rm3_reproduces_anserinis_end_to_end_reference_run():
    """Anserini's TrecEndToEndTest (castorini/anserini ``src/test/java/io/anserini/
    integration/TrecEndToEndTest.java``): three documents, topic "simple text", BM25 k1 0.9,
    b 0.4 (Porter stemmer) and ``-rm3`` at its defaults. Every term of the three documents is
    held by more than 10% of them, so no feedback term passes Anserini's df filter: the
    expanded query is the original at half weight, and the reference scores are a quarter of
    BM25's (printed to 4 decimals there)."""
    from aiblox.engine.stages.rm3 import rm3_expand, term_filter
    from aiblox.indexes import BM25Index
    from aiblox.indexes.term_stats import TermStats

    docs = [ItemRecord(id="DOC222", title="", text="HEAD simple enough text text text"),
            ItemRecord(id="TREC_DOC_1", title="", text="This is head very simple text"),
            ItemRecord(id="WSJ_1", title="", text="head text 01/30/03 content")]
    fts = FtsConfig(k1=0.9, b=0.4, stemmer="porter")
    index, stats = BM25Index.build([docs], fts), TermStats.build([docs], fts)
    [hits] = index.search(["simple text"], 10)
    assert [(d, round(s, 4)) for d, s in hits] == [("DOC222", 0.3432), ("TREC_DOC_1", 0.3334),
                                                   ("WSJ_1", 0.0687)]
    cfg = Rm3Config(fts=fts)
    terms = rm3_expand(stats, {"simpl": 1.0, "text": 1.0},
                       [(stats.position[d], s) for d, s in hits], cfg,
                       term_filter(stats, cfg.max_df, cfg.english_terms))
    assert terms == {"simpl": 0.25, "text": 0.25}
    [again] = index.search_terms([terms], 10)
    assert [(d, round(s, 4)) for d, s in again] == [("DOC222", 0.0858), ("TREC_DOC_1", 0.0834),
                                                    ("WSJ_1", 0.0172)]


def test_bo1_reproduces_pyterriers_expansion_on_vaswani():
    """PyTerrier's ``test_bo1_qe_expansion_for_query_compact_on_bm25``
    (terrier-org/pyterrier ``tests/test_rewrite.py``): vaswani, BM25, query "compact", Bo1 at
    its defaults gives ``compact^1.822309726 design^0.287992096`` (the other eight top terms
    weigh 0: each is in one of the three feedback documents). Terrier's analysis (Porter, its
    own stop words) and ours (Snowball) agree on these terms and on the top three documents."""
    from aiblox.data import load_dataset
    from aiblox.engine.stages.bo1 import bo1_expand
    from aiblox.indexes import BM25Index
    from aiblox.indexes.term_stats import TermStats
    from tests.conftest import shared_dataset

    ds = load_dataset(shared_dataset("vaswani"), splits=[])
    items = sorted(ds.corpus.values(), key=lambda it: it.id)
    batches = [items[i:i + 4000] for i in range(0, len(items), 4000)]
    index, stats = BM25Index.build(batches, FtsConfig()), TermStats.build(batches, FtsConfig())
    [hits] = index.search(["compact"], 3)
    terms = bo1_expand(stats, {"compact": 1.0}, [stats.position[d] for d, _ in hits],
                       Bo1Config())
    assert {t: f"{w:.9f}" for t, w in terms.items()} == {"compact": "1.822309726",
                                                        "design": "0.287992096"}
