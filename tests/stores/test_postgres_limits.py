"""Documents a PostgreSQL store cannot hold (an id over the btree limit, a full-text entry over
the tsvector limit): refused before the sync's first write, naming the file, line, id and
field, the store left as it was and searchable; a limit met by a write is a located data
error, never "unreachable"."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest
from sqlalchemy import exc
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.contracts import ItemRecord
from aiblox.stores import StoreError
from aiblox.stores.identity import check_searchable, read_mark

ENV = {"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "400"}


def _dump(n: int = 120_000) -> str:
    """Text of ``n`` distinct 9-letter words: a tsvector of about 1.6 MB, over the limit."""
    rng = random.Random(1)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=9)) for _ in range(n))


def _dataset(root: Path) -> Path:
    folder = root / "ds"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": f"doc {i}", "text": f"foxes and hounds number {i}"}
            for i in range(5)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "foxes"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return folder


def _append(folder: Path, doc: dict) -> None:
    with open(folder / "corpus.jsonl", "a") as f:
        f.write(json.dumps(doc) + "\n")


@pytest.mark.parametrize("doc, field", [
    ({"_id": "dump", "title": "log", "text": _dump()}, "text"),
    ({"_id": "x" * 9000, "title": "t", "text": "a short document"}, "_id"),
])
def test_a_document_postgres_cannot_hold_is_refused_before_any_write(pg_store, tmp_path, doc,
                                                                     field):
    url = pg_store.url.render_as_string(hide_password=False)
    folder = _dataset(tmp_path)
    runner = CliRunner()
    r = runner.invoke(app, ["ingest", str(folder), "--db", url, "--embedder", "hashing"],
                      env=ENV)
    assert r.exit_code == 0, r.output
    before = pg_store.read_meta()["sync"]
    _append(folder, doc)
    r = runner.invoke(app, ["ingest", str(folder), "--db", url, "--embedder", "hashing"],
                      env=ENV)
    assert r.exit_code == 2, r.output
    line = " ".join(r.output.split())
    assert f"{folder.resolve() / 'corpus.jsonl'}:6: field {field!r}" in line, line
    assert doc["_id"][:40] in line and "unreachable" not in line and "Traceback" not in line
    # nothing written: not half-synced, the last sync's record stands, searchable as it was
    assert read_mark(pg_store) is None and pg_store.read_meta()["sync"] == before
    check_searchable(pg_store, "hashing-v1-384")
    assert sorted(pg_store.item_hashes()) == [f"d{i}" for i in range(5)]
    r = runner.invoke(app, ["search", "hounds", "--db", url, "--mode", "bm25", "--json"],
                      env=ENV)
    assert r.exit_code == 0, r.output


def test_a_limit_met_by_a_write_names_the_document_and_field_not_the_connection(pg_store):
    # past the checks made before a sync: the upsert itself locates the document at fault
    good = ItemRecord(id="ok", title="t", text="fine", source_ref="corpus.jsonl:1")
    big = ItemRecord(id="dump", title="log", text=_dump(), source_ref="corpus.jsonl:2")
    with pytest.raises(StoreError) as err:
        pg_store.upsert_items([good, big])
    message = str(err.value)
    assert message.startswith("corpus.jsonl:2: field 'text' of document 'dump'"), message
    assert "tsvector" in message and "unreachable" not in message
    assert pg_store.item_hashes() == {}  # the batch is written whole or not at all
    from aiblox.stores.base import ItemRefused
    from aiblox.stores.postgres.limits import MAX_ID_BYTES

    assert isinstance(err.value, ItemRefused) and err.value.field == "text"
    long_id = ItemRecord(id="y" * (MAX_ID_BYTES + 1), text="x", source_ref="corpus.jsonl:3")
    with pytest.raises(ItemRefused, match=r"corpus.jsonl:3: field '_id'"):
        pg_store.upsert_items([long_id])


def test_an_id_at_the_limit_and_a_large_document_under_it_are_stored(pg_store):
    from aiblox.stores.postgres.limits import MAX_ID_BYTES, TSVECTOR_SAFE_BYTES

    words = " ".join(f"w{i}" for i in range(TSVECTOR_SAFE_BYTES // 6))  # one of 100+ KiB
    items = [ItemRecord(id="é" * (MAX_ID_BYTES // 2), text="x"),
             ItemRecord(id="big", text=words)]
    for it in items:
        pg_store.check_item(it)
    assert pg_store.upsert_items(items).inserted == 2
    pg_store.check_item(items[1])  # stored with the same content: not measured again


def test_a_program_limit_error_is_not_called_unreachable(pg_store):
    class Limit(Exception):
        sqlstate = "54000"

    class Down(Exception):
        sqlstate = "08006"

    for orig, unreachable in ((Limit("string is too long for tsvector"), False),
                              (Down("server closed the connection"), True)):
        with pytest.raises(StoreError) as err, pg_store.db_errors("upsert items"):
            raise exc.OperationalError("INSERT ...", {}, orig)
        assert ("unreachable" in str(err.value)) is unreachable, str(err.value)
