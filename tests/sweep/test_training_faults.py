"""A training table (``[finetune]``, ``[finetune_reranker]``) that cannot train is refused
naming the spec's file, line and field, in one line, before any model trains: a split whose
every query the sweep scores (when the spec loads), a split the dataset lacks or one its data
leaves empty once the scored queries are held out (against the dataset, before anything is
logged), and a ``negative_depth`` that leaves a query no document to draw negatives from (when
the training pairs are drawn). Nothing here trains a model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.sweep import SweepSpecError, load_spec
from tests.sweep.spec_text import training

pytest.importorskip("sentence_transformers")

TABLES = {  # what each table needs besides its split
    "finetune": dict(embedder="minilm", pipeline="", recipe="epochs = 1\nhard_negatives = 1",
                     grid="[grid]\nw_text = [0.3, 0.7]"),
    "finetune_reranker": dict(  # a pipeline sweep of the cross-encoder's weight
        embedder="hashing",
        pipeline='pipeline = "bm25 >> cross_encoder"\n'
                 '[stages.cross_encoder]\nmodel = "finetune"\ntop_n = 5\nmax_length = 64\n',
        recipe='base = "minilm"\nnegatives = 1\nmax_length = 64',
        grid="[grid.stages.cross_encoder]\nalpha = [0.5, 1.0]"),
}


def write(tmp_path: Path, table: str, **replace: str) -> Path:
    text = training(table, "sample_training", **TABLES[table])
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "train.toml"
    path.write_text(text, encoding="utf-8")
    return path


def line_of(path: Path, key: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1)
                if line.startswith(f"{key} = "))


def sweep(path: Path, tmp_path: Path, db: str):
    return CliRunner().invoke(app, ["sweep", str(path), "--db", db, "--cache-dir",
                                    str(tmp_path / "cache"), "--no-tracking"],
                              env={"AIBLOX_NO_PROGRESS": "1"})


def one_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output, result.output
    errors = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def test_a_split_held_out_whole_is_known_from_the_names():
    from aiblox.data import held_out_by

    both = ["test:0/2", "test:1/2"]
    assert held_out_by("test", both) == both
    assert held_out_by("test:0/3", both) == both  # any part of test
    assert held_out_by("test:0/2", ["test", "train"]) == ["test"]
    assert held_out_by("test:1/4", ["test:1/2", "train"]) == ["test:1/2"]  # 1 mod 4 is 1 mod 2
    assert held_out_by("test:0/2", ["test:0/4", "test:2/4"]) == ["test:0/4", "test:2/4"]
    assert held_out_by("test:0/2", ["test:0/4", "test:1/4"]) == []  # 2 mod 4 is left
    assert held_out_by("test", ["test:0/2", "train"]) == []
    assert held_out_by("train", both) == []
    assert held_out_by("test:1/4", ["test:0/2"]) == []


@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize("split", ["test", "test:0/3"])
def test_a_split_the_sweep_scores_whole_is_refused_when_the_spec_loads(table, split, tmp_path):
    path = write(tmp_path, table, **{'split = "train"': f'split = "{split}"'})
    with pytest.raises(SweepSpecError) as err:
        load_spec(path)
    assert str(err.value) == (
        f"{path}:{line_of(path, 'split')}: field '{table}.split': got {split!r}: every query "
        f"of it is in the sweep's test:0/2 and test:1/2, held out of training, so none is "
        f"left to train on: train on another split, or score only a part of this one")


@pytest.mark.parametrize("table", list(TABLES))
def test_a_split_the_dataset_lacks_is_refused_naming_the_field(table, tmp_path, sweep_db):
    path = write(tmp_path, table, **{'split = "train"': 'split = "dev:0/2"'})
    load_spec(path)  # the names alone do not tell
    error = one_error(sweep(path, tmp_path, sweep_db))
    assert error == (f"error: {path}:{line_of(path, 'split')}: field '{table}.split': got "
                     f"'dev:0/2': the dataset 'sample' has no split 'dev' (its splits: test, "
                     f"train): train on one of them")
    assert not (tmp_path / "cache" / "models").exists()


@pytest.mark.parametrize("table", list(TABLES))
def test_a_split_its_data_leaves_empty_is_refused_naming_the_field(table, tmp_path, sweep_db):
    # every train query of the sample dataset hashes to part 0 of 2: the sweep scores them all
    path = write(tmp_path, table, **{'tune_split = "test:0/2"': 'tune_split = "train:0/2"'})
    load_spec(path)
    error = one_error(sweep(path, tmp_path, sweep_db))
    assert error == (f"error: {path}:{line_of(path, 'split')}: field '{table}.split': got "
                     f"'train': no query of it is left to train on once the tune and report "
                     f"splits' queries (train:0/2, test:1/2) are held out: train on another "
                     f"split, or score only a part of this one")
    assert not (tmp_path / "cache" / "models").exists()


@pytest.mark.parametrize("table", list(TABLES))
def test_a_negative_depth_with_nothing_to_draw_is_refused_naming_the_field(table, tmp_path,
                                                                          sweep_db):
    # the top BM25 document of every train query of the sample dataset is judged relevant
    path = write(tmp_path, table, **{"negative_depth = 5": "negative_depth = 1"})
    error = one_error(sweep(path, tmp_path, sweep_db))
    assert re.fullmatch(rf"error: {re.escape(str(path))}:{line_of(path, 'negative_depth')}: "
                        rf"field '{table}\.negative_depth': got 1: .* top 1 BM25 documents "
                        rf"that is not judged relevant.*: raise negative_depth.*", error), error
    assert not list((tmp_path / "cache" / "models").glob("*/*"))  # no model trained
