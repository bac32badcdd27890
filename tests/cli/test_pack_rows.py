"""``pack verify`` checks the stored row's columns against the pack they stand beside, and says
when a signature was not checked; ``pack list`` and ``pack show`` show what the pack says
(QA audit: columns changed in the database were listed and passed verify)."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app

runner = CliRunner()
ENV = {"AIBLOX_NO_PROGRESS": "1"}
Q = "Who developed the probabilistic relevance framework behind BM25?"


def _run(*args, code=0):
    r = runner.invoke(app, list(args), env=ENV)
    assert r.exit_code == code, r.output
    return r


@pytest.fixture(scope="module")
def answered(tmp_path_factory):
    """A store with one unsigned pack, and a signed pack's signature."""
    tmp = tmp_path_factory.mktemp("pack_rows")
    db = str(tmp / "a.duckdb")
    _run("ingest", "sample", "--db", db, "--embedder", "hashing")
    pack_id = json.loads(_run("answer", Q, "--db", db, "--embedder", "hashing", "--json",
                              "--retrieved-at", "2024-01-15T10:30:00Z").stdout)["pack_id"]
    key = tmp / "t.key"
    key.write_bytes(b"tenant-secret")
    signed = json.loads(_run("answer", Q, "--db", db, "--embedder", "hashing", "--json",
                             "--key-file", str(key)).stdout)["pack_id"]
    con = duckdb.connect(db)
    stored = dict(con.execute("SELECT pack_id, json FROM evidence_packs").fetchall())
    con.close()
    return {"db": db, "pack": pack_id, "key": key, "json": stored[pack_id],
            "signature": json.loads(stored[signed])["signature"]}


def _copy(answered, tmp_path, sql, *params):
    db = str(tmp_path / "copy.duckdb")
    shutil.copy(answered["db"], db)
    con = duckdb.connect(db)
    con.execute(sql, list(params))
    con.close()
    return db


def _listed(db, pack_id):
    return {p["pack_id"]: p for p in json.loads(_run("pack", "list", "--db", db,
                                                     "--json").stdout)}[pack_id]


def test_a_row_whose_columns_disagree_with_its_pack_fails_verify(answered, tmp_path):
    pack_id = answered["pack"]
    db = _copy(answered, tmp_path, "UPDATE evidence_packs SET tenant_id = 'evil', signed = true, "
               "parent_pack_id = 'pack_0000000000000000' WHERE pack_id = ?", pack_id)
    r = _run("pack", "verify", pack_id, "--db", db, code=1)
    assert "the stored row's tenant_id is 'evil' but the pack says 'default'" in r.stdout
    assert "the stored row's signed is True but the pack says False" in r.stdout
    assert "the stored row's parent_pack_id is 'pack_0000000000000000'" in r.stdout
    _run("pack", "export", pack_id, "--db", db, code=1)
    # the list shows what the pack says, not the altered columns
    listed = _listed(db, pack_id)
    assert (listed["tenant"], listed["signed"], listed["parent"]) == ("default", False, None)
    table = _run("pack", "list", "--db", db).stdout
    assert "evil" not in table


def test_a_signature_added_to_an_unsigned_pack_is_caught_or_said_unchecked(answered, tmp_path):
    """A bogus signature in the JSON passed `pack verify` without a key with nothing said,
    and `pack show` said signed: yes while `pack list` said no."""
    pack_id = answered["pack"]
    bogus = {**answered["signature"], "value": "0" * 64}
    faked = json.dumps({**json.loads(answered["json"]), "signature": bogus})
    db = _copy(answered, tmp_path, "UPDATE evidence_packs SET json = ? WHERE pack_id = ?",
               faked, pack_id)
    r = _run("pack", "verify", pack_id, "--db", db, code=1)  # the row says unsigned
    assert "the stored row's signed is False but the pack says True" in r.stdout
    # the column changed too: only a key can tell, and verify without one says so
    con = duckdb.connect(db)
    con.execute("UPDATE evidence_packs SET signed = true WHERE pack_id = ?", [pack_id])
    con.close()
    r = _run("pack", "verify", pack_id, "--db", db)
    assert r.stdout.strip() == (f"OK {pack_id}: id matches content, signature not checked "
                                "(give --key-file to check it)")
    r = _run("pack", "verify", pack_id, "--db", db, "--key-file", str(answered["key"]), code=1)
    assert "signature does not match" in r.stdout
    shown = _run("pack", "show", pack_id, "--db", db)
    assert "signed: yes" in shown.stderr and _listed(db, pack_id)["signed"] is True
