"""evaluate_retrieval as a one-point run of the engine: the same numbers, keys and runs as a
sweep's point, retrieval pipelines as systems, refusals before any work; `aiblox eval
--pipeline` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from aiblox.contracts.retrieval import RetrievalPrefs
from aiblox.engine import Stage
from aiblox.engine.evaluate import evaluate_retrieval
from aiblox.metrics import DepthError

METRICS = ["ndcg@10", "recall@20", "map@20"]


@pytest.fixture(scope="module")
def ws(tmp_path_factory, sample_dataset):
    from aiblox.engine.workspace import open_workspace

    db = str(tmp_path_factory.mktemp("eval") / "sample.duckdb")
    with open_workspace(sample_dataset, db, "hashing", progress=False) as w:
        yield w


def prefs(**kw):
    return RetrievalPrefs(query_text="", top_k_items=20, fts={"top_k": 20},
                          vector={"top_k": 20}, **kw)


def test_a_mode_scores_as_the_sweeps_point_does(ws, sample_dataset, tmp_path):
    from aiblox.engine.cache import StageCache
    from aiblox.engine.context import RunContext
    from aiblox.engine.point import split_point
    from aiblox.engine.settings import PipelinePoint, SweepSettings

    p = prefs(mode="hybrid")
    result = evaluate_retrieval(ws, sample_dataset, "test", p, METRICS, progress=False)
    settings = SweepSettings(name="s", embedder="hashing", metrics=tuple(METRICS))
    ctx = RunContext(settings, sample_dataset, StageCache(tmp_path / "c"), ws.db,
                     ws.store.kind, ["test"], progress=False)
    out = split_point(ctx, PipelinePoint(p), "test")
    ctx.close()
    assert result.metrics == out["metrics"]
    assert [s["key"] for s in result.stages] == [s["key"] for s in out["stages"]]
    assert result.stage_run_hash == out["run_hash"]
    assert set(result.per_query) == set(METRICS)
    assert set(result.per_query["ndcg@10"]) == {q for q, _ in
                                               sample_dataset.split_queries("test")}
    assert all(len(hits) <= 20 for hits in result.run.values())


@pytest.mark.parametrize(("blend", "unused"), [
    ("rrf", {"normalize": "zscore", "missing": "list_min", "w_text": 0.9, "w_vec": 0.1}),
    ("linear", {"rrf_k": 10, "rrf_w_text": 2.0, "rrf_w_vec": 0.5}),
])
def test_settings_the_blend_does_not_read_are_the_same_point(ws, sample_dataset, blend, unused):
    """--blend rrf --normalize zscore is --blend rrf: the same config hash and stage keys (at
    the defaults, what a default point has always had), the same run."""
    default = evaluate_retrieval(ws, sample_dataset, "test", prefs(scoring={"blend": blend}),
                                 METRICS, progress=False)
    other = evaluate_retrieval(ws, sample_dataset, "test",
                               prefs(scoring={"blend": blend, **unused}), METRICS,
                               progress=False)
    assert other.hashes == default.hashes
    assert [s["key"] for s in other.stages] == [s["key"] for s in default.stages]
    assert other.config["prefs"]["scoring"] == default.config["prefs"]["scoring"]
    # a setting the blend reads is another point
    read = {"rrf": {"rrf_k": 10}, "linear": {"normalize": "zscore"}}[blend]
    another = evaluate_retrieval(ws, sample_dataset, "test",
                                 prefs(scoring={"blend": blend, **read}), METRICS,
                                 progress=False)
    assert another.hashes["config"] != default.hashes["config"]


def test_bm25_plus_dense_as_a_pipeline_is_the_hybrid_mode(ws, sample_dataset):
    p = prefs(mode="hybrid")
    mode = evaluate_retrieval(ws.retriever, sample_dataset, "test", p, METRICS, progress=False)
    piped = evaluate_retrieval(ws, sample_dataset, "test", p, METRICS,
                               pipeline=Stage("bm25") + Stage("dense"), progress=False)
    assert piped.metrics == mode.metrics and piped.hashes["run"] == mode.hashes["run"]
    assert piped.mode == "hybrid" and piped.pipeline == "bm25 + dense"
    assert piped.hashes["config"] != mode.hashes["config"]  # the pipeline is in its config


@pytest.mark.parametrize("scoring", [{"blend": "linear", "w_text": 0.2, "w_vec": 0.8,
                                       "normalize": "minmax"},
                                      {"blend": "rrf", "rrf_w_text": 3.0}])
def test_a_fusion_of_a_lexical_and_a_dense_branch_takes_the_signals_weights(ws, sample_dataset,
                                                                            scoring):
    """QA13d #1: the weights of w_text/w_vec (rrf_w_text/rrf_w_vec) were taken by a bare
    ``bm25 + dense`` alone; a cut-off or a no-op stage on a branch silently fused 0.5/0.5
    (1/1), under a label that said w0.2."""
    p = prefs(scoring=scoring)
    hybrid = evaluate_retrieval(ws, sample_dataset, "test", p, METRICS,
                                pipeline="bm25 + dense", progress=False)
    for pipe in ("(bm25 % 20) + (dense % 20)", "(bm25 >> identity) + dense",
                 "dense + bm25 % 20"):
        r = evaluate_retrieval(ws, sample_dataset, "test", p, METRICS, pipeline=pipe,
                               progress=False)
        assert r.hashes["run"] == hybrid.hashes["run"], pipe
        assert r.metrics == hybrid.metrics
    equal = evaluate_retrieval(ws, sample_dataset, "test", p, METRICS,
                               pipeline="fuse(bm25 % 20, dense, weights=[0.5, 0.5])",
                               progress=False)
    assert equal.hashes["run"] != hybrid.hashes["run"]  # explicit weights win


def test_a_pipeline_of_its_own_stages(ws, sample_dataset):
    plain = evaluate_retrieval(ws, sample_dataset, "test", prefs(mode="bm25"), METRICS,
                               progress=False)
    prf = evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS,
                             pipeline="bm25 >> rm3(fb_docs=3) >> bm25", progress=False)
    assert prf.mode == "pipeline"
    assert [s["name"] for s in prf.stages] == ["signals", "fusion", "rm3", "bm25", "metrics"]
    assert prf.metrics != plain.metrics
    again = evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS,
                               pipeline=Stage("bm25") >> Stage("rm3", fb_docs=3) >> Stage("bm25"),
                               progress=False)
    assert again.hashes == prf.hashes and again.metrics == prf.metrics


def test_a_pipeline_too_shallow_for_its_metrics_is_refused_before_any_work(ws, sample_dataset,
                                                                          tmp_path):
    with pytest.raises(DepthError, match=r"dense_rescore\(top_n=5\) gives 5: deepen"):
        evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS,
                           pipeline="bm25 % 5 >> dense_rescore(top_n=5)",
                           cache_dir=tmp_path / "c", progress=False)
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())
    # a fusion of cut runs is as deep as its deepest one, as a hybrid first stage (bm25 % 5 +
    # dense % 5 was once scored at @10 over 6-9 documents, while bm25(top_k=5) + dense(top_k=5)
    # was refused)
    for pipe in ("bm25 % 5 + dense % 5", "bm25(top_k=5) + dense(top_k=5)"):
        with pytest.raises(DepthError, match="gives 5|retrieve at most 5"):
            evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS, pipeline=pipe,
                               progress=False)
    with pytest.raises(DepthError, match=r"gives 5 \(at most 10: a fusion is as deep as its "
                                         r"deepest run\)"):
        evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS,
                           pipeline="bm25 % 5 + dense % 5", progress=False)
    # a first stage cut by the pipeline is refused in the pipeline's words, not in those of
    # a RetrievalPrefs field the user never set (top_k_items = 5)
    for pipe in ("bm25 % 5", "bm25(top_k=5)", "(bm25 + dense) % 5"):
        with pytest.raises(DepthError) as err:
            evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS, pipeline=pipe,
                               progress=False)
        said = str(err.value)
        assert "but its depth (a % cut-off, or its last stage's top_k) = 5 cuts the run" in said
        assert said.endswith("make the pipeline 20 deep or more, or use cutoffs of at most 5")
        assert "top_k_items" not in said


def test_a_fusion_with_the_wrong_number_of_weights_is_refused_before_any_work(
        ws, sample_dataset, tmp_path):
    """QA13d #4: the traceback ended in plan.fuse_runs inside the stage cache, after the
    fusion's inputs were computed and written."""
    from aiblox.engine import PipelineError

    with pytest.raises(PipelineError, match=r"weights needs one weight per fused run, in "
                                            r"order \(3: "):
        evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS,
                           pipeline="fuse(bm25, dense, bm25 >> rm3 >> bm25, weights=[0.3, 0.7])",
                           cache_dir=tmp_path / "c", progress=False)
    assert not (tmp_path / "c").exists()


