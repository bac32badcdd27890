"""``aiblox ingest --vectors FILE`` always reads and checks the file, and a new file's vectors
replace the old ones, with everything computed from them (dense runs, vector indexes, sweep
stage keys). Real DuckDB files, real parquet files, the CLI runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.contracts.retrieval import VectorConfig
from aiblox.data import load_dataset
from aiblox.embedding import HashingEmbedder
from aiblox.hashing import sha256_text
from aiblox.indexes import StoreIndexes
from aiblox.stores import DuckDBStore, store_fingerprint
from aiblox.stores.identity import read_mark, read_sync

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "datasets" / "sample"
MODEL = HashingEmbedder().model_id
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def _said(r) -> str:
    return " ".join(r.output.split())


def _rows() -> list[tuple[str, str]]:
    """``(id, sha256 of the text embedded)`` of every sample document, then every query."""
    ds = load_dataset(SAMPLE)
    return ([(d.id, sha256_text(d.embedding_text)) for d in ds.corpus.values()]
            + [(q, sha256_text(t)) for q, t in ds.queries.items()])


def _write(path: Path, rows: list[tuple[str, str]], vectors: np.ndarray) -> Path:
    pq.write_table(pa.table({"_id": [r[0] for r in rows], "text_sha256": [r[1] for r in rows],
                             "vector": [[float(x) for x in v] for v in vectors]}), path)
    return path


def _unit(n: int, seed: int, dim: int = 384) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _ingest(db: str, *extra: str) -> dict:
    r = _run("ingest", str(SAMPLE), "--db", db, "--embedder", "hashing", "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _dense(db: str) -> dict:
    r = _run("eval", str(SAMPLE), "--db", db, "--embedder", "hashing", "--mode", "dense",
             "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["systems"][0]


def _state(db: str) -> tuple:
    with DuckDBStore(db) as s:
        return (store_fingerprint(s, MODEL), read_sync(s), s.item_vectors(MODEL)[1].tobytes(),
                s.get_embeddings(MODEL, [h for _, h in _rows()]).keys())


def test_a_new_file_replaces_the_vectors_and_what_was_computed_from_them(tmp_path):
    db = str(tmp_path / "s.duckdb")
    first = _ingest(db)
    assert first["vectors_written"] == 40 and first["vector_rows"] == 0
    before = _dense(db)
    with DuckDBStore(db) as s:
        fp_before = store_fingerprint(s, MODEL)
        knn_before = StoreIndexes(s).vector_key(MODEL, VectorConfig())[0]

    rows = _rows()
    new = _write(tmp_path / "new.parquet", rows, _unit(len(rows), seed=1))
    report = _ingest(db, "--vectors", str(new))  # the store was up to date: read all the same
    assert report["up_to_date"] is False and report["vector_rows"] == 56
    assert report["vectors_imported"] == 56 and report["vectors_written"] == 40
    assert report["items"]["unchanged"] == 40
    after = _dense(db)
    assert after["hashes"]["run"] != before["hashes"]["run"]
    assert round(before["metrics"]["ndcg@10"], 4) == 0.4688
    assert round(after["metrics"]["ndcg@10"], 4) == 0.1079
    # what a store ingested with that file from the start gives
    fresh = str(tmp_path / "fresh.duckdb")
    _ingest(fresh, "--vectors", str(new))
    assert _dense(fresh)["hashes"]["run"] == after["hashes"]["run"]
    assert _dense(fresh)["metrics"] == after["metrics"]
    with DuckDBStore(db) as s, DuckDBStore(fresh) as f:
        ids, m = s.item_vectors(MODEL)
        assert (ids, m.tobytes()) == (f.item_vectors(MODEL)[0], f.item_vectors(MODEL)[1].tobytes())
        np.testing.assert_array_equal(m[0], _unit(len(rows), seed=1)[0])
        # stage keys and index keys follow: the vectors digest moved
        fp = store_fingerprint(s, MODEL)
        assert fp["items"] == fp_before["items"] and fp["vectors"] != fp_before["vectors"]
        assert StoreIndexes(s).vector_key(MODEL, VectorConfig())[0] != knn_before
        assert read_mark(s) is None and read_sync(s) is not None

    again = _ingest(db, "--vectors", str(new))  # the same file again: nothing to do
    assert again["up_to_date"] is True and again["vectors_imported"] == 0
    r = _run("ingest", str(SAMPLE), "--db", db, "--embedder", "hashing", "--vectors", str(new))
    assert "56 rows of --vectors checked, 0 new or changed" in _said(r)


def test_query_vectors_alone_replaced_move_the_stage_keys(tmp_path):
    """A file of query vectors changes no item vector, but the dense run reads the query
    vectors from the store's embedding cache: the fingerprint (in every stage key) moves."""
    db = str(tmp_path / "s.duckdb")
    _ingest(db)
    before = _dense(db)
    with DuckDBStore(db) as s:
        fp = store_fingerprint(s, MODEL)
    queries = _rows()[40:]
    qfile = _write(tmp_path / "queries.parquet", queries, _unit(len(queries), seed=2))
    report = _ingest(db, "--vectors", str(qfile))
    assert report["vectors_imported"] == 16 and report["vectors_written"] == 0
    after = _dense(db)
    assert after["hashes"]["run"] != before["hashes"]["run"]
    with DuckDBStore(db) as s:
        moved = store_fingerprint(s, MODEL)
        assert moved["items"] == fp["items"] and moved["vectors"] != fp["vectors"]
        assert read_sync(s).vectors[MODEL] == fp["vectors"]  # the item vectors are the same


