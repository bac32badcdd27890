"""The BM25 index is bm25s: the same tokens, the same float32 scores bit for bit, the same
ranked lists (ties by item id), for every variant; and it reaches the published reference runs
of the shared collections."""

from __future__ import annotations

import re

import numpy as np
import pytest

from aiblox.contracts import FtsConfig, ItemRecord
from aiblox.data import load_dataset
from aiblox.indexes import BM25Index
from aiblox.text.analysis import Analyzer
from tests.conftest import SAMPLE, shared_dataset

bm25s = pytest.importorskip("bm25s")
Stemmer = pytest.importorskip("Stemmer")


def _bm25s(texts, cfg: FtsConfig):
    stemmer = Stemmer.Stemmer(cfg.stemmer) if cfg.stemmer else None
    stop = "en" if cfg.stopwords == "en" else []
    tok = bm25s.tokenize(texts, stopwords=stop, stemmer=stemmer, show_progress=False,
                         lower=cfg.lower)
    ref = bm25s.BM25(k1=cfg.k1, b=cfg.b, method=cfg.method, delta=cfg.delta)
    ref.index(tok, show_progress=False)
    return ref


def _batches(items, n=7):
    items = sorted(items, key=lambda it: it.id)
    return (items[i:i + n] for i in range(0, len(items), n))


@pytest.fixture(scope="module")
def sample_items():
    return list(load_dataset(SAMPLE, splits=["test"]).corpus.values())


def test_tokens_equal_bm25s(sample_items):
    texts = [f"{it.title} {it.text}".strip() for it in sample_items]
    ours = Analyzer().terms_many(texts)
    tok = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"),
                         return_ids=False, show_progress=False)
    assert ours == tok


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_scores_equal_bm25s_bit_for_bit(sample_items, method):
    cfg = FtsConfig(method=method, k1=1.5, b=0.6, delta=0.7)
    items = sorted(sample_items, key=lambda it: it.id)
    index = BM25Index.build(_batches(items), cfg)
    ref = _bm25s([f"{it.title} {it.text}".strip() for it in items], cfg)
    for query in ("BM25 term frequency saturation saturation", "dense vectors and embeddings",
                  "zzz unknown words only", "fusion of ranked lists"):
        ours = index.scores(query)
        q_tok = bm25s.tokenize([query], stopwords="en", stemmer=Stemmer.Stemmer("english"),
                               return_ids=False, show_progress=False)[0]
        known = [t for t in q_tok if t in ref.vocab_dict]
        theirs = ref.get_scores(known) if known else np.zeros(len(items), np.float32)
        assert ours.dtype == np.float32 and ours.tobytes() == theirs.tobytes(), (method, query)


def test_ranked_lists_are_the_top_scores_ties_by_id():
    docs = [ItemRecord(id=f"d{i:02d}", title="", text=t) for i, t in enumerate(
        ["apple banana", "banana apple", "apple", "banana", "cherry", "apple apple banana"])]
    index = BM25Index.build([docs], FtsConfig())
    [hits] = index.search(["apple banana"], k=10)
    scores = index.scores("apple banana")
    expect = sorted((i for i in range(len(docs)) if scores[i] > 0),
                    key=lambda i: (-scores[i], docs[i].id))
    assert [h[0] for h in hits] == [docs[i].id for i in expect]
    assert [h[1] for h in hits] == [float(scores[i]) for i in expect]
    tied = [h[0] for h in hits if h[1] == dict(hits)["d00"]]
    assert tied == ["d00", "d01"]  # equal scores: item id ascending
    [top2] = index.search(["apple banana"], k=2)
    assert top2 == hits[:2] and top2[1][0] == "d00"  # the cut-off keeps the lower id
    assert "d04" not in {h[0] for h in hits}  # no query term: not returned
    mask = np.array([i != 0 for i in range(len(docs))])
    [filtered] = index.search(["apple banana"], k=2, allowed=mask)
    assert [h[0] for h in filtered] == [h[0] for h in hits if h[0] != "d00"][:2]


@pytest.mark.parametrize("method", ["lucene", "robertson", "bm25+"])
def test_search_equals_the_full_sort_on_a_real_collection(method):
    """Both selection passes (common terms: a scan of every score; rare terms: the postings)
    return what a full sort of every matching document's score gives."""
    ds = load_dataset(shared_dataset("cisi"), splits=["test"])
    index = BM25Index.build(_batches(ds.corpus.values(), 500), FtsConfig(method=method))
    queries = [ds.queries[q] for q in sorted(ds.qrels["test"])][:30] + ["zebra", "retrieval"]
    hits = index.search(queries, k=50)
    base = index.nonoccurrence
    for q, got in zip(queries, hits, strict=True):
        s = index.scores(q)
        flat, _ = index.query_terms([q])
        extra = base[flat].sum() if base is not None else np.float32(0)
        matched = (s - extra) != 0 if base is not None else s != 0
        order = [i for i in np.lexsort((np.arange(len(s)), -s)) if matched[i]][:50]
        assert got == [(index.ids[i], float(s[i])) for i in order], q


@pytest.mark.parametrize("method", ["lucene", "robertson", "bm25+"])
def test_one_query_equals_the_compiled_kernel_bit_for_bit(method):
    """One query is scored in numpy (no numba to load: a search command), a batch by the
    compiled kernel: the same documents, order and float32 scores, bit for bit, with
    repeated terms, a filter, a query of no known term and ``k`` beyond the matches."""
    ds = load_dataset(shared_dataset("cisi"), splits=["test"])
    index = BM25Index.build(_batches(ds.corpus.values(), 500), FtsConfig(method=method))
    queries = [ds.queries[q] for q in sorted(ds.qrels["test"])][:25] + [
        "retrieval retrieval of information", "zebra", "qqqq", "the"]
    allowed = np.arange(index.n_docs) % 3 != 0
    for k, mask in ((10, None), (1000, None), (20, allowed)):
        batch = index.search(queries, k=k, allowed=mask)  # the kernel
        for q, want in zip(queries, batch, strict=True):
            got = index.search([q], k=k, allowed=mask)[0]  # numpy
            assert got == want, (q, k)
            assert [np.float32(s).tobytes() for _, s in got] == \
                [np.float32(s).tobytes() for _, s in want]
    assert index.search(["qqqq"], k=5) == [[]]


