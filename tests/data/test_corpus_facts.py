"""A large corpus's facts (hash, ids, lexical gaps) are recorded by its first read and trusted
while the file is unchanged: later loads give exactly what a full read gives without parsing
the corpus, and any change to the file reads it again."""

from __future__ import annotations

import json
import os
import shutil

import pytest

import aiblox.data.dataset as dataset_mod
import aiblox.data.facts as facts_mod
from aiblox.data import DatasetError, corpus_file, corpus_hash, load_dataset
from aiblox.data.facts import LazyCorpus
from tests.conftest import SAMPLE


@pytest.fixture()
def big(tmp_path, monkeypatch):
    """The sample dataset with two documents BM25 cannot index and a qrels row naming a
    missing document, every corpus counted as large, the sidecars in a folder of the test's."""
    monkeypatch.setenv("AIBLOX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(facts_mod, "TRUST_MIN_BYTES", 0)
    folder = tmp_path / "ds"
    shutil.copytree(SAMPLE, folder)
    with open(folder / "corpus.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": "cjk1", "title": "", "text": "東 京"}) + "\n")
        fh.write(json.dumps({"_id": "emoji1", "title": "", "text": "🙂"}) + "\n")
    qrels = folder / "qrels" / "test.tsv"
    first_q = qrels.read_text().splitlines()[1].split("\t")[0]
    with open(qrels, "a", encoding="utf-8") as fh:
        fh.write(f"{first_q}\tnot-in-corpus\t1\n")
    return folder


def _full(folder, **kw):
    """A load that reads everything (facts neither trusted nor recorded)."""
    old = facts_mod.TRUST_MIN_BYTES
    facts_mod.TRUST_MIN_BYTES = 2**62
    try:
        return load_dataset(folder, **kw)
    finally:
        facts_mod.TRUST_MIN_BYTES = old


@pytest.fixture()
def reads(monkeypatch):
    """Counts the corpus files parsed."""
    seen: list[str] = []
    real = dataset_mod.iter_corpus

    def counting(path, name, hasher=None):
        seen.append(path.name)
        return real(path, name, hasher)

    monkeypatch.setattr(dataset_mod, "iter_corpus", counting)
    return seen


def _same(a, b):
    assert a.hash == b.hash and a.corpus_hash == b.corpus_hash
    assert a.lexical_gaps == b.lexical_gaps and a.missing_qrels_docs == b.missing_qrels_docs
    assert a.qrels == b.qrels and a.queries == b.queries
    assert list(a.corpus) == list(b.corpus) and len(a.corpus) == len(b.corpus)


def test_a_trusted_load_gives_what_a_full_read_gives_without_parsing(big, reads):
    with pytest.warns(UserWarning):
        full = _full(big, splits=["test"])
    assert full.missing_qrels_docs == {"test": 1}
    assert set(full.lexical_gaps["documents"].ids) == {"cjk1", "emoji1"}
    n = len(reads)
    with pytest.warns(UserWarning, match="2 of 42 documents"):
        first = load_dataset(big, splits=["test"])  # reads and records
    assert len(reads) == n + 1
    with pytest.warns(UserWarning, match="2 of 42 documents"):
        again = load_dataset(big, splits=["test"])  # trusted: the corpus is not parsed
    assert len(reads) == n + 1 and isinstance(again.corpus, LazyCorpus)
    _same(first, full)
    _same(again, full)
    assert "d01" in again.corpus and "nope" not in again.corpus
    assert len(reads) == n + 1
    assert again.corpus["d01"] == full.corpus["d01"]  # a document asked for: read then
    assert dict(again.corpus.items()) == dict(full.corpus.items())
    assert corpus_hash(corpus_file(big)) == full.corpus_hash


def test_other_splits_and_changed_judgments_keep_the_exact_hash(big, reads):
    with pytest.warns(UserWarning):
        load_dataset(big, splits=["test"])
        qrels = big / "qrels" / "test.tsv"
        qrels.write_text(qrels.read_text().replace("\t1\n", "\t2\n", 1))
        changed = load_dataset(big, splits=["test"])  # the corpus trusted, its bytes re-hashed
        _same(changed, _full(big, splits=["test"]))
        again = load_dataset(big, splits=["test"])
    assert again.hash == changed.hash
    assert reads.count("corpus.jsonl") == 2  # the first read and the full one: never again


@pytest.mark.parametrize("change", ["append", "same size and mtime"])
def test_a_changed_corpus_is_read_again(big, reads, change):
    with pytest.warns(UserWarning):
        before = load_dataset(big, splits=["test"])
    path = big / "corpus.jsonl"
    st = path.stat()
    if change == "append":
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"_id": "new", "title": "", "text": "fresh words"}) + "\n")
    else:  # one letter swapped, the size and modification time put back
        raw = path.read_bytes()
        path.write_bytes(raw.replace(b"BM25", b"BM26", 1))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    n = len(reads)
    with pytest.warns(UserWarning):
        after = load_dataset(big, splits=["test"])
        full = _full(big, splits=["test"])
    assert len(reads) == n + 2  # this load read it, as did the full one
    assert after.corpus_hash != before.corpus_hash
    _same(after, full)
    assert len(list((big.parent / "cache" / "corpus-facts").glob("*.ids"))) == 1  # the new ids


def test_a_lazy_corpus_refuses_a_file_changed_after_the_load(big):
    with pytest.warns(UserWarning):
        load_dataset(big, splits=["test"])
        ds = load_dataset(big, splits=["test"])
    with open(big / "corpus.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": "late", "title": "", "text": "late words"}) + "\n")
    with pytest.raises(DatasetError, match="changed since the dataset was loaded"):
        ds.corpus["d01"]


def test_ingest_records_the_facts_the_next_load_trusts(big, reads, tmp_path):
    from aiblox.engine.workspace import ingest_dataset, open_workspace
    from aiblox.stores import DuckDBStore

    db = tmp_path / "s.duckdb"
    store = DuckDBStore(db)
    try:
        report = ingest_dataset(store, big, None, progress=False)
    finally:
        store.close()
    assert report.items.inserted == 42
    n = len(reads)
    with pytest.warns(UserWarning):
        ds = load_dataset(big, splits=["test"])
    assert len(reads) == n  # recorded by the ingest: nothing parsed
    ws = open_workspace(ds, str(db), "hashing", with_vectors=False, progress=False)
    ws.close()
    assert len(reads) == n and ds.corpus._docs is None  # the store in sync: corpus unread
    with pytest.warns(UserWarning):
        _same(ds, _full(big, splits=["test"]))


def test_small_corpora_are_read_whole_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv("AIBLOX_CACHE_DIR", str(tmp_path / "cache"))
    ds = load_dataset(SAMPLE)
    assert isinstance(ds.corpus, dict) and not (tmp_path / "cache").exists()
