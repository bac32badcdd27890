"""Stage keys, run hashes and config hashes pinned: a refactor of the sweep must not change them.

``pinned_keys.json`` holds, for every shipped spec under ``evals/sweeps/``, each point's label and
config hash and the keys of its signals, fusion and metrics stages (with a fixed dataset hash and
store fingerprint, so no dataset is read); and, for a fusion sweep and a pipeline sweep run on the
sample dataset, every stage record (key and output hash), run hash, prompt hash and metric value.
A changed value is either a bug or a deliberate version bump: regenerate the file with
``python tests/sweep/test_pinned_keys.py`` and name the bump in the commit. A spec added without
touching the main file is pinned in a ``pinned_keys_<topic>.json`` beside it (``specs`` only;
``pinned_keys_cv.json``: the cross-validated BM25 specs; ``pinned_keys_finetune.json``: the
fine-tuned scifact spec; ``pinned_keys_rerank.json``: the reranked scifact spec), read with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PINNED = HERE / "pinned_keys.json"
SPECS = sorted((REPO / "evals" / "sweeps").glob("*.toml"))

DATASET_HASH = "d" * 64
FINGERPRINT = {"items": "a" * 64, "vectors": "b" * 64}
EMBEDDER_ID = "pinned-embedder"


def spec_keys(path: Path) -> list[dict[str, Any]]:
    """Every point of a shipped spec: label, config hash, stage keys per split."""
    from aiblox.engine.configs import fusion_config, metrics_config, signals_config
    from aiblox.engine.evaluate import config_hash
    from aiblox.engine.settings import chunk_label, pipeline_config, point_label
    from aiblox.engine.task import STAGE_VERSIONS, stage_key
    from aiblox.sweep import load_spec
    from aiblox.sweep.spec import backend_of
    SIGNALS_VERSION, FUSION_VERSION, METRICS_VERSION = (
        STAGE_VERSIONS[s] for s in ("signals", "fusion", "metrics"))

    spec = load_spec(path)
    backend = backend_of(spec.db, spec.backend)
    if spec.has_pipeline_axes:
        pts = [(p.prefs, pipeline_config(spec.settings(), p, EMBEDDER_ID, backend)[0],
                point_label(p.prefs) + "|" + chunk_label(p.prefs))
               for p in spec.pipeline_points()]
        limit = spec.query_limit
    else:
        pts = [(p, config_hash(p, EMBEDDER_ID, backend)[0], point_label(p))
               for p in spec.points()]
        limit = None
    out = []
    for prefs, chash, label in pts:
        keys = {}
        for split in spec.splits:  # a cross-validated spec may have no report split
            scfg = signals_config(prefs, DATASET_HASH, split, backend, EMBEDDER_ID,
                                  limit=limit, store=FINGERPRINT)
            skey = stage_key("signals", SIGNALS_VERSION, scfg, [])
            fkey = stage_key("fusion", FUSION_VERSION, fusion_config(prefs), [skey])
            mkey = stage_key("metrics", METRICS_VERSION, metrics_config(spec.metrics, split),
                             [fkey])
            keys[split] = [skey, fkey, mkey]
        out.append({"label": label, "config_hash": chash, "keys": keys})
    return out


def run_record(result: Any) -> dict[str, Any]:
    """What a finished sweep must reproduce byte for byte."""
    return {
        "best": result.best.config_hash,
        "points": [{
            "label": p.label, "config_hash": p.config_hash,
            "splits": {s: {"run_hash": m.run_hash, "prompts_sha256": m.prompts_sha256,
                           "stages": [[r["name"], r["key"], r["output_hash"]] for r in m.stages],
                           "metrics": {k: repr(v) for k, v in sorted(p.metrics[s].items())}}
                       for s, m in sorted(p.manifest.splits.items())},
        } for p in result.points],
    }


def sample_runs(sample_dataset: Any, db: str, cache_dir: Path) -> dict[str, Any]:
    """A fusion sweep and a pipeline sweep (chunking, selection, extractive reader) on the
    sample dataset with the hashing embedder."""
    from aiblox.sweep import SweepSpec, load_spec, run_sweep

    spec = load_spec(REPO / "evals" / "sweeps" / "sample_fusion.toml")
    fusion = run_sweep(spec, cache_dir=cache_dir / "fusion", db=db, progress=False,
                       dataset=sample_dataset)
    data = spec.model_dump()
    data["base"] = {**data["base"], "top_k_chunks": 6}
    data.update({"name": "pinned_pipeline",
                 "grid": {"chunking": {"chunker_id": ["sentences", "whole"]},
                          "selection": {"policy": ["R2_POLICY_V1", "R2_POLICY_V2"],
                                        "max_chunks": [2, 4]}},
                 "baseline": {"policy": "R2_POLICY_V1", "max_chunks": 2},
                 "primary": "answer_f1", "query_limit": 4, "metrics": ["ndcg@10"],
                 "significance_top": 2,
                 # 6 chunks returned: answer_recall@k for k <= 6 only (issue 25; the record
                 # held an answer_recall@10 over 6 chunks before)
                 "chunk_k": [1, 5]})
    pipeline = run_sweep(SweepSpec.model_validate(data), cache_dir=cache_dir / "pipeline",
                         db=db, progress=False, dataset=sample_dataset)
    return {"sample_fusion": run_record(fusion), "pinned_pipeline": run_record(pipeline)}


def current_specs() -> dict[str, Any]:
    return {p.name: spec_keys(p) for p in SPECS}


def load_pinned() -> dict[str, Any]:
    """``pinned_keys.json``, with the specs of ``pinned_keys_*.json`` beside it added (a spec
    pinned later, by a branch that left the main file alone); a spec in both must agree."""
    data = json.loads(PINNED.read_text(encoding="utf-8"))
    for extra in sorted(HERE.glob("pinned_keys_*.json")):
        for name, keys in json.loads(extra.read_text(encoding="utf-8"))["specs"].items():
            assert data["specs"].setdefault(name, keys) == keys, f"{extra.name}: {name}"
    return data


@pytest.fixture(scope="module")
def pinned() -> dict[str, Any]:
    return load_pinned()


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_shipped_spec_keys_are_pinned(path, pinned):
    assert path.name in pinned["specs"], f"{path.name} is not pinned: regenerate (see above)"
    assert spec_keys(path) == pinned["specs"][path.name]


def test_sample_sweeps_reproduce_pinned_records(tmp_path, pinned, sample_dataset, sweep_db):
    runs = sample_runs(sample_dataset, sweep_db, tmp_path)
    for name, record in runs.items():
        assert record == pinned["runs"][name], name


if __name__ == "__main__":  # regenerate: python tests/sweep/test_pinned_keys.py
    import tempfile

    from aiblox.data import load_dataset
    from aiblox.embedding import CachedEmbedder, HashingEmbedder
    from aiblox.engine.workspace import prepare_store
    from aiblox.stores import DuckDBStore

    with tempfile.TemporaryDirectory() as tmp:
        ds = load_dataset(REPO / "datasets" / "sample")
        db = str(Path(tmp) / "sample.duckdb")
        store = DuckDBStore(db)
        prepare_store(store, ds, CachedEmbedder(HashingEmbedder(), store), progress=False)
        store.close()
        pinned_data = {"specs": current_specs(),
                       "runs": sample_runs(ds, db, Path(tmp) / "stages")}
    PINNED.write_text(json.dumps(pinned_data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PINNED}")
