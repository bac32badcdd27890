"""Output that pipes and errors before work, through the CLI as users type it: results on
stdout (whole, in a file), progress and errors on stderr (plain lines, never ``\\r`` or escape
codes when stderr is not a terminal), ``--quiet`` and ``--version``, each bad option one line
with its choices, and a store that cannot answer refused with the command to run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox import __version__
from aiblox.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "evals" / "sweeps" / "sample_fusion.toml"
runner = CliRunner()


def _env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: progress not switched off, this checkout imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("AIBLOX_NO_PROGRESS", "COLUMNS")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return {**env, **extra}


def _aiblox(args: list[str], stdout_file: Path, cwd: Path, **env: str
            ) -> subprocess.CompletedProcess[str]:
    """``aiblox ARGS > stdout_file`` with stderr captured through a pipe (not a terminal)."""
    with open(stdout_file, "w", encoding="utf-8") as f:
        return subprocess.run([sys.executable, "-m", "aiblox.cli", *args], stdout=f,
                              stderr=subprocess.PIPE, text=True, cwd=cwd, env=_env(**env),
                              timeout=600, check=False)


def _plain(stderr: str) -> None:
    assert "\r" not in stderr and "\x1b" not in stderr, stderr[-2000:]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """The sample dataset ingested with hashing vectors, as a user builds it."""
    path = str(tmp_path_factory.mktemp("pipes") / "sample.duckdb")
    r = runner.invoke(app, ["ingest", "sample", "--db", path, "--embedder", "hashing"])
    assert r.exit_code == 0, r.output
    return path


def _one_error_line(r, *needles: str) -> str:
    """The run failed with exit 2 and one ``error:`` line on stderr holding every needle."""
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "https://" not in lines[0] and "Traceback" not in r.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert r.stdout == ""
    return lines[0]


# -- results on stdout, progress as plain lines on a pipe ----------------------------------------
def test_search_results_land_in_the_file_and_stderr_is_plain(store, tmp_path):
    out = tmp_path / "out.txt"
    r = _aiblox(["search", "how does BM25 saturate term frequency", "--db", store,
                 "--embedder", "hashing", "-k", "3"], out, tmp_path)
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    assert "hybrid results for" in text and "d01" in text
    assert "results for" not in r.stderr  # the table is not on stderr
    _plain(r.stderr)


def test_sweep_report_in_the_file_labels_whole_and_progress_plain(tmp_path):
    """A narrow COLUMNS (rich's width when stdout is no terminal) once cut the leaderboard's
    labels to ``linear-w0.25-mi…``: labels that differ only at their end (``-d10``, ``-d20``)
    must reach the file whole and distinct. The signals phase (minutes on a large dataset) shows
    as plain lines on stderr."""
    out = tmp_path / "sweep.txt"
    r = _aiblox(["sweep", str(SPEC), "--db", str(tmp_path / "s.duckdb"), "--cache-dir",
                 str(tmp_path / "stages"), "--no-tracking", "--top", "30"], out, tmp_path,
                COLUMNS="50")
    assert r.returncode == 0, r.stderr[-3000:]
    from aiblox.cli._common import size_text

    text = out.read_text(encoding="utf-8")
    assert "best on train by ndcg@10" in text
    assert "stages computed: signals 4, fusion 48, metrics 48; reused: none" in text
    stages = tmp_path / "stages"  # the cache's size now, on stderr, as `aiblox cache` counts it
    size = size_text(sum(p.stat().st_size for d in ("signals", "fusion", "metrics")
                         for p in (stages / d).rglob("*") if p.is_file()))  # packs too
    assert f"stage cache {stages}: 100 entries, {size} (aiblox cache list" in \
        " ".join(r.stderr.split())
    assert "\u2026" not in text  # nothing elided
    label = re.compile(r"^│ ((?:linear-w[0-9.]+-(?:minmax|zscore)-zero|rrf-k\d+)-d\d+)"
                       r"( \((?:chosen|baseline|chosen; baseline)\))? +│")
    board = text.split("best on train")[0]  # the leaderboard: every point, best first
    found = [m for line in board.splitlines() if (m := label.match(line))]
    labels = [m.group(1) for m in found]
    assert len(labels) == 24 and len(set(labels)) == 24, labels  # the whole grid, distinct
    assert [m.group(2) for m in found][0] == " (chosen)"  # the chosen point first, marked
    assert sum(m.group(2) == " (chosen)" for m in found) == 1
    assert {"linear-w0.25-minmax-zero-d10", "linear-w0.25-minmax-zero-d20"} <= set(labels)
    _plain(r.stderr)
    assert re.search(r"^signals: sample train hybrid depth 10/10 \(\d+ queries\) \.\.\. [0-9.]+ s$",
                     r.stderr, re.M), r.stderr
    assert "sweep sample_fusion: 24 points" in r.stderr
    assert "best on train" not in r.stderr


def test_quiet_search_writes_nothing_to_stderr(store):
    r = runner.invoke(app, ["--quiet", "search", "BM25", "--db", store, "--embedder", "hashing"])
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and "BM25" in r.stdout
    # quiet is per invocation: the next one prints its informational lines again
    r = runner.invoke(app, ["index", "build", "--db", store, "--embedder", "hashing"])
    assert r.exit_code == 0 and "bm25:" in r.stderr and "built:" in r.stdout


def test_quiet_still_prints_errors(store):
    r = runner.invoke(app, ["-q", "search", "BM25", "--db", store, "--mode", "sparse"])
    _one_error_line(r, "--mode", "hybrid, bm25, dense")


def test_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.strip() == f"aiblox {__version__}"


# -- bad options: one line with the choices, before any work -------------------------------------
@pytest.mark.parametrize(("args", "needles"), [
    (["search", "q", "--mode", "sparse"], ["--mode 'sparse'", "hybrid, bm25, dense"]),
    (["search", "q", "--blend", "max"], ["--blend 'max'", "rrf, linear"]),
    (["search", "q", "--normalize", "l2"], ["--normalize 'l2'", "minmax, zscore, sigmoid, none"]),
    (["search", "q", "--embedder", "nope"], ["--embedder", "hashing, minilm"]),
    (["index", "build", "--method", "bm26"], ["--method 'bm26'", "lucene, robertson"]),
    (["index", "build", "--index", "ivf"], ["--index 'ivf'", "auto, exact, hnsw"]),
    (["index", "build", "--distance", "dot"], ["--distance 'dot'", "cosine, l2, ip"]),
    (["index", "build", "--embedder", "nope"], ["--embedder", "hashing, minilm"]),
    (["answer", "q", "--chunker", "nope"], ["--chunker", "sentences"]),
    (["answer", "q", "--embedder", "nope"], ["--embedder", "hashing, minilm"]),
])
def test_bad_option_is_one_line_with_its_choices(store, args, needles):
    before = Path(store).stat().st_mtime_ns
    r = runner.invoke(app, [*args, "--db", store])
    _one_error_line(r, *needles)
    assert Path(store).stat().st_mtime_ns == before  # nothing was written


def test_ingest_with_an_unknown_embedder_makes_no_store(tmp_path):
    db = tmp_path / "new.duckdb"
    r = runner.invoke(app, ["ingest", "sample", "--db", str(db), "--embedder", "nope"])
    _one_error_line(r, "--embedder", "hashing, minilm")
    assert not db.exists()


def test_index_build_bad_stemmer_has_no_pydantic_boilerplate(store):
    r = runner.invoke(app, ["index", "build", "--db", store, "--stemmer", "klingon"])
    line = _one_error_line(r, "stemmer", "english")
    assert "type=" not in line and "errors.pydantic.dev" not in line
    # the way to ask for none that this command takes (it said "or null", which it refuses)
    assert "(or none: `--stemmer none`" in line


def test_index_build_checks_before_it_builds_and_refuses_nothing_to_build(tmp_path):
    """A store without the asked embedder's vectors: the BM25 index was built (and its line
    printed) before the refusal; `--no-bm25 --no-vectors` said "built: none (all were
    current)" (QA 28)."""
    db = str(tmp_path / "ix.duckdb")
    assert runner.invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"]
                         ).exit_code == 0
    r = runner.invoke(app, ["index", "build", "--db", db, "--embedder", "minilm"])
    _one_error_line(r, "40 of 40 items have no all-MiniLM-L6-v2 vector")
    listed = runner.invoke(app, ["index", "list", "--db", db])
    assert listed.exit_code == 0 and "bm25-" not in listed.output  # nothing built
    _one_error_line(runner.invoke(app, ["index", "build", "--db", db, "--no-bm25",
                                        "--no-vectors"]), "leave nothing to build")


