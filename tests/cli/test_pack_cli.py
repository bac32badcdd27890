"""``aiblox answer`` stores an evidence pack; ``aiblox pack show|verify|export|list`` read it
back, check it (a tampered stored pack fails, and so does a row whose columns disagree with its
pack) and export it; ``pack list`` and ``pack show`` show what the pack says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.evidence import pack_content, pack_from_json, pack_to_json, revise_pack, verify_pack
from aiblox.hashing import sha256_hex
from aiblox.stores import DuckDBStore

runner = CliRunner()
ENV = {"AIBLOX_NO_PROGRESS": "1"}
Q = "Who developed the probabilistic relevance framework behind BM25?"
AT = "2024-01-15T10:30:00Z"


def _run(*args, code=0):
    r = runner.invoke(app, list(args), env=ENV)
    assert r.exit_code == code, r.output
    return r


@pytest.fixture(scope="module")
def answered(tmp_path_factory):
    """A sample store with one answered (unsigned) and one signed pack."""
    tmp = tmp_path_factory.mktemp("pack_cli")
    db = str(tmp / "a.duckdb")
    _run("ingest", "sample", "--db", db, "--embedder", "hashing")
    cold = json.loads(_run("answer", Q, "--db", db, "--embedder", "hashing", "--json",
                           "--retrieved-at", AT).stdout)
    out = json.loads(_run("answer", Q, "--db", db, "--embedder", "hashing", "--json",
                          "--retrieved-at", AT).stdout)
    key = tmp / "tenant.key"
    key.write_bytes(b"tenant-a-secret\n")
    signed = json.loads(_run("answer", Q, "--db", db, "--embedder", "hashing", "--json",
                             "--tenant", "tenant-a", "--key-file", str(key)).stdout)
    return {"db": db, "cold": cold, "out": out, "signed": signed["pack_id"], "key": key, "tmp": tmp}


def test_answer_json_has_source_cards_and_a_stored_pack(answered):
    db, out = answered["db"], answered["out"]
    assert out["sources"] and out["sources"][0]["rank"] == 1
    pack_id = out["pack_id"]
    assert pack_id.startswith("pack_") and len(pack_id) == 21
    # the same question at the same retrieval time gives the same pack: stored once
    again = json.loads(_run("answer", Q, "--db", db, "--embedder", "hashing", "--json",
                            "--retrieved-at", AT).stdout)
    assert again["pack_id"] == pack_id
    cold_id = answered["cold"]["pack_id"]
    with DuckDBStore(db) as store:
        ids = [r["pack_id"] for r in store.list_evidence_packs()]
        pack = pack_from_json(store.get_evidence_pack(pack_id)["json"])
        cold = pack_from_json(store.get_evidence_pack(cold_id)["json"])
    assert ids.count(pack_id) == 1 and answered["signed"] in ids
    # the first answer filled the chunk cache, the second read it: the same pack id all the
    # same (cache counts are observations, outside the hashed content); the stored pack is the
    # first one, whose observations show the writes
    assert cold_id == pack_id and cold == pack
    seen = cold.observations["retrieval"]
    assert seen["counts"]["chunk_cache_writes"] > 0 and seen["counts"]["chunk_cache_hits"] == 0
    assert "chunk cache" in seen["side_effects"][0]
    assert cold.tool_calls[0].side_effects == []
    assert not any(k.startswith("chunk_cache") for k in cold.tool_calls[0].outputs["counts"])
    assert pack.decision.kind == "answer" and pack.decision.text == out["answer_text"]
    assert pack.trace_id == out["request_id"]
    assert pack.prompts[0].prompt_sha256 == out["hashes"]["prompt_sha256"]
    assert [s.internal_ref.split("#")[0] for s in pack.sources][:1] == [
        out["sources"][0]["source_id"]]


def test_show_prints_the_stored_pack(answered):
    pack_id = answered["out"]["pack_id"]
    r = _run("pack", "show", pack_id, "--db", answered["db"])
    shown = json.loads(r.stdout)
    assert shown["pack_id"] == pack_id and shown["query"] == Q
    assert verify_pack(pack_from_json(json.dumps(shown))) == []
    r = _run("pack", "show", "pack_" + "0" * 16, "--db", answered["db"], code=2)
    assert "no evidence pack pack_0000000000000000" in r.output
    for bad in ("nonsense", pack_id.upper(), pack_id[:-1]):  # mistyped: said so (QA 23)
        for cmd in ("show", "verify", "export"):
            r = _run("pack", cmd, bad, "--db", answered["db"], code=2)
            assert r.output.startswith(f"error: {bad!r} is not a pack id (pack_ + 16 "), r.output
    r = _run("pack", "show", pack_id, "--db", str(answered["tmp"] / "none.duckdb"), code=2)
    assert "no store at" in r.output


def test_verify_checks_id_and_signature(answered):
    db, key, signed = answered["db"], answered["key"], answered["signed"]
    r = _run("pack", "verify", answered["out"]["pack_id"], "--db", db)
    assert r.stdout.startswith("OK ")
    r = _run("pack", "verify", signed, "--db", db, "--key-file", str(key))
    assert "signature ok (key tenant-a)" in r.stdout
    wrong = answered["tmp"] / "wrong.key"
    wrong.write_bytes(b"another-key")
    r = _run("pack", "verify", signed, "--db", db, "--key-file", str(wrong), code=1)
    assert r.stdout.startswith("FAILED ") and "signature does not match" in r.stdout  # stdout
    # an unsigned pack fails when a signature is asked for
    r = _run("pack", "verify", answered["out"]["pack_id"], "--db", db, "--key-file", str(key),
             code=1)
    assert "not signed" in r.output


def test_export_json_and_html(answered):
    db, pack_id, tmp = answered["db"], answered["out"]["pack_id"], answered["tmp"]
    _run("pack", "export", pack_id, "--db", db, "--format", "json", "--out", str(tmp / "p.json"))
    text = (tmp / "p.json").read_text(encoding="utf-8")
    pack = pack_from_json(text)
    assert pack.pack_id == pack_id and pack_to_json(pack) == text  # canonical bytes
    _run("pack", "export", pack_id, "--db", db, "--format", "html", "--out", str(tmp / "p.html"))
    page = (tmp / "p.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and pack_id in page and "Robertson" in page
    r = _run("pack", "export", pack_id, "--db", db, "--format", "pdf", "--out", "x", code=2)
    assert "json or html" in r.output


def test_export_never_writes_over_the_store_it_reads(answered):
    """QA: ``--out`` over ``--db`` replaced the store with one page of HTML (no guard)."""
    import os

    db, pack_id, tmp = answered["db"], answered["out"]["pack_id"], answered["tmp"]
    before = Path(db).read_bytes()
    linked = tmp / "store-link.html"
    os.link(db, linked)
    for out, words in ((db, "is the store"), (f"duckdb:///{db}", None),
                       (str(linked), "the same file, a hard link"),
                       (f"{db}.indexes/p.html", "inside the folder of the store's indexes")):
        if out.startswith("duckdb:///"):
            r = _run("pack", "export", pack_id, "--db", out, "--out", db, code=2)
        else:
            r = _run("pack", "export", pack_id, "--db", db, "--format", "html", "--out", out,
                     code=2)
        assert "--out" in r.output and (words is None or words in r.output), r.output
    assert Path(db).read_bytes() == before
    linked.unlink()


def test_export_without_out_prints_the_exact_bytes(answered):
    """Left out (or ``-``), ``--out`` is standard output: the canonical JSON and nothing else,
    the same bytes as the file, so ``aiblox pack export ID > pack.json`` is the export."""
    db, pack_id, tmp = answered["db"], answered["out"]["pack_id"], answered["tmp"]
    _run("pack", "export", pack_id, "--db", db, "--out", str(tmp / "same.json"))
    want = (tmp / "same.json").read_bytes()
    assert _run("pack", "export", pack_id, "--db", db).stdout_bytes == want
    assert _run("pack", "export", pack_id, "--db", db, "--out", "-").stdout_bytes == want
    page = _run("pack", "export", pack_id, "--db", db, "--format", "html").stdout
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")


def test_a_pack_exports_the_same_bytes_from_any_store_and_quietly(answered, tmp_path):
    """Two stores holding the same pack exported different pack.json, only in created_at (when
    each stored it): the export leaves it out (null), so a pack id exports to one byte string.
    ``aiblox -q`` printed ``wrote FILE`` all the same: it is informational (stderr, quiet)."""
    db, pack_id = answered["db"], answered["out"]["pack_id"]
    with DuckDBStore(db) as store:
        row = store.get_evidence_pack(pack_id)
    assert row["created_at"]  # the store keeps when it stored the pack
    later = pack_from_json(row["json"]).model_copy(update={"created_at": "2031-02-03T04:05:06Z"})
    other = str(tmp_path / "other.duckdb")
    with DuckDBStore(other) as store:
        store.put_evidence_pack(pack_id, later.parent_pack_id, row["sha256"], pack_to_json(later),
                                tenant_id=later.tenant_id, trace_id=later.trace_id,
                                created_at=later.created_at)
    exported = [_run("pack", "export", pack_id, "--db", d).stdout_bytes for d in (db, other)]
    assert exported[0] == exported[1] and json.loads(exported[0])["created_at"] is None
    page = [_run("pack", "export", pack_id, "--db", d, "--format", "html").stdout_bytes
            for d in (db, other)]
    assert page[0] == page[1]
    loud = _run("pack", "export", pack_id, "--db", db, "--out", str(tmp_path / "a.json"))
    assert loud.stdout == "" and loud.stderr.startswith(f"wrote {tmp_path / 'a.json'} (json, ")
    quiet = _run("-q", "pack", "export", pack_id, "--db", db, "--out", str(tmp_path / "q.json"))
    assert quiet.output == "" and (tmp_path / "q.json").read_bytes() == exported[0]


def test_a_pack_exports_the_same_bytes_whatever_its_stores_chunk_cache_did(answered, tmp_path):
    """One pack id stored from a cold chunk cache in one store and a warm one in another
    exported different bytes, in ``observations`` alone (QA audit): they are the store's, not
    the pack's, and the export leaves them out (empty), as it does ``created_at``."""
    db, pack_id = answered["db"], answered["out"]["pack_id"]
    with DuckDBStore(db) as store:
        row = store.get_evidence_pack(pack_id)
    cold = pack_from_json(row["json"])
    assert cold.observations["retrieval"]["counts"]["chunk_cache_writes"] > 0
    warm = cold.model_copy(update={"observations": {"retrieval": {
        "counts": {"chunk_cache_hits": 20, "chunk_cache_writes": 0}, "side_effects": []}}})
    other = str(tmp_path / "warm.duckdb")
    with DuckDBStore(other) as store:
        store.put_evidence_pack(pack_id, warm.parent_pack_id, row["sha256"], pack_to_json(warm),
                                tenant_id=warm.tenant_id, trace_id=warm.trace_id)
    _run("pack", "verify", pack_id, "--db", other)
    for fmt in ("json", "html"):
        exported = [_run("pack", "export", pack_id, "--db", d, "--format", fmt).stdout_bytes
                    for d in (db, other)]
        assert exported[0] == exported[1], fmt
        if fmt == "json":
            assert json.loads(exported[0])["observations"] == {}


