"""The BEIR loader on every shared collection, and its errors on bad input."""

import gzip
import shutil
from pathlib import Path

import pytest

from aiblox.data import DatasetError, load_dataset
from tests.conftest import SAMPLE, shared_dataset

COUNTS = {  # name: (documents, {split: judged queries}) from ../shared/datasets/README.md
    "scifact": (5183, {"test": 300, "train": 809}),
    "cranfield": (1400, {"test": 225}),
    "cisi": (1460, {"test": 76}),
    "medline": (1033, {"test": 30}),
    "adi": (82, {"test": 35}),
    "vaswani": (11429, {"test": 93}),
    "squad-v1.1-dev": (2067, {"test": 10570}),
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_every_shared_collection_loads(name):
    ds = load_dataset(shared_dataset(name))
    docs, splits = COUNTS[name]
    assert len(ds.corpus) == docs
    assert {s: len(q) for s, q in ds.qrels.items()} == splits
    assert len(ds.hash) == 64
    if name == "squad-v1.1-dev":
        assert len(ds.answers) == 10570
        a = next(iter(ds.answers.values()))
        text = ds.corpus[a.corpus_id].text
        assert text[a.answer_starts[0]:].startswith(a.answers[0])


def _copy(tmp_path, gz=False):
    dst = tmp_path / "ds"
    shutil.copytree(SAMPLE, dst)
    if gz:
        data = (dst / "corpus.jsonl").read_bytes()
        (dst / "corpus.jsonl").unlink()
        (dst / "corpus.jsonl.gz").write_bytes(gzip.compress(data))
    return dst


def test_gz_corpus_same_content_same_hash(tmp_path):
    plain = load_dataset(_copy(tmp_path / "a"), name="x")
    gz = load_dataset(_copy(tmp_path / "b", gz=True), name="x")
    assert plain.hash == gz.hash
    assert {k: v.content_hash for k, v in plain.corpus.items()} == \
        {k: v.content_hash for k, v in gz.corpus.items()}


def test_hash_changes_with_content(tmp_path):
    path = _copy(tmp_path)
    before = load_dataset(path).hash
    q = path / "queries.jsonl"
    q.write_text(q.read_text().replace("BM25", "BM26", 1))
    assert load_dataset(path).hash != before


def _corrupt(path, rel, line_no, new_line):
    f = path / rel
    lines = f.read_text().splitlines()
    lines[line_no - 1] = new_line
    f.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("rel", "line", "content", "field", "msg"), [
    ("corpus.jsonl", 3, '{"_id": "d03", "title": ', "json", "malformed JSON"),
    # an unterminated string, not the line break after it (once "Invalid control character
    # at", cut short): the reason and where
    ("corpus.jsonl", 3, '{"_id": "d03", "text": "cherry}', "json",
     "malformed JSON: Unterminated string starting at (column 24)"),
    ("corpus.jsonl", 4, '{"title": "t", "text": "x"}', "_id", "missing"),
    ("corpus.jsonl", 5, '{"_id": "d01", "title": "t", "text": "x"}', "_id", "duplicate id 'd01'"),
    ("corpus.jsonl", 6, '{"_id": "d06", "title": 7, "text": "x"}', "title", "expected a string"),
    ("queries.jsonl", 2, '{"_id": "q02"}', "text", "missing"),
    ("qrels/test.tsv", 3, "q99\td01\t1", "query-id", "unknown query 'q99'"),
    ("qrels/test.tsv", 4, "q01\td01\thigh", "score", "not a number"),
    ("qrels/test.tsv", 5, "q01 d01 1", "row", "separated by tabs"),
])
def test_bad_input_names_file_line_field(tmp_path, rel, line, content, field, msg):
    path = _copy(tmp_path)
    _corrupt(path, rel, line, content)
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    e = err.value
    assert e.file.endswith(rel) and e.line == line and e.field == field
    assert msg in str(e) and f"{rel}:{line}" in str(e)


def test_an_empty_queries_file_is_named_when_the_qrels_judge_queries(tmp_path):
    path = _copy(tmp_path)
    (path / "queries.jsonl").write_text("")
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    assert err.value.file.endswith("test.tsv") and err.value.field == "query-id"
    assert str(err.value).endswith("(the queries file holds no query)")


def test_missing_split(tmp_path):
    with pytest.raises(DatasetError) as err:
        load_dataset(_copy(tmp_path), splits=["dev"])
    assert err.value.field == "split" and "available: ['test', 'train']" in str(err.value)


def test_qrels_unknown_document_warns_and_counts(tmp_path):
    path = _copy(tmp_path)
    with (path / "qrels/test.tsv").open("a") as fh:
        fh.write("q01\tnot-in-corpus\t1\nq02\talso-missing\t1\n")
    with pytest.warns(UserWarning, match="2 qrels rows name documents absent"):
        ds = load_dataset(path)
    assert ds.missing_qrels_docs["test"] == 2
    assert ds.qrels["test"]["q01"]["not-in-corpus"] == 1


def test_find_by_name():
    assert load_dataset("sample", splits=["test"]).name == "sample"
    with pytest.raises(DatasetError, match="no BEIR dataset"):
        load_dataset("no-such-dataset-anywhere")


def test_a_dataset_not_found_lists_each_folder_once_and_the_nearest_name(monkeypatch):
    """From the checkout, ./datasets and ../shared/datasets are the repository's own two
    folders: they were listed twice, and a typo got no hint (QA 27)."""
    from aiblox.data.find import find_dataset
    from aiblox.data.rules import DatasetError

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    monkeypatch.delenv("AIBLOX_DATASETS", raising=False)
    with pytest.raises(DatasetError) as err:
        find_dataset("sampel")
    message = str(err.value)
    folders = message.split("under ", 1)[1].split(" (need", 1)[0].split(", ")
    assert len(folders) == len(set(folders)) and str(repo / "datasets") in folders
    assert message.endswith("; did you mean 'sample'?")
    with pytest.raises(DatasetError) as err:
        find_dataset("no-such-thing-at-all")
    assert "did you mean" not in str(err.value)
