"""Chunk-level evaluation (a small SQuAD subset, the sample) and the ``chunk`` / ``eval`` CLI."""

import json
import os
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from aiblox.chunking import get_chunker
from aiblox.contracts import RetrievalPrefs
from aiblox.data import load_dataset
from aiblox.embedding import CachedEmbedder, HashingEmbedder
from aiblox.engine.chunk_eval import evaluate_chunks, gold_answers
from aiblox.engine.workspace import prepare_store
from aiblox.metrics import DepthError
from aiblox.retrieval import HybridRetriever, make_retriever
from aiblox.stores import DuckDBStore
from tests.conftest import shared_dataset

runner = CliRunner()


def _run(*args):
    return runner.invoke(app_(), list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def app_():
    from aiblox.cli.main import app

    return app


@pytest.fixture(scope="module")
def squad_subset():
    """The first 30 query ids of squad-v1.1-dev with their gold paragraphs and 150 others."""
    ds = load_dataset(shared_dataset("squad-v1.1-dev"))
    qids = sorted(ds.qrels["test"])[:30]
    keep = {ds.answers[q].corpus_id for q in qids} | set(list(ds.corpus)[:150])
    return replace(ds, corpus={k: v for k, v in ds.corpus.items() if k in keep})


def test_squad_answer_recall_and_projection(squad_subset, tmp_path):
    ds = squad_subset
    with DuckDBStore(tmp_path / "squad.duckdb") as store:
        emb = CachedEmbedder(HashingEmbedder(), store)
        prepare_store(store, ds, emb, auto_vectors=False, progress=False)
        r = make_retriever(store, emb)
        prefs = RetrievalPrefs(query_text="", top_k_items=5, top_k_chunks=5,
                               chunking={"chunker_id": "sentences", "max_chunk_tokens": 64})
        res = evaluate_chunks(r, ds, "test", prefs, metrics=["ndcg@5", "recall@5"],
                              k_values=(1, 5), limit=30, batch_size=8, progress=False)
        assert res.n_queries == 30 and res.n_answer_queries == 30
        r1, r5 = res.answer_recall["answer_recall@1"], res.answer_recall["answer_recall@5"]
        assert 0.2 < r1 <= r5 <= 1.0
        # the batched evaluation agrees with one-query retrieval through the retriever hook:
        # same evidence chunks, and a hit exactly when a chunk of the gold paragraph holds a
        # gold answer span
        qids = sorted(ds.qrels["test"])[:30]
        gold = gold_answers(ds, qids)
        bundles = r.search_many([prefs.model_copy(update={"query_text": ds.queries[q]})
                                 for q in qids])
        for qid, bundle in zip(qids, bundles, strict=True):
            assert [(e.chunk_id, e.score) for e in bundle.evidence] == res.chunk_run[qid]
            hit = any(e.item_id == doc and e.start_idx <= start
                      and start + len(answer) <= e.end_idx
                      for e in bundle.evidence for doc, answer, start in gold[qid])
            assert res.per_query["answer_recall@5"][qid] == (1.0 if hit else 0.0)
        assert sum(res.per_query["answer_recall@5"].values()) / 30 == pytest.approx(r5)
        assert res.evidence_tokens["@1"] <= res.evidence_tokens["@5"] == res.evidence_tokens[
            "all"] <= 5 * 64
        assert res.projection == "max_passage" and res.config["projection"] == "max_passage"
        assert 0.0 < res.projection_metrics["ndcg@5"] <= 1.0
        assert set(res.document_metrics) == {"ndcg@5", "recall@5"}
        assert res.counts["chunk_cache_misses"] > 0 and res.counts["chunk_cache_hits"] >= 0
        again = evaluate_chunks(r, ds, "test", prefs, metrics=["ndcg@5", "recall@5"],
                                k_values=(1, 5), limit=30, batch_size=8, progress=False)
        assert again.counts["chunk_cache_misses"] == 0 and again.counts["chunk_cache_hits"] > 0
        assert again.hashes == res.hashes and again.answer_recall == res.answer_recall
        with pytest.raises(ValueError, match="LateChunker"):
            evaluate_chunks(HybridRetriever(store, emb), ds, "test", prefs, limit=2)
        # the 5 chunked documents cannot give ndcg@10, nor 5 chunks answer_recall@10:
        # refused before anything is retrieved (no chunk cache traffic)
        with pytest.raises(DepthError, match="ndcg@10 reads 10 documents per query, but "
                                             "top_k_items = 5 cuts the run at 5"):
            evaluate_chunks(r, ds, "test", prefs, metrics=["ndcg@10"], limit=2)
        with pytest.raises(DepthError, match="answer_recall@10 reads 10 chunks per query, "
                                             "but top_k_chunks = 5 returns at most 5"):
            evaluate_chunks(r, ds, "test", prefs, metrics=["ndcg@5"], k_values=(1, 10),
                            limit=2)
        # no metrics named: the default ones 5 documents hold (none: only chunk metrics)
        assert evaluate_chunks(r, ds, "test", prefs, k_values=(1,), limit=2,
                               progress=False).projection_metrics == {}


def test_sample_gold_offsets_index_item_text(sample_dataset):
    for qid, gold in sample_dataset.answers.items():
        text = sample_dataset.corpus[gold.corpus_id].text
        for answer, start in zip(gold.answers, gold.answer_starts, strict=True):
            assert text[start:start + len(answer)] == answer, qid


def test_cli_chunk_json_and_table(tmp_path, sample_dataset):
    r = _run("chunk", "--dataset", "sample", "--doc", "d01", "--chunker", "headings",
             "--max-tokens", "128", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    text = sample_dataset.corpus["d01"].text
    expected = get_chunker("headings", max_chunk_tokens=128).chunk("d01", text,
                                                                   sample_dataset.corpus[
                                                                       "d01"].content_hash)
    assert out["n_chunks"] == len(expected) >= 2
    assert [c["chunk_id"] for c in out["chunks"]] == [c.chunk_id for c in expected]
    for c in out["chunks"]:
        assert text[c["start_idx"]:c["end_idx"]] == c["text"] and c["token_count"] <= 128
        assert c["heading_path"][0] == "BM25"
    table = _run("chunk", "--dataset", "sample", "--doc", "d01", "--chunker", "headings",
                 "--max-tokens", "128")
    assert table.exit_code == 0 and "heading path" in table.output
    assert f"{len(expected)} chunks" in table.output

    f = tmp_path / "note.md"
    f.write_text("# Title\n\nOne sentence here. Another one there.\n\n## Sub\n\nMore text.\n",
                 encoding="utf-8")
    r = _run("chunk", "--text", str(f), "--chunker", "token_window", "--max-tokens", "8",
             "--overlap-tokens", "2", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["item_id"] == "note.md" and out["n_chunks"] >= 3
    assert out["chunker_id"].startswith("token_window(max=8,overlap=2")

    # a file with CRLF line ends is chunked as given: offsets and hash index its own text
    # (read_text turned \r\n into \n: 71 characters of a 77-character file)
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(b"# Title\r\n\r\nOne sentence here. Another one.\r\n\r\n"
                     b"## Sub\r\n\r\nMore.\r\n")
    for chunker in ("sentences", "token_window", "headings"):
        r = _run("chunk", "--text", str(crlf), "--chunker", chunker, "--json")
        assert r.exit_code == 0, r.output
        body = crlf.read_bytes().decode("utf-8")
        out = json.loads(r.stdout)
        assert out["chunks"] and all(body[c["start_idx"]:c["end_idx"]] == c["text"]
                                     for c in out["chunks"]), chunker

    bad = _run("chunk", "--dataset", "sample", "--doc", "nope")
    assert bad.exit_code == 2 and "nope" in bad.output
    bad = _run("chunk", "--text", str(f), "--chunker", "paragraphs")
    assert bad.exit_code == 2 and "unknown chunker" in bad.output
    # a budget given to the whole chunker is said to be ignored (its one chunk is the same)
    whole = _run("chunk", "--text", str(f), "--chunker", "whole", "--max-tokens", "8", "--json")
    assert whole.exit_code == 0 and json.loads(whole.stdout)["n_chunks"] == 1
    assert "warning: --max-tokens 8: the whole chunker keeps each document as one chunk" in \
        whole.stderr
    sized = _run("chunk", "--text", str(f), "--chunker", "sentences", "--max-tokens", "8")
    assert sized.exit_code == 0 and "warning" not in sized.stderr
    # --no-headers is the headings chunker's alone: said, as a budget given to `whole` is
    plain = _run("chunk", "--text", str(f), "--chunker", "token_window", "--no-headers")
    assert plain.exit_code == 0 and "warning: --no-headers: only the headings chunker puts " \
        "heading lines inside its chunks; token_window ignores it" in " ".join(plain.stderr.split())
    heads = _run("chunk", "--text", str(f), "--chunker", "headings", "--no-headers")
    assert heads.exit_code == 0 and "warning" not in heads.stderr
    # not a regular file: /dev/zero filled 7.6 GB in 8 s and a FIFO blocked forever (QA 28)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO (named pipe)"), ("/dev/zero", "a character device")):
        r = _run("chunk", "--text", str(path))
        assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == \
            f"error: {path}: cannot read: {kind}, not a regular file"


def test_cli_eval_reports_chunk_metrics(tmp_path):
    db = str(tmp_path / "ev.duckdb")
    args = ["eval", "sample", "--db", db, "--embedder", "hashing", "--json",
            "--metric", "ndcg@10", "--chunker", "headings", "--max-chunk-tokens", "128",
            "--top-k-chunks", "5"]
    r = _run(*args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["systems"][0]
    chunks = out["chunks"]
    assert chunks["chunker_id"].startswith("headings(max=128")
    # 5 chunks returned: answer_recall@10 would read 5 chunks under the name @10, left out
    assert set(chunks["answer_recall"]) == {"answer_recall@1", "answer_recall@5"}
    assert "warning: --chunks: answer_recall@k only for k <= --top-k-chunks 5: @1, @5" in \
        r.stderr
    assert chunks["n_answer_queries"] > 0 and chunks["evidence_tokens"]["all"] > 0
    assert chunks["projection"] == "max_passage"
    assert set(chunks["projection_metrics"]) == {"ndcg@10"}
    assert chunks["counts"]["chunk_cache_misses"] > 0
    again = json.loads(_run(*args).stdout)["systems"][0]["chunks"]
    assert again["counts"]["chunk_cache_misses"] == 0
    assert again["hashes"] == chunks["hashes"]
    plain = json.loads(_run("eval", "sample", "--db", db, "--embedder", "hashing", "--json",
                            "--metric", "ndcg@10").stdout)
    assert plain["systems"][0]["chunks"] is None
    bad = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--chunker", "nope")
    assert bad.exit_code == 2 and "unknown chunker" in bad.output


def test_a_chunk_option_alone_scores_chunks_and_a_pipeline_refuses_it_by_name(tmp_path):
    """`--chunk-limit 3` or `--max-chunk-tokens 32` without `--chunks` printed the document
    table alone, chunk scoring silently off (QA 19): any chunk option now asks for it, as
    `--chunker` did; beside a `--pipeline` (scored on its ranking only) it is one error line
    naming the options given."""
    db = str(tmp_path / "ev.duckdb")
    base = ["eval", "sample", "--db", db, "--embedder", "hashing", "--json", "--mode", "bm25",
            "--metric", "ndcg@10"]
    per_query = tmp_path / "pq.csv"
    r = _run(*base, "--chunk-limit", "3", "--max-chunk-tokens", "32", "--per-query", per_query)
    assert r.exit_code == 0, r.output
    chunks = json.loads(r.stdout)["systems"][0]["chunks"]
    assert chunks is not None and chunks["chunker_id"].startswith("sentences(max=32")
    assert chunks["n_queries"] == 3
    # --per-query holds the chunk-level values beside the documents' (it held the latter only)
    import pandas as pd

    frame = pd.read_csv(per_query, dtype={"query_id": str})
    for metric, mean in [*chunks["answer_recall"].items(),
                         *((f"max_passage:{m}", v) for m, v in
                           chunks["projection_metrics"].items())]:
        values = frame[(frame.system == "bm25") & (frame.metric == metric)]
        assert len(values) == 3 and values.value.mean() == pytest.approx(mean, abs=1e-12)
    assert set(frame.metric) >= {"ndcg@10", "max_passage:ndcg@10"}
    refused = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--pipeline",
                   "bm25 >> bo1 >> bm25", "--max-chunk-tokens", "64", "--chunk-limit", "5")
    assert refused.exit_code == 2, refused.output
    assert [ln for ln in refused.output.splitlines() if ln.startswith("error:")] == [
        "error: --max-chunk-tokens, --chunk-limit score modes' evidence (chunk-level metrics); "
        "a --pipeline is scored on its ranking only: leave them out, or score the pipeline's "
        "first stage as a --mode"]


def test_the_precomputed_strategy_over_a_store_without_precomputed_chunks_is_refused(tmp_path):
    """It scored every chunk metric 0 with no word (QA 28), and no command precomputed
    chunks: refused, naming `aiblox index build --chunks`, which now does."""
    db = str(tmp_path / "p.duckdb")
    r = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--mode", "hybrid",
             "--metric", "ndcg@10", "--chunk-strategy", "precomputed")
    assert r.exit_code == 2, r.output
    line = r.output.strip().splitlines()[-1]
    assert line.startswith("error: chunk strategy precomputed: the store holds no chunks "
                           "precomputed for sentences(") and "use late" in line
    assert "`aiblox index build --chunks` (its --chunker and sizes) precomputes them" in line
    late = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--mode", "hybrid",
                "--metric", "ndcg@10", "--chunks", "--json")  # late: the default strategy
    assert late.exit_code == 0, late.output
    # `aiblox index build --chunks` precomputes them (there was no command for it): the
    # precomputed strategy then reads the very chunks the late one makes
    built = _run("index", "build", "--db", db, "--embedder", "hashing", "--chunks")
    assert built.exit_code == 0, built.output
    assert "chunks (sentences(" in " ".join(built.output.split())
    assert "40 documents, 40 written" in " ".join(built.output.split())
    again = _run("index", "build", "--db", db, "--embedder", "hashing", "--chunks")
    assert "40 documents, 0 written" in " ".join(again.output.split())
    pre = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--mode", "hybrid",
               "--metric", "ndcg@10", "--chunk-strategy", "precomputed", "--json")
    assert pre.exit_code == 0, pre.output
    a, b = (json.loads(r.stdout)["systems"][0]["chunks"] for r in (late, pre))
    assert a["answer_recall"] == b["answer_recall"] and a["chunker_id"] == b["chunker_id"]
    assert b["counts"]["precomputed_hits"] > 0 and not b["counts"]["precomputed_missing"]
    bad = _run("index", "build", "--db", db, "--embedder", "hashing", "--chunks",
               "--chunker", "token_window", "--max-chunk-tokens", "8", "--overlap-tokens", "8")
    assert bad.exit_code == 2 and "--overlap-tokens" in bad.output