def test_a_tampered_stored_pack_fails_verify_and_is_not_exported(answered, tmp_path):
    src = answered["db"]
    db = str(tmp_path / "copy.duckdb")
    con = duckdb.connect(db)  # a copy, so the other tests keep an intact store
    con.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
    con.execute("CREATE TABLE evidence_packs AS SELECT * FROM src.evidence_packs")
    pack_id, signed = answered["out"]["pack_id"], answered["signed"]
    con.execute("UPDATE evidence_packs SET json = replace(json, 'Robertson', 'Robinson')")
    con.close()
    r = _run("pack", "verify", pack_id, "--db", db, code=1)
    assert "pack_id does not match the pack's content" in r.output
    assert "does not match the sha256 recorded" in r.output
    r = _run("pack", "verify", signed, "--db", db, "--key-file", str(answered["key"]), code=1)
    assert "signature does not match" in r.output
    _run("pack", "export", pack_id, "--db", db, "--format", "json",
         "--out", str(tmp_path / "t.json"), code=1)
    assert not (tmp_path / "t.json").exists()
    # stored JSON cut short no longer parses: the same verdict (FAILED, exit 1), not a usage
    # error (exit 2)
    con = duckdb.connect(db)
    con.execute("UPDATE evidence_packs SET json = left(json, 200)")
    con.close()
    r = _run("pack", "verify", pack_id, "--db", db, code=1)
    assert f"FAILED {pack_id}: its stored JSON is not a valid pack" in r.output
    _run("pack", "export", pack_id, "--db", db, "--out", str(tmp_path / "t.json"), code=1)
    assert not (tmp_path / "t.json").exists()


