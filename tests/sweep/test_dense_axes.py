"""Dense document scores from passages as sweep axes: ``doc_score``, ``passage_chunker`` and
``passage_tokens`` expand (``first`` once whatever the passage sizes), each setting is a
signals stage of its own with its own key, TPE sees them, bad values fail when the spec loads,
and specs without them keep their hashes."""

from __future__ import annotations

import json

import pytest
from spec_text import AS_LOGGED_HASH, as_logged

from aiblox.contracts import RetrievalPrefs


def test_dense_axes_expand_run_and_rerun_free(tmp_path, sample_spec, small_spec):
    from aiblox.sweep import run_sweep

    spec = small_spec(sample_spec, doc_score=["first", "maxp", "mean_top2"],
                      passage_tokens=[32, 64], baseline={"doc_score": "first"})
    spec = spec.model_copy(update={"base": {**spec.base, "mode": "dense"}})
    pts = spec.points()
    got = [(p.vector.doc_score, p.vector.passage_tokens if p.vector.doc_score != "first"
            else None) for p in pts]
    assert got == [("first", None), ("maxp", 32), ("maxp", 64), ("mean_top2", 32),
                   ("mean_top2", 64)]
    assert spec.baseline_prefs().vector.doc_score == "first"
    first = run_sweep(spec, cache_dir=tmp_path / "c", db=str(tmp_path / "s.duckdb"),
                      progress=False)
    assert first.computed["signals"] == 10  # 5 settings x 2 splits
    runs = {p.label: p.manifest.splits["test"].run_hash for p in first.points}
    assert len(set(runs.values())) == 5
    assert set(runs) == {"dense-d20", "dense-maxp-token_window32-d20",
                         "dense-maxp-token_window64-d20", "dense-mean_top2-token_window32-d20",
                         "dense-mean_top2-token_window64-d20"}
    again = run_sweep(spec, cache_dir=tmp_path / "c", db=str(tmp_path / "s.duckdb"),
                      progress=False)
    assert again.computed == {} and [p.metrics for p in again.points] == \
        [p.metrics for p in first.points]


def test_signals_keys_differ_per_setting_and_first_is_unchanged():
    from aiblox.engine.configs import signals_config
    from aiblox.engine.task import stage_key

    def key(**vector):
        prefs = RetrievalPrefs(query_text="", mode="dense", vector=vector)
        cfg = signals_config(prefs, "h", "test", "duckdb", "m", store={"items": "i"})
        return stage_key("signals", "1", cfg), cfg

    plain, cfg = key()
    assert "passages" not in cfg and "doc_score" not in cfg["vector"]
    # passage settings do not apply to "first": the same key
    assert key(passage_tokens=64)[0] == plain == key(doc_score="first")[0]
    keys = {key(doc_score=d, passage_tokens=t, passage_overlap=o)[0]
            for d in ("maxp", "mean_top2", "mean_top3") for t in (64, 128) for o in (None, 8)}
    assert len(keys) == 12 and plain not in keys
    _, maxp = key(doc_score="maxp", passage_tokens=64)
    assert maxp["passages"].startswith("token_window(max=64,overlap=8,")
    assert key(doc_score="maxp", passage_chunker="sentences")[1]["passages"].startswith(
        "sentences(")
    # BM25 alone reads no vectors: no passage key either
    bm25 = RetrievalPrefs(query_text="", mode="bm25", vector={"doc_score": "maxp"})
    assert "passages" not in signals_config(bm25, "h", "test", "duckdb", "m")


def test_tpe_space_sees_dense_settings(sample_spec, small_spec):
    from aiblox.sweep.space import SearchSpace

    spec = small_spec(sample_spec, doc_score=["first", "maxp"], passage_tokens=[32, 64],
                      w_text=[0.3, 0.5], blend=["linear"])
    from aiblox.engine.settings import PipelinePoint

    space = SearchSpace([PipelinePoint(p) for p in spec.points()])
    assert len(space.points) == 6  # 2 weights x (first + maxp x 2 sizes)
    assert {"doc_score", "passage_tokens", "w_text"} <= set(space.dimensions)

    class Trial:  # answers by parameter name, whatever suffix the space gives it
        def __init__(self, **params):
            self.params, self.asked = params, []

        def suggest_int(self, name, low, high):
            self.asked.append(name)
            return self.params[name.split("|")[0]]

        def suggest_categorical(self, name, choices):
            self.asked.append(name)
            value = self.params[name.split("|")[0]]
            assert value in choices
            return value

    t = Trial(w_text=1, doc_score="maxp", passage_tokens=0)
    v = space.points[space.point(t)].prefs
    assert (v.vector.doc_score, v.vector.passage_tokens, v.scoring.w_text) == ("maxp", 32, 0.5)
    assert any(n.startswith("passage_tokens") for n in t.asked)
    t = Trial(w_text=0, doc_score="first")
    assert space.points[space.point(t)].prefs.vector.doc_score == "first"
    assert not any(n.startswith("passage_tokens") for n in t.asked)  # not asked of "first"


@pytest.mark.parametrize(("grid", "base", "message"), [
    ({"doc_score": ["max"]}, {}, "doc_score must be one of"),
    ({"doc_score": ["mean_top1"]}, {}, "doc_score must be one of"),
    ({"passage_chunker": ["nope"]}, {}, "unknown chunker"),
    ({"passage_tokens": [0]}, {}, "passage_tokens values must be >= 1"),
    ({"doc_score": []}, {}, "at least one value"),
    ({"doc_score": ["maxp"], "passage_tokens": [16]},
     {"vector": {"passage_overlap": 16}}, "field 'grid': passages"),
    ({}, {"vector": {"doc_score": "maxp", "passage_chunker": "nope"}}, "unknown chunker 'nope'"),
    ({}, {"vector": {"doc_score": "maxp", "distance": "l2"}}, "needs engine 'index'"),
])
def test_bad_dense_settings_fail_when_the_spec_loads(tmp_path, grid, base, message):
    from spec_text import MINIMAL, write

    from aiblox.sweep import SweepSpecError, load_spec

    def toml(table, value):
        return f"[{table}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in value.items())

    text = MINIMAL + toml("grid", grid) + (toml("base.vector", base["vector"]) if base else "")
    with pytest.raises(SweepSpecError, match=message):
        load_spec(write(tmp_path, text))


def test_specs_without_dense_axes_keep_their_hash(sample_spec):
    # the value before these axes existed (spec_text.AS_LOGGED_HASH)
    assert as_logged(sample_spec).hash == AS_LOGGED_HASH
    assert all(p.vector.doc_score == "first" for p in sample_spec.points())


def test_shipped_maxp_spec_loads():
    from pathlib import Path

    from aiblox.sweep import load_spec

    path = Path(__file__).resolve().parents[2] / "evals/sweeps/levers/scifact_maxp.toml"
    spec = load_spec(path)
    pts = spec.points()
    assert len(pts) == spec.grid_size() == 4 * 21 * 2 * 2
    assert {p.vector.doc_score for p in pts} == {"first", "maxp", "mean_top2", "mean_top3"}
    base = spec.baseline_prefs()
    assert base.vector.doc_score == "first" and base.scoring.w_vec == 0.45
