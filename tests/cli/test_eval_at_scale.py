"""``aiblox eval`` does only what its systems need: a BM25 evaluation neither loads nor embeds
with a model, and a large corpus's recorded facts (:mod:`aiblox.data.facts`) give the same
table as a full read. The sample dataset and real DuckDB files."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

import aiblox.data.facts as facts_mod
from aiblox.cli.main import app
from aiblox.stores import DuckDBStore
from tests.conftest import SAMPLE

runner = CliRunner()


def _ok(*args: str) -> str:
    r = runner.invoke(app, [str(a) for a in args], env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return r.output


def _table(out: str) -> dict:
    """The JSON table without its timings."""
    got = json.loads(out)
    for s in got["systems"]:
        s.pop("timings", None)
    return got


def _models(db) -> list[str]:
    with DuckDBStore(db) as store:
        return sorted(m for (m,) in store.con.execute(
            "SELECT DISTINCT model_id FROM item_vectors").fetchall())


def test_a_bm25_evaluation_embeds_nothing(tmp_path):
    db = tmp_path / "s.duckdb"
    _ok("ingest", SAMPLE, "--db", db, "--embedder", "hashing")
    before = _models(db)
    out = json.loads(_ok("eval", SAMPLE, "--mode", "bm25", "--db", db, "--format", "json"))
    assert [s["name"] for s in out["systems"]] == ["bm25"]
    assert _models(db) == before  # the default embedder (minilm) never ran over the corpus


def test_recorded_facts_give_the_same_table(tmp_path, monkeypatch):
    folder = tmp_path / "ds"
    shutil.copytree(SAMPLE, folder)
    monkeypatch.setenv("AIBLOX_CACHE_DIR", str(tmp_path / "cache"))
    db = tmp_path / "s.duckdb"
    _ok("ingest", folder, "--db", db, "--embedder", "hashing")
    args = ("eval", folder, "--mode", "bm25", "--mode", "dense", "--embedder", "hashing",
            "--db", db, "--format", "json")
    full = _table(_ok(*args))
    monkeypatch.setattr(facts_mod, "TRUST_MIN_BYTES", 0)  # every corpus counted as large
    recorded = _table(_ok(*args))  # reads the corpus once, records its facts
    assert list((tmp_path / "cache" / "corpus-facts").glob("*.json"))
    trusted = _table(_ok(*args))  # trusts them: the corpus is not read
    assert full == recorded == trusted


@pytest.mark.parametrize("mode", ["bm25", "dense"])
def test_a_trusted_store_is_not_synced_again(tmp_path, monkeypatch, mode):
    import aiblox.engine.workspace as ws_mod

    folder = tmp_path / "ds"
    shutil.copytree(SAMPLE, folder)
    monkeypatch.setenv("AIBLOX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(facts_mod, "TRUST_MIN_BYTES", 0)
    db = tmp_path / "s.duckdb"
    _ok("ingest", folder, "--db", db, "--embedder", "hashing")  # records the facts
    synced = []
    real = ws_mod.sync_dataset
    monkeypatch.setattr(ws_mod, "sync_dataset",
                        lambda *a, **k: synced.append(list(a[3])) or real(*a, **k))
    _ok("eval", folder, "--mode", mode, "--embedder", "hashing", "--db", db)
    assert synced == [[]]  # in sync: no item handed over, none read from the corpus