def test_signing_a_pack_already_stored_unsigned_is_refused_not_dropped(answered):
    """``--key-file`` for a pack whose id is already stored unsigned: packs are insert-only, so
    the answer says in one line that the signature was not stored, and exits 1 (it exited 0
    and ``pack verify`` then said the pack was not signed)."""
    db, key = answered["db"], answered["key"]
    r = _run("answer", Q, "--db", db, "--embedder", "hashing", "--retrieved-at", AT,
             "--key-file", str(key), code=1)
    last = r.output.strip().splitlines()[-1]
    assert last.startswith(f"error: evidence pack {answered['out']['pack_id']} was already "
                           f"stored unsigned") and "signature was not stored" in last
    _run("pack", "verify", answered["out"]["pack_id"], "--db", db, "--key-file", str(key),
         code=1)  # still the unsigned one


def test_signing_a_pack_already_signed_with_another_key_is_refused_not_dropped(answered):
    """The same pack answered again with another tenant key: exit 0 and nothing said, though
    `pack verify` with that key then failed (QA 28)."""
    db, tmp = answered["db"], answered["tmp"]
    k1, k2 = tmp / "k1.key", tmp / "k2.key"
    k1.write_bytes(b"first-secret")
    k2.write_bytes(b"second-secret")
    common = ["answer", "what is idf?", "--db", db, "--embedder", "hashing", "--retrieved-at",
              "2026-01-02T00:00:00Z", "--tenant", "t1"]
    first = _run(*common, "--key-file", str(k1))
    _run(*common, "--key-file", str(k1))  # the same signature again: nothing to say
    r = _run(*common, "--key-file", str(k2), code=1)
    pack_id = first.output.split("evidence pack: ", 1)[1].split()[0]
    assert r.output.strip().splitlines()[-1] == (
        f"error: evidence pack {pack_id} was already stored signed with another key (key id "
        f"'t1') and packs are never rewritten: this signature was not stored (a new "
        f"--retrieved-at makes a new pack)")
    _run("pack", "verify", pack_id, "--db", db, "--key-file", str(k1))  # still k1's