TYPES = {"text vector": "of type string: a vector is a list of numbers (floats or integers), "
                        "not text",
         "nested vector": "of type list<element: list<element: double>>: a vector is a list of "
                          "numbers (floats or integers), not a list of lists",
         "bool vector": "not a list of bool",
         "binary hash": "field 'text_sha256': of type binary: the sha256 is text"}
"""Columns of a type no row can be read as (once an internal ArrowNotImplementedError, "setting
an array element with a sequence." with no file, "Invalid UTF8 payload", or booleans read as
vectors of ones)."""
MODELS = {"other model name": "corpus.all-MiniLM-L6-v2.parquet",
          "other hashing name": "queries.hashing-v1-256.parquet",
          "other model metadata": "vectors.parquet"}
"""Files another model made (once imported under the embedder's id: MiniLM's vectors stored
as hashing-v1-384's)."""


@pytest.mark.parametrize("case", ["missing", "nan", "inf", "zeros", "dimension", "unknown id",
                                  "other text", "not parquet", "two vectors", *TYPES, *MODELS])
def test_a_bad_file_is_an_error_naming_file_and_row_and_nothing_changes(tmp_path, case):
    db = str(tmp_path / "s.duckdb")
    _ingest(db)
    before = _state(db)
    rows = _rows()
    vectors = _unit(len(rows), seed=3)
    bad = tmp_path / MODELS.get(case, f"{case.replace(' ', '_')}.parquet")
    where = "row 8"  # the 8th row: rows count from 1, as the dataset loader's
    columns = {"_id": [r[0] for r in rows], "text_sha256": [r[1] for r in rows],
               "vector": [[float(x) for x in v] for v in vectors]}
    if case in TYPES:  # refused at the first row, before any is read
        where = "row 1"
        if case == "text vector":
            columns["vector"] = [json.dumps(v) for v in columns["vector"]]
        elif case == "nested vector":
            columns["vector"] = [[v] for v in columns["vector"]]
        elif case == "bool vector":
            columns["vector"] = [[True] * 384 for _ in rows]
        else:
            columns["text_sha256"] = [bytes.fromhex(r[1]) for r in rows]
        pq.write_table(pa.table(columns), bad)
    elif case in MODELS:
        where = "field 'file name': made with " + bad.name.split(".")[1]
        table = pa.table(columns)
        if case == "other model metadata":
            where = "field 'aiblox.model_id': made with all-MiniLM-L6-v2"
            table = table.replace_schema_metadata({"aiblox.model_id": "all-MiniLM-L6-v2"})
        pq.write_table(table, bad)
    elif case == "missing":
        where = "no such file"
    elif case == "nan":
        vectors[7, 3] = np.nan
        _write(bad, rows, vectors)
    elif case == "inf":
        vectors[7, 0] = np.inf
        _write(bad, rows, vectors)
    elif case == "zeros":  # no direction: dense search scored it 0, never found (QA 28)
        vectors[7] = 0.0
        _write(bad, rows, vectors)
    elif case == "dimension":
        pq.write_table(pa.table({
            "_id": [r[0] for r in rows], "text_sha256": [r[1] for r in rows],
            "vector": [[0.1] * (383 if i == 7 else 384) for i in range(len(rows))]}), bad)
    elif case == "unknown id":
        rows[7] = ("no-such-doc", rows[7][1])
        _write(bad, rows, vectors)
    elif case == "other text":
        rows[7] = (rows[7][0], sha256_text("some other text"))
        _write(bad, rows, vectors)
    elif case == "two vectors":  # row 7 repeats row 2 (its id and text) with another vector
        # (once accepted: a change claimed and the kNN index marked stale, no vector changed)
        rows[7] = rows[2]
        _write(bad, rows, vectors)
    else:
        bad.write_text("not a parquet file")
        where = "not a parquet file"
    r = _run("ingest", str(SAMPLE), "--db", db, "--embedder", "hashing", "--vectors", str(bad))
    said = _said(r)
    assert r.exit_code == 2, r.output
    assert said.startswith("error:") and str(bad) in said and where in said, said
    assert "Traceback" not in said and len(r.output.strip().splitlines()) == 1
    expected = {"nan": "NaN or infinity", "inf": "NaN or infinity",
                "zeros": "all zeros: no direction, so dense search could never find",
                "dimension": "dimension 383, expected 384", "unknown id": "unknown id",
                "other text": "is not the sha256 of the text of document 'd08'",
                "two vectors": f"_id {rows[2][0]!r} (text_sha256 {rows[2][1][:16]}...) has "
                               f"another vector than row 3 of {bad}",
                **TYPES, **dict.fromkeys(MODELS, f"not with {MODEL}, the embedder's model")}
    assert expected.get(case, "") in said
    assert _state(db) == before  # nothing stored lost, nothing written
    with DuckDBStore(db) as s:
        assert read_mark(s) is None


