"""BM25 field weighting: a title term weighted against a body term, in the index engine.

With one length normalisation (``title_b`` None) an integer weight ``w`` is exactly bm25s on a
corpus whose titles are written ``w`` times (``w = 0``: the bodies alone), bit for bit, for every
variant; BM25F (``title_b`` set) equals the formula computed by hand; the default is the plain
joined text (the same index bytes and the same index key as before field weighting existed).
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aiblox.contracts import FtsConfig, ItemRecord
from aiblox.data import load_dataset
from aiblox.indexes import BM25Index
from tests.conftest import SAMPLE

bm25s = pytest.importorskip("bm25s")
Stemmer = pytest.importorskip("Stemmer")

QUERIES = ("BM25 term frequency saturation", "dense vectors and embeddings",
           "fusion of ranked lists", "zzz unknown words only")


@pytest.fixture(scope="module")
def items():
    return sorted(load_dataset(SAMPLE, splits=["test"]).corpus.values(), key=lambda it: it.id)


def _bm25s_scores(texts, cfg, query):
    stem = Stemmer.Stemmer("english")
    tok = bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False)
    ref = bm25s.BM25(k1=cfg.k1, b=cfg.b, method=cfg.method, delta=cfg.delta)
    ref.index(tok, show_progress=False)
    q = bm25s.tokenize([query], stopwords="en", stemmer=stem, return_ids=False,
                       show_progress=False)[0]
    known = [t for t in q if t in ref.vocab_dict]
    return ref.get_scores(known) if known else np.zeros(len(texts), np.float32)


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize("weight", [0, 2, 3])
def test_integer_title_weight_is_bm25s_on_repeated_titles(items, method, weight):
    assert all(it.title for it in items)  # every title counts
    cfg = FtsConfig(method=method, k1=1.5, b=0.6, delta=0.7, title_weight=weight)
    index = BM25Index.build([items[:7], items[7:]], cfg)
    texts = [" ".join([it.title] * weight + [it.text]) for it in items]
    for query in QUERIES:
        ours, theirs = index.scores(query), _bm25s_scores(texts, cfg, query)
        assert ours.tobytes() == theirs.tobytes(), (method, weight, query)


def test_weight_one_is_todays_index(items):
    plain = BM25Index.build([items], FtsConfig())
    assert FtsConfig(title_weight=1.0) == FtsConfig() and not FtsConfig().fielded
    assert FtsConfig(title_weight=1.0).model_dump() == FtsConfig().model_dump()
    assert "title_weight" not in FtsConfig().model_dump_json()
    assert "fields" not in FtsConfig().scoring()  # the index key of the joined text is unchanged
    # the fielded build at weight 1 (counts kept per field, then summed) is the joined text
    fielded = BM25Index._build_fielded([items[:5], items[5:]], FtsConfig())
    for name in ("data", "indices", "indptr"):
        assert getattr(fielded, name).tobytes() == getattr(plain, name).tobytes(), name
    assert fielded.vocab == plain.vocab and fielded.ids == plain.ids
    assert np.array_equal(fielded.doc_lens, plain.doc_lens)


def test_weight_zero_is_the_bodies_alone(items):
    zero = BM25Index.build([items], FtsConfig(title_weight=0))
    bodies = BM25Index.build([items], FtsConfig(fields=("text",)))
    for query in QUERIES:
        assert zero.search([query], 10) == bodies.search([query], 10)
    assert zero.vocab == bodies.vocab  # title-only terms are not indexed


def _bm25f_reference(docs, query_terms, w, b_title, b_body, k1):
    """BM25F (lucene idf, tf~ / (k1 + tf~)) in Python floats, from whitespace tokens."""
    n = len(docs)
    avg_t = sum(len(t.split()) for t, _ in docs) / n
    avg_b = sum(len(x.split()) for _, x in docs) / n
    out = []
    for title, body in docs:
        tt, bt = title.split(), body.split()
        norm_t = 1 - b_title + b_title * len(tt) / avg_t
        norm_b = 1 - b_body + b_body * len(bt) / avg_b
        score = 0.0
        for q in query_terms:
            df = sum(1 for t, x in docs if q in t.split() or q in x.split())
            if not df:
                continue
            tf = (w * tt.count(q) / norm_t if tt else 0.0) + bt.count(q) / norm_b
            score += math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf / (k1 + tf)
        out.append(score)
    return np.asarray(out)


def test_bm25f_equals_the_formula_by_hand():
    docs = [("apple pie", "banana bread with apple sauce and more apple"),
            ("banana", "apple"),
            ("cherry cherry tart", "a long body about baking bread cherry dough flour oven"),
            ("bread", "bread bread bread banana apple cherry"),
            ("", "plain body without a title apple")]
    items = [ItemRecord(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(docs)]
    plain_docs = [(t, " ".join(w for w in x.split() if w not in ("a", "with", "and")))
                  for t, x in docs]  # the analyzer's stop words; every other word is its stem
    for w, b_title, b_body, k1 in [(2.0, 0.3, 0.75, 1.2), (0.5, 1.0, 0.0, 0.9),
                                   (1.0, 0.75, 0.75, 1.5)]:
        cfg = FtsConfig(title_weight=w, title_b=b_title, b=b_body, k1=k1, stemmer=None)
        index = BM25Index.build([items], cfg)
        for query in ("apple", "bread cherry", "banana apple tart"):
            expect = _bm25f_reference(plain_docs, query.split(), w, b_title, b_body, k1)
            np.testing.assert_allclose(index.scores(query), expect, rtol=2e-6, atol=1e-7)
    # BM25F is another model than one normalisation of the weighted length
    one_b = BM25Index.build([items], FtsConfig(title_weight=2.0, stemmer=None))
    bm25f = BM25Index.build([items], FtsConfig(title_weight=2.0, title_b=0.75, stemmer=None))
    assert not np.array_equal(one_b.scores("apple"), bm25f.scores("apple"))


def test_field_settings_are_checked():
    with pytest.raises(ValueError, match="need fields"):
        FtsConfig(title_weight=2, fields=("text",))
    with pytest.raises(ValueError, match="engine 'index' only"):
        FtsConfig(title_b=0.5, engine="native")
    with pytest.raises(ValueError):
        FtsConfig(title_weight=-1)
    with pytest.raises(ValueError):
        FtsConfig(title_b=1.5)
    assert FtsConfig(fields=("text",)).model_dump()["fields"] == ("text",)  # unweighted: fine


def test_fielded_indexes_do_not_depend_on_batches_or_hash_seed(items, tmp_path):
    cfgs = [FtsConfig(title_weight=2.5), FtsConfig(title_weight=1.5, title_b=0.4)]
    for cfg in cfgs:
        one = BM25Index.build([items], cfg)
        split = BM25Index.build([items[:3], items[3:20], items[20:]], cfg)
        assert one.data.tobytes() == split.data.tobytes() and one.vocab == split.vocab
    code = ("import hashlib; from aiblox.contracts import FtsConfig; "
            "from aiblox.data import load_dataset; from aiblox.indexes import BM25Index;"
            "from tests.conftest import SAMPLE; "
            "its = sorted(load_dataset(SAMPLE, splits=['test']).corpus.values(), "
            "key=lambda it: it.id); "
            "ix = BM25Index.build([its], FtsConfig(title_weight=1.5, title_b=0.4)); "
            "print(hashlib.sha256(ix.data.tobytes() + ix.indices.tobytes()"
            " + ' '.join(sorted(ix.vocab, key=ix.vocab.get)).encode()).hexdigest())")
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True, cwd=Path(__file__).resolve().parents[2])
        outs.add(proc.stdout.strip())
    ix = BM25Index.build([items], cfgs[1])
    here = hashlib.sha256(ix.data.tobytes() + ix.indices.tobytes() + " ".join(
        sorted(ix.vocab, key=ix.vocab.get)).encode()).hexdigest()
    assert outs == {here}