def test_plus_is_associative_in_eval(ws, sample_dataset):
    """QA13d #8: ``(bm25 + dense) + X`` ran a flat 3-way RRF and ``X + (bm25 + dense)`` a
    nested one (ndcg@10 0.3293 against 0.3629 on cranfield); both are now the 3-way fusion, and
    ``fuse(bm25 + dense, X)`` is the nested one."""
    x = "(bm25 >> rm3(fb_docs=3) >> bm25)"
    left, right, nested = (
        evaluate_retrieval(ws, sample_dataset, "test", prefs(), METRICS, pipeline=p,
                           progress=False)
        for p in (f"(bm25 + dense) + {x}", f"{x} + (bm25 + dense)", f"fuse(bm25 + dense, {x})"))
    assert left.metrics == right.metrics
    assert [s["name"] for s in left.stages].count("fuse") == 1
    assert [s["name"] for s in nested.stages].count("fuse") == 1  # bm25 + dense: the first
    assert nested.pipeline == "fuse(bm25, dense) + (bm25 >> rm3(fb_docs=3) >> bm25)"
    assert nested.metrics != left.metrics


def aiblox(*args, cwd):
    return subprocess.run([sys.executable, "-m", "aiblox.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_eval_scores_pipelines_as_systems_and_refuses_a_bad_one_first(tmp_path):
    db = str(tmp_path / "s.duckdb")
    ok = aiblox("eval", "sample", "--embedder", "hashing", "--db", db, "--mode", "bm25",
                "--pipeline", "prf=bm25 >> rm3(fb_docs=3) >> bm25", "--baseline", "bm25",
                "--json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    systems = {s["name"]: s for s in json.loads(ok.stdout)["systems"]}
    assert set(systems) == {"bm25", "prf"}
    assert (systems["bm25"]["kind"], systems["prf"]["kind"]) == ("mode", "pipeline")
    assert systems["prf"]["metrics"]["ndcg@10"] != systems["bm25"]["metrics"]["ndcg@10"]
    # a labelled pipeline shows its expression (QA13d #10: only "prf" was shown anywhere)
    assert systems["prf"]["expression"] == "bm25 >> rm3(fb_docs=3) >> bm25"
    assert "expression" not in systems["bm25"]
    table = aiblox("eval", "sample", "--embedder", "hashing", "--db", db, "--pipeline",
                   "prf=bm25 >> rm3(fb_docs=3) >> bm25", cwd=tmp_path)
    assert "prf = bm25 >> rm3(fb_docs=3) >> bm25: run " in table.stdout
    bad = aiblox("eval", "sample", "--embedder", "hashing", "--db", db, "--pipeline", "bm25",
                 "--pipeline", "bm25 >> rm3(fb_docs=500) >> bm25", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "error: --pipeline bm25 >> rm3(fb_docs=500) >> bm25: stage rm3: fb_docs = 500 but "
        "the store holds 40 documents")
    assert "signals:" not in bad.stderr  # nothing retrieved before the refusal
    typo = aiblox("eval", "sample", "--embedder", "hashing", "--db", db, "--pipeline",
                  "bm25 >> rm4 >> bm25", cwd=tmp_path)
    assert typo.returncode == 2 and "unknown stage 'rm4'" in typo.stderr
    # a refusal when the expression is built names the --pipeline by its label, as later ones do
    ignored = aiblox("eval", "sample", "--embedder", "hashing", "--db", db, "--pipeline",
                     "x=bm25 >> rm3 >> dense", cwd=tmp_path)
    assert ignored.returncode == 2
    assert ignored.stderr.strip().splitlines()[-1].startswith(
        "error: --pipeline x: dense cannot read the weighted terms rm3 gives")
    # its context named once (was "--pipeline x: pipeline: stage bo1 (bo1): ...")
    param = aiblox("eval", "sample", "--embedder", "hashing", "--db", db, "--pipeline",
                   "x=bm25 >> bo1(fb_terms=0) >> bm25", cwd=tmp_path)
    assert param.returncode == 2
    assert param.stderr.strip().splitlines()[-1].startswith(
        "error: --pipeline x: stage bo1 (bo1): fb_terms: ")


def test_a_store_of_another_dataset_is_refused_and_a_name_is_loaded(ws, sample_dataset,
                                                                    tmp_path):
    """A workspace of one dataset evaluated against another: refused, naming both (its
    documents would match no judgement, every metric 0, as it once silently did). The dataset
    may be given by name, as ``load_dataset`` reads it."""
    from aiblox.data import load_dataset
    from aiblox.engine.workspace import open_workspace
    from aiblox.stores import StoreMismatch

    by_name = evaluate_retrieval(ws, "sample", "test", prefs(mode="bm25"), METRICS,
                                 progress=False)
    assert by_name.metrics == evaluate_retrieval(ws, sample_dataset, "test", prefs(mode="bm25"),
                                                 METRICS, progress=False).metrics
    tiny = load_dataset(_tiny(tmp_path))
    with open_workspace(tiny, str(tmp_path / "tiny.duckdb"), "hashing", progress=False) as other:
        for retriever in (other, other.retriever):
            with pytest.raises(StoreMismatch, match=r"holds dataset 'tiny' .*not 'sample'"):
                evaluate_retrieval(retriever, sample_dataset, "test", prefs(mode="bm25"),
                                   METRICS, progress=False)


def _tiny(tmp_path):
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        '{"_id": "t1", "title": "", "text": "alpha beta"}\n'
        '{"_id": "t2", "title": "", "text": "gamma delta"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "x1", "text": "alpha"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nx1\tt1\t1\n")
    return folder


def test_open_workspace_takes_a_dataset_s_name_or_folder(tmp_path, sample_dataset):
    """As evaluate_retrieval does: ``open_workspace("sample")`` raised ``AttributeError: 'str'
    object has no attribute 'corpus_hash'``."""
    from aiblox.engine.workspace import open_workspace

    db = str(tmp_path / "s.duckdb")
    with open_workspace(str(sample_dataset.path), db, "hashing", progress=False) as w:
        assert w.dataset.hash == sample_dataset.hash
        assert w.dataset.qrels.keys() == sample_dataset.qrels.keys()  # every split
        r = evaluate_retrieval(w, w.dataset, "test", prefs(mode="bm25"), ["ndcg@10"],
                               progress=False)
    assert r.n_queries == len(sample_dataset.qrels["test"])
