"""No traceback reaches the user: every input or environment fault is one line ``error: ...``
naming the file, line and field or the option, with exit status 2, before any work where the
fault can be seen first. Real files, real DuckDB stores, the real command group."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from aiblox.cli._errors import AibloxGroup
from aiblox.cli.main import app
from tests.conftest import REPO, SAMPLE

runner = CliRunner()
SAMPLE_SPEC = REPO / "evals" / "sweeps" / "sample_fusion.toml"


def _run(*args: str, **env: str):
    return runner.invoke(app, [str(a) for a in args],
                         env={"AIBLOX_NO_PROGRESS": "1", "AIBLOX_DEBUG": "", **env})


def _one_error(result, code: int = 2) -> str:
    """The single ``error:`` line of a failed command (and nothing that looks like a traceback)."""
    out = result.output
    assert result.exit_code == code, out
    assert "Traceback" not in out and 'File "' not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    assert "error" not in out.replace(errors[0], "").lower(), out
    return errors[0]


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "ds"
    shutil.copytree(SAMPLE, dst)
    return dst


def _eval(path: Path, db: Path, *more: str):
    return _run("eval", path, "--embedder", "hashing", "--mode", "bm25", "--db", db, *more)


# ------------------------------------------------------------------ bad datasets, one line each
DATASET_CASES = [
    ("corpus.jsonl", "", None, "corpus"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\n", None, "qrels"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq01\td01\t1.9\n", 2, "score"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq01\td01\tinf\n", 2, "score"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq01\td01\t2\nq01\td01\t1\n", 3, "score"),
    ("qrels/test.tsv", "q01 0 d01 2\nq01\td03\t1\n", 2, "row"),
    ("corpus.jsonl", '{"_id": "d01", "text": "\\ud800"}\n', 1, "text"),
    ("queries.jsonl", '{"_id": "q01", "text": "lone \\udc00"}\n', 1, "text"),
    # a misspelt or null text was stored as an empty, unsearchable document (QA 28)
    ("corpus.jsonl", '{"_id": "d01", "text": "x"}\n{"_id": "d02", "txt": "y"}\n', 2, "text"),
    ("corpus.jsonl", '{"_id": "d01", "title": "t", "text": null}\n', 1, "text"),
    # a gold answer not at its offset lowered answer recall with no word (QA 28)
    ("answers.jsonl", '{"_id": "q01", "corpus-id": "d01", "answers": ["BM25"], '
     '"answer_starts": [5]}\n', 1, "answer_starts"),
]


@pytest.mark.parametrize(("rel", "content", "line", "field"), DATASET_CASES,
                         ids=[f"{c[0]}:{c[3]}:{i}" for i, c in enumerate(DATASET_CASES)])
def test_bad_datasets_are_one_line_naming_file_line_and_field(tmp_path, rel, content, line,
                                                              field):
    path = _copy(tmp_path)
    (path / rel).write_text(content, encoding="utf-8")
    db = tmp_path / "s.duckdb"
    err = _one_error(_eval(path, db))
    where = f"{path / rel}:{line}" if line else f"{path / rel}"
    assert err.startswith(f"error: {where}: field {field!r}: "), err
    assert not db.exists()  # refused before any store was made


def test_gold_answers_in_documents_the_corpus_lacks_are_one_warning(tmp_path):
    """They lowered answer recall with no word (QA 28); kept, as qrels rows naming absent
    documents are, and said once."""
    path = _copy(tmp_path)
    lines = (path / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "corpus-id": "d99"})
    (path / "answers.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = _eval(path, tmp_path / "s.duckdb")
    assert r.exit_code == 0, r.output
    said = " ".join(r.stderr.split())
    assert (f"warning: {path / 'answers.jsonl'}: 1 gold answers name documents absent from the "
            f"corpus (kept; they are never found, and lower answer recall), e.g. query "
            f"{first['_id']!r}") in said


def test_a_bad_corpus_line_leaves_no_store_an_ingest_made_and_keeps_one_it_found(tmp_path):
    """The corpus streams, so a bad line is met mid-ingest: a store the failed ingest made
    itself was left behind empty (QA 27), for the next command to find; one that was there
    keeps what it held."""
    path = _copy(tmp_path)
    good = (path / "corpus.jsonl").read_text(encoding="utf-8")
    lines = good.splitlines()
    bad = "\n".join(lines[:3] + [lines[3][:-5]] + lines[4:]) + "\n"
    (path / "corpus.jsonl").write_text(bad, encoding="utf-8")
    db = tmp_path / "s.duckdb"
    err = _one_error(_run("ingest", path, "--embedder", "hashing", "--db", db))
    assert err.startswith(f"error: {path / 'corpus.jsonl'}:4: field 'json': malformed JSON")
    assert not db.exists() and not Path(f"{db}.wal").exists()
    (path / "corpus.jsonl").write_text(good, encoding="utf-8")
    assert _run("ingest", path, "--embedder", "hashing", "--db", db).exit_code == 0
    (path / "corpus.jsonl").write_text(bad, encoding="utf-8")
    _one_error(_run("ingest", path, "--embedder", "hashing", "--db", db))
    from aiblox.stores import open_store

    store = open_store(db)
    try:
        assert store.count_items() == len(lines)  # nothing lost
    finally:
        store.close()


def test_trec_qrels_score_like_beir(tmp_path):
    beir = _copy(tmp_path / "a")
    trec = _copy(tmp_path / "b")
    rows = [r.split("\t") for r in (trec / "qrels/test.tsv").read_text().splitlines()[1:]]
    (trec / "qrels/test.tsv").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    outs = []
    for path in (beir, trec):
        r = _eval(path, tmp_path / f"{path.parent.name}.duckdb", "--json")
        assert r.exit_code == 0, r.output
        outs.append(json.loads(r.stdout)["systems"][0]["metrics"])
    assert outs[0] == outs[1]
    assert outs[0]["ndcg@10"] > 0.5  # the `0` column is not read as a document id


def test_text_bm25_cannot_see_is_one_warning_line(tmp_path):
    path = _copy(tmp_path)
    with (path / "corpus.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"_id": "em1", "title": "", "text": "😀 🔍"}\n'
                 '{"_id": "em2", "title": "", "text": "✨"}\n'
                 '{"_id": "zh1", "title": "", "text": "稠密检索 😀"}\n')  # CJK: indexed
    r = _eval(path, tmp_path / "s.duckdb", "--json")
    assert r.exit_code == 0, r.output
    warned = [line for line in r.output.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1, r.output
    assert "2 of 43 documents (e.g. doc 'em1') have text BM25 cannot index" in warned[0]
    # ingest warns alike (one function says it for both), once
    r = _run("ingest", path, "--embedder", "hashing", "--db", tmp_path / "i.duckdb")
    assert r.exit_code == 0, r.output
    warned_ingest = [line for line in r.output.splitlines() if line.startswith("warning:")]
    assert len(warned_ingest) == 1, r.output
    assert warned_ingest[0].split(": ", 2)[2] == warned[0].split(": ", 2)[2]


# ------------------------------------------------------------------ options, before any work
@pytest.mark.parametrize(("metric", "words"), [
    ("bogus@10", "unknown metric 'bogus'"), ("ndcg@-3", "must be a positive integer"),
    ("ndcg@10", "metric 'ndcg@10' is named twice")])  # the column twice (QA 27)
def test_a_bad_metric_fails_in_a_moment_naming_the_option(tmp_path, metric, words):
    db = tmp_path / "s.duckdb"
    t0 = time.perf_counter()
    r = _eval(SAMPLE, db, "--metric", "ndcg@10", "--metric", metric)
    elapsed = time.perf_counter() - t0
    err = _one_error(r)
    assert err.startswith("error: --metric: ") and words in err
    # before any work: no store, and no ingest's seconds (a bound above an import's time on a
    # loaded machine: 1.0 failed at 1.03 s beside three other jobs)
    assert elapsed < 5.0 and not db.exists()


BAD_VALUES = [
    (("compare", "a", "b", "--alpha", "5"), "--alpha must be between 0 and 1, got 5.0"),
    (("compare", "a", "b", "--changed", "-1"),
     "--changed -1: out of range; valid: a whole number >= 0"),
    (("answer", "q", "--dataset", "sample", "--top-k-chunks", "0"),
     "--top-k-chunks 0: out of range; valid: a whole number >= 1"),
    (("eval", "sample", "--alpha", "2"), "--alpha must be between 0 and 1, got 2.0"),
    (("sweep", SAMPLE_SPEC, "--jobs", "-1"), "--jobs -1: out of range; valid: a whole number >= 0"),
    (("sweep", SAMPLE_SPEC, "--top", "-1"), "--top -1: out of range; valid: a whole number >= 1"),
    (("sweep", SAMPLE_SPEC, "--max-points", "0"),
     "--max-points 0: out of range; valid: a whole number >= 1"),
    (("chunk", "--text", REPO / "README.md", "--preview", "-1"),
     "--preview -1: out of range; valid: a whole number >= 1"),
]


@pytest.mark.parametrize(("args", "words"), BAD_VALUES,
                         ids=[" ".join(str(a) for a in c[0][:1] + c[0][-2:]) for c in BAD_VALUES])
def test_a_value_out_of_range_is_one_line_before_any_work(tmp_path, args, words):
    """Each option with a least value (or a range) is refused as one ``error:`` line naming it,
    before a store, MLflow or a dataset is opened (none of these runs gets that far)."""
    t0 = time.perf_counter()
    err = _one_error(_run(*args))
    assert time.perf_counter() - t0 < 2.0
    assert err.startswith(f"error: {words}"), err


@pytest.mark.parametrize(("extra", "words"), [
    ('[grid]\ndepth = [0]\n',
     "field 'grid.depth': depths (candidates per signal) must be in [1, 2147483647]"),
    ('[grid]\nblend = ["linear"]\nw_text = { start = 0, stop = 1, step = 1e-7 }\n',
     "field 'grid': 10,000,001 points, above the limit of 10,000"),
    ('metrics = ["bogus@10"]\n', "field 'metrics': bad metric name"),
    ('metrics = ["ndcg@10", "recall@10", "ndcg@10"]\n',
     "field 'metrics': metric 'ndcg@10' is named twice"),
])
def test_bad_sweep_specs_are_one_line(tmp_path, extra, words):
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "t"\ndataset = "sample"\ntune_split = "train"\n'
                    'report_split = "test"\nembedder = "hashing"\n' + extra)
    t0 = time.perf_counter()
    err = _one_error(_run("sweep", spec, "--no-tracking", "--cache-dir", tmp_path / "c"))
    assert time.perf_counter() - t0 < 2.0
    assert re.match(rf"error: {re.escape(str(spec))}:\d+: ", err) and words in err  # its line
    assert not (tmp_path / "c").exists()


def test_max_points_raises_the_limit_and_the_count_is_shown_first(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SAMPLE_SPEC.read_text())
    err = _one_error(_run("sweep", spec, "--no-tracking", "--max-points", "10"))
    assert "field 'grid': 24 points, above the limit of 10" in err
    r = _run("sweep", spec, "--no-tracking", "--max-points", "24", "--cache-dir",
             tmp_path / "c", "--db", tmp_path / "s.duckdb")
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first.startswith("sweep sample_fusion: 24 points (limit 24;"), r.output


# ------------------------------------------------------------------ the environment
def _unwritable(tmp_path: Path) -> Path:
    """A folder no file can be written in: read-only for a normal user; for root (who writes
    anywhere) a path through a regular file."""
    if os.geteuid() == 0:
        blocker = tmp_path / "blocker"
        blocker.write_text("a regular file")
        return blocker / "sub"
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    return folder / "sub"


def test_an_unwritable_cache_dir_is_one_line_before_any_work(tmp_path):
    cache = _unwritable(tmp_path)
    db = tmp_path / "s.duckdb"
    err = _one_error(_run("sweep", SAMPLE_SPEC, "--no-tracking", "--cache-dir", cache,
                          "--db", db))
    assert err.startswith(f"error: --cache-dir {cache}: cannot write there: ")
    assert not db.exists()


def test_an_unwritable_tracking_folder_is_one_line_before_any_work(tmp_path):
    folder = _unwritable(tmp_path)
    db = tmp_path / "s.duckdb"
    err = _one_error(_run("sweep", SAMPLE_SPEC, "--tracking-uri", f"sqlite:///{folder}/m.db",
                          "--cache-dir", tmp_path / "c", "--db", db))
    assert err.startswith(f"error: --tracking-uri {folder}: cannot write there: ")
    assert not db.exists()


def test_an_unwritable_report_folder_is_one_line(tmp_path):
    err = _one_error(_run("report", "no-such-sweep", "--tracking-uri",
                          f"sqlite:///{_unwritable(tmp_path)}/m.db"))
    assert str(tmp_path) in err


@pytest.fixture(scope="module")
def store_file(tmp_path_factory):
    """A real store of the sample dataset (hashing vectors), made by `aiblox ingest`."""
    db = tmp_path_factory.mktemp("store") / "good.duckdb"
    r = _run("ingest", "sample", "--db", db, "--embedder", "hashing")
    assert r.exit_code == 0, r.output
    return db


def test_a_corrupted_store_is_one_line_naming_it(tmp_path, store_file):
    """Garbage in the file header, then in each 256 KiB block in turn (DuckDB checksums every
    block): whether opening or a query finds it, one line names the store."""
    size = store_file.stat().st_size
    offsets = [0, *range(12288 + 8, size - 262144, 262144)]
    seen = {"at open": 0, "later": 0}
    for offset in offsets:
        bad = tmp_path / f"bad-{offset}.duckdb"
        shutil.copy(store_file, bad)
        with bad.open("r+b") as fh:
            fh.seek(offset)
            fh.write(bytes(range(256)) * 4)
        r = _run("eval", "sample", "--embedder", "hashing", "--mode", "bm25", "--mode", "dense",
                 "--db", bad)
        if r.exit_code == 0:  # a block no query reads
            continue
        err = _one_error(r)
        assert str(bad) in err and ("Corrupt database file" in err or "not a valid DuckDB"
                                    in err or "not a DuckDB database file" in err), err
        seen["at open" if err.startswith("error: cannot open store") else "later"] += 1
    assert seen["at open"] >= 2 and seen["later"] >= 1, seen


def test_a_folder_or_a_text_file_as_store_is_one_line(tmp_path):
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database")
    for db in (text, tmp_path):
        err = _one_error(_eval(SAMPLE, db))
        assert str(db) in err


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.csv", "corpus.parquet"])
def test_a_dataset_file_as_store_is_refused_and_left_as_it_was(tmp_path, name):
    """DuckDB opens a JSON, CSV or Parquet file as a temporary in-memory database: ``--db
    corpus.jsonl`` once ingested into nothing and said it had stored every document."""
    import pandas as pd

    frame = pd.DataFrame({"_id": ["d1", "d2"], "title": ["", ""], "text": ["a b", "c d"]})
    path = tmp_path / name
    {"corpus.jsonl": lambda: frame.to_json(path, orient="records", lines=True),
     "corpus.csv": lambda: frame.to_csv(path, index=False),
     "corpus.parquet": lambda: frame.to_parquet(path)}[name]()
    before = path.read_bytes()
    for r in (_run("ingest", "sample", "--db", path, "--embedder", "hashing"), _eval(SAMPLE, path),
              _run("search", "bm25", "--db", path, "--mode", "bm25")):
        err = _one_error(r)
        assert err.startswith(f"error: cannot open store {path}: the file") and \
            "is not a DuckDB database file" in err and "corpus.duckdb" in err, err
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no index folder beside it


def test_a_duckdb_named_file_that_is_not_one_suggests_another_name(tmp_path):
    """The suggestion named the very file refused (``garbage.duckdb``, QA 23)."""
    path = tmp_path / "garbage.duckdb"
    path.write_text("garbage\n", encoding="utf-8")
    err = _one_error(_run("search", "bm25", "--db", path, "--mode", "bm25"))
    assert "not a DuckDB database file" in err and err.endswith("e.g. garbage-store.duckdb)")


def test_an_empty_query_is_refused_by_search_as_by_answer(tmp_path, store_file):
    """``aiblox search ""`` printed an empty table, exit 0 (QA 23)."""
    for text in ("", "   "):
        err = _one_error(_run("search", text, "--db", store_file, "--mode", "bm25"))
        assert err == "error: the query is empty: give the text to search for", err


def test_text_that_is_not_unicode_in_an_argument_is_one_line(tmp_path, store_file):
    err = _one_error(_run("search", "caf\udce9 au lait", "--db", store_file, "--embedder",
                          "hashing"))
    assert "not valid Unicode" in err and "in 'caf\\udce9 au lait'" in err


# ------------------------------------------------------------------ bugs are not input faults
def _group_with(exc: Exception) -> typer.Typer:
    demo = typer.Typer(cls=AibloxGroup, add_completion=False)

    @demo.command()
    def boom() -> None:
        raise exc

    @demo.command()
    def fine() -> None:
        typer.echo("ok")

    return demo


def test_an_unexpected_exception_is_one_line_with_a_hint_and_exit_1():
    demo = _group_with(TypeError("unsupported operand"))
    r = runner.invoke(demo, ["boom"], env={"AIBLOX_DEBUG": ""})
    err = _one_error(r, code=1)
    assert err == ("error: internal error (TypeError: unsupported operand); rerun with "
                   "AIBLOX_DEBUG=1 for the traceback")
    r = runner.invoke(demo, ["boom"], env={"AIBLOX_DEBUG": "1"})
    assert isinstance(r.exception, TypeError)  # propagated, with its traceback
    assert runner.invoke(demo, ["fine"]).output == "ok\n"


def test_a_ctrl_c_that_numba_wrapped_is_a_ctrl_c_not_an_internal_error():
    """Ctrl-C while numba loads a kernel arrives as ``SystemError ... returned a result with an
    exception set``, the KeyboardInterrupt as its cause: it said "internal error" (CI)."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise SystemError("<function _numba_unpickle> returned a result with an exception "
                              "set") from stop
    except SystemError as exc:
        wrapped = exc
    r = runner.invoke(_group_with(wrapped), ["boom"], env={"AIBLOX_DEBUG": ""})
    assert "internal error" not in r.output
    assert r.exit_code == 130  # as any Ctrl-C in a typer command


