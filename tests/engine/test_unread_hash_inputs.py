"""What a point never reads, and how its metrics are listed, leave its hashes.

QA: ``aiblox eval adi --mode bm25 --embedder hashing`` gave another config hash than the default
embedder for the identical BM25 ranking (the config kept ``embedder`` for a mode that never reads
it, while the signals key drops it), and ``--metric ndcg@10 --metric recall@100`` against the
reverse order gave another metrics stage key and output hash and another manifest hash (the
metrics were hashed in the order given). An unread embedder is now hashed as the default's
(:data:`~aiblox.engine.result.UNREAD_EMBEDDER`), as unread fusion settings are at their defaults,
and the metrics in canonical order (:func:`~aiblox.metrics.canonical_metrics`), which is the
default list's own: every hash at the defaults is as it was. The order metrics are shown in is
the one given."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine.configs import chunk_metrics_config, metrics_config
from aiblox.engine.evaluate import config_hash, evaluate_retrieval
from aiblox.engine.settings import PipelinePoint, SweepSettings, point_config
from aiblox.experiment.tracking import result_manifest
from aiblox.metrics import DEFAULT_METRICS, evaluation_prefs

# the config hash of `aiblox eval --mode bm25` (default metrics, DuckDB) with the default
# embedder, as it was before: unchanged, and now every embedder's
BM25_AT_DEFAULTS = "e9c892432191e54032ca4c74d8379452403288a4725e031839e19c7fb613736f"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, sample_dataset):
    from aiblox.engine.workspace import open_workspace

    db = str(tmp_path_factory.mktemp("unread") / "sample.duckdb")
    with open_workspace(sample_dataset, db, "hashing", progress=False) as w:
        yield w


def _eval(tmp_path, embedder: str, mode: str = "bm25") -> dict:
    r = CliRunner().invoke(app, ["eval", "sample", "--mode", mode, "--embedder", embedder,
                                 "--db", str(tmp_path / f"{embedder}.duckdb"), "--json"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["systems"][0]


def test_bm25_hashes_no_embedder(tmp_path):
    hashing, minilm = _eval(tmp_path, "hashing"), _eval(tmp_path, "minilm")
    assert hashing["hashes"] == minilm["hashes"]
    assert hashing["hashes"]["config"] == BM25_AT_DEFAULTS
    bm25 = evaluation_prefs(RetrievalPrefs(query_text="", mode="bm25"), DEFAULT_METRICS)
    assert config_hash(bm25, "all-MiniLM-L6-v2+cuda", "duckdb")[0] == BM25_AT_DEFAULTS


def test_a_point_that_reads_the_embedder_keeps_it():
    settings = SweepSettings(name="s", embedder="hashing", metrics=("ndcg@10",))

    def chash(prefs: RetrievalPrefs, embedder: str, **kw) -> str:
        return point_config(settings if not kw else SweepSettings(
            name="s", embedder="hashing", metrics=("ndcg@10",), **kw),
            PipelinePoint(prefs), embedder, "duckdb")[0]

    for mode in ("hybrid", "dense"):
        p = RetrievalPrefs(query_text="", mode=mode)
        assert chash(p, "hashing-v1-384") != chash(p, "all-MiniLM-L6-v2")
    bm25 = RetrievalPrefs(query_text="", mode="bm25")
    assert chash(bm25, "hashing-v1-384") == chash(bm25, "all-MiniLM-L6-v2")
    # chunk stages and selection read it (the late chunker, the policy's key)
    assert chash(bm25, "hashing-v1-384", chunk_stages=True) != \
        chash(bm25, "all-MiniLM-L6-v2", chunk_stages=True)


@pytest.mark.parametrize(("expression", "reads"), [
    ("bm25 >> rm3 >> bm25", False), ("bm25 >> bo1 >> bm25", False), ("bm25 % 20", False),
    ("bm25 >> dense_rescore", True), ("dense >> rocchio >> dense", True),
    ("bm25 + dense", True), ("retrieve", True)])
def test_a_pipeline_hashes_the_embedder_only_when_a_stage_reads_it(expression, reads):
    """A pipeline point hashed its embedder whatever its stages read: ``bm25 >> rm3 >> bm25``
    under ``--embedder hashing`` was another point than under MiniLM, for one ranking."""
    from aiblox.engine import parse_pipeline

    settings = SweepSettings(name="s", embedder="hashing", metrics=("ndcg@10",))
    pt = PipelinePoint(RetrievalPrefs(query_text="", mode="bm25"),
                       pipeline=parse_pipeline(expression))
    hashes = {point_config(settings, pt, e, "duckdb")[0]
              for e in ("hashing-v1-384", "all-MiniLM-L6-v2")}
    assert len(hashes) == (2 if reads else 1)


def test_metrics_are_hashed_in_one_order_and_shown_in_the_order_given(ws, sample_dataset):
    from aiblox.metrics import canonical_metrics

    assert canonical_metrics(DEFAULT_METRICS) == list(DEFAULT_METRICS)  # keys at the defaults
    assert metrics_config(DEFAULT_METRICS, "test") == {"metrics": list(DEFAULT_METRICS),
                                                        "split": "test"}
    assert chunk_metrics_config(["recall@10", "ndcg@10"], [1], "test") == \
        chunk_metrics_config(["ndcg@10", "recall@10"], [1], "test")
    prefs = RetrievalPrefs(query_text="", mode="bm25", top_k_items=20, fts={"top_k": 20})
    given = [["ndcg@10", "recall@20"], ["recall@20", "ndcg@10"]]
    results = [evaluate_retrieval(ws, sample_dataset, "test", prefs, m, progress=False)
               for m in given]
    assert [list(r.metrics) for r in results] == given  # shown as listed
    assert results[0].metrics == results[1].metrics
    assert results[0].stages == results[1].stages  # the same keys and output hashes
    manifests = [result_manifest(sample_dataset, r, embedder="hashing", metrics=m)
                 for r, m in zip(results, given, strict=True)]
    assert [m.metrics for m in manifests] == given
    assert manifests[0].manifest_hash == manifests[1].manifest_hash
