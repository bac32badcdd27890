"""Input files read in bounded memory and environment variables named by the user's name for
them: ``/dev/zero``, a FIFO or a file without line breaks given as qrels, corpus, queries, a
dataset manifest or a run file is one error naming the file (and line), never "out of memory";
a malformed ``AIBLOX_*`` value names the variable, the value and what is expected. Real files,
devices and FIFOs; the CLI in process."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.data import DatasetError, load_dataset
from aiblox.experiment.table import RunFileError, read_trec_run
from aiblox.inputs import (
    MAX_LINE_BYTES,
    EnvVarError,
    InputFileError,
    bounded_lines,
    env_seconds,
    read_bounded,
)
from tests.conftest import SAMPLE

runner = CliRunner()
ZERO = Path("/dev/zero")
needs_zero = pytest.mark.skipif(not ZERO.exists() or not hasattr(os, "mkfifo"),
                                reason="needs /dev/zero and FIFOs")


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(SAMPLE, dst, ignore=shutil.ignore_patterns("*.py", "README.md"))
    return dst


def _no_newline(path: Path, size: int = MAX_LINE_BYTES + 10) -> Path:
    """A sparse file of ``size`` zero bytes: one line longer than the limit, no disk used."""
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


# --------------------------------------------------------------------------- the reader
@needs_zero
def test_bounded_lines_refuse_devices_fifos_folders_and_endless_lines(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "zero.tsv"
    link.symlink_to(ZERO)
    for path, kind in ((ZERO, "a character device"), (fifo, "a FIFO"),
                       (tmp_path, "a folder"), (link, f"a character device ({ZERO})")):
        with pytest.raises(InputFileError) as err:
            list(bounded_lines(path))
        assert err.value.line is None and err.value.reason.startswith(kind)
        assert str(err.value).startswith(f"{path}: cannot read: {kind}")
    with pytest.raises(InputFileError, match="No such file"):
        list(bounded_lines(tmp_path / "missing"))

    big = _no_newline(tmp_path / "big.txt")
    with pytest.raises(InputFileError) as err:
        list(bounded_lines(big))
    assert err.value.line == 1 and f"longer than {MAX_LINE_BYTES} bytes" in err.value.reason
    text = tmp_path / "ok.txt.gz"
    text.write_bytes(gzip.compress(b"a\nbb\n\nccc"))
    assert list(bounded_lines(text, gz=True)) == [(1, b"a\n"), (2, b"bb\n"), (3, b"\n"),
                                                  (4, b"ccc")]
    with pytest.raises(InputFileError, match=r"ok.txt.gz:2: cannot read: a line longer than 2"):
        list(bounded_lines(text, gz=True, max_line=2))

    with pytest.raises(InputFileError, match="character device"):
        read_bounded(ZERO)
    small = tmp_path / "small.toml"
    small.write_bytes(b"x" * 11)
    assert read_bounded(small, max_bytes=11) == b"x" * 11
    with pytest.raises(InputFileError, match="larger than 10 bytes"):
        read_bounded(small, max_bytes=10)


# --------------------------------------------------------------------------- datasets
@needs_zero
@pytest.mark.parametrize("role", ["qrels/test.tsv", "queries.jsonl", "corpus.jsonl",
                                  "answers.jsonl"])
def test_a_dataset_file_linked_to_dev_zero_is_named(tmp_path, role):
    folder = _copy(tmp_path)
    (folder / role).unlink()
    (folder / role).symlink_to(ZERO)
    with pytest.raises(DatasetError) as err:
        load_dataset(folder)
    assert err.value.file == str(folder / role) and err.value.field == "file"
    assert err.value.message == f"cannot read: a character device ({ZERO}), not a regular file"


def test_a_dataset_file_without_line_breaks_is_named_with_its_line(tmp_path):
    folder = _copy(tmp_path)
    _no_newline(folder / "qrels" / "test.tsv")
    with pytest.raises(DatasetError) as err:
        load_dataset(folder)
    assert (err.value.file, err.value.line, err.value.field) == (
        str(folder / "qrels" / "test.tsv"), 1, "line")
    assert err.value.message.startswith(f"cannot read: a line longer than {MAX_LINE_BYTES}")


@needs_zero
def test_tabular_and_manifest_files_linked_to_dev_zero_are_named(tmp_path):
    folder = tmp_path / "own"
    (folder / "qrels").mkdir(parents=True)
    shutil.copy(SAMPLE / "corpus.jsonl", folder / "corpus.jsonl")
    shutil.copy(SAMPLE / "queries.jsonl", folder / "queries.jsonl")
    for name in ("test.csv", "test.parquet"):  # a tabular split: read, and refused by name
        link = folder / "qrels" / name
        link.symlink_to(ZERO)
        with pytest.raises(DatasetError, match=f"{name}: field 'file': cannot read: a "
                                               f"character device"):
            load_dataset(folder)
        link.unlink()

    (folder / "judged.tsv").symlink_to(ZERO)  # a manifest naming a device
    (folder / "dataset.toml").write_text('corpus = "corpus.jsonl"\nqueries = "queries.jsonl"\n'
                                         'qrels = {test = "judged.tsv"}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        load_dataset(folder)
    assert err.value.file == str(folder / "dataset.toml") and err.value.field == "qrels.test"
    assert "judged.tsv: a character device" in err.value.message

    (folder / "dataset.toml").unlink()  # the manifest itself a device: not skipped
    (folder / "dataset.toml").symlink_to(ZERO)
    with pytest.raises(DatasetError, match="dataset.toml: field 'file': cannot read: a "
                                           "character device"):
        load_dataset(folder)


@needs_zero
def test_eval_on_a_folder_whose_qrels_is_dev_zero_is_one_error_line(tmp_path):
    folder = _copy(tmp_path)
    (folder / "qrels" / "test.tsv").unlink()
    (folder / "qrels" / "test.tsv").symlink_to(ZERO)
    r = runner.invoke(app, ["eval", str(folder), "--mode", "bm25", "--embedder", "hashing",
                            "--db", str(tmp_path / "s.duckdb")], env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"error: {folder}/qrels/test.tsv: field 'file': cannot read: a character device "
        f"({ZERO}), not a regular file"]
    assert not (tmp_path / "s.duckdb").exists()  # before any work


# --------------------------------------------------------------------------- run files
@needs_zero
def test_a_run_file_that_never_ends_is_named(tmp_path):
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    for path, said in ((ZERO, f"--run {ZERO}: cannot read it: a character device"),
                       (fifo, f"--run {fifo}: cannot read it: a FIFO"),
                       (_no_newline(tmp_path / "run.trec"),
                        f"--run {tmp_path / 'run.trec'}:1: cannot read it: a line longer than")):
        with pytest.raises(RunFileError) as err:
            read_trec_run(path)
        assert str(err.value).startswith(said)
    bad = tmp_path / "latin1.trec"
    bad.write_bytes(b"q1 Q0 d1 1 1.0 t\nq1 Q0 caf\xe9 2 0.5 t\n")
    with pytest.raises(RunFileError, match=r"latin1.trec:2: cannot read it: 'utf-8' codec"):
        read_trec_run(bad)
    ok = tmp_path / "ok.trec"
    ok.write_text("q1 Q0 d1 1 1.5 t\r\nq1 Q0 d2 2 0.5 t\n\nq2 Q0 d1 1 2 t", encoding="utf-8")
    assert read_trec_run(ok) == {"q1": [("d1", 1.5), ("d2", 0.5)], "q2": [("d1", 2.0)]}


# --------------------------------------------------------------------------- variables
def test_env_seconds_names_the_variable_the_value_and_what_is_expected():
    assert env_seconds("X_S", 2.0, {}) == 2.0
    assert env_seconds("X_S", 2.0, {"X_S": ""}) == 2.0
    assert env_seconds("X_S", 2.0, {"X_S": "0.25"}) == 0.25
    for bad in ("abc", "0", "-1", "nan", "inf"):
        with pytest.raises(EnvVarError) as err:
            env_seconds("X_S", 2.0, {"X_S": bad})
        assert str(err.value) == (f"environment variable X_S={bad!r}: expected a finite number "
                                  f"of seconds > 0 (unset: 2)")
    secret = EnvVarError("K", "sk-123", "an API key", shown=False)
    assert "sk-123" not in str(secret) and "K=(the value, not shown)" in str(secret)