@pytest.mark.parametrize(("exc", "words"), [
    (PermissionError(13, "Permission denied", "/data/x"), "/data/x: Permission denied"),
    (OSError(28, "No space left on device", "/data/y"), "no space left on the device"),
    (OSError(30, "Read-only file system", "/ro/z"), "/ro/z: read-only file system"),
    (ValueError("spec.toml: field 'x': bad\nspec.toml: field 'y': worse"),
     "spec.toml: field 'x': bad; spec.toml: field 'y': worse"),
    (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "not valid Unicode"),
    (MemoryError(), "out of memory"),
])
def test_environment_and_input_faults_are_one_line_exit_2(exc, words):
    err = _one_error(runner.invoke(_group_with(exc), ["boom"], env={"AIBLOX_DEBUG": ""}))
    assert words in err


def test_messages_keep_brackets_and_mask_passwords():
    exc = ValueError("need [grid.selection] for 'postgresql+psycopg://me:s3cret@db/x'")
    err = _one_error(runner.invoke(_group_with(exc), ["boom"], env={"AIBLOX_DEBUG": ""}))
    assert "[grid.selection]" in err and "s3cret" not in err
    assert "'postgresql+psycopg://me:***@db/x'" in err


def test_duckdb_sql_errors_are_bugs_but_its_file_errors_are_not():
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SELEC 1")
    except duckdb.Error as exc:
        parse_error = exc
    err = _one_error(runner.invoke(_group_with(parse_error), ["boom"],
                                   env={"AIBLOX_DEBUG": ""}), code=1)
    assert err.startswith("error: internal error (ParserException:")
    try:
        duckdb.connect(str(REPO / "README.md"))
    except duckdb.Error as exc:
        io_error = exc
    err = _one_error(runner.invoke(_group_with(io_error), ["boom"], env={"AIBLOX_DEBUG": ""}))
    assert err.startswith("error: DuckDB: ") and "README.md" in err


