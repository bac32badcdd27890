"""Derived splits: ``<split>:<i>/<n>`` is a deterministic hash partition of a judged split."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aiblox.data import DatasetError, load_dataset, parse_split, split_part

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
