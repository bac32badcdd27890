"""aiblox.explore: what the notebooks compute, checked against the package's own runners
and against values worked out by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
from _notebook_runs import log_two_points
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.engine.evaluate import evaluate_retrieval
from aiblox.evidence import pack_from_json, pack_to_json, verify_pack
from aiblox.explore import (
    PACK_RETRIEVED_AT,
    answer_all,
    available_datasets,
    available_embedders,
    available_policies,
    baseline_prefs,
    chunk_table,
    compare_chunkers,
    compare_per_query,
    diff_packs,
    evidence_changes_table,
    evidence_pack,
    fitting_metrics,
    fusion_prefs,
    inspect_question,
    mlflow_runs,
    moved_queries,
    open_notebook_workspace,
    retrieve_bundles,
    score_answers,
    score_point,
    weight_curve,
)
from aiblox.hashing import sha256_text
from aiblox.metrics import DepthError

REPO = Path(__file__).resolve().parents[2]
QUESTION = "Who developed BM25 and where was it tested?"


@pytest.fixture(scope="module")
def ws():
    w = open_notebook_workspace("sample", "hashing", split="test", max_depth=50)
    yield w
    w.close()


def test_pickers_offer_the_sample_and_the_policies():
    assert available_datasets()[0] == "sample"
    assert "hashing" in available_embedders()
    shared = REPO.parent / "shared" / "datasets"
    if shared.is_dir():  # CI runs with ../shared beside the checkout
        found = {p.name for p in shared.iterdir() if (p / "queries.jsonl").is_file()}
        assert found <= set(available_datasets())
    if importlib.util.find_spec("sentence_transformers") is not None:
        assert "minilm" in available_embedders()
    assert {"R2_POLICY_V1", "R2_POLICY_V2"} <= set(available_policies())


@pytest.mark.parametrize("prefs", [
    baseline_prefs(depth=50),
    fusion_prefs(blend="linear", w_text=0.3, normalize="minmax", depth=20),
    fusion_prefs(blend="rrf", w_text=0.8, rrf_k=10, depth=10),
    fusion_prefs(blend="linear", w_text=0.6, normalize="zscore", missing="list_min", depth=5),
], ids=["rrf-default", "linear-minmax-20", "rrf-weighted-10", "linear-zscore-5"])
def test_cached_signals_give_the_runners_run(ws, prefs):
    """Re-fusing the cached depth-50 lists cut to ``depth`` is exactly what the eval runner
    gets by retrieving at ``depth``: same run hash, same metrics (at cutoffs the run holds)."""
    d = prefs.fts.top_k
    metrics = [f"ndcg@{d}", f"recall@{d}", "mrr@5", "map"]
    point = score_point(ws, prefs, metrics)
    full = evaluate_retrieval(ws.retriever, ws.dataset, "test", prefs, metrics, progress=False)
    assert point.hashes["run"] == full.hashes["run"]
    assert point.hashes["config"] == full.hashes["config"]
    assert point.metrics == pytest.approx(full.metrics)


def test_depth_above_the_cache_is_refused(ws):
    with pytest.raises(ValueError, match="cached depth 50"):
        score_point(ws, fusion_prefs(depth=60))


def test_a_metric_deeper_than_the_run_is_refused_and_the_default_fits(ws):
    prefs = fusion_prefs(depth=20, top_k=50)
    with pytest.raises(DepthError, match=r"recall@100 reads 100 documents per query, but "
                                         r"fts.top_k = 20 and vector.top_k = 20 retrieve at "
                                         r"most 20 candidates per list"):
        score_point(ws, prefs, ["ndcg@10", "recall@100"])
    with pytest.raises(DepthError, match="top_k_items = 50 cuts the run at 50"):
        weight_curve(ws, fusion_prefs(depth=50, top_k=50), metric="map@100")
    # no metrics named: the default ones a 20-deep run computes
    assert fitting_metrics(prefs) == ["ndcg@10", "mrr@10"]
    assert set(score_point(ws, prefs).metrics) == {"ndcg@10", "mrr@10"}


def test_weight_grid_uses_integer_steps(ws):
    curve = weight_curve(ws, fusion_prefs(blend="linear", normalize="minmax", depth=20),
                         metric="ndcg@10", steps=10)
    assert list(curve["w_text"]) == [i / 10 for i in range(11)]  # 0.3, not 0.30000000000000004
    assert curve["value"].between(0.0, 1.0).all()
    at_03 = score_point(ws, fusion_prefs(blend="linear", w_text=0.3, normalize="minmax",
                                         depth=20)).metrics["ndcg@10"]
    assert curve.loc[3, "value"] == pytest.approx(at_03)


def test_fusion_prefs_weights():
    p = fusion_prefs(blend="rrf", w_text=0.5)
    assert (p.scoring.rrf_w_text, p.scoring.rrf_w_vec) == (1.0, 1.0)  # classic RRF
    p = fusion_prefs(blend="linear", w_text=0.7)
    assert (p.scoring.w_text, p.scoring.w_vec) == (0.7, 0.3)
    with pytest.raises(ValueError, match="w_text"):
        fusion_prefs(w_text=1.5)


def test_moved_queries_against_itself_and_another_setting(ws):
    base = score_point(ws, baseline_prefs(depth=50))
    same = moved_queries(ws, base, base)
    assert len(same) == len(ws.qrels) and (same["delta"] == 0).all()
    assert not same["top_changed"].any()
    other = score_point(ws, fusion_prefs(blend="linear", w_text=1.0, normalize="minmax",
                                         depth=50))
    moved = moved_queries(ws, base, other)
    deltas = moved["delta"].abs().tolist()
    assert deltas == sorted(deltas, reverse=True)
    row = moved.iloc[0]
    q = row["qid"]
    assert row["before"] == round(base.per_query["ndcg@10"][q], 4)
    assert row["after"] == round(other.per_query["ndcg@10"][q], 4)
    assert row["top1_after"] == other.run[q][0][0]


def test_chunk_table_offsets_overlap_and_headings():
    text = ("# Title\n\nFirst sentence here. Second sentence follows it.\n\n"
            "## Part\n\nThird sentence sits in a subsection. A fourth one ends it.")
    heads = chunk_table("d1", text, "headings", max_chunk_tokens=16)
    for _, r in heads.iterrows():
        assert text[r["start"]:r["end"]] == r["text"]
    assert list(heads["heading_path"]) == ["Title", "Title > Part"]
    windows = chunk_table("d1", text * 4, "token_window", max_chunk_tokens=16, overlap_tokens=4)
    assert len(windows) > 3
    assert (windows["tokens"] <= 16).all()
    assert (windows["overlap_chars"].iloc[1:] > 0).all()  # consecutive windows share text
    assert (windows["overlap_tokens"].iloc[1:] >= 1).all()
    assert windows["overlap_chars"].iloc[0] == 0
    assert list(windows["position"]) == list(range(len(windows)))


def test_compare_chunkers_scores_the_chunks_the_table_shows(ws, tmp_path):
    """The chunking lab's comparison took the token budget from its widgets but not the overlap
    or the headings: a table of chunks with 16 tokens of overlap sat above recall scored on
    chunks with none (QA 21). Now both, and the CLI's chunk eval gives the same numbers."""
    import json

    from typer.testing import CliRunner

    from aiblox.cli.main import app

    table = compare_chunkers(ws, ["sentences"], limit=12, max_chunk_tokens=128,
                             overlap_tokens=16, include_headers=True)
    plain = compare_chunkers(ws, ["sentences"], limit=12, max_chunk_tokens=128,
                             overlap_tokens=0)
    assert "overlap=16" in table.chunker_id[0] and "overlap=0" in plain.chunker_id[0]
    r = CliRunner().invoke(app, [
        "eval", "sample", "--db", str(tmp_path / "s.duckdb"), "--embedder", "hashing",
        "--mode", "hybrid", "--chunker", "sentences", "--max-chunk-tokens", "128",
        "--overlap-tokens", "16", "--chunk-limit", "12", "--metric", "ndcg@10", "--json"],
        env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    cli = json.loads(r.stdout)["systems"][0]["chunks"]
    assert cli["chunker_id"] == table.chunker_id[0]
    shared = [k for k in cli["answer_recall"] if k in table]
    assert shared == ["answer_recall@1", "answer_recall@5"]
    for k in shared:
        assert table[k][0] == round(cli["answer_recall"][k], 4)


def test_compare_per_query_counts_wins_ties_losses():
    from scipy.stats import ttest_rel

    a = {"answered": {"q1": 0, "q2": 1, "q3": 1, "q4": 0},
         "status:REFUSED": {"q1": 1, "q2": 0, "q3": 0, "q4": 0}}
    b = {"answered": {"q1": 1, "q2": 1, "q3": 0, "q4": 1},
         "status:REFUSED": {"q1": 0, "q2": 0, "q3": 1, "q4": 0}}
    t = compare_per_query(a, b).set_index("metric")
    assert tuple(t.loc["answered", ["wins", "ties", "losses"]]) == (2, 1, 1)
    assert t.loc["answered", "delta"] == 0.25
    # fewer refusals is a win: q1 wins, q3 loses
    assert tuple(t.loc["status:REFUSED", ["wins", "ties", "losses"]]) == (1, 2, 1)
    # the paired t-test of aiblox compare (ranx's, scipy's numbers)
    expected = ttest_rel([0, 1, 1, 0], [1, 1, 0, 1]).pvalue
    assert t.loc["answered", "p_value"] == pytest.approx(expected)
    same = compare_per_query(a, a).set_index("metric")
    assert (same["p_value"] == 1.0).all() and (same["delta"] == 0.0).all()


def test_policies_compared_on_the_same_bundles(ws):
    bundles = retrieve_bundles(ws, limit=6)
    assert sorted(bundles) == sorted(q for q, _ in ws.queries)[:6]
    a = answer_all(ws, bundles, "R2_POLICY_V1")
    b = answer_all(ws, bundles, "R2_POLICY_V2")
    ma, mb = score_answers(ws, bundles, a), score_answers(ws, bundles, b)
    # the sample has gold answers: the sweep's answer metrics, every query
    for m in ("answered", "answer_em", "evidence_answer_recall", "status:REFUSED"):
        assert set(ma[m]) == set(bundles) and set(ma[m].values()) <= {0.0, 1.0}
    for q in bundles:
        assert ma["answer_em"][q] <= ma["answered"][q] and 0 <= ma["answer_f1"][q] <= 1
        assert ma["selected_chunks"][q] <= 6 and mb["selected_chunks"][q] <= 8  # policy caps
    table = compare_per_query(ma, mb)
    assert set(table["metric"]) == set(ma)
    assert (table["wins"] + table["ties"] + table["losses"] == table["n"]).all()
    # every query, but citation precision: only the queries that cited something
    assert (table.loc[table["metric"] != "citation_precision", "n"] == 6).all()
    changes = evidence_changes_table(ws, a, b)
    assert set(changes["qid"]) <= set(bundles)
    same = evidence_changes_table(ws, a, a)
    assert same.empty


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory):
    """The sample ingested for ``aiblox answer`` (the hashing embedder, as ``ws``)."""
    db = str(tmp_path_factory.mktemp("answer_cli") / "s.duckdb")
    r = CliRunner().invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return db


