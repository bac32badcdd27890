"""The CLI through typer's runner, on the sample dataset and real DuckDB files."""

import json

from typer.testing import CliRunner

from aiblox.cli.main import app

runner = CliRunner()


def _run(*args):
    result = runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})
    return result


def test_ingest_search_eval_json(tmp_path):
    db = str(tmp_path / "cli.duckdb")
    r = _run("ingest", "sample", "--db", db, "--embedder", "hashing", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["items"]["inserted"] == 40 and report["vectors_written"] == 40
    again = json.loads(_run("ingest", "sample", "--db", db, "--embedder", "hashing",
                            "--json").stdout)
    assert again["items"]["unchanged"] == 40 and again["vectors_written"] == 0

    r = _run("search", "BM25 term frequency saturation", "--db", db, "--embedder", "hashing",
             "--json", "-k", "3")
    assert r.exit_code == 0, r.output
    bundle = json.loads(r.stdout)
    assert [c["item_id"] for c in bundle["candidates"]][0] == "d01"

    r = _run("eval", "sample", "--db", db, "--embedder", "hashing", "--mode", "bm25", "--json",
             "--metric", "ndcg@10", "--metric", "precision@5")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["systems"][0]
    assert set(out["metrics"]) == {"ndcg@10", "precision@5"}
    assert 0.5 < out["metrics"]["ndcg@10"] <= 1.0
    assert {"dataset", "config", "run"} <= set(out["hashes"])


def test_eval_fusion_options_change_config_hash(tmp_path):
    db = str(tmp_path / "f.duckdb")
    base = ["eval", "sample", "--db", db, "--embedder", "hashing", "--json"]
    rrf = json.loads(_run(*base).stdout)["systems"][0]
    lin = json.loads(_run(*base, "--blend", "linear", "--w-text", "0.5", "--w-vec", "0.5",
                          "--normalize", "minmax").stdout)["systems"][0]
    assert rrf["hashes"]["config"] != lin["hashes"]["config"]
    assert rrf["hashes"]["dataset"] == lin["hashes"]["dataset"]
    # settings RRF does not read leave the point as it is (the defaults are hashed)
    zscore = json.loads(_run(*base, "--blend", "rrf", "--normalize", "zscore", "--w-text", "0.9",
                             "--missing", "list_min").stdout)["systems"][0]
    assert zscore["hashes"] == rrf["hashes"]
    lin_k = json.loads(_run(*base, "--blend", "linear", "--w-text", "0.5", "--w-vec", "0.5",
                            "--normalize", "minmax", "--rrf-k", "10").stdout)["systems"][0]
    assert lin_k["hashes"] == lin["hashes"]
    both = json.loads(_run(*base, "--mode", "bm25", "--mode", "hybrid").stdout)
    assert [r["name"] for r in both["systems"]] == ["bm25", "hybrid"]


def test_bad_input_is_a_clear_error(tmp_path):
    r = _run("eval", "no-such-dataset", "--db", str(tmp_path / "x.duckdb"))
    assert r.exit_code == 2 and "no BEIR dataset" in r.output
    r = _run("eval", "sample", "--split", "dev", "--db", str(tmp_path / "x.duckdb"))
    assert r.exit_code == 2 and "no split 'dev'" in r.output
    r = _run("eval", "sample", "--embedder", "nope", "--db", str(tmp_path / "x.duckdb"))
    assert r.exit_code == 2 and "unknown embedder 'nope'" in r.output


SEARCH_WITH = """
import json, sys
from aiblox.embedding import register_embedder

class Unavailable:
    model_id = "unavailable-1"
    dim = 384

    def __init__(self, *args, **kwargs):
        raise RuntimeError("this embedder cannot be built here")

    def embed(self, texts):
        raise RuntimeError("this embedder cannot embed")

register_embedder("unavailable", Unavailable)
from aiblox.cli.main import app
try:
    app(sys.argv[1:], prog_name="aiblox")
finally:
    sys.stderr.write("\\nloaded " + json.dumps(
        [m for m in ("numba", "torch", "sentence_transformers", "pandas") if m in sys.modules]))
"""


def test_bm25_search_needs_no_embedder(tmp_path):
    """``search --mode bm25`` builds no embedder and embeds nothing (a whole process, with an
    embedder that can neither be built nor embed): a ranked list, evidence scored by text
    alone, and neither numba nor a model library loaded; hybrid with it fails."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    db = str(tmp_path / "bm25.duckdb")
    assert _run("ingest", "sample", "--db", db, "--embedder", "hashing").exit_code == 0
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])}

    def search(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", SEARCH_WITH, "search",
                               "BM25 term frequency saturation", "--db", db, "--mode", mode,
                               "--embedder", "unavailable", "--json", "-k", "5"],
                              capture_output=True, text=True, env=env, timeout=300)

    r = search("bm25")
    assert r.returncode == 0, r.stderr[-3000:]
    bundle = json.loads(r.stdout)
    scores = [c["score"] for c in bundle["candidates"]]
    assert bundle["candidates"][0]["item_id"] == "d01" and len(scores) == 5
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert all(c["rank_vec"] is None for c in bundle["candidates"])
    assert bundle["evidence"] and all(e["score_vec"] is None for e in bundle["evidence"])
    assert bundle["stats"]["params"]["embedder"] is None
    loaded = json.loads(r.stderr.strip().splitlines()[-1].removeprefix("loaded "))
    assert set(loaded) <= {"pandas"}  # pandas: DuckDB's client, writing the chunk cache once
    hybrid = search("hybrid")
    assert hybrid.returncode != 0 and "cannot be built" in hybrid.stderr, hybrid.stderr[-2000:]


def test_warm_hybrid_search_loads_neither_pandas_nor_numba(tmp_path):
    """A repeated hybrid search (its query's and chunks' vectors cached by the first) binds no
    DuckDB parameter (the client would import pandas: 0.2-0.3 s) and scores its one query
    without numba: neither is loaded."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    db = str(tmp_path / "hybrid.duckdb")
    assert _run("ingest", "sample", "--db", db, "--embedder", "hashing").exit_code == 0
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])}
    runs = [subprocess.run([sys.executable, "-c", SEARCH_WITH, "search", "it's a 'quoted' query?",
                            "--db", db, "--embedder", "hashing", "--json", "-k", "5"],
                           capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-3000:]
    first, again = (json.loads(r.stdout) for r in runs)
    assert [c["item_id"] for c in first["candidates"]] == \
        [c["item_id"] for c in again["candidates"]] and len(first["candidates"]) == 5
    assert runs[1].stderr.strip().splitlines()[-1] == "loaded []"


def test_text_is_printed_as_typed_and_k_deepens_the_lists(tmp_path):
    """A query, an answer or a verdict holding rich markup crashed (``[/bold]``: MarkupError)
    or lost characters (``[red]x[/red]`` shown as ``x``); and ``-k 150`` showed 100 (each list
    kept its default depth of 100)."""
    folder = tmp_path / "ds"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": "p1", "title": "", "text": "Platypus lay eggs [/red] and [bold]swim[/bold]."}]
    docs += [{"_id": f"d{i:03d}", "title": "", "text": f"common alpha word {i}"}
             for i in range(150)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "platypus"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tp1\t1\n")
    db = str(tmp_path / "s.duckdb")
    assert _run("ingest", str(folder), "--db", db, "--embedder", "hashing").exit_code == 0
    r = _run("search", "[/bold] platypus", "--db", db, "--embedder", "hashing")
    assert r.exit_code == 0, r.output
    assert "results for '[/bold] platypus'" in r.stdout
    r = _run("answer", "Do platypus lay eggs?", "--db", db, "--embedder", "hashing")
    assert r.exit_code == 0, r.output
    assert "[/red] and [bold]swim[/bold]" in r.stdout
    for mode in ("bm25", "dense", "hybrid"):
        r = _run("search", "common alpha", "--db", db, "--embedder", "hashing", "--mode", mode,
                 "-k", "140", "--json")
        assert r.exit_code == 0, r.output
        assert len(json.loads(r.stdout)["candidates"]) == 140, mode
