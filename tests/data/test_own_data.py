"""Your own data: DataFrames, CSV, TSV and parquet folders and a ``dataset.toml`` manifest load
like the BEIR folder holding the same rows (same content, same dataset hash, same metrics
through the CLI), and bad input is refused naming the file, the line or row, and the field."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from aiblox.data import (
    Dataset,
    DatasetError,
    available_splits,
    content_hash,
    corpus_file,
    corpus_hash,
    dataset_name,
    load_dataset,
)
from tests.conftest import shared_dataset

REPO = Path(__file__).resolve().parents[2]
ADI = shared_dataset("adi")


def _adi_frames() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """adi's three files as DataFrames, read as written (ids stay strings)."""
    corpus = pd.read_json(ADI / "corpus.jsonl", lines=True, dtype=False)
    queries = pd.read_json(ADI / "queries.jsonl", lines=True, dtype=False)
    qrels = pd.read_csv(ADI / "qrels" / "test.tsv", sep="\t", dtype=str)
    return corpus, queries, qrels


def _same_content(a: Dataset, b: Dataset) -> None:
    assert a.hash == b.hash and a.corpus_hash == b.corpus_hash
    assert a.queries == b.queries and a.qrels == b.qrels
    assert list(a.corpus) == list(b.corpus)
    assert [d.content_hash for d in a.corpus.values()] == \
        [d.content_hash for d in b.corpus.values()]


@pytest.fixture(scope="module")
def beir():
    return load_dataset(ADI)


def test_from_frames_hashes_like_the_beir_folder(beir):
    corpus, queries, qrels = _adi_frames()
    ds = Dataset.from_frames(corpus, queries, qrels, name="adi")
    _same_content(ds, beir)
    assert ds.hash == "5bce9ba07912d645476f4b451ee02917e4a003843ce3649651ffe8dd47867456"
    assert content_hash(beir) == beir.hash  # adi's files are BEIR's canonical lines
    # other column names, integer ids, a split column: the same rows, the same hash
    renamed = Dataset.from_frames(
        corpus.rename(columns={"_id": "doc_id"}).assign(doc_id=lambda f: f.doc_id.astype(int)),
        queries.rename(columns={"_id": "qid", "text": "question"}),
        qrels.rename(columns={"query-id": "q", "corpus-id": "d", "score": "relevance"})
        .assign(split="test", relevance=lambda f: f.relevance.astype(float)),
        columns={"queries": {"text": "question"}, "qrels": {"query_id": "q", "doc_id": "d"}})
    _same_content(renamed, beir)
    one = Dataset.from_frames(corpus, queries, {"test": qrels})
    assert one.hash == beir.hash and one.name == "frames"


def test_hash_is_computed_never_given(beir):
    with pytest.raises(TypeError, match="hash"):
        Dataset(name="x", path=Path("x"), corpus={}, queries={}, qrels={},
                hash="abc")  # type: ignore[call-arg]
    # a dataset built by hand, or changed by dataclasses.replace, hashes its own content
    fewer = replace(beir, corpus=dict(list(beir.corpus.items())[:10]))
    assert fewer.hash == content_hash(fewer) != beir.hash
    assert fewer.corpus_hash != beir.corpus_hash
    again = Dataset(name="adi", path=ADI, corpus=beir.corpus, queries=beir.queries,
                    qrels=beir.qrels)
    assert again.hash == beir.hash  # adi's rows are in canonical BEIR form and order


