"""``aiblox eval --chunk-strategy precomputed`` after ``aiblox index build --chunks``: a
document changed since gives no evidence and is named (QA: the table said ``cache hits 0
misses 0`` while answer recall dropped), and ``--mode bm25`` reads the text-only chunks the
build writes beside the embedder's (it looked up keys no command wrote, and always failed)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from aiblox.cli.main import app

runner = CliRunner()

ANIMALS = ("ZEBRAFISH", "QUOKKA", "WOMBAT", "KOALA")


def _run(*args: str):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "400"})


def _dataset(root: Path, changed: str = "") -> Path:
    """Four documents, one answer each (at offset 14); ``changed`` appended to the last."""
    root.mkdir(exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    docs, queries, answers, qrels = [], [], [], ["query-id\tcorpus-id\tscore"]
    for i, word in enumerate(ANIMALS, 1):
        text = f"The word is   {word} here.{changed if i == len(ANIMALS) else ''}"
        docs.append({"_id": f"d{i}", "title": "", "text": text})
        queries.append({"_id": f"q{i}", "text": word.lower()})
        answers.append({"_id": f"q{i}", "corpus-id": f"d{i}", "answers": [word],
                        "answer_starts": [14]})
        qrels.append(f"q{i}\td{i}\t1")
    for name, rows in (("corpus", docs), ("queries", queries), ("answers", answers)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return root


def test_a_document_changed_since_its_chunks_were_precomputed_is_named(tmp_path):
    ds, db = _dataset(tmp_path / "ds"), str(tmp_path / "s.duckdb")
    common = ["--db", db, "--embedder", "hashing", "--chunker", "whole"]
    evaluate = ["eval", str(ds), *common, "--mode", "hybrid", "--metric", "ndcg@10",
                "--chunk-strategy", "precomputed"]
    assert _run("eval", str(ds), "--db", db, "--embedder", "hashing").exit_code == 0
    built = _run("index", "build", *common, "--chunks")
    assert built.exit_code == 0, built.output
    ok = _run(*evaluate)
    assert ok.exit_code == 0, ok.output
    assert "answer_recall@1 1.0000" in ok.stdout and "precomputed hits 4 missing 0" in ok.stdout
    assert "warning: --mode hybrid --chunk-strategy precomputed" not in ok.output
    _dataset(ds, changed=" Edited.")  # d4 changed: its precomputed chunks no longer apply
    r = _run(*evaluate)
    assert r.exit_code == 0, r.output
    assert "answer_recall@1 0.7500" in r.stdout
    # the chunk line said `cache hits 0 misses 0` alone: now where the chunks came from
    assert "precomputed hits 3 missing 1" in r.stdout
    assert "warning: --mode hybrid --chunk-strategy precomputed: 1 candidate document (d4) " \
           "had no precomputed chunks for whole(" in r.stderr
    assert "`aiblox index build --chunks` with this --embedder, --chunker and sizes " \
           "precomputes them again" in r.stderr
    data = json.loads(_run(*evaluate, "--json").stdout)["systems"][0]["chunks"]
    assert data["missing_documents"] == ["d4"] and data["counts"]["precomputed_missing"] == 1
    assert _run("index", "build", *common, "--chunks").exit_code == 0
    again = _run(*evaluate)
    assert "answer_recall@1 1.0000" in again.stdout and "warning:" not in again.stderr


def test_bm25_reads_the_text_only_chunks_index_build_precomputes(tmp_path):
    ds, db = _dataset(tmp_path / "ds"), str(tmp_path / "s.duckdb")
    common = ["--db", db, "--embedder", "hashing", "--chunker", "whole"]
    evaluate = ["eval", str(ds), *common, "--metric", "ndcg@10", "--chunk-strategy",
                "precomputed", "--json"]
    assert _run("eval", str(ds), "--db", db, "--embedder", "hashing").exit_code == 0
    none = _run(*evaluate, "--mode", "bm25")  # nothing precomputed yet: refused, said whose
    assert none.exit_code == 2 and "precomputed for whole(enc=cl100k_base,v=1) for text-only " \
        "scoring (no embedder: bm25 mode" in " ".join(none.output.split())
    built = _run("index", "build", *common, "--chunks")
    assert built.exit_code == 0, built.output
    assert "4 documents, 4 written; text-only (for --mode bm25): 4 written" in \
        " ".join(built.output.split())
    r = _run(*evaluate, "--mode", "bm25", "--mode", "hybrid")
    assert r.exit_code == 0, r.output  # bm25 refused ("holds no chunks precomputed"): all
    bm25, hybrid = (s["chunks"] for s in json.loads(r.stdout)["systems"])
    for c in (bm25, hybrid):
        assert c["counts"]["precomputed_hits"] == 4 and c["counts"]["precomputed_missing"] == 0
        assert c["answer_recall"]["answer_recall@1"] == 1.0
    # the text-only chunks are the late strategy's: the same evidence, the same run
    late = _run("eval", str(ds), *common, "--metric", "ndcg@10", "--json", "--mode", "bm25",
                "--chunks")
    assert json.loads(late.stdout)["systems"][0]["chunks"]["hashes"]["run"] == \
        bm25["hashes"]["run"]
    again = _run("index", "build", *common, "--chunks")
    assert "4 documents, 0 written; text-only (for --mode bm25): 0 written" in \
        " ".join(again.output.split())
