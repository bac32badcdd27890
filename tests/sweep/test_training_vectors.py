"""A sweep that trains a model (``[finetune]``, ``[finetune_reranker]``) checks its ``vectors``
files before the model trains: the store syncs, and reads them, only once the model is
trained (minutes to half an hour on a real dataset), so a NaN row, a wrong dimension, an
unknown id or a file another model made was refused only then. Each is one error line naming
the file, row and field, with no model trained and no store made; with ``[finetune]`` a file
that says it was made with another model (the base model's own) is refused too, since the
sweep embeds with the trained model. A sweep that trains nothing refuses the file when its
store syncs, and leaves no empty store behind either. Nothing here trains a model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.data import load_dataset
from aiblox.embedding import VectorImportError
from aiblox.hashing import sha256_text
from aiblox.sweep import load_spec, run_sweep
from aiblox.sweep.finetune import check_spec_vectors, fine_tuned_folder
from tests.sweep.spec_text import training

pytest.importorskip("sentence_transformers")

TABLES = {  # the smallest recipes; the reranker's pipeline reads vectors (dense)
    "finetune": dict(embedder="minilm", pipeline="", recipe="epochs = 1\nbatch_size = 4",
                     grid="[grid]\nw_text = [0.3, 0.7]"),
    "finetune_reranker": dict(
        embedder="hashing",
        pipeline='pipeline = "(bm25 + dense) % 10 >> cross_encoder"\n'
                 '[stages.cross_encoder]\nmodel = "finetune"\ntop_n = 5\nmax_length = 64\n',
        recipe='base = "minilm"\nnegatives = 1\nmax_length = 64',
        grid="[grid.stages.cross_encoder]\nalpha = [0.5, 1.0]"),
}


def _rows() -> list[tuple[str, str]]:
    """``(id, sha256 of the text embedded)`` of every sample document, then every query."""
    ds = load_dataset("sample")
    return ([(d.id, sha256_text(d.embedding_text)) for d in ds.corpus.values()]
            + [(q, sha256_text(t)) for q, t in ds.queries.items()])


def _vectors(path: Path, case: str = "good") -> Path:
    """A vectors file for the sample dataset (384 dimensions), bad at its 8th row by ``case``."""
    rows = _rows()
    vectors = np.random.default_rng(0).normal(size=(len(rows), 384)).astype(np.float32)
    column = [[float(x) for x in v] for v in vectors]
    if case == "nan":
        column[7][3] = float("nan")
    elif case == "dimension":
        column[7] = column[7][:383]
    elif case == "unknown id":
        rows[7] = ("no-such-doc", rows[7][1])
    pq.write_table(pa.table({"_id": [r[0] for r in rows], "text_sha256": [r[1] for r in rows],
                             "vector": column}), path)
    return path


def _spec(tmp_path: Path, table: str, vectors: Path) -> Path:
    path = tmp_path / "train.toml"
    head = f'device = "cpu"\nvectors = ["{vectors}"]\n'
    path.write_text(training(table, "sample_training_vectors", head=head, **TABLES[table]),
                    encoding="utf-8")
    return path


def _sweep(path: Path, tmp_path: Path):
    return CliRunner().invoke(app, ["sweep", str(path), "--db", str(tmp_path / "new.duckdb"),
                                    "--cache-dir", str(tmp_path / "cache"), "--no-tracking"],
                              env={"AIBLOX_NO_PROGRESS": "1"})


def _nothing_made(tmp_path: Path) -> None:
    assert not (tmp_path / "cache" / "models").exists()  # no model trained
    assert not list(tmp_path.glob("new.duckdb*"))  # no store made


BAD = {"nan": "row 8, field 'vector': contains NaN or infinity",
       "dimension": "row 8, field 'vector': dimension 383, expected 384",
       "unknown id": "row 8, field '_id': unknown id 'no-such-doc': no document or query of "
                     "'sample'"}


@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_vectors_file_is_refused_before_the_model_trains(table, case, tmp_path):
    bad = _vectors(tmp_path / "vectors.parquet", case)
    r = _sweep(_spec(tmp_path, table, bad), tmp_path)
    assert r.exit_code == 2, r.output
    errors = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {bad}, {BAD[case]}"), r.output
    assert "Traceback" not in r.output
    _nothing_made(tmp_path)


def test_a_file_the_base_model_made_is_refused_when_the_sweep_embeds_with_the_tuned_one(
        tmp_path):
    bad = _vectors(tmp_path / "corpus.all-MiniLM-L6-v2.parquet")  # its name says MiniLM
    path = _spec(tmp_path, "finetune", bad)
    r = _sweep(path, tmp_path)
    assert r.exit_code == 2, r.output
    errors = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in r.output, r.output
    _nothing_made(tmp_path)
    spec = load_spec(path)
    folder = fine_tuned_folder(spec, load_dataset("sample", splits=spec.splits),
                               tmp_path / "cache", "cpu")
    assert errors[0] == (
        f"error: {bad}, field 'file name': made with all-MiniLM-L6-v2 (its name, "
        f"<stem>.<model id>.parquet as aiblox names precomputed vectors), and the sweep embeds "
        f"with the model [finetune] trains from minilm ({folder.name}): another model's "
        f"vectors are never its vectors; leave the file out of vectors (the sweep embeds the "
        f"texts with the trained model), or rename it if its name is wrong")
    # the metadata says so: the same
    table = pq.read_table(bad).replace_schema_metadata({"aiblox.model_id": "all-MiniLM-L6-v2"})
    pq.write_table(table, tmp_path / "vectors.parquet")
    spec = spec.model_copy(update={"vectors": [str(tmp_path / "vectors.parquet")]})
    ds = load_dataset("sample", splits=spec.splits)
    with pytest.raises(VectorImportError, match="field 'aiblox.model_id': made with "
                                                "all-MiniLM-L6-v2"):
        check_spec_vectors(spec, ds, tmp_path / "cache", "cpu")
    # a file naming the very model this sweep trains is left to the sync (its files' digest)
    named = _vectors(tmp_path / f"corpus.st:{folder.name}@0123456789abcdef.parquet")
    check_spec_vectors(spec.model_copy(update={"vectors": [str(named)]}), ds,
                       tmp_path / "cache", "cpu")


def test_run_sweep_checks_them_before_the_model_trains(tmp_path):
    bad = _vectors(tmp_path / "vectors.parquet", "nan")
    spec = load_spec(_spec(tmp_path, "finetune", bad))
    with pytest.raises(VectorImportError, match="row 8, field 'vector': contains NaN"):
        run_sweep(spec, cache_dir=tmp_path / "cache", db=str(tmp_path / "new.duckdb"),
                  progress=False)
    _nothing_made(tmp_path)


def test_a_sweep_that_trains_nothing_leaves_no_store_behind(tmp_path, sweep_db):
    bad = _vectors(tmp_path / "vectors.parquet", "nan")
    text = _spec(tmp_path, "finetune", bad).read_text(encoding="utf-8")
    path = tmp_path / "plain.toml"
    path.write_text(text.replace('[finetune]\nsplit = "train"\nepochs = 1\nbatch_size = 4\n'
                                 'negative_depth = 5\n', ""), encoding="utf-8")
    assert load_spec(path).finetune is None
    r = _sweep(path, tmp_path)
    assert r.exit_code == 2, r.output
    assert f"error: {bad}, {BAD['nan']}" in r.output.splitlines()
    _nothing_made(tmp_path)
    # a store that was there is kept, an empty one too
    from aiblox.stores import DuckDBStore

    DuckDBStore(tmp_path / "empty.duckdb").close()
    for db in (sweep_db, str(tmp_path / "empty.duckdb")):
        r = CliRunner().invoke(app, ["sweep", str(path), "--db", db, "--cache-dir",
                                     str(tmp_path / "cache"), "--no-tracking"],
                               env={"AIBLOX_NO_PROGRESS": "1"})
        assert r.exit_code == 2 and f"error: {bad}, {BAD['nan']}" in r.output, r.output
        assert Path(db).is_file()
    with DuckDBStore(sweep_db) as store:
        assert store.count_items() == len(load_dataset("sample").corpus)