def test_what_a_copy_hashes_and_when_it_differs_is_the_class_doc(beir):
    """QA s7 D5: ``dataclasses.replace`` of a dataset whose qrels repeat a row changed its hash,
    undocumented: the load hashes every row read, in file order, a copy its content (each
    judgment once, a query's rows together). No dataset hash moves (none of the shared
    collections repeats a row; the rows' positions are not kept, so a copy cannot hash them):
    the class doc names each case in which a copy hashes otherwise, and each is so."""
    doc = " ".join((Dataset.__doc__ or "").split())
    for words in ("copied by ``dataclasses.replace`` (even unchanged), hashes its content",
                  "BEIR files written another way", "qrels repeating an identical row",
                  "a query's rows apart", "a derived split"):
        assert words in doc, words
    corpus = pd.DataFrame({"_id": ["d1", "d2"], "text": ["one", "two"]})
    queries = pd.DataFrame({"_id": ["q1", "q2"], "text": ["one", "two"]})

    def frames(*rows: tuple[str, str, int]) -> Dataset:
        qrels = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
        return Dataset.from_frames(corpus, queries, qrels)

    grouped = frames(("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d2", 1))
    assert replace(grouped).hash == grouped.hash == content_hash(grouped)
    with pytest.warns(UserWarning, match="1 qrels rows repeat an identical judgment"):
        repeated = frames(("q1", "d1", 1), ("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d2", 1))
    assert repeated.qrels == grouped.qrels and repeated.duplicate_qrels == {"test": 1}
    assert replace(repeated).hash == grouped.hash != repeated.hash
    apart = frames(("q1", "d1", 1), ("q2", "d2", 1), ("q1", "d2", 0))
    assert apart.qrels == grouped.qrels and replace(apart).hash == grouped.hash != apart.hash
    part = load_dataset(ADI, splits=["test:0/2"])
    assert replace(part).hash != part.hash == beir.hash  # the file read is test.tsv, whole
    assert replace(beir).hash == beir.hash  # adi's files are BEIR's lines written that way


def _write(folder: Path, fmt: str, frames, qrels_name: str = "test") -> Path:
    corpus, queries, qrels = frames
    (folder / "qrels").mkdir(parents=True)
    for frame, rel in ((corpus, "corpus"), (queries, "queries"), (qrels, f"qrels/{qrels_name}")):
        if fmt == "parquet":
            frame.to_parquet(folder / f"{rel}.parquet", index=False)
        else:
            frame.to_csv(folder / f"{rel}.{fmt}", sep="\t" if fmt == "tsv" else ",",
                         index=False)
    return folder


def _manifest(tmp_path: Path) -> Path:
    """A manifest over files with their own names and columns: CSV documents, parquet queries,
    one qrels CSV with a split column."""
    corpus, queries, qrels = _adi_frames()
    folder = tmp_path / "mine"
    folder.mkdir()
    corpus.rename(columns={"_id": "doc", "text": "body", "title": "headline"}).to_csv(
        folder / "docs.csv", index=False)
    queries.rename(columns={"_id": "qid", "text": "question"}).to_parquet(
        folder / "questions.parquet", index=False)
    qrels.rename(columns={"query-id": "query", "corpus-id": "doc", "score": "rel"}).assign(
        split="test").to_csv(folder / "judged.csv", index=False)
    (folder / "adi.toml").write_text(
        'name = "my-adi"\ncorpus = "docs.csv"\nqueries = "questions.parquet"\n'
        'qrels = "judged.csv"\n'
        '[columns.corpus]\nid = "doc"\ntext = "body"\ntitle = "headline"\n'
        '[columns.queries]\ntext = "question"\n'
        '[columns.qrels]\nquery_id = "query"\ndoc_id = "doc"\nscore = "rel"\n')
    return folder / "adi.toml"


@pytest.mark.parametrize("fmt", ["csv", "tsv", "parquet"])
def test_tabular_folders_load_like_beir(tmp_path, beir, fmt):
    folder = _write(tmp_path / fmt, fmt, _adi_frames())
    ds = load_dataset(folder)
    _same_content(ds, beir)
    assert ds.name == fmt and available_splits(folder) == ["test"]
    assert corpus_file(folder).name == f"corpus.{fmt}"
    assert corpus_hash(corpus_file(folder)) == ds.corpus_hash  # what `aiblox ingest` records
    assert load_dataset(folder, splits=["test:0/2"]).qrels["test:0/2"] == \
        load_dataset(ADI, splits=["test:0/2"]).qrels["test:0/2"]


def test_manifest_loads_like_beir(tmp_path, beir):
    manifest = _manifest(tmp_path)
    ds = load_dataset(manifest)
    _same_content(ds, beir)
    assert ds.name == dataset_name(manifest) == "my-adi"
    assert available_splits(manifest) == ["test"]
    assert corpus_hash(corpus_file(manifest)) == ds.corpus_hash
    # a folder holding dataset.toml is a dataset too
    manifest.rename(manifest.with_name("dataset.toml"))
    assert load_dataset(manifest.parent).hash == beir.hash
    assert load_dataset(manifest.parent / "dataset.toml").path == manifest.parent