def test_one_instant_is_one_pack_however_it_is_written(answered):
    """`--retrieved-at` was recorded as typed: one instant gave a pack id per spelling, and a
    time without a timezone (or a date alone) named no instant at all (QA 28)."""
    ids = []
    for when in ("2026-03-01T00:00:00Z", "2026-03-01T01:00:00+01:00",
                 "2026-02-28T19:00:00-05:00"):
        out = json.loads(_run("answer", Q, "--db", answered["db"], "--embedder", "hashing",
                              "--json", "--retrieved-at", when).stdout)
        ids.append(out["pack_id"])
    assert len(set(ids)) == 1
    with DuckDBStore(answered["db"]) as store:
        sources = json.loads(store.get_evidence_pack(ids[0])["json"])["sources"]
    assert sources and {s["retrieved_at"] for s in sources} == {"2026-03-01T00:00:00Z"}
    for naive in ("2026-03-01T00:00:00", "2026-03-01"):
        r = _run("answer", Q, "--db", answered["db"], "--embedder", "hashing",
                 "--retrieved-at", naive, code=2)
        assert r.output.strip().splitlines()[-1].startswith(
            f"error: --retrieved-at {naive!r} has no timezone")


@pytest.mark.parametrize("tenant", ["", "  ", "a b", "a\x1b[2Jb", "ab\u202ec", "a\x00"])
def test_a_blank_spaced_or_control_tenant_is_refused(answered, tenant):
    """An empty tenant was stored (and would be a signature's key id) (QA 28); one with an
    escape sequence or a bidi override was stored and reached the terminal of `pack list`."""
    r = _run("answer", Q, "--db", answered["db"], "--embedder", "hashing", "--tenant", tenant,
             code=2)
    assert r.output.strip().splitlines() == [
        f"error: --tenant {tenant!r}: give a tenant id without spaces, control or bidi "
        f"characters (default: default)"]


