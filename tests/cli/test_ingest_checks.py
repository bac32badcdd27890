"""``aiblox ingest`` checks a dataset's queries, qrels and answers files as ``aiblox eval`` does
(file, line and field of the first fault) before any write, though it streams the corpus
alone: a dataset that ingests is one that evaluates (QA4 #3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "sample"
runner = CliRunner()


def _edit(folder: Path, rel: str, change) -> None:  # noqa: ANN001 - a str -> str function
    p = folder / rel
    p.write_text(change(p.read_text(encoding="utf-8")), encoding="utf-8")


def _first_query_without_text(text: str) -> str:
    lines = text.splitlines(keepends=True)
    obj = json.loads(lines[0])
    del obj["text"]
    return json.dumps(obj) + "\n" + "".join(lines[1:])


CASES = {
    "a grade that is no number": (
        "qrels/test.tsv", lambda t: t + "q01\td01\tabc\n", "test.tsv", "'score'"),
    "an unknown query": (
        "qrels/test.tsv", lambda t: t + "nope\td01\t1\n", "test.tsv", "unknown query 'nope'"),
    "qrels not UTF-8": (
        "qrels/test.tsv", None, "test.tsv", "'encoding'"),
    "a query without text": (
        "queries.jsonl", _first_query_without_text, "queries.jsonl:1", "'text': missing"),
    "an answer to an unknown query": (
        "answers.jsonl", lambda t: t + json.dumps({"_id": "nope", "corpus-id": "d01",
                                                    "answers": ["x"], "answer_starts": [0]}) + "\n",
        "answers.jsonl", "unknown query 'nope'"),
    "no query at all": (
        "queries.jsonl", lambda t: "", "test.tsv", "the queries file holds no query"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ingest_refuses_bad_queries_and_qrels_before_any_write(tmp_path, case):
    folder = tmp_path / "sample"
    shutil.copytree(SAMPLE, folder)
    rel, change, where, needle = CASES[case]
    if change is None:
        with open(folder / rel, "ab") as f:
            f.write(b"q01\t\xff\xfe\t1\n")
    else:
        _edit(folder, rel, change)
    db = tmp_path / "s.duckdb"
    r = runner.invoke(app, ["ingest", str(folder), "--db", str(db), "--embedder", "hashing"],
                      env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "300"})
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert where in said and needle in said and "Traceback" not in said, said
    # the same fault as eval's
    e = runner.invoke(app, ["eval", str(folder), "--db", str(tmp_path / "e.duckdb"),
                            "--embedder", "hashing", "--mode", "bm25"],
                      env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "300"})
    assert e.exit_code == 2 and needle in " ".join(e.output.split()), e.output
    if db.exists():  # nothing written
        from aiblox.stores import open_store

        with open_store(str(db)) as s:
            assert s.count_items() == 0 and "syncing" not in s.read_meta()