def test_mixed_folder_jsonl_corpus_with_csv_qrels(tmp_path, beir):
    folder = tmp_path / "mixed"
    (folder / "qrels").mkdir(parents=True)
    for f in ("corpus.jsonl", "queries.jsonl"):
        (folder / f).write_bytes((ADI / f).read_bytes())
    _adi_frames()[2].to_csv(folder / "qrels" / "test.csv", index=False)
    _same_content(load_dataset(folder), beir)


def _cli(*args: str) -> dict:
    from aiblox.cli.main import app

    result = CliRunner().invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_scores_every_form_alike(tmp_path):
    manifest = _manifest(tmp_path)
    csv_folder = _write(tmp_path / "csv", "csv", _adi_frames())
    common = ["--mode", "bm25", "--embedder", "hashing", "--json"]
    got = {}
    for label, dataset in (("beir", ADI), ("manifest", manifest), ("csv", csv_folder)):
        table = _cli("eval", str(dataset), "--db", str(tmp_path / f"{label}.duckdb"), *common)
        (got[label],) = table["systems"]
    assert got["beir"]["hashes"]["dataset"] == got["manifest"]["hashes"]["dataset"] \
        == got["csv"]["hashes"]["dataset"]
    assert 0.0 < got["beir"]["metrics"]["ndcg@10"] < 1.0
    assert got["beir"]["metrics"] == got["manifest"]["metrics"] == got["csv"]["metrics"]
    # ingest streams a tabular corpus and records the hash eval then finds up to date
    db = str(tmp_path / "ingested.duckdb")
    first = _cli("ingest", str(csv_folder), "--db", db, "--embedder", "hashing", "--json")
    assert first["items"]["inserted"] == 82 and first["dataset"] == "csv"
    again = _cli("ingest", str(csv_folder), "--db", db, "--embedder", "hashing", "--json")
    assert again["up_to_date"]
    (scored,) = _cli("eval", str(csv_folder), "--db", db, *common)["systems"]
    assert scored["metrics"] == got["beir"]["metrics"]


# --- bad input: file, line (row), field -----------------------------------------------------

_CORPUS = "_id,title,text\nd1,One,first doc\nd2,Two,second doc\n"
_QUERIES = "_id,text\nq1,first\nq2,second\n"
_QRELS = "query_id,doc_id,score\nq1,d1,1\nq2,d2,2\n"


def _folder(tmp_path: Path, corpus=_CORPUS, queries=_QUERIES, qrels=_QRELS) -> Path:
    folder = tmp_path / "bad"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.csv").write_text(corpus, encoding="utf-8")
    (folder / "queries.csv").write_text(queries, encoding="utf-8")
    (folder / "qrels" / "test.csv").write_text(qrels, encoding="utf-8")
    return folder


def test_small_folder_loads(tmp_path):
    ds = load_dataset(_folder(tmp_path))
    assert ds.qrels == {"test": {"q1": {"d1": 1}, "q2": {"d2": 2}}}
    assert ds.corpus["d2"].title == "Two" and ds.corpus["d2"].source_ref == "corpus.csv:3"


