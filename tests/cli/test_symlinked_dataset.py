"""A dataset folder reached through a symlink is the folder it resolves to, for every command.

QA: ``ln -s /work/shared/datasets/adi myadi; aiblox ingest myadi`` said "ingested myadi into
.aiblox/datasets/myadi-....duckdb" while the store recorded dataset ``adi`` (ingest handed the
resolved folder on, which was named again from there), so ``aiblox eval myadi`` refused the
store ("holds dataset 'adi' ..., not 'myadi'") and the ``aiblox ingest --replace`` it suggested
said "up to date": a loop. Through the link the precomputed vectors beside the datasets folder
were not found either (looked up under the link's name), so dense runs embedded locally and
their run hashes, the answer pack's id and a sweep's stage cache differed from the folder's.
The dataset's name is now its resolved folder's (:func:`aiblox.data.dataset_name`), as a
``dataset.toml`` folder's already was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from aiblox.cli.main import app
from tests.conftest import shared_dataset

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "datasets" / "sample"
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def _ok(*args: str) -> dict:
    r = _run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_ingest_then_eval_search_answer_through_a_symlink(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "datasets" / "mydata"
    shutil.copytree(SAMPLE, folder, ignore=shutil.ignore_patterns("*.py", "README.md"))
    (tmp_path / "link").symlink_to(folder, target_is_directory=True)
    ingested = _ok("ingest", "link", "--embedder", "hashing")
    assert ingested["dataset"] == "mydata" and ingested["source"] == folder.resolve().as_posix()
    assert ingested["db"].startswith(".aiblox/datasets/mydata-")
    r = _run("ingest", "link", "--embedder", "hashing")  # the line names what the store holds
    assert r.exit_code == 0 and f"holds mydata ({ingested['items']['inserted']} items" in \
        " ".join(r.output.split())
    via_link = _ok("eval", "link", "--embedder", "hashing", "--mode", "bm25")["systems"][0]
    direct = _ok("eval", str(folder), "--embedder", "hashing", "--mode", "bm25")["systems"][0]
    assert via_link["hashes"] == direct["hashes"]
    assert [p.name for p in (tmp_path / ".aiblox" / "datasets").glob("*.duckdb")] == [
        Path(ingested["db"]).name]  # one store: the folder's, whichever way it is named
    found = _ok("search", "BM25 saturation", "--dataset", "link", "--mode", "bm25")
    assert found["candidates"]
    packs = [_ok("answer", "what is BM25", "--dataset", ds, "--embedder", "hashing",
                 "--retrieved-at", "2026-01-01T00:00:00Z") for ds in ("link", str(folder))]
    assert packs[0]["pack_id"] == packs[1]["pack_id"]


def test_names_and_precomputed_vectors_follow_the_folder_a_link_resolves_to(tmp_path):
    from aiblox.data import dataset_name, load_dataset
    from aiblox.engine.workspace import dataset_binding, find_precomputed_vectors

    adi = shared_dataset("adi")  # has MiniLM vectors (../shared/embeddings/README.md)
    link = tmp_path / "myadi"
    link.symlink_to(adi, target_is_directory=True)
    assert dataset_name(link) == dataset_name(adi) == "adi"
    assert dataset_binding(link) == dataset_binding(adi)
    files = adi.resolve().parent.parent / "embeddings" / "adi"  # ../shared may be a link too
    shared = sorted(files.glob("*.all-MiniLM-L6-v2.parquet"))
    assert len(shared) == 2  # corpus and queries
    for ds in (dataset_binding(link), load_dataset(link, splits=["test"])):
        assert find_precomputed_vectors(ds, "all-MiniLM-L6-v2") == shared