# -- a store that cannot answer -------------------------------------------------------------------
def test_search_on_a_missing_store(tmp_path):
    r = runner.invoke(app, ["search", "q", "--db", str(tmp_path / "none.duckdb")])
    _one_error_line(r, "no store at", "aiblox ingest")
    assert not (tmp_path / "none.duckdb").exists()


def test_search_on_an_empty_store(tmp_path):
    from aiblox.stores import open_store

    db = str(tmp_path / "empty.duckdb")
    open_store(db).close()
    for mode in ("hybrid", "bm25"):
        r = runner.invoke(app, ["search", "q", "--db", db, "--mode", mode,
                                "--embedder", "hashing"])
        _one_error_line(r, "holds no items", f"aiblox ingest DATASET --db {db}")


def test_search_on_a_store_of_another_embedder(store):
    r = runner.invoke(app, ["search", "q", "--db", store])  # default --embedder minilm
    _one_error_line(r, "built with hashing-v1-", "not all-MiniLM-L6-v2",
                    "--embedder hashing", "aiblox ingest", "--embedder minilm")
    r = runner.invoke(app, ["search", "BM25", "--db", store, "--mode", "bm25"])  # no vectors
    assert r.exit_code == 0 and "d01" in r.stdout, r.output
    r = runner.invoke(app, ["answer", "who developed BM25?", "--db", store])
    line = _one_error_line(r, "built with hashing-v1-", "--embedder hashing")
    assert "--mode" not in line  # answer has no --mode