BAD = [  # (what, file, replaced text, expected start of the message, field)
    ("missing id", "corpus", _CORPUS.replace("d2,Two", ",Two"), "corpus.csv:3", "_id"),
    ("duplicate id", "corpus", _CORPUS.replace("d2,Two", "d1,Two"), "corpus.csv:3", "_id"),
    ("duplicate query", "queries", _QUERIES + "q1,again\n", "queries.csv:4", "_id"),
    ("missing column", "corpus", _CORPUS.replace("text", "body", 1), "corpus.csv", "text"),
    ("ragged row", "corpus", _CORPUS + "d3,Three\n", "corpus.csv:4", "row"),
    ("non-integer relevance", "qrels", _QRELS.replace("q2,d2,2", "q2,d2,1.5"),
     "test.csv:3", "score"),
    ("not a number", "qrels", _QRELS.replace("q2,d2,2", "q2,d2,high"), "test.csv:3", "score"),
    ("fullwidth digit grade", "qrels", _QRELS.replace("q2,d2,2", "q2,d2,\uff12"), "test.csv:3",
     "score"),
    ("unknown query", "qrels", _QRELS + "q9,d1,1\n", "test.csv:4", "query_id"),
    ("conflicting grades", "qrels", _QRELS + "q1,d1,0\n", "test.csv:4", "score"),
    ("no relevant judgment", "qrels", "query_id,doc_id,score\nq1,d1,0\n", "test.csv", "score"),
    ("empty file", "queries", "", "queries.csv", "header"),
    ("multi-line field", "corpus", _CORPUS + 'd3,"a\nb",c\nd3,x,y\n', "corpus.csv:6", "_id"),
    # a quote never closed once swallowed every row after it into one document, silently
    ("quote never closed", "corpus", _CORPUS.replace("d1,One,first doc", 'd1,One,"first doc'),
     "corpus.csv:2", "row"),
    # qrels/test.csv holds the test split: a row saying train was once scored as test
    ("another split's row", "qrels", "query_id,doc_id,score,split\nq1,d1,1,test\n"
                                     "q2,d2,2,train\n", "test.csv:3", "split"),
]


@pytest.mark.parametrize(("what", "role", "text", "where", "field"), BAD,
                         ids=[b[0] for b in BAD])
def test_bad_csv_names_file_line_and_field(tmp_path, what, role, text, where, field):
    folder = _folder(tmp_path, **{role: text})
    with pytest.raises(DatasetError) as err:
        load_dataset(folder)
    message = str(err.value)
    assert "\n" not in message
    assert re.search(re.escape(where) + r": field " + re.escape(repr(field)), message), message
    assert err.value.field == field


def test_a_tsv_field_is_the_text_between_tabs_quotes_and_all(tmp_path):
    """A TSV's quotes are text (MS MARCO's passages hold them): ``"alpha" is a word`` once lost
    its quotes, and a field starting with a quote swallowed the next row (d4 vanished)."""
    folder = tmp_path / "tsv"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.tsv").write_text('_id\ttitle\ttext\nd1\t\t"alpha" is a word\n'
                                       'd3\t\t"quoted start\nd4\t\tgamma delta\n')
    (folder / "queries.tsv").write_text('_id\ttext\nq1\t"gamma"\n')
    (folder / "qrels" / "test.tsv").write_text("query_id\tdoc_id\tscore\nq1\td4\t1\n")
    with warnings.catch_warnings():  # no doubled quote inside: no CSV writer quoted these
        warnings.simplefilter("error")
        ds = load_dataset(folder)
    assert {k: v.text for k, v in ds.corpus.items()} == {
        "d1": '"alpha" is a word', "d3": '"quoted start', "d4": "gamma delta"}
    assert ds.corpus["d4"].source_ref == "corpus.tsv:4" and ds.queries["q1"] == '"gamma"'


