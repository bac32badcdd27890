"""A store holds the vectors of its embedder's dimension, whatever it is: ``aiblox ingest`` makes
a store at the embedder's dimension (a tiny real 32-dim sentence-transformers model), readers
(``search``, ``answer``, ``pack``) open a store at the dimension it holds, ``aiblox eval``'s store
is searchable, and an embedder of another dimension is one error line before anything is
written. Real DuckDB files, the CLI runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.stores import DuckDBStore
from aiblox.stores.identity import read_mark, read_sync

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "datasets" / "sample"
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


@pytest.fixture(scope="module")
def st32(tmp_path_factory) -> Path:
    pytest.importorskip("sentence_transformers")
    from tests.embedding.tiny_models import st_model
    from tests.stages.conftest import tiny_bert

    root = tmp_path_factory.mktemp("models")
    return st_model(root / "st32", tiny_bert(root / "base", head=False))


def _state(db: str) -> tuple:
    with DuckDBStore(db, read_only=True) as s:  # (read: at the dimension it holds)
        return s.dim, s.count_items(), read_sync(s), read_mark(s)


def test_a_32_dim_embedder_ingests_and_its_store_is_searched(tmp_path, st32):
    """Once: ``internal error (ConversionException ... length 32 to array with length 384)``,
    the store left half-synced."""
    db = str(tmp_path / "p.duckdb")
    r = _run("ingest", str(SAMPLE), "--db", db, "--embedder", str(st32))
    assert r.exit_code == 0, r.output
    dim, items, sync, mark = _state(db)
    assert dim == 32 and items > 0 and mark is None and len(sync.vectors) == 1
    r = _run("search", "vitamin D", "--db", db, "--embedder", str(st32), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["candidates"]
    r = _run("answer", "what is vitamin D?", "--db", db, "--embedder", str(st32), "--json")
    assert r.exit_code in (0, 1), r.output  # an answer or a refusal, with its pack stored
    r = _run("pack", "list", "--db", db, "--json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 1, r.output
    # another embedder's search names the dimension instead of advising an impossible ingest
    r = _run("search", "vitamin D", "--db", db, "--embedder", "hashing")
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "a store of 32-dim vectors" in said, said


def test_the_store_aiblox_eval_built_is_searchable(tmp_path, st32):
    """``aiblox eval`` opened the store at the model's dimension; search asked for 384:
    ``store holds 32-dim vectors, asked for 384``."""
    db = str(tmp_path / "e.duckdb")
    r = _run("eval", str(SAMPLE), "--db", db, "--embedder", str(st32), "--mode", "dense",
             "--json")
    assert r.exit_code == 0, r.output
    r = _run("search", "vitamin D", "--db", db, "--embedder", str(st32), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["candidates"]


def test_an_embedder_of_another_dimension_is_refused_before_any_write(tmp_path, st32):
    db = str(tmp_path / "h.duckdb")
    assert _run("ingest", str(SAMPLE), "--db", db, "--embedder", "hashing").exit_code == 0
    before = _state(db)
    r = _run("ingest", str(SAMPLE), "--db", db, "--embedder", str(st32))
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert said.startswith(f"error: store {db} holds 384-dim vectors and --embedder {st32} "
                           f"makes 32-dim ones"), said
    assert _state(db) == before  # nothing written, nothing left half-synced