# ------------------------------------------------------------------ generated malformed datasets
_TEXT = st.one_of(  # mostly printable text of any script, sometimes control characters
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
            max_size=20),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8),
    st.sampled_from(["信息检索", "😀 🔍", "Привет", "BM25 ranking", "", "   "]))
_ID = st.one_of(st.sampled_from(["d1", "d2", "q1", "0", "a b", "'", '"', "é", "Ω", "x" * 200]),
                st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc",
                                                                                  "Zs"]),
                        min_size=1, max_size=6))
_GRADE = st.one_of(  # mostly valid grades, some of every kind of bad one
    st.integers(1, 2).map(str), st.integers(1, 2).map(str), st.integers(-2, 3).map(str),
    st.sampled_from(["1.9", "inf", "nan", "-1", "2.0", "1e400", "x", "", "9" * 30]))
_RARELY = [None] * 6
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20),
                               st.floats(allow_nan=False, allow_infinity=False), _TEXT),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(_TEXT, c, max_size=3),
                     max_leaves=6)


@st.composite
def _datasets(draw):
    docs = draw(st.lists(st.tuples(_ID, _TEXT, _TEXT), min_size=1, max_size=5,
                         unique_by=lambda d: d[0]))
    queries = draw(st.lists(st.tuples(_ID, _TEXT), min_size=1, max_size=3,
                            unique_by=lambda q: q[0]))
    ids = [d for d, _, _ in docs]
    qids = [q for q, _ in queries]
    rows = draw(st.lists(st.tuples(st.sampled_from(qids), st.sampled_from([*ids, "zz"]),
                                   _GRADE), min_size=1, max_size=6))
    trec = draw(st.booleans())
    surrogate = draw(st.sampled_from([*_RARELY, "corpus", "queries"]))
    junk = draw(st.sampled_from([*_RARELY, "corpus.jsonl", "queries.jsonl", "qrels/test.tsv"]))
    junk_bytes = draw(st.binary(min_size=1, max_size=20))
    numbers = draw(st.sampled_from([None, 1, 1e308, -0.0, 10**40]))
    extra = draw(st.sampled_from([*_RARELY, "corpus.jsonl", "queries.jsonl"]))
    extra_line = json.dumps({"_id": draw(_ID), "title": draw(_JSON), "text": draw(_JSON),
                             "metadata": draw(_JSON)})
    return docs, queries, rows, trec, surrogate, (junk, junk_bytes), numbers, \
        (extra, extra_line)