def test_a_tsv_a_csv_writer_quoted_is_warned_about_naming_file_line_and_column(tmp_path):
    """QA s7 D2: pandas' ``to_csv(sep="\\t")`` quotes a field holding ``"`` as CSV does, and
    the TSV reader reads a field as written, so ``He said "shaken"`` loaded in quotes, its
    quotes doubled, without a word. Such a field (``"`` first and last, ``""``
    inside) is warned about once per file, naming the line and column of the first and counting
    them; it is kept as written (the quotes may be the text). Written with
    ``quoting=csv.QUOTE_NONE`` (the README's advice), the frames load as they are."""
    import csv

    docs = pd.DataFrame({"_id": ["d1", "d2", "d3"], "text": [
        'He said "shaken, not stirred".', "Plain text.", 'say "a" and "b"']})
    queries = pd.DataFrame({"_id": ["q1", "q2"], "text": ['"shaken" martini', '"plain"']})
    qrels = pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [1]})

    def write(folder: Path, **options) -> Path:
        (folder / "qrels").mkdir(parents=True)
        for frame, rel in ((docs, "corpus"), (queries, "queries"), (qrels, "qrels/test")):
            frame.to_csv(folder / f"{rel}.tsv", sep="\t", index=False, **options)
        return folder

    quoted = write(tmp_path / "quoted")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_dataset(quoted)
    said = [str(w.message) for w in caught if "looks quoted" in str(w.message)]
    advice = ("looks quoted as a CSV writer quotes a field holding '\"' (RFC 4180; pandas' "
              "to_csv(sep=\"\\t\") writes so), but a TSV field is read as written, quotes and all")
    assert said == [
        f"{quoted / 'corpus.tsv'}:2: field 'text': '\"He said \"\"shaken, not stirred\"\".\"' "
        f"{advice} (2 fields of the file look so): kept as written; write the TSV with "
        f"quoting=csv.QUOTE_NONE, or write CSV",
        f"{quoted / 'queries.tsv'}:2: field 'text': '\"\"\"shaken\"\" martini\"' {advice} "
        f"(2 fields of the file look so): kept as written; write the TSV with "
        f"quoting=csv.QUOTE_NONE, or write CSV"]
    assert ds.corpus["d1"].text == '"He said ""shaken, not stirred""."'
    assert ds.queries["q2"] == '"""plain"""'
    plain = write(tmp_path / "plain", quoting=csv.QUOTE_NONE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_dataset(plain)
    assert ds.corpus["d1"].text == 'He said "shaken, not stirred".'
    assert ds.hash == Dataset.from_frames(docs, queries, qrels).hash
    as_csv = tmp_path / "csv"  # CSV reads its quoting: the same dataset, no warning
    (as_csv / "qrels").mkdir(parents=True)
    for frame, rel in ((docs, "corpus"), (queries, "queries"), (qrels, "qrels/test")):
        frame.to_csv(as_csv / f"{rel}.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_dataset(as_csv).hash == ds.hash


def test_missing_column_lists_the_present_ones(tmp_path):
    with pytest.raises(DatasetError, match=r"expected one of \['text'\].*present: "
                                           r"\['_id', 'title', 'body'\]"):
        load_dataset(_folder(tmp_path, corpus=_CORPUS.replace("text", "body", 1)))


def test_unknown_document_is_a_warning_as_in_beir(tmp_path):
    with pytest.warns(UserWarning, match=r"test.csv: 1 qrels rows name documents absent"):
        ds = load_dataset(_folder(tmp_path, qrels=_QRELS + "q1,d9,1\n"))
    assert ds.missing_qrels_docs == {"test": 1} and ds.qrels["test"]["q1"] == {"d1": 1, "d9": 1}


def test_not_utf8_names_the_line(tmp_path):
    folder = _folder(tmp_path)
    (folder / "queries.csv").write_bytes(b"_id,text\nq1,ok\nq2,caf\xe9\n")
    with pytest.raises(DatasetError, match=r"queries.csv:3: field 'encoding': not UTF-8"):
        load_dataset(folder)


def test_parquet_errors_name_the_row(tmp_path):
    folder = _folder(tmp_path)
    (folder / "corpus.csv").unlink()
    pd.DataFrame({"_id": ["d1", "d2", "d1"], "text": ["a", "b", "c"]}).to_parquet(
        folder / "corpus.parquet", index=False)
    with pytest.raises(DatasetError, match=r"corpus.parquet, row 3: field '_id': duplicate id "
                                           r"'d1' \(first at row 1\)"):
        load_dataset(folder)
    (folder / "corpus.parquet").write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match=r"corpus.parquet: field 'file': cannot read"):
        load_dataset(folder)


def test_a_null_text_is_refused_as_in_jsonl_and_an_empty_csv_cell_is_empty_text(tmp_path):
    """A parquet null (or a DataFrame's None / NaN) text stored an empty document, silently,
    where JSONL refuses ``"text": null`` (QA4 #4); a CSV cell is never null: an empty one is
    ``""``, as JSONL's ``"text": ""``."""
    folder = _folder(tmp_path)
    (folder / "corpus.csv").unlink()
    pd.DataFrame({"_id": ["d1", "d2"], "title": [None, "t"], "text": ["a", None]}).to_parquet(
        folder / "corpus.parquet", index=False)
    with pytest.raises(DatasetError, match=r"corpus.parquet, row 2: field 'text': null"):
        load_dataset(folder)
    queries = pd.DataFrame({"id": ["q1"], "text": ["a"]})
    qrels = pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [1]})
    for missing in (None, float("nan")):
        corpus = pd.DataFrame({"id": ["d1", "d2"], "text": ["a", missing]})
        with pytest.raises(DatasetError, match=r"corpus frame, row 1: field 'text': null"):
            Dataset.from_frames(corpus, queries, qrels)
    (folder / "corpus.parquet").unlink()
    (folder / "corpus.csv").write_text("_id,title,text\nd1,,a\nd2,t,\n")
    with warnings.catch_warnings():  # an empty document: BM25 cannot index it
        warnings.simplefilter("ignore")
        ds = load_dataset(folder)  # a null title is "", as in JSONL
    assert (ds.corpus["d1"].title, ds.corpus["d2"].text) == ("", "")


