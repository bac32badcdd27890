"""Derived splits: ``<split>:<i>/<n>`` is a deterministic hash partition of a judged split."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aiblox.data import DatasetError, load_dataset, parse_split, split_part, splits_overlap

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "sample"


def test_parts_are_disjoint_cover_the_split_and_follow_sha256():
    ds = load_dataset(SAMPLE, splits=["test", "test:0/2", "test:1/2"])
    whole = ds.qrels["test"]
    a, b = ds.qrels["test:0/2"], ds.qrels["test:1/2"]
    assert set(a).isdisjoint(b)
    assert set(a) | set(b) == set(whole)
    assert a and b  # the sample's 8 test queries fall into both parts
    for q in a:
        assert int(hashlib.sha256(q.encode()).hexdigest(), 16) % 2 == 0
        assert a[q] == whole[q]  # judgements come along unchanged
    assert [q for q, _ in ds.split_queries("test:1/2")] == sorted(b)


def test_derived_splits_load_alone_and_hash_the_file_once():
    alone = load_dataset(SAMPLE, splits=["test:0/2", "test:1/2"])
    plain = load_dataset(SAMPLE, splits=["test"])
    assert alone.hash == plain.hash  # same files read: qrels/test.tsv once
    again = load_dataset(SAMPLE, splits=["test:0/2", "test:1/2"])
    assert again.qrels == alone.qrels


def test_three_way_partition():
    with pytest.warns(UserWarning, match="derived split 'train:2/3' holds no judged query"):
        ds = load_dataset(SAMPLE, splits=["train", "train:0/3", "train:1/3", "train:2/3"])
    parts = [set(ds.qrels[f"train:{i}/3"]) for i in range(3)]
    assert sum(len(p) for p in parts) == len(ds.qrels["train"])
    assert set().union(*parts) == set(ds.qrels["train"])
    assert all(split_part(q, 3) == i for i, p in enumerate(parts) for q in p)


@pytest.mark.parametrize("split, message", [
    ("test:2/2", "0 <= i < n"),
    ("test:0/1", "n >= 2"),
    ("test:a/2", "<split>:<i>/<n>"),
    ("dev:0/2", "no split 'dev:0/2'"),
])
def test_bad_derived_splits_name_the_split(split, message):
    with pytest.raises(DatasetError) as err:
        load_dataset(SAMPLE, splits=[split])
    assert message in str(err.value)
    assert "split" in str(err.value)


def test_parse_split():
    assert parse_split("test") is None
    assert parse_split("test:1/4") == ("test", 1, 4)


@pytest.mark.parametrize("alias", ["test:00/2", "test:0/02", "test:\u0660/\u0662", "test:0/2\n",
                                   "test:+0/2", "test: 0/2", "test:\uff10/2"])
def test_a_part_has_one_name(alias):
    """QA s7 D1: ``test:00/2``, ``test:0/02``, Arabic-Indic digits and a trailing line break
    all named the queries of ``test:0/2``, so a check that a sweep's two splits differ was
    passed by a spelling; each is refused, naming the split."""
    with pytest.raises(ValueError, match="no leading zero"):
        parse_split(alias)
    with pytest.raises(DatasetError) as err:
        load_dataset(SAMPLE, splits=[alias])
    assert err.value.field == "split" and repr(alias) in str(err.value)
    assert parse_split("test:10/12") == ("test", 10, 12)


@pytest.mark.parametrize(("a", "b", "meet"), [
    ("test", "test:0/2", True),
    ("test:0/2", "test:0/4", True),
    ("test:0/2", "test:2/4", True),
    ("test:0/2", "test:0/3", True),  # 0 modulo 6 is in both
    ("test:1/2", "test:0/4", False),
    ("test:0/2", "test:1/2", False),
    ("test:1/4", "test:2/6", False),  # odd and even
    ("test", "train", False),
    ("test:0/2", "train:0/2", False),
    ("test", "test:00/2", False),  # malformed: refused on its own
])
def test_which_split_names_can_share_a_query(a, b, meet):
    """Whatever the data: ``i`` modulo ``m`` and ``j`` modulo ``n`` meet when ``i - j`` is a
    multiple of ``gcd(m, n)``; parts that never meet share no query of the sample."""
    assert splits_overlap(a, b) is meet and splits_overlap(b, a) is meet
    if not meet and "00" not in b:
        ds = load_dataset(SAMPLE, splits=[a, b])
        assert not set(ds.qrels[a]) & set(ds.qrels[b])


def test_a_part_of_a_loaded_base_split_is_cut_from_it():
    """QA s7 D1: a dataset loaded with every split was asked for ``test:0/2``
    (``evaluate_retrieval``, ``split_queries``) and said "split not loaded", naming a file
    ``qrels/test:0/2.tsv`` that cannot exist; the part is cut from the loaded ``test``."""
    every = load_dataset(SAMPLE)
    part = load_dataset(SAMPLE, splits=["test:0/2"])
    assert every.split_qrels("test:0/2") == part.qrels["test:0/2"]
    assert every.split_queries("test:0/2") == part.split_queries("test:0/2")
    assert every.split_qrels("test") is every.qrels["test"]
    train = load_dataset(SAMPLE, splits=["train"])
    with pytest.raises(DatasetError) as err:
        train.split_queries("test:0/2")
    assert str(err.value) == (f"{SAMPLE / 'qrels' / 'test.tsv'}: field 'split': split "
                              f"'test:0/2' not loaded; loaded: ['train'] "
                              f"(load_dataset(..., splits=['test:0/2']) loads it)")
    with pytest.raises(DatasetError, match="no leading zero"):
        every.split_qrels("test:0/02")


def test_evaluate_retrieval_scores_a_part_of_a_dataset_loaded_whole():
    from aiblox import RetrievalPrefs, evaluate_retrieval, open_workspace

    every = load_dataset(SAMPLE)
    part = load_dataset(SAMPLE, splits=["test:0/2"])
    prefs = RetrievalPrefs(query_text="", mode="bm25")
    with open_workspace(every, ":memory:", "hashing", with_vectors=False,
                        progress=False) as ws:
        whole = evaluate_retrieval(ws, every, "test:0/2", prefs, progress=False)
        alone = evaluate_retrieval(ws, part, "test:0/2", prefs, progress=False)
    assert whole.n_queries == len(part.qrels["test:0/2"]) == alone.n_queries
    assert whole.metrics == alone.metrics