@pytest.mark.parametrize("name", ["vectors.parquet", "corpus.v2.parquet",
                                  f"corpus.{MODEL}.parquet", f"corpus.{MODEL}+cuda.parquet",
                                  "corpus.all-MiniLM-L6-v2-ish.parquet"])
def test_a_file_whose_name_or_metadata_names_no_other_model_is_imported(tmp_path, name):
    """Only a name of aiblox's form ``<stem>.<model id>.parquet`` with the id of an embedder
    aiblox knows names a model: the embedder's own (on any device) or none is imported."""
    rows = _rows()
    table = pa.table({"_id": [r[0] for r in rows], "text_sha256": [r[1] for r in rows],
                      "vector": [[float(x) for x in v] for v in _unit(len(rows), seed=8)]})
    if name == "vectors.parquet":
        table = table.replace_schema_metadata({"aiblox.model_id": MODEL})
    pq.write_table(table, tmp_path / name)
    report = _ingest(str(tmp_path / "s.duckdb"), "--vectors", str(tmp_path / name))
    assert report["vectors_imported"] == len(rows)


def test_vectors_in_eval_are_checked_too_and_a_copy_of_the_dataset_is_not_another(tmp_path):
    db = str(tmp_path / "s.duckdb")
    rows = _rows()
    rows[3] = ("zzz", rows[3][1])
    bad = _write(tmp_path / "bad.parquet", rows, _unit(len(rows), seed=5))
    r = _run("eval", str(SAMPLE), "--db", db, "--embedder", "hashing", "--mode", "dense",
             "--vectors", str(bad))
    assert r.exit_code == 2 and "bad.parquet, row 4, field '_id': unknown id 'zzz'" in _said(r)
    # a file made for another copy of the dataset whose document d01 was edited
    ds = tmp_path / "mydata"
    shutil.copytree(SAMPLE, ds, ignore=shutil.ignore_patterns("*.py", "README.md"))
    lines = (ds / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[0])
    doc["text"] += " (edited)"
    (ds / "corpus.jsonl").write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n",
                                     encoding="utf-8")
    good = _write(tmp_path / "good.parquet", _rows(), _unit(56, seed=6))
    r = _run("ingest", str(ds), "--db", str(tmp_path / "m.duckdb"), "--embedder", "hashing",
             "--vectors", str(good))
    assert r.exit_code == 2
    assert "good.parquet, row 1, field 'text_sha256'" in _said(r) and "'d01'" in _said(r)