def test_frame_errors_name_the_frame_index_and_column():
    corpus = pd.DataFrame({"id": ["d1", None], "text": ["a", "b"]}, index=[10, 11])
    queries = pd.DataFrame({"id": ["q1"], "text": ["a"]})
    qrels = pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [1]})
    with pytest.raises(DatasetError, match=r"^corpus frame, row 11: field 'id': missing id"):
        Dataset.from_frames(corpus, queries, qrels)
    with pytest.raises(DatasetError, match=r"^queries frame: field 'text': missing column.*"
                                           r"present: \['id', 'query_text'\]"):
        Dataset.from_frames(corpus.dropna(), queries.rename(columns={"text": "query_text"}),
                            qrels)
    with pytest.raises(DatasetError, match=r"^qrels frame, row 0: field 'score': not a whole"):
        Dataset.from_frames(corpus.dropna(), queries, qrels.assign(score=[0.5]))
    with pytest.raises(DatasetError, match="^qrels frame, row 0: field 'score': not a number: "
                                           "'\u0661'$"):  # QA s7 D3: Arabic-Indic 1
        Dataset.from_frames(corpus.dropna(), queries, qrels.assign(score=["\u0661"]))
    with pytest.raises(DatasetError, match=r"corpus frame, row 0: field 'id': a float id"):
        Dataset.from_frames(pd.DataFrame({"id": [1.0], "text": ["a"]}), queries, qrels)
    with pytest.raises(DatasetError, match=r"ambiguous: columns \['_id', 'id'\]"):
        Dataset.from_frames(corpus.dropna().assign(_id="x"), queries, qrels)
    with pytest.raises(DatasetError, match=r"corpus frame: field 'frame': expected a pandas"):
        Dataset.from_frames([{"id": "d1"}], queries, qrels)


@pytest.mark.parametrize(("toml", "match"), [
    ('corpus = "docs.csv"\nqueries = "q.csv"\n', r"field 'qrels': missing"),
    ('corpus = "nope.csv"\nqueries = "q.csv"\nqrels = "r.csv"\n',
     r"field 'corpus': file not found"),
    ('corpus = "docs.csv"\nqueries = "q.csv"\nqrels = "r.csv"\ncolour = 1\n',
     r"field 'colour': unknown key; valid: \['name', 'corpus'"),
    ('corpus = "docs.csv"\nqueries = "q.csv"\nqrels = "r.csv"\n[columns.corpus]\nbody = "x"\n',
     r"field 'columns.corpus.body': unknown key; valid: \['id', 'text', 'title', 'metadata'\]"),
    ('corpus = "docs.csv"\nqueries = "q.csv"\nqrels = "r.csv"\n[columns.corpus]\ntext = "x"\n',
     r"docs.csv: field 'x': no column 'x' \(columns.corpus.text\); columns present"),
    ('corpus = "docs.csv"\nqueries = ', r"field 'toml': not valid TOML"),
])
def test_bad_manifest_names_the_key(tmp_path, toml, match):
    (tmp_path / "docs.csv").write_text(_CORPUS)
    (tmp_path / "q.csv").write_text(_QUERIES)
    (tmp_path / "r.csv").write_text(_QRELS)
    (tmp_path / "dataset.toml").write_text(toml)
    with pytest.raises(DatasetError, match=match):
        load_dataset(tmp_path)


