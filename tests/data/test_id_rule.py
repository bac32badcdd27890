"""Ids are one thing everywhere: the corpus, the queries, the qrels, the answers (BEIR and TREC
files, CSV, TSV, parquet, JSONL, DataFrames) and TREC run files take an id without its
surrounding whitespace, refuse one with whitespace inside or two equal under that rule, and a
run written by ``--save-runs`` from a dataset with padded ids scores exactly as the mode did."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.contracts import ItemRecord
from aiblox.data import Dataset, DatasetError, corpus_file, corpus_hash, load_dataset
from aiblox.engine.workspace import dataset_binding, ingest_dataset
from aiblox.stores import DuckDBStore
from aiblox.stores.identity import read_sync
from aiblox.stores.ingest import sync_dataset

DOCS = [("d1", "Foxes", "the quick brown fox jumps over the lazy dog"),
        ("d2", "Dogs", "lazy dogs sleep all day in the sun"),
        ("d3", "Engines", "columnar storage engines scan compressed blocks"),
        ("d4", "Rivers", "rivers carry sediment to the sea"),
        ("d5", "Stars", "stars burn hydrogen into helium")]
QUERIES = [("q1", "quick fox"), ("q2", "lazy dogs sleeping"), ("q3", "storage engines")]
QRELS = [("q1", "d1", 2), ("q1", "d2", 1), ("q2", "d2", 1), ("q3", "d3", 1), ("q3", "d5", 0)]
PAD = {"d1": " d1 ", "d2": "d2\t", "d3": "  d3", "q1": "q1 ", "q3": "\u00a0q3"}
"""Surrounding whitespace: spaces, a tab, a no-break space."""


def _beir(folder: Path, pad: dict[str, str] | None = None) -> Path:
    pad = pad or {}
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, title, text in DOCS:
            f.write(json.dumps({"_id": pad.get(i, i), "title": title, "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for q, text in QUERIES:
            f.write(json.dumps({"_id": pad.get(q, q), "text": text}) + "\n")
    cell = {k: v.replace("\t", " ") for k, v in pad.items()}  # a TSV cell holds no tab
    rows = "".join(f"{cell.get(q, q)}\t{cell.get(d, d)}\t{g}\n" for q, d, g in QRELS)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows,
                                              encoding="utf-8")
    return folder


def test_padded_ids_load_as_the_plain_ones_in_every_layout(tmp_path):
    plain = load_dataset(_beir(tmp_path / "plain"))
    padded = load_dataset(_beir(tmp_path / "padded", PAD))
    assert list(padded.corpus) == list(plain.corpus) == ["d1", "d2", "d3", "d4", "d5"]
    assert padded.queries == plain.queries and padded.qrels == plain.qrels
    assert [d.content_hash for d in padded.corpus.values()] == \
        [d.content_hash for d in plain.corpus.values()]
    # TREC qrels (whitespace-separated) and a CSV / parquet folder, padded, load alike
    trec = _beir(tmp_path / "trec", PAD)
    (trec / "qrels" / "test.tsv").write_text(
        "".join(f" {q}  0 {d}\t{g} \n" for q, d, g in QRELS), encoding="utf-8")
    assert load_dataset(trec).qrels == plain.qrels
    for fmt in ("csv", "parquet"):
        folder = tmp_path / fmt
        (folder / "qrels").mkdir(parents=True)
        frames = {
            "corpus": pd.DataFrame([(PAD.get(i, i), t, x) for i, t, x in DOCS],
                                   columns=["_id", "title", "text"]),
            "queries": pd.DataFrame([(PAD.get(q, q), t) for q, t in QUERIES],
                                    columns=["_id", "text"]),
            "qrels/test": pd.DataFrame([(PAD.get(q, q), PAD.get(d, d), g) for q, d, g in QRELS],
                                       columns=["query_id", "doc_id", "score"])}
        for name, frame in frames.items():
            if fmt == "csv":
                frame.to_csv(folder / f"{name}.csv", index=False)
            else:
                frame.to_parquet(folder / f"{name}.parquet", index=False)
        table = load_dataset(folder)
        assert list(table.corpus) == list(plain.corpus) and table.qrels == plain.qrels
        assert table.hash == plain.hash  # a table hashes its rows' BEIR lines: ids as ruled
    frames = Dataset.from_frames(frames["corpus"], frames["queries"], frames["qrels/test"])
    assert frames.hash == plain.hash


@pytest.mark.parametrize(("file", "old", "new", "where", "field", "message"), [
    ("corpus.jsonl", '"d2"', '" d1"', "corpus.jsonl:2", "_id",
     "duplicate id 'd1' (first at line 1, written 'd1' there and ' d1' here: ids are compared "
     "without surrounding whitespace)"),
    ("corpus.jsonl", '"d2"', '"d 2"', "corpus.jsonl:2", "_id",
     "id 'd 2' holds whitespace (' ' at character 1), which a TREC run or qrels line cannot "
     "carry"),
    ("queries.jsonl", '"q2"', '"q1\\t"', "queries.jsonl:2", "_id", "duplicate id 'q1'"),
    ("queries.jsonl", '"q2"', '"   "', "queries.jsonl:2", "_id",
     "missing, or not a non-empty string or a whole number"),
    # a number id is read as its digits; other kinds are refused, saying what is taken (QA 28)
    ("queries.jsonl", '"q2"', '1.5', "queries.jsonl:2", "_id",
     "missing, or not a non-empty string or a whole number (a number id is read as its "
     "digits)"),
    ("qrels/test.tsv", "q3\td3", "q3\td\u00a03", "test.tsv:5", "corpus-id",
     "id 'd\\xa03' holds whitespace ('\\xa0' at character 1)"),
])
def test_ambiguous_ids_are_refused_naming_file_line_and_field(tmp_path, file, old, new, where,
                                                              field, message):
    folder = _beir(tmp_path / "bad")
    path = folder / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        load_dataset(folder)
    assert err.value.field == field and message in str(err.value), str(err.value)
    assert f"{where}: field {field!r}: " in str(err.value)


def test_a_csv_id_with_whitespace_inside_is_refused(tmp_path):
    folder = tmp_path / "csv"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.csv").write_text("_id,text\nd1,a\nd 2,b\n", encoding="utf-8")
    (folder / "queries.csv").write_text("_id,text\nq1,a\n", encoding="utf-8")
    (folder / "qrels" / "test.csv").write_text("query_id,doc_id,score\nq1,d1,1\n")
    with pytest.raises(DatasetError, match=r"corpus.csv:3: field '_id': id 'd 2' holds "
                                           r"whitespace"):
        load_dataset(folder)


runner = CliRunner()


def _eval(*args: object) -> dict:
    r = runner.invoke(app, ["eval", *map(str, args), "--embedder", "hashing", "--format", "json"],
                      env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_saved_run_of_padded_ids_scores_as_the_mode(tmp_path):
    padded = _beir(tmp_path / "padded", PAD)
    plain = _beir(tmp_path / "plain")
    runs = tmp_path / "runs"
    (mode,) = _eval(padded, "--mode", "bm25", "--db", tmp_path / "p.duckdb",
                    "--save-runs", runs)["systems"]
    assert mode["metrics"]["ndcg@10"] > 0.5  # the padded corpus ids meet the qrels' ids
    lines = (runs / "bm25.trec").read_text().splitlines()
    assert all(len(line.split(" ")) == 6 for line in lines)  # no id carries a space
    (back,) = _eval(padded, "--run", runs / "bm25.trec", "--db", tmp_path / "p.duckdb")["systems"]
    assert back["metrics"] == mode["metrics"] and back["hashes"]["run"] == mode["hashes"]["run"]
    (same,) = _eval(plain, "--mode", "bm25", "--db", tmp_path / "q.duckdb")["systems"]
    assert same["metrics"] == mode["metrics"] and same["hashes"]["run"] == mode["hashes"]["run"]


def test_a_store_synced_with_padded_ids_syncs_again(tmp_path):
    """A store synced before the id rule holds the padded ids, under the same corpus hash (the
    file's bytes): it is not taken as up to date."""
    folder = _beir(tmp_path / "padded", PAD)
    store = DuckDBStore(tmp_path / "old.duckdb")
    try:
        old = [ItemRecord(id=PAD.get(i, i), source="padded", title=t, text=x)
               for i, t, x in DOCS]
        sync_dataset(store, dataset_binding(folder), corpus_hash(corpus_file(folder)), old,
                     None, progress=False)
        assert " d1 " in store.item_hashes()
        report = ingest_dataset(store, folder, None, progress=False)
        assert not report.up_to_date and report.items.deleted == 3
        assert sorted(store.item_hashes()) == ["d1", "d2", "d3", "d4", "d5"]
        record = read_sync(store)
        assert record is not None and record.n_items == 5
        assert ingest_dataset(store, folder, None, progress=False).up_to_date
    finally:
        store.close()