@pytest.mark.parametrize("prefix", ["", "duckdb:///"])
def test_eval_with_a_bad_file_leaves_no_store_it_made_and_keeps_one_it_found(tmp_path, prefix):
    """As ``aiblox ingest``: the store file a failed eval made is removed (it left an empty
    store behind, 0 items, for the next command to find); one that was there, even empty, is
    kept."""
    rows = _rows()
    vectors = _unit(len(rows), seed=7)
    vectors[7, 3] = np.nan
    bad = _write(tmp_path / "nan.parquet", rows, vectors)
    db = tmp_path / "new.duckdb"
    r = _run("eval", str(SAMPLE), "--db", f"{prefix}{db}", "--embedder", "hashing", "--mode",
             "dense", "--vectors", str(bad))
    assert r.exit_code == 2 and f"{bad}, row 8, field 'vector': contains NaN" in _said(r)
    assert not list(tmp_path.glob("new.duckdb*"))
    DuckDBStore(db).close()  # there before, empty
    r = _run("eval", str(SAMPLE), "--db", f"{prefix}{db}", "--embedder", "hashing", "--mode",
             "dense", "--vectors", str(bad))
    assert r.exit_code == 2 and db.is_file()


def test_a_text_repeated_with_its_vector_up_to_float_noise_keeps_the_first(tmp_path):
    """One text embedded in two batches differs in its last bits (squad-v1.1-dev's shared
    query vectors hold two such pairs, 7.8e-8 apart): the first row's vector is kept, the
    import is no error and a second run changes nothing."""
    db = str(tmp_path / "s.duckdb")
    _ingest(db)
    rows = _rows()
    vectors = _unit(len(rows), seed=4)
    rows[7] = rows[2]
    vectors[7] = vectors[2] + np.float32(7.8e-8)
    assert not np.array_equal(vectors[7], vectors[2])
    path = _write(tmp_path / "noise.parquet", rows, vectors)
    first = _ingest(db, "--vectors", str(path))
    assert first["vectors_imported"] == len(rows) - 1  # one row per text
    state = _state(db)
    again = _ingest(db, "--vectors", str(path))
    assert again["vectors_imported"] == 0 and _state(db) == state


def test_whole_number_ids_are_read_as_their_digits_and_other_types_refused(tmp_path):
    """pandas writes numeric ids as int64: the file named document "1" as 1, and the import
    said no document had the id 1 (the dataset loaders read a whole-number id as its digits)."""
    from aiblox.embedding.vectors import VectorImportError, read_vectors

    h = sha256_text("text")
    vecs = [[0.6, 0.8], [1.0, 0.0]]
    pq.write_table(pa.table({"_id": pa.array([1, 20], pa.int64()), "text_sha256": [h, h],
                             "vector": vecs}), tmp_path / "ints.parquet")
    ids, hashes, matrix = read_vectors(tmp_path / "ints.parquet", 2)
    assert ids == ["1", "20"] and hashes == [h, h] and matrix.shape == (2, 2)
    pq.write_table(pa.table({"_id": [1.0, 2.5], "text_sha256": [h, h], "vector": vecs}),
                   tmp_path / "floats.parquet")
    with pytest.raises(VectorImportError, match=r"row 1, field '_id': of type double: ids are "
                                                r"text \(or whole numbers"):
        read_vectors(tmp_path / "floats.parquet", 2)