def test_a_manifest_saved_with_a_bom_loads(tmp_path, beir):
    """QA s7 D6: a ``dataset.toml`` saved "UTF-8 with BOM" was refused ("Invalid statement (at
    line 1, column 1)") while a BOM opening a CSV, TSV, JSONL or qrels file is not text."""
    manifest = _manifest(tmp_path)
    written = load_dataset(manifest)
    manifest.write_bytes(b"\xef\xbb\xbf" + manifest.read_bytes())
    assert load_dataset(manifest).hash == written.hash == beir.hash
    folder = manifest.parent
    manifest.rename(folder / "dataset.toml")
    assert load_dataset(folder).hash == beir.hash


def test_manifest_splits_and_a_split_column(tmp_path):
    (tmp_path / "docs.csv").write_text(_CORPUS)
    (tmp_path / "q.csv").write_text(_QUERIES)
    (tmp_path / "r.csv").write_text("query_id,doc_id,score,split\nq1,d1,1,train\nq2,d2,1,\n")
    (tmp_path / "data.toml").write_text(
        'corpus = "docs.csv"\nqueries = "q.csv"\nqrels = "r.csv"\nsplit = "dev"\n')
    manifest = tmp_path / "data.toml"
    assert dataset_name(manifest) == "data" and available_splits(manifest) == ["dev", "train"]
    ds = load_dataset(manifest)
    assert ds.qrels == {"dev": {"q2": {"d2": 1}}, "train": {"q1": {"d1": 1}}}
    train = load_dataset(manifest, splits=["train"])
    assert list(train.qrels) == ["train"] and train.hash != ds.hash
    with pytest.raises(DatasetError, match=r"no split 'test'; available: \['dev', 'train'\]"):
        load_dataset(manifest, splits=["test"])


def test_same_rows_same_hash_in_a_new_process(tmp_path, beir):
    folder = _write(tmp_path / "csv", "csv", _adi_frames())
    code = ("from aiblox.data import load_dataset; import sys; "
            "print(load_dataset(sys.argv[1]).hash)")
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert done.stdout.strip() == beir.hash, done.stderr


def test_the_readme_own_data_example_runs(tmp_path):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Evaluate your own data"):]
    code = re.search(r"```python\n(.*?)```", block, re.S).group(1)  # type: ignore[union-attr]
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "True"  # the frames and the manifest give one dataset hash
    assert 0.0 < float(lines[-1].split()[-1]) <= 1.0


def test_no_warning_for_clean_tabular_data(tmp_path):
    folder = _write(tmp_path / "csv", "csv", _adi_frames())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_dataset(folder)


def test_a_sweep_on_tables_reproduces_the_pinned_beir_runs(tmp_path, monkeypatch):
    """The sample as a CSV corpus (metadata as JSON text), parquet queries, CSV qrels: the
    sample_fusion sweep on it gives every point's pinned ranked lists and metrics (stage keys
    differ: they hold the dataset hash, which is the hash of these rows)."""
    from aiblox.sweep import SweepSpec, load_spec, run_sweep

    sample = REPO / "datasets" / "sample"
    folder = tmp_path / "sample-tables"
    (folder / "qrels").mkdir(parents=True)
    corpus = pd.read_json(sample / "corpus.jsonl", lines=True, dtype=False)
    corpus.assign(metadata=[json.dumps(m) for m in corpus["metadata"]]).to_csv(
        folder / "corpus.csv", index=False)
    pd.read_json(sample / "queries.jsonl", lines=True, dtype=False).to_parquet(
        folder / "queries.parquet", index=False)
    for split in ("train", "test"):
        pd.read_csv(sample / "qrels" / f"{split}.tsv", sep="\t", dtype=str).to_csv(
            folder / "qrels" / f"{split}.csv", index=False)
    spec = load_spec(REPO / "evals" / "sweeps" / "sample_fusion.toml")
    spec = SweepSpec.model_validate({**spec.model_dump(), "dataset": str(folder)})
    monkeypatch.chdir(tmp_path)
    result = run_sweep(spec, cache_dir=tmp_path / "cache", db=str(tmp_path / "s.duckdb"),
                       progress=False)
    pinned = json.loads((REPO / "tests" / "sweep" / "pinned_keys.json").read_text())
    want = [(p["label"], {s: (v["run_hash"], v["metrics"]) for s, v in p["splits"].items()})
            for p in pinned["runs"]["sample_fusion"]["points"]]
    got = [(p.label, {s: (m.run_hash, {k: repr(v) for k, v in sorted(p.metrics[s].items())})
                      for s, m in sorted(p.manifest.splits.items())}) for p in result.points]
    assert got == want and len(got) >= 24
    assert result.dataset_hash == load_dataset(folder).hash != load_dataset(sample).hash