def test_search_on_a_store_missing_some_vectors_of_its_model(tmp_path):
    """39 of 40 items hold MiniLM vectors (an ingest with another embedder changed the 40th):
    said so, with the ingest that adds the missing one, not "built with hashing vectors, not
    all-MiniLM-L6-v2" (QA4 #2)."""
    import numpy as np

    from aiblox.stores import open_store

    db = str(tmp_path / "partial.duckdb")
    assert runner.invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"]
                         ).exit_code == 0
    with open_store(db) as s:
        ids = sorted(s.item_hashes())[1:]
        s.set_item_vectors("all-MiniLM-L6-v2", [(i, "0" * 64, np.ones(384, np.float32))
                                                for i in ids])
    r = runner.invoke(app, ["search", "q", "--db", db, "--embedder", "minilm"])
    line = _one_error_line(r, "39 of 40 items have all-MiniLM-L6-v2 vectors",
                           "miss the other 1", "--embedder minilm`", "--mode bm25")
    assert "built with" not in line


def test_one_default_store_per_dataset(tmp_path, monkeypatch):
    """``ingest DATASET`` builds the store every ``--dataset`` command reads (the one
    :func:`default_store_path` names), and a dataset without one gets the command to run."""
    from aiblox.engine.workspace import default_store_path

    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["search", "q", "--dataset", "sample", "--embedder", "hashing"])
    _one_error_line(r, "has no store yet", "aiblox ingest sample")
    r = runner.invoke(app, ["ingest", "sample", "--embedder", "hashing"])
    assert r.exit_code == 0, r.output
    assert default_store_path("sample") in r.stdout
    assert (tmp_path / default_store_path("sample")).exists()
    r = runner.invoke(app, ["search", "BM25", "--dataset", "sample", "--embedder", "hashing"])
    assert r.exit_code == 0 and "d01" in r.stdout, r.output
