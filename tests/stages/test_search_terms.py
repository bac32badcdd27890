"""``BM25Index.search_terms``: weighted analysed terms scored as ``sum_t w_t bm25(t, d)`` in
float32 by the compiled kernel, equal to a full sort of the reference scores, with
``search``'s tie rule and filters; and the term statistics feedback reads."""

from __future__ import annotations

import random

import numpy as np
import pytest

from aiblox.contracts import FtsConfig, ItemRecord
from aiblox.data import load_dataset
from aiblox.indexes import BM25Index
from aiblox.indexes.term_stats import TermStats
from aiblox.text.analysis import Analyzer
from tests.conftest import SAMPLE, shared_dataset


def _batches(items, n=500):
    items = sorted(items, key=lambda it: it.id)
    return [items[i:i + n] for i in range(0, len(items), n)]


@pytest.fixture(scope="module")
def cisi():
    return load_dataset(shared_dataset("cisi"), splits=["test"])


@pytest.mark.parametrize("method", ["lucene", "robertson", "bm25+"])
def test_search_terms_equals_the_full_sort_of_the_reference(cisi, method):
    """Both selection passes (common and rare terms), bm25+'s non-occurrence constant, negative
    and zero weights, terms outside the vocabulary."""
    index = BM25Index.build(_batches(cisi.corpus.values()), FtsConfig(method=method))
    rng = random.Random(0)
    analyzer = Analyzer()
    vocab = sorted(index.vocab)
    queries = []
    for q in sorted(cisi.qrels["test"])[:25]:
        terms = analyzer.terms(cisi.queries[q])
        weights = {t: rng.choice([0.1, 0.5, 1.0, 2.5, rng.random()]) for t in terms}
        weights[rng.choice(vocab)] = -0.3
        weights["zzznotaterm"] = 5.0
        queries.append(weights)
    queries += [{"retriev": 0.7}, {"zebra": 1.0}, {}]
    hits = index.search_terms(queries, k=40)
    for weights, got in zip(queries, hits, strict=True):
        s = index.term_scores(weights)
        flat, w, _ = index.weighted_terms([weights])
        extra = ((w * index.nonoccurrence[flat]).sum() if index.nonoccurrence is not None
                 else np.float32(0))
        matched = (s - extra) != 0
        order = [i for i in np.lexsort((np.arange(len(s)), -s)) if matched[i]][:40]
        assert got == [(index.ids[i], float(s[i])) for i in order], weights
    assert hits[-1] == [] and hits[-2] == []


def test_unit_weights_are_search_and_the_tie_rule_holds(cisi):
    index = BM25Index.build(_batches(cisi.corpus.values()), FtsConfig())
    analyzer = Analyzer()
    texts = [cisi.queries[q] for q in sorted(cisi.qrels["test"])[:40]]
    distinct = [t for t in texts if len(set(analyzer.terms(t))) == len(analyzer.terms(t))]
    assert len(distinct) >= 10
    weighted = [{t: 1.0 for t in analyzer.terms(t)} for t in distinct]
    assert index.search_terms(weighted, k=100) == index.search(distinct, k=100)
    docs = [ItemRecord(id=f"d{i}", title="", text=t) for i, t in
            enumerate(["apple banana", "banana apple", "apple", "cherry"])]
    small = BM25Index.build([docs], FtsConfig())
    [hits] = small.search_terms([{"appl": 2.0, "banana": 2.0}], k=10)
    assert [d for d, _ in hits] == ["d0", "d1", "d2"] and hits[0][1] == hits[1][1]
    [top] = small.search_terms([{"appl": 2.0, "banana": 2.0}], k=1)
    assert top == hits[:1]  # the cut-off keeps the lower id of a tie
    mask = np.array([False, True, True, True])
    [filtered] = small.search_terms([{"appl": 1.0}], k=10, allowed=mask)
    assert [d for d, _ in filtered] == ["d2", "d1"]  # "apple" alone: the shorter document
    with pytest.raises(ValueError, match="'appl': weight nan is not a finite number"):
        small.search_terms([{"appl": float("nan")}], k=3)


def _counts(items, cfg):
    """Term counts counted here, from the analyser: title weighted ``title_weight`` times."""
    a = Analyzer(lower=cfg.lower, stopwords=cfg.stopwords, stemmer=cfg.stemmer)
    out = {}
    for it in items:
        c: dict[str, float] = {}
        if cfg.title_weight == 1.0:
            for t in a.terms(f"{it.title or ''} {it.text or ''}".strip()):
                c[t] = c.get(t, 0.0) + 1.0
        else:
            for t in a.terms(it.title or "") if cfg.title_weight > 0 else []:
                c[t] = c.get(t, 0.0) + cfg.title_weight
            for t in a.terms(it.text or ""):
                c[t] = c.get(t, 0.0) + 1.0
        out[it.id] = c
    return out


@pytest.mark.parametrize("cfg", [FtsConfig(), FtsConfig(title_weight=2.0),
                                 FtsConfig(title_weight=0.0), FtsConfig(title_b=0.5),
                                 FtsConfig(stemmer=None, stopwords="none")])
def test_term_stats_count_what_bm25_indexes(cfg):
    items = sorted(load_dataset(SAMPLE, splits=[]).corpus.values(), key=lambda it: it.id)
    stats = TermStats.build(_batches(items, 7), cfg)
    expect = _counts(items, cfg)
    assert {d: stats.doc_terms(d) for d in stats.ids} == expect
    assert stats.vocab == BM25Index.build(_batches(items, 7), cfg).vocab
    cf: dict[str, float] = {}
    for c in expect.values():
        for t, n in c.items():
            cf[t] = cf.get(t, 0.0) + n
    assert dict(zip(stats.terms, stats.cf.tolist(), strict=True)) == cf
    assert stats.doc_lens.tolist() == [sum(c.values()) for c in expect.values()]


def test_term_stats_bytes_do_not_depend_on_hash_order(tmp_path):
    import os
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from aiblox.data import load_dataset;"
            "from aiblox.contracts import FtsConfig; from aiblox.indexes.term_stats import "
            "TermStats; ds = load_dataset(sys.argv[1], splits=[]);"
            "TermStats.build([sorted(ds.corpus.values(), key=lambda i: i.id)], FtsConfig())"
            ".save(Path(sys.argv[2]))")
    digests = []
    for seed, name in (("1", "a"), ("2", "b")):
        subprocess.run([sys.executable, "-c", code, str(SAMPLE), str(tmp_path / name)],
                       check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        digests.append({p.name: p.read_bytes() for p in (tmp_path / name).iterdir()})
    assert digests[0] == digests[1]


def test_one_statistics_index_per_analysis_whatever_the_scoring(sample_store):
    from aiblox.indexes import StoreIndexes

    store, _ = sample_store
    ix = StoreIndexes(store)
    key = ix.term_stats_key(FtsConfig())[0]
    assert ix.term_stats_key(FtsConfig(k1=2.0, b=0.3, method="bm25+", title_b=0.4))[0] == key
    assert ix.term_stats_key(FtsConfig(stemmer=None))[0] != key
    assert ix.term_stats_key(FtsConfig(title_weight=2.0))[0] != key
    stats = ix.term_stats(FtsConfig(k1=2.0))
    assert ix.built == [f"terms-{key[:16]}"] and stats.n_docs == store.count_items()
    assert ix.term_stats(FtsConfig()) is stats  # loaded once per process
    assert isinstance(stats.tfs, np.memmap)  # memory-mapped like the BM25 index