def _write(path: Path, data) -> None:
    docs, queries, rows, trec, surrogate, junk, numbers, extra = data
    (path / "qrels").mkdir(parents=True)
    corpus = [json.dumps({"_id": d, "title": t, "text": x, "metadata": {"n": numbers}})
              for d, t, x in docs]
    qlines = [json.dumps({"_id": q, "text": t}) for q, t in queries]
    if surrogate == "corpus" and corpus:
        corpus[0] = corpus[0].replace('"text": "', '"text": "\\udc80', 1)
    if surrogate == "queries":
        qlines[0] = qlines[0].replace('"text": "', '"text": "\\ud800', 1)
    (path / "corpus.jsonl").write_text("".join(c + "\n" for c in corpus), encoding="utf-8")
    (path / "queries.jsonl").write_text("".join(q + "\n" for q in qlines), encoding="utf-8")
    qrels = ("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows) if trec else
             "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows))
    (path / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    if extra[0] is not None:  # one more line of arbitrary JSON values
        with (path / extra[0]).open("a", encoding="utf-8") as fh:
            fh.write(extra[1] + "\n")
    if junk[0] is not None:
        with (path / junk[0]).open("ab") as fh:
            fh.write(junk[1])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=_datasets())
def test_generated_datasets_succeed_or_fail_in_one_line(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("gen")
    path = root / "ds"
    _write(path, data)
    r = _eval(path, root / "s.duckdb", "--json")
    out = r.output
    assert "Traceback" not in out, out
    if r.exit_code == 0:
        event("scored")
        metrics = json.loads(r.stdout)["systems"][0]["metrics"]
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in metrics.values()), metrics
        return
    err = _one_error(r)
    event(f"refused: {err.split(': field ')[-1].split(':')[0][:20]}")
    assert str(path) in err and "field '" in err, err


def test_a_real_process_prints_one_unwrapped_line(tmp_path):
    """In a real process with a narrow terminal: still one line, no traceback, exit 2."""
    import subprocess
    import sys

    path = _copy(tmp_path)
    (path / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq01\td01\tinf\n")
    env = {**os.environ, "COLUMNS": "40", "AIBLOX_NO_PROGRESS": "1", "AIBLOX_DEBUG": ""}
    proc = subprocess.run([sys.executable, "-m", "aiblox.cli.main", "eval", str(path),
                           "--embedder", "hashing", "--mode", "bm25", "--db",
                           str(tmp_path / "s.duckdb")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"error: {path / 'qrels/test.tsv'}:2: field 'score': not a finite number: 'inf'"]
