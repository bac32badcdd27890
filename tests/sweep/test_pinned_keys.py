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

Deliberate changes, recorded: the labels of the single-signal pipeline points of
``pinned_keys_dense.json`` (``bm25 >> dense_rescore(...)``, ``dense >> rocchio(...) >> dense``)
no longer name the base's RRF they never apply (``@ rrf-k60-d100`` -> ``@ bm25-d100``,
``@ dense-d100``; ``evals/sweeps/README.md``, "What is cached"): labels only, every config hash
and key as before. A pipeline point's ``@`` naming only the base's settings its stages read
(``settings.base_reads``: ``mix(...; blend='linear',...) @ linear-zero-d100``, was ``@
rrf-k60-d100``) changed no pinned label: every shipped pipeline reads all it names. Stage
versions ``selection`` 2, ``reader`` 3 and ``validation`` 2 (the fail-closed sentence split,
``NO_CONTENT``, duplicates judged against kept chunks only): the keys of those stages and of
``prompt`` and ``answer_metrics`` after them moved in the sample pipeline runs, so a cache never
serves an answer checked by the old splitter; every output hash, prompt hash and metric value
is as before. Stage versions ``selection`` 3 (the overlap ratio is the candidate's share of
words in a kept chunk), ``reader`` 4 and ``validation`` 3 (a terminator touching a citation
marker ends a sentence; a chunk's unterminated last sentence is not quoted; control characters
and a result for another prompt fail): the same keys moved, every output hash, prompt hash and
metric value as before. Stage version ``selection`` 4 (the per-chunk cap cuts at the sentence
splitter's ends, ambiguous full stops not taken): the same keys moved, every output hash, prompt
hash and metric value as before (no cut on the sample moved). Stage versions ``reader`` 5 and
``validation`` 4 (MALFORMED_CITATION for any bracket form, numbered references and glued
brackets, and the reader never quoting what it refuses; the reader counting tokens with the
policy's encoding): the keys of ``reader``, ``validation`` and ``answer_metrics`` moved, every
output hash, prompt hash and metric value as before. Stage version ``answer_metrics`` 2 (a chunk
the policy cut holds only what it kept): its keys moved, every output hash as before. Stage
version ``reader`` 6 (an output holding a failed generation of a reader that calls an endpoint
is kept under a key naming its bytes, never the stage's key, so a later run asks again; caches
held such failures under the version 5 keys): the keys of ``reader``, ``validation`` and
``answer_metrics`` moved, every output hash, prompt hash and metric value as before.
Chunker versions ``sentences`` 2,
``headings`` 3 (a blank line between ``\\r\\n`` or ``\\r`` endings ends a sentence) and
``token_window`` 2 (no window inside the one before it): the sample (no ``\\r``) is cut as
before, but a chunk id holds its chunker's id, so the sentences points' ``chunks`` key and output
hash moved, with the keys and output hashes of every stage after them and their prompt hashes;
every metric value, and every ``whole`` point, as before.

A pipeline point's config hash holding only the base's fusion settings its fusions read
(``settings.BaseReads.scoring``, the rest at their defaults), and a fusion's key only those its
blend reads (``FuseConfig.canonical``), changed no pinned value: no shipped point sets one it
does not read (one that does now has the key of the same run at the default; no stage version
moved, as no output did).

Two hashes that read what the point never uses (QA, 2026-11-29), no stage version moved (the
stages compute what they did, each key names exactly that): the metrics stage's key holds its
metrics in canonical order (``aiblox.metrics.canonical_metrics``: ``ndcg``, ``recall``, ``mrr``,
``map``, the default list's own order) and computes them in it, so the specs listing
``["ndcg@10", "map@100", "recall@100"]`` (the ``*_bm25_cv``, ``*_rm3_cv``, ``*_dense_prf`` and
``*_dense_rescore`` specs) moved their metrics keys, every other key as before; and a ``bm25``
point without a pipeline or chunk stages hashes the default embedder's id whatever its store's
(``aiblox.engine.result.UNREAD_EMBEDDER``), so the config hashes of ``scifact_bm25`` and the
``*_bm25_cv`` specs moved here, pinned with a stand-in embedder id (with MiniLM, the default,
they are as before; the ``*_bm25_cv`` specs, written for the hashing embedder, move in use too).
Every run record (keys, output hashes, run hashes, metric values) is as before.

A pipeline point hashes the embedder only when one of its stages reads it (its kind's
``reads``: ``settings.BaseReads.embedder``), so the config hashes of the points whose pipelines
read none (``bm25 >> rm3 >> bm25``, ``bo1``, the dense-rescore specs' BM25 baseline) moved
here, pinned with a stand-in embedder id; no key, output hash or metric moved.
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
    if spec.pipeline is not None and spec.finetune_reranker is None:
        # (a trained reranker's key holds its files' sha256, known only once it is trained:
        # such a spec is pinned by its first stage, as below)
        return pipeline_spec_keys(spec, backend)
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


class KeyContext:
    """The engine's planning context (:class:`aiblox.engine.plan.PlanContext`) that computes
    keys and nothing else: every stage of a retrieval pipeline keyed as a sweep keys it, from
    a fixed dataset hash, store fingerprint and embedder id (``dataset_hash``, ``fingerprint``,
    ``embedder``: a real sweep's, to hold the planner to it)."""

    def __init__(self, backend: str, limit: int | None = None, dataset_hash: str = DATASET_HASH,
                 fingerprint: dict[str, Any] | None = None, embedder: str = EMBEDDER_ID):
        self.backend, self.limit, self.dataset_hash = backend, limit, dataset_hash
        self.fp, self.embedder = fingerprint or FINGERPRINT, embedder

    class _Record:
        def __init__(self, key: str) -> None:
            self.key = key

    def topics(self, split):
        from aiblox.engine.plan import Value
        from aiblox.engine.task import stage_key

        key = stage_key("topics", "1", {"dataset": self.dataset_hash, "split": split,
                                        "limit": self.limit})
        return Value("queries", key, (), lambda: None, topics=True)

    def first_stage(self, prefs, split):
        from aiblox.engine.configs import fusion_config, signals_config
        from aiblox.engine.plan import Value
        from aiblox.engine.task import STAGE_VERSIONS, stage_key

        scfg = signals_config(prefs, self.dataset_hash, split, self.backend, self.embedder,
                              limit=self.limit, store=self.fp)
        skey = stage_key("signals", STAGE_VERSIONS["signals"], scfg, [])
        fkey = stage_key("fusion", STAGE_VERSIONS["fusion"], fusion_config(prefs), [skey])
        return Value("run", fkey, (self._Record(skey), self._Record(fkey)), lambda: None,
                     prefs=prefs, queries=self.topics(split))

    def run_stage(self, name, version, config, inputs, compute):
        from aiblox.engine.task import stage_key

        return self._Record(stage_key(name, version, config, inputs)), None

    def fingerprints(self, reads):
        out: dict[str, Any] = {"dataset": self.dataset_hash, "backend": self.backend}
        if reads & {"items", "vectors"}:
            out["store"] = self.fp
        if reads & {"vectors", "embedder"}:
            out["embedder"] = self.embedder
        return out

    def stage_context(self):
        return None


def pipeline_keys(pt: Any, split: str, metrics: list[str], ctx: KeyContext) -> list[str]:
    """The keys of a pipeline point's stages on ``split``, metrics last, as a sweep keys them."""
    from aiblox.engine.configs import metrics_config
    from aiblox.engine.plan import apply_pipeline
    from aiblox.engine.task import STAGE_VERSIONS, stage_key

    value = apply_pipeline(pt.pipeline, pt.prefs, ctx, split)
    keys = [r.key for r in value.records]
    return keys + [stage_key("metrics", STAGE_VERSIONS["metrics"],
                             metrics_config(metrics, split), [value.key])]


def pipeline_spec_keys(spec: Any, backend: str) -> list[dict[str, Any]]:
    """Every point of a spec with a retrieval pipeline: label, config hash, and the keys of
    every stage of its pipeline per split (its own stages too, not only the first)."""
    import importlib

    from aiblox.engine.settings import point_config, point_title

    for module in spec.stage_modules:
        importlib.import_module(module)
    settings = spec.settings()
    ctx = KeyContext(backend, spec.query_limit)
    return [{"label": point_title(settings, pt),
             "config_hash": point_config(settings, pt, EMBEDDER_ID, backend)[0],
             "keys": {split: pipeline_keys(pt, split, list(spec.metrics), ctx)
                      for split in spec.splits}}
            for pt in spec.grid_points()]


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
        specs = current_specs()
        topics: set[str] = set()
        for extra in sorted(HERE.glob("pinned_keys_*.json")):  # each topic's specs in its file
            data = json.loads(extra.read_text(encoding="utf-8"))
            data["specs"] = {name: specs[name] for name in data["specs"] if name in specs}
            topics |= set(data["specs"])
            extra.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            print(f"wrote {extra}")
        pinned_data = {"specs": {name: spec for name, spec in specs.items()
                                 if name not in topics},
                       "runs": sample_runs(ds, db, Path(tmp) / "stages")}
    PINNED.write_text(json.dumps(pinned_data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PINNED}")