def test_a_split_column_in_a_folder_file_is_named_when_a_split_is_missing(tmp_path):
    """``qrels/all.csv`` whose rows carry a ``split`` column is the split ``all`` (a folder's file
    is the split its name says): asking for ``test`` said only "no split 'test'; available:
    ['all']". The error now names the file's column and the manifest line that reads it, and
    that line works."""
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.csv").write_text("id,title,text\nd1,A,alpha\nd2,B,gamma\n")
    (tmp_path / "queries.csv").write_text("id,text\nq1,alpha\nq2,gamma\n")
    (tmp_path / "qrels" / "all.csv").write_text(
        "query_id,doc_id,score,split\nq1,d1,1,test\nq2,d2,1,train\n")
    with pytest.raises(DatasetError) as exc:
        load_dataset(tmp_path, splits=["test"])
    assert exc.value.message == (
        "no split 'test'; available: ['all']; qrels/all.csv has a 'split' column, but a file in "
        "the qrels folder is the split its name says ('all'): to read each row's split from "
        "that column, name the file in dataset.toml (qrels = \"qrels/all.csv\")")
    (tmp_path / "dataset.toml").write_text(
        'corpus = "corpus.csv"\nqueries = "queries.csv"\nqrels = "qrels/all.csv"\n')
    ds = load_dataset(tmp_path, splits=["test", "train"])
    assert ds.qrels == {"test": {"q1": {"d1": 1}}, "train": {"q2": {"d2": 1}}}
    (tmp_path / "dataset.toml").unlink()  # no split column in the folder: the plain message
    (tmp_path / "qrels" / "all.csv").unlink()
    (tmp_path / "qrels" / "test.csv").write_text("query_id,doc_id,score\nq1,d1,1\n")
    with pytest.raises(DatasetError) as exc:
        load_dataset(tmp_path, splits=["dev"])
    assert exc.value.message == "no split 'dev'; available: ['test']"


def test_documents_alone_are_ingested_searched_and_refused_for_evaluation(tmp_path,
                                                                         monkeypatch):
    """A folder with a BEIR corpus and nothing else (a user's documents, no queries) was "no
    BEIR dataset here": it loads with no queries or splits, ingests, answers searches, and an
    evaluation says what it lacks. ``.`` is named after the folder it is."""
    from aiblox.cli.main import app

    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "corpus.jsonl").write_text(
        '{"_id": "a", "title": "Okapi", "text": "BM25 weighs term frequency."}\n'
        '{"_id": "b", "text": "HNSW is a graph index."}\n', encoding="utf-8")
    ds = load_dataset(docs)
    assert sorted(ds.corpus) == ["a", "b"] and not ds.queries and available_splits(docs) == []
    assert load_dataset(docs).hash == ds.hash
    monkeypatch.chdir(docs)
    assert dataset_name(".") == "mydocs"
    env = {"AIBLOX_NO_PROGRESS": "1"}
    db = str(tmp_path / "d.duckdb")
    r = CliRunner().invoke(app, ["ingest", ".", "--db", db, "--embedder", "hashing"], env=env)
    assert r.exit_code == 0 and "ingested mydocs into" in r.output, r.output
    r = CliRunner().invoke(app, ["search", "graph index", "--db", db, "--mode", "bm25",
                                 "--json"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["candidates"][0]["item_id"] == "b"
    r = CliRunner().invoke(app, ["eval", ".", "--db", db, "--embedder", "hashing"], env=env)
    assert r.exit_code == 2 and "mydocs holds documents alone (no queries or judgements)" in \
        " ".join(r.output.split()), r.output