def test_index_bytes_do_not_depend_on_hash_order(tmp_path):
    import subprocess
    import sys

    code = ("import sys, hashlib; from aiblox.data import load_dataset;"
            "from aiblox.contracts import FtsConfig; from aiblox.indexes import BM25Index;"
            "ds = load_dataset(sys.argv[1], splits=[]);"
            "ix = BM25Index.build([sorted(ds.corpus.values(), key=lambda i: i.id)], FtsConfig());"
            "from pathlib import Path; ix.save(Path(sys.argv[2]))")
    digests = []
    for seed, name in (("1", "a"), ("2", "b")):
        subprocess.run([sys.executable, "-c", code, str(SAMPLE), str(tmp_path / name)],
                       check=True, env={**__import__("os").environ, "PYTHONHASHSEED": seed})
        digests.append({p.name: p.read_bytes() for p in (tmp_path / name).iterdir()})
    assert digests[0] == digests[1]


def test_bad_settings_name_the_field():
    from pydantic import ValidationError

    for bad, field in (({"k1": -1}, "k1"), ({"b": 1.5}, "b"), ({"method": "bm26"}, "method"),
                       ({"stemmer": "klingon"}, "stemmer"), ({"stopwords": "fr"}, "stopwords"),
                       ({"fields": []}, "fields")):
        with pytest.raises(ValidationError) as err:
            FtsConfig(**bad)
        assert field in str(err.value)


def test_k1_0_is_refused_where_the_variant_is_undefined_and_no_score_is_left_not_finite(
        sample_items):
    """QA: ``k1 = 0`` under ``bm25+`` scored every document NaN (0/0 for an absent term: the
    batch and one-query paths then ranked differently, a run's JSON failed) and under
    ``bm25l`` 0 (nothing returned, nDCG 0 silently); ``lucene``'s ``k1 = 0`` is binary tf."""
    from pydantic import ValidationError

    for method, said in (("bm25+", "0/0"), ("bm25l", "every document scores 0")):
        named = re.escape(repr(method))
        with pytest.raises(ValidationError, match=rf"k1 0 under method {named}: .*{said}"):
            FtsConfig(method=method, k1=0)
        assert FtsConfig(method=method, k1=1e-9).k1 == 1e-9
    assert BM25Index.build(_batches(sample_items), FtsConfig(k1=0)).search(["bm25"], 3)[0]
    tiny = BM25Index.build(_batches(sample_items), FtsConfig(method="bm25+", k1=1e-300))
    assert np.isfinite(tiny.data).all() and tiny.search(["bm25 ranking"], 3)[0]
    with pytest.raises(ValueError, match=r"^BM25 index: \d+ term score\(s\) are not finite "
                                         r"numbers under .*\"delta\": 1e\+308"):
        # (a delta FtsConfig refuses, past 100: built as a config made without validation)
        BM25Index.build(_batches(sample_items),
                        FtsConfig.model_construct(**{**FtsConfig(method="bm25+").__dict__,
                                                     "delta": 1e308}))
    with pytest.raises(ValidationError, match="delta"):  # 32-bit scores lose tf past it
        FtsConfig(method="bm25+", delta=1e10)
    assert FtsConfig(method="bm25l", delta=100).delta == 100


@pytest.mark.parametrize("name,expected", [("scifact", 0.6791), ("cisi", 0.3814),
                                           ("medline", 0.6986), ("cranfield", 0.3695),
                                           ("adi", 0.4832), ("vaswani", 0.4362)])
def test_default_bm25_reaches_the_reference_runs(name, expected):
    from aiblox.metrics import evaluate_run

    ds = load_dataset(shared_dataset(name), splits=["test"])
    index = BM25Index.build(_batches(ds.corpus.values(), 2000), FtsConfig())
    qids = sorted(ds.qrels["test"])
    hits = index.search([ds.queries[q] for q in qids], k=100)
    means, _ = evaluate_run(ds.qrels["test"], dict(zip(qids, hits, strict=True)), ["ndcg@10"])
    assert abs(means["ndcg@10"] - expected) <= 0.002, means


@pytest.mark.parametrize("method", ["lucene", "bm25+"])
def test_worker_processes_build_the_same_bytes(tmp_path, method):
    """Two worker processes tokenise (as big stores do) and the saved index is the same bytes
    as the one built in this process, on a real collection in batches of 500."""
    items = list(load_dataset(shared_dataset("cranfield"), splits=[]).corpus.values())
    cfg = FtsConfig(method=method)
    built = {}
    for workers in (1, 2):
        index = BM25Index.build(_batches(items, 500), cfg, workers=workers)
        index.save(tmp_path / str(workers))
        built[workers] = {p.name: p.read_bytes() for p in (tmp_path / str(workers)).iterdir()}
    assert built[1] == built[2]
    assert index.n_docs == len(items)


def test_worker_build_refuses_ids_out_of_order():
    a, b = (ItemRecord(id=i, kind="doc", source="t", text="some words here") for i in "ba")
    with pytest.raises(ValueError, match="ascending id order"):
        BM25Index.build([[a], [b]], FtsConfig(), workers=2)