def _cli_answer(db, question, *options):
    r = CliRunner().invoke(app, ["answer", question, "--db", db, "--embedder", "hashing",
                                 "--retrieved-at", PACK_RETRIEVED_AT, "--json", *options],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_querys_pack_is_the_same_alone_in_a_batch_and_from_the_cli(ws, cli_db):
    """A query's evidence pack had another id for each number of queries retrieved with it
    (the retriever's batch size was hashed into the retrieval call's inputs), so the pack
    policy_compare showed was never the one ``aiblox answer`` stores (QA): the batch size is
    an observation, outside the id, and the pack is the CLI's and the query inspector's."""
    q = sorted(ws.query_text)[0]
    text = ws.query_text[q]
    ids = set()
    for limit in (1, 4, 12):
        bundles = retrieve_bundles(ws, limit=limit)
        pack = evidence_pack(ws, text, bundles[q], answer_all(ws, bundles, "R2_POLICY_V1")[q])
        retrieval = pack.tool_calls[0]
        assert retrieval.kind == "retrieval" and "batch_size" not in retrieval.inputs
        assert retrieval.inputs["top_k_chunks"] == 12  # the chunks asked for: hashed
        assert pack.observations["retrieval"]["params"] == {"batch_size": limit}
        ids.add(pack.pack_id)
    assert len(ids) == 1
    assert ids == {inspect_question(ws, text).pack.pack_id,
                   _cli_answer(cli_db, text)["pack_id"]}


def test_answer_all_records_the_chunks_asked_for(ws, cli_db):
    """Fewer chunks came back than asked (whole documents: one per candidate): ``answer_all``
    recorded the number that came back as the trace's ``retrieval_top_k``, so its answer
    bundle hash differed from ``aiblox answer``'s and the sweep's, which record the number
    asked for (QA)."""
    q = sorted(ws.query_text)[0]
    text = ws.query_text[q]
    bundles = retrieve_bundles(ws, limit=3, chunker="whole", top_k_chunks=30)
    assert len(bundles[q].evidence) < 30
    got = answer_all(ws, bundles, "R2_POLICY_V1")[q]
    assert got.answer_bundle.trace.retrieval_top_k == 30
    sha = got.hashes["answer_bundle_sha256"]
    traced = inspect_question(ws, text, chunker="whole", top_k_chunks=30)
    assert traced.result.hashes["answer_bundle_sha256"] == sha
    cli = _cli_answer(cli_db, text, "--chunker", "whole", "--top-k-chunks", "30")
    assert cli["hashes"]["answer_bundle_sha256"] == sha


def test_answer_all_refuses_bundles_of_other_queries(ws):
    """Bundles of queries the workspace's split does not hold (another split's) raised a bare
    ``KeyError`` (QA): a ``ValueError`` names them."""
    (q, b), = retrieve_bundles(ws, limit=1).items()
    with pytest.raises(ValueError, match=r"not in the workspace's split 'test'.*: q-other, "
                                         r"q-train"):
        answer_all(ws, {q: b, "q-train": b, "q-other": b}, "R2_POLICY_V1")


def test_moved_queries_refuses_a_metric_the_points_did_not_score(ws):
    """A metric the points were not scored with raised a bare ``KeyError`` (QA): a
    ``ValueError`` names it and the ones scored."""
    point = score_point(ws, baseline_prefs(depth=50), ["ndcg@10", "mrr@10"])
    with pytest.raises(ValueError, match=r"'recall@10' was not scored by the before point; "
                                         r"it scored: ndcg@10, mrr@10"):
        moved_queries(ws, point, point, metric="recall@10")


def test_inspect_question_refuses_no_chunks_as_the_cli_does(ws):
    """``top_k_chunks=0`` answered a NO_EVIDENCE refusal where ``aiblox answer
    --top-k-chunks 0`` is refused (QA): refused in the CLI's words."""
    with pytest.raises(ValueError, match=r"top_k_chunks 0: out of range; valid: a whole "
                                         r"number >= 1"):
        inspect_question(ws, QUESTION, top_k_chunks=0)
    with pytest.raises(ValueError, match=r"top_k_chunks 0: out of range"):
        retrieve_bundles(ws, limit=2, top_k_chunks=0)


def test_mlflow_runs_on_a_missing_store_is_empty_and_creates_nothing(tmp_path):
    db = tmp_path / "none" / "mlflow.db"
    assert mlflow_runs(f"sqlite:///{db}").empty
    assert not db.exists()


def test_inspect_question_traces_every_artifact(ws):
    t = inspect_question(ws, QUESTION, top_k_chunks=12)
    assert t.result.validation.validation_status == "PASSED"
    assert "Robertson" in (t.result.answer_text or "")
    assert sha256_text(t.prompt_bytes.decode("utf-8")) == t.result.prompt.prompt_sha256
    assert len(t.prompt_bytes) == t.result.prompt.prompt_bytes
    assert len(t.candidates) == len(t.bundle.candidates) > 0
    assert {"rank_text", "rank_vec"} <= set(t.candidates.columns)
    assert len(t.selected) + len(t.dropped) == len(t.chunks) == 12
    assert set(t.dropped["reason"]) <= {"DROP_BUDGET", "DROP_DUP", "DROP_PER_KNOWLEDGE_CAP",
                                         "DROP_EMPTY_AFTER_SANITIZE",
                                         "DROP_BELOW_SIMILARITY_FLOOR"}
    assert t.selected["cited"].any()
    assert {"prompt_sha256", "policy_sha256", "template_sha256", "dataset",
            "retrieval_config", "index_version"} <= set(t.hashes)
    again = inspect_question(ws, QUESTION, top_k_chunks=12)
    assert again.hashes == t.hashes  # deterministic
    assert isinstance(t.candidates, pd.DataFrame) and len(t.sources) > 0


def test_inspected_question_carries_a_reproducible_evidence_pack(ws):
    # the first call may find the chunk cache cold: its cache counts are observations, outside
    # the pack id, so a cold and a warm cache give the same pack id
    first = inspect_question(ws, QUESTION, top_k_chunks=12)
    t = inspect_question(ws, QUESTION, top_k_chunks=12)
    p = t.pack
    assert first.pack.pack_id == p.pack_id
    assert p.observations["retrieval"]["counts"]["chunk_cache_writes"] == 0
    assert verify_pack(p) == [] and pack_from_json(pack_to_json(p)) == p
    assert p.query == QUESTION and p.decision.kind == "answer"
    assert p.decision.text == t.result.answer_text
    assert {s.retrieved_at for s in p.sources} == {PACK_RETRIEVED_AT}
    cited = set(t.result.validation.cited_chunk_ids)
    assert {s.internal_ref.split("#")[1] for s in p.sources[:len(cited)]} == cited
    assert p.prompts[0].prompt_sha256 == t.result.prompt.prompt_sha256
    # a warm chunk cache: the same question gives the same pack id, run after run
    again = inspect_question(ws, QUESTION, top_k_chunks=12)
    assert again.pack.pack_id == p.pack_id and pack_to_json(again.pack) == pack_to_json(p)
    # another retrieval time is another pack, and the diff names exactly that
    later = evidence_pack(ws, QUESTION, t.bundle, t.result, retrieved_at="2001-01-01T00:00:00Z")
    d = diff_packs(p, later)
    assert d.iloc[0]["field"] == "pack_id" and d.iloc[0]["B"] == later.pack_id
    assert set(d["field"]) == {"pack_id"} | {f"sources[{s.internal_ref}].retrieved_at"
                                             for s in p.sources}
    assert diff_packs(p, again.pack).empty


def test_fresh_stores_give_the_same_pack_id():
    ids = []
    for _ in range(2):  # each a new in-memory store: a cold chunk cache both times
        w = open_notebook_workspace("sample", "hashing", split="test", max_depth=5)
        try:
            ids.append(inspect_question(w, QUESTION, top_k_chunks=12).pack.pack_id)
        finally:
            w.close()
    assert ids[0] == ids[1]


def test_diff_packs_lists_what_another_policy_changed(ws):
    bundles = retrieve_bundles(ws, limit=4)
    a = answer_all(ws, bundles, "R2_POLICY_V1")
    b = answer_all(ws, bundles, "R2_POLICY_V2")
    text = ws.query_text
    q = sorted(bundles)[0]
    pa = evidence_pack(ws, text[q], bundles[q], a[q], query_id=q)
    pb = evidence_pack(ws, text[q], bundles[q], b[q], query_id=q)
    assert pa.pack_id != pb.pack_id and pa.query_id == q
    d = diff_packs(pa, pb)
    assert list(d.columns) == ["field", "change", "A", "B"]
    assert d.iloc[0].to_dict() == {"field": "pack_id", "change": "changed", "A": pa.pack_id,
                                   "B": pb.pack_id}
    refs_a = {s.internal_ref for s in pa.sources}
    refs_b = {s.internal_ref for s in pb.sources}
    added = {r.split("] ", 1)[1] for r in d.loc[(d["field"] == "sources")
                                                 & (d["change"] == "added"), "B"]}
    removed = {r.split("] ", 1)[1] for r in d.loc[(d["field"] == "sources")
                                                   & (d["change"] == "removed"), "A"]}
    assert added == refs_b - refs_a and removed == refs_a - refs_b
    changed = dict(zip(d["field"], d["B"], strict=True))
    assert changed["tool_calls[llm].inputs.policy_sha256"] == b[q].hashes["policy_sha256"]
    if a[q].prompt.prompt_sha256 != b[q].prompt.prompt_sha256:
        assert changed["prompts[prompt_contract].prompt_sha256"] == b[q].prompt.prompt_sha256
    # the diff is symmetric: B to A swaps the columns and added / removed
    back = diff_packs(pb, pa)
    assert len(back) == len(d)
    assert set(back.loc[back["change"] == "added", "B"]) == set(
        d.loc[(d["change"] == "removed") & (d["field"] == "sources"), "A"])


def test_mlflow_runs_logged_like_a_sweep_are_listed_and_compared(tmp_path, monkeypatch):
    """Two runs logged the way ``aiblox sweep`` logs a point (``<split>.<metric>`` metrics,
    ``per_query.<split>.parquet`` artifacts in long layout) are listed and compared."""
    mlflow = pytest.importorskip("mlflow")
    from aiblox.explore import compare_mlflow_runs
    from aiblox.sweep import compare_runs

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    exp = client.create_experiment("nb", artifact_location=(tmp_path / "art").as_uri())
    ids = log_two_points(client, exp, tmp_path)
    runs = mlflow_runs(uri)
    assert set(runs["run_id"]) == set(ids.values())
    assert set(runs["tags.mlflow.runName"]) == {"point-a", "point-b"}
    logged, per_query = compare_mlflow_runs(ids["a"], ids["b"], uri)
    row = logged.set_index("metric").loc["test.ndcg_at_10"]
    assert row["delta"] == pytest.approx(1 / 3)
    pq = per_query.set_index("metric").loc["test:ndcg@10"]
    assert (pq["n"], pq["wins"], pq["ties"], pq["losses"]) == (3, 1, 2, 0)
    assert pq["delta"] == pytest.approx(1 / 3)
    # aiblox compare's numbers: the same paired t-test (d = (1, 0, 0): t = 1 on 2 df)
    cmp = compare_runs(ids["a"], ids["b"], uri, split="test").primary_row
    assert (pq["p_value"], pq["delta"]) == (cmp.p_value, cmp.delta)
    assert pq["p_value"] == pytest.approx(0.42264973)


def test_fusion_points_logged_from_a_notebook_show_up_in_the_store(ws, tmp_path):
    """The other way round: a setting logged from the fusion explorer lands in the MLflow store
    in the sweep layout, and the policy-compare listing reads it back, per query included."""
    pytest.importorskip("mlflow")
    from aiblox.explore import compare_mlflow_runs, log_fusion_point

    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    a = score_point(ws, baseline_prefs(depth=50))
    b = score_point(ws, fusion_prefs(blend="linear", w_text=0.7, normalize="minmax", depth=50))
    ra, rb = log_fusion_point(ws, a, uri), log_fusion_point(ws, b, uri)
    assert (tmp_path / "mlruns" / "artifacts").is_dir()  # beside the store, as sweeps do
    runs = mlflow_runs(uri).set_index("run_id")
    assert runs.at[rb, "tags.aiblox.config_hash"] == b.hashes["config"]
    assert runs.at[rb, "params.prefs.scoring.blend"] == "linear"
    assert runs.at[rb, "params.dataset"] == "sample"
    assert runs.at[ra, "metrics.test.ndcg_at_10"] == pytest.approx(a.metrics["ndcg@10"])
    logged, per_query = compare_mlflow_runs(ra, rb, uri)
    pq = per_query.set_index("metric").loc["test:ndcg@10"]
    expected = compare_per_query({"m": a.per_query["ndcg@10"]}, {"m": b.per_query["ndcg@10"]})
    assert pq["n"] == len(ws.qrels)
    assert (pq["wins"], pq["ties"], pq["losses"], pq["p_value"]) == tuple(
        expected.iloc[0][["wins", "ties", "losses", "p_value"]])
