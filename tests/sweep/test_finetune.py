"""Fine-tuning as a sweep stage (``[finetune]``): the spec's checks before any work, the queries
trained on (never a scored one), the model trained once and keyed by its recipe, the same
files from the same recipe and seed, points scored with the tuned model, and ``verify``
checking the very weights a point was scored with. Real training (all-MiniLM-L6-v2 on the
sample dataset's 8 train pairs, CPU, seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiblox.data import load_dataset
from aiblox.embedding.finetune import RECIPE_FILE, FineTuneConfig, TrainingPair, fine_tune
from aiblox.embedding.sentence_transformers import model_digest
from aiblox.sweep import SweepSpecError, load_spec, run_sweep
from aiblox.sweep.finetune import (
    base_model_folder,
    ensure_fine_tuned,
    finetune_key,
    training_query_ids,
)
from aiblox.sweep.verify import verify_point

pytest.importorskip("sentence_transformers")

SPEC = """
name = "sample_ft"
dataset = "sample"
tune_split = "test:0/2"
report_split = "test:1/2"
embedder = "minilm"
metrics = ["ndcg@10"]
primary = "ndcg@10"

[finetune]
split = "train"
epochs = 1
batch_size = 4
hard_negatives = 1
negative_depth = 5
{extra}

[base]
top_k_items = 10
scoring = {{ blend = "linear", normalize = "minmax" }}
fts = {{ top_k = 20 }}
vector = {{ top_k = 20 }}