@pytest.mark.parametrize("when", ["notadate", "2026-13-45T99:00:00Z"])
def test_a_retrieved_at_that_is_not_a_time_is_one_error_line(answered, when):
    r = _run("answer", Q, "--db", answered["db"], "--embedder", "hashing", "--retrieved-at",
             when, code=2)
    assert r.output.strip().splitlines()[-1] == (
        f"error: --retrieved-at {when!r} is not an ISO-8601 time (e.g. 2026-02-02T00:00:00Z)")


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_retrieved_at_outside_the_years_datetime_holds_in_utc_is_one_error_line(answered,
                                                                                  when):
    """A time whose UTC instant is in the year 10000 (or 0) was an internal error
    (OverflowError, exit 1; QA)."""
    r = _run("answer", Q, "--db", answered["db"], "--embedder", "hashing", "--retrieved-at",
             when, code=2)
    assert r.output.strip().splitlines() == [
        f"error: --retrieved-at {when!r} is out of range: in UTC it falls outside the years 1 "
        f"to 9999"]


def test_pack_list_escapes_control_and_bidi_characters_of_stored_text(answered, tmp_path):
    """A question with an escape sequence (an OSC retitling the window, a screen clear) or a
    bidi override was written raw to the terminal by `pack list` (QA): every stored string
    a listing shows is escaped; --json keeps the text as stored (JSON escapes controls)."""
    db = str(tmp_path / "esc.duckdb")
    shutil.copy(answered["db"], db)
    question = "who developed\x1b]0;PWNED\x07\x1b[2J \u202eBM25?"
    _run("answer", question, "--db", db, "--embedder", "hashing", "--retrieved-at", AT)
    # every pack listed: the fixture's were stored within the same second in a fast run, and
    # "the newest 1" was then one of them
    table = _run("pack", "list", "--db", db, "--limit", "100").stdout
    assert "\x1b" not in table and "\x07" not in table and "\u202e" not in table
    assert "who developed\\x1b]0;PWNED\\x07\\x1b[2J \\u202eBM25?" in table
    listed = json.loads(_run("pack", "list", "--db", db, "--limit", "100", "--json").stdout)
    assert question in [p["question"] for p in listed]