[grid]
w_text = [0.3, 0.7]
"""


def _spec(tmp_path: Path, extra: str = "", **replace: str):
    text = SPEC.format(extra=extra)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "ft.toml"
    path.write_text(text, encoding="utf-8")
    return load_spec(path)


@pytest.mark.parametrize(("extra", "replace", "message"), [
    ("", {'split = "train"': 'split = "test:0/2"'},
     "field 'finetune.split': got 'test:0/2': a split the sweep scores"),
    ("", {'split = "train"': 'split = "train:2"'}, "field 'finetune.split': derived split"),
    ("", {'embedder = "minilm"': 'embedder = "hashing"'}, "not a sentence-transformers model"),
    ("epochs_x = 1", {}, "finetune.epochs_x"),
    ("", {"epochs = 1": "epochs = 0"}, "finetune.epochs"),
    ("", {"negative_depth = 5": "negative_depth = 0"}, "finetune.negative_depth"),
])
def test_bad_finetune_tables_are_refused_when_the_spec_loads(tmp_path, extra, replace, message):
    with pytest.raises(SweepSpecError, match=message):
        _spec(tmp_path, extra, **replace)


def test_training_queries_never_include_a_scored_query(tmp_path):
    spec = _spec(tmp_path, **{'split = "train"': 'split = "test"',
                              'tune_split = "test:0/2"': 'tune_split = "train"'})
    scored = load_dataset("sample", splits=spec.splits)
    train = load_dataset("sample", splits=["test"])
    qids = training_query_ids(spec, train, scored)
    held = {q for s in spec.splits for q, _ in scored.split_queries(s)}
    assert qids and not set(qids) & held
    assert set(qids) == {q for q, _ in train.split_queries("test")} - held
    everything = _spec(tmp_path, **{'split = "train"': 'split = "test"',
                                    'tune_split = "test:0/2"': 'tune_split = "train"',
                                    'report_split = "test:1/2"': 'report_split = "test:0/2"'})
    scored = load_dataset("sample", splits=everything.splits)
    part = load_dataset("sample", splits=["test"])
    left = training_query_ids(everything, part, scored)
    half = load_dataset("sample", splits=["test:1/2"])
    assert left == sorted({q for q, _ in half.split_queries("test:1/2")})


def test_the_key_follows_the_recipe_and_the_training_queries(tmp_path):
    spec = _spec(tmp_path)
    train = load_dataset("sample", splits=["train"])
    qids = ["q1", "q2"]
    key = finetune_key(spec, train, "base", qids)
    assert key == finetune_key(spec, train, "base", list(qids))
    assert key != finetune_key(spec, train, "base", qids[:1])
    assert key != finetune_key(spec, train, "other-base", qids)
    lr = _spec(tmp_path, **{"epochs = 1": "epochs = 1\nlr = 5e-5"})
    assert key != finetune_key(lr, train, "base", qids)


def test_fine_tune_refuses_what_it_cannot_train_on(tmp_path):
    base = base_model_folder("minilm")
    with pytest.raises(ValueError, match="at least one"):
        fine_tune(base, [], tmp_path / "m", FineTuneConfig())
    with pytest.raises(ValueError, match="no non-relevant candidate"):
        fine_tune(base, [TrainingPair("q", "d")], tmp_path / "m", FineTuneConfig())
    (tmp_path / "there").mkdir()
    with pytest.raises(ValueError, match="already exists"):
        fine_tune(base, [TrainingPair("q", "d", ("n",))], tmp_path / "there",
                  FineTuneConfig())


def test_a_gpu_asked_for_where_there_is_none_is_refused_before_training(tmp_path):
    from aiblox.embedding import DeviceError
    from aiblox.embedding.device import gpu_count

    if gpu_count():
        pytest.skip("this machine has a GPU")
    pairs = [TrainingPair("q", "d")]
    with pytest.raises(DeviceError, match=r"^--device cuda: torch sees no GPU"):
        fine_tune(base_model_folder("minilm"), pairs, tmp_path / "m",
                  FineTuneConfig(hard_negatives=0), device="cuda")
    assert not (tmp_path / "m").exists()
    spec = _spec(tmp_path, **{'embedder = "minilm"': 'embedder = "minilm"\ndevice = "cuda"'})
    with pytest.raises(DeviceError, match=r"^device cuda: torch sees no GPU"):
        ensure_fine_tuned(spec, load_dataset("sample", splits=spec.splits), tmp_path / "c",
                          str(tmp_path / "s.duckdb"), progress=False)
    assert not (tmp_path / "c").exists()


def test_same_recipe_and_seed_give_the_same_files(tmp_path):
    base = base_model_folder("minilm")
    pairs = [TrainingPair(f"what is topic {i}", f"topic {i} is a study of thing {i}",
                          (f"unrelated text {i}", f"another text {i + 1}")) for i in range(6)]
    cfg = FineTuneConfig(epochs=1, batch_size=3, hard_negatives=1)
    steps: list[tuple[int, int]] = []
    a = fine_tune(base, pairs, tmp_path / "a", cfg, on_step=lambda s, n, _: steps.append((s, n)))
    b = fine_tune(base, pairs, tmp_path / "b", cfg)
    assert steps == [(1, 2), (2, 2)]
    import torch

    assert not torch.are_deterministic_algorithms_enabled()  # the process's setting restored
    assert model_digest(a) == model_digest(b)
    assert model_digest(a) != model_digest(base)
    recipe = json.loads((a / RECIPE_FILE).read_text())
    assert recipe["config"]["seed"] == 0 and recipe["pairs"] == 6 and recipe["steps"] == 2
    assert "device" not in recipe  # trained on the CPU: the folder as before devices existed
    c = fine_tune(base, pairs, tmp_path / "c", cfg.model_copy(update={"seed": 1}))
    assert model_digest(c) != model_digest(a)


def test_a_sweep_trains_once_scores_with_the_tuned_model_and_verifies(tmp_path, monkeypatch):
    spec = _spec(tmp_path)
    cache, db = tmp_path / "stages", str(tmp_path / "store.duckdb")
    result = run_sweep(spec, cache_dir=cache, db=db, progress=False)
    models = sorted((cache / "models").iterdir())
    assert len(models) == 1 and (models[0] / RECIPE_FILE).is_file()
    folder = models[0]
    model_id = f"st:{folder.name}@{model_digest(folder)[:16]}"
    best = result.best
    assert best.manifest.config["embedder"] == model_id
    # named by what the spec said and which model (its files), never by where it lies
    ref = f"finetune:{folder.name}@{model_digest(folder)[:16]}"
    assert best.manifest.embedder_name == ref
    assert best.manifest.models == {ref: str(folder)}
    assert len(result.points) == 2

    import aiblox.sweep.finetune as ft

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(ft, "fine_tune", no_training)
    again = run_sweep(spec, cache_dir=cache, db=db, progress=False)
    assert [p.manifest.splits["test:1/2"].run_hash for p in again.points] == \
        [p.manifest.splits["test:1/2"].run_hash for p in result.points]
    assert ensure_fine_tuned(spec, load_dataset("sample", splits=spec.splits), cache, db,
                             progress=False) == folder

    ok = verify_point(best.manifest, db=db)
    assert ok.identical, ok.first_difference
    # the same spec over the cache moved elsewhere: the same points and manifests (an MLflow
    # sweep logs none again), nothing trained or computed; the moved point verifies
    import shutil

    moved_cache = tmp_path / "elsewhere" / "stages"
    shutil.copytree(cache, moved_cache)
    shutil.rmtree(cache)
    moved = run_sweep(spec, cache_dir=moved_cache, db=db, progress=False)
    assert [(p.config_hash, p.label, p.manifest.manifest_hash) for p in moved.points] == \
        [(p.config_hash, p.label, p.manifest.manifest_hash) for p in result.points]
    assert moved.computed == {}
    assert moved.best.manifest.models == {ref: str(moved_cache / "models" / folder.name)}
    ok = verify_point(moved.best.manifest, db=db)
    assert ok.identical, ok.first_difference
    shutil.move(moved_cache, cache)
    recipe = folder / RECIPE_FILE
    recipe.write_text(recipe.read_text() + " ", encoding="utf-8")  # other files, other model
    changed = verify_point(best.manifest, db=db)
    assert not changed.identical and changed.first_difference == "embedder"
    shutil.move(folder, tmp_path / "away")  # gone: one line naming it, not a difference
    with pytest.raises(ValueError) as err:
        verify_point(best.manifest, db=db)
    assert str(err.value).startswith(f"the embedder {model_id} the point was scored with is "
                                     f"gone: no model folder {folder} (trained by sweep "
                                     f"'sample_ft'")
    assert f"--cache-dir {cache} (its [finetune] table" in str(err.value)


def test_a_remote_cache_shares_the_trained_model(tmp_path, monkeypatch):
    """With a remote stage cache the model trained on one machine is published to the cache and
    copied (every file checked) by another instead of being trained again; a damaged copy is
    trained again."""
    import shutil

    import fsspec

    import aiblox.sweep.finetune as ft

    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path)
    scored = load_dataset("sample", splits=spec.splits)
    uri, db = "memory://ft-share/stages", str(tmp_path / "store.duckdb")
    folder = ensure_fine_tuned(spec, scored, uri, db, progress=False)
    assert folder.parent == Path(".aiblox/models") and (folder / RECIPE_FILE).is_file()
    digest = model_digest(folder)
    fs = fsspec.filesystem("memory")
    assert fs.exists(f"/ft-share/stages/models/{folder.name}/files.json")

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(ft, "fine_tune", no_training)
    shutil.rmtree(folder)  # another machine: nothing local
    again = ensure_fine_tuned(spec, scored, uri, db, progress=False)
    assert again == folder and model_digest(again) == digest

    shutil.rmtree(folder)
    fs.pipe(f"/ft-share/stages/models/{folder.name}/{RECIPE_FILE}", b"damaged")
    with pytest.raises(AssertionError, match="trained again"):
        ensure_fine_tuned(spec, scored, uri, db, progress=False)
    assert not folder.exists()


def test_a_scored_query_judged_under_another_id_is_not_trained_on():
    """scifact judges two queries under one id in train and another in test (train 871 is test
    870, "Obesity decreases life quality.", each judged relevant to document 195689316; train
    1291 is test 1292): held out by id only, the shipped scifact specs trained on both, so
    the model had learned two reported queries' answers."""
    from aiblox.sweep.finetune import query_text_key, training_data

    spec = load_spec(Path(__file__).resolve().parents[2] / "evals" / "sweeps"
                     / "scifact_finetune.toml")
    scored = load_dataset(spec.dataset, splits=spec.splits)
    train = training_data(spec)
    qids = training_query_ids(spec, train, scored)
    assert train.queries["871"] == scored.queries["870"] == "Obesity decreases life quality."
    assert "871" not in qids and "1291" not in qids and "870" in scored.qrels["test"]
    held = {query_text_key(scored.queries[q]) for s in spec.splits
            for q, _ in scored.split_queries(s)}
    assert qids and not {query_text_key(train.queries[q]) for q in qids} & held
    by_id = {q for q, _ in train.split_queries(spec.finetune.split)} - {
        q for s in spec.splits for q, _ in scored.split_queries(s)}
    assert sorted(by_id - {"871", "1291"}) == qids  # only those two moved