def test_pack_list_names_every_stored_pack_with_its_decision(answered, tmp_path):
    """There was no way to see a store's packs from the command line but their ids printed
    one by one by `aiblox answer` (QA 27)."""
    db = answered["db"]
    with DuckDBStore(db) as store:
        stored = {r["pack_id"]: r for r in store.list_evidence_packs()}
    listed = json.loads(_run("pack", "list", "--db", db, "--json").stdout)
    assert sorted(p["pack_id"] for p in listed) == sorted(stored)
    assert [p["created_at"] for p in listed] == sorted((p["created_at"] for p in listed),
                                                      reverse=True)  # newest first
    by_id = {p["pack_id"]: p for p in listed}
    signed = by_id[answered["signed"]]
    assert signed["signed"] and signed["tenant"] == "tenant-a" and signed["question"] == Q
    assert by_id[answered["out"]["pack_id"]]["decision"] == "answer (OK)"
    table = " ".join(_run("pack", "list", "--db", db).stdout.split())
    assert f"evidence packs in {db}: {len(stored)}" in table and answered["signed"] in table
    # the table has the parent column its help promises (only --json had it)
    pack_id = answered["out"]["pack_id"]
    with DuckDBStore(db) as store:
        row = store.get_evidence_pack(pack_id)
    child = revise_pack(pack_from_json(row["json"]), query_id="revised")
    revised = tmp_path / "revised.duckdb"
    with DuckDBStore(str(revised)) as store:
        store.put_evidence_pack(child.pack_id, pack_id, sha256_hex(pack_content(child)),
                                pack_to_json(child), tenant_id=child.tenant_id,
                                trace_id=child.trace_id)
    r = runner.invoke(app, ["pack", "list", "--db", str(revised)], env={**ENV, "COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    [header] = [ln.split("┃") for ln in r.stdout.splitlines() if ln.startswith("┃ pack")]
    [line] = [ln.split("│") for ln in r.stdout.splitlines() if ln.startswith("│ pack_")]
    assert (header[-2].strip(), line[-2].strip()) == ("parent", pack_id)
    empty = tmp_path / "e.duckdb"
    _run("ingest", "sample", "--db", str(empty), "--embedder", "hashing")
    none = _run("pack", "list", "--db", str(empty))
    assert "no evidence packs in" in " ".join(none.output.split())


def test_pack_list_limit_gives_the_newest_packs_reading_only_their_json(answered, monkeypatch):
    """``pack list`` read every pack's JSON (a store of many packs listed slowly): ``--limit N``
    lists the newest N, as the whole list's first N, and reads only theirs."""
    db = answered["db"]
    every = json.loads(_run("pack", "list", "--db", db, "--json").stdout)
    assert len(every) >= 2
    newest = json.loads(_run("pack", "list", "--db", db, "--json", "--limit", "1").stdout)
    assert newest == every[:1]
    from aiblox.stores.duckdb_store import DuckDBStore as Store

    read = []
    whole = Store.get_evidence_pack

    def counted(self, pack_id):
        read.append(pack_id)
        return whole(self, pack_id)

    listing = Store.list_evidence_packs

    def columns_only(self, with_json=False):
        assert not with_json, "the JSON of every pack read"
        return listing(self)

    monkeypatch.setattr(Store, "get_evidence_pack", counted)
    monkeypatch.setattr(Store, "list_evidence_packs", columns_only)
    table = " ".join(_run("pack", "list", "--db", db, "--limit", "1").stdout.split())
    assert read == [every[0]["pack_id"]]
    assert f"evidence packs in {db}: the newest 1 of {len(every)}" in table
    bad = _run("pack", "list", "--db", db, "--limit", "0", code=2)
    assert "--limit 0: out of range; valid: a whole number >= 1" in bad.output


def _copy(answered, tmp_path, sql, *params):
    """A copy of the answered store with ``sql`` run on it (the other tests keep theirs)."""
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
    """Columns changed in the database were listed and passed verify (QA audit)."""
    pack_id = answered["out"]["pack_id"]
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
    pack_id = answered["out"]["pack_id"]
    with DuckDBStore(answered["db"]) as store:
        unsigned = json.loads(store.get_evidence_pack(pack_id)["json"])
        signature = json.loads(store.get_evidence_pack(answered["signed"])["json"])["signature"]
    # the fixture's signed pack is another tenant's: the bogus signature claims this one's key
    bogus = {**signature, "key_id": unsigned["tenant_id"], "value": "0" * 64}
    faked = json.dumps({**unsigned, "signature": bogus})
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
