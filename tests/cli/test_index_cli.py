"""``aiblox index``: build, list (size, settings, current or stale) and drop."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from aiblox.cli.main import app

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(args), env={"AIBLOX_NO_PROGRESS": "1"})


def test_build_list_drop(tmp_path):
    from aiblox.indexes import forget_loaded

    db = str(tmp_path / "s.duckdb")
    assert _run("ingest", "sample", "--db", db, "--embedder", "hashing").exit_code == 0
    r = _run("index", "build", "--db", db, "--embedder", "hashing", "--k1", "0.9")
    assert r.exit_code == 0, r.output
    assert "bm25: 40 documents" in r.output and "vectors (hashing" in r.output
    listed = json.loads(_run("index", "list", "--db", db, "--json").stdout)
    kinds = {i["kind"]: i for i in listed["indexes"]}
    assert set(kinds) == {"bm25", "knn"} and all(i["current"] for i in kinds.values())
    assert kinds["bm25"]["config"]["scoring"]["k1"] == 0.9 and kinds["bm25"]["n"] == 40
    r = _run("index", "build", "--db", db, "--embedder", "hashing", "--k1", "0.9")
    assert "none (all were current)" in r.output
    name = kinds["bm25"]["name"]
    assert _run("index", "drop", name, "--db", db).exit_code == 0
    forget_loaded()
    left = json.loads(_run("index", "list", "--db", db, "--json").stdout)["indexes"]
    assert [i["kind"] for i in left] == ["knn"]
    r = _run("index", "drop", "bm25-nope", "--db", db)
    assert r.exit_code == 2 and "no index" in r.output
    r = _run("index", "build", "--db", db, "--k1", "-1")
    assert r.exit_code == 2 and "k1" in r.output


def test_bad_bm25_options_name_the_option_as_typed(tmp_path):
    """``--k1 -1`` once printed ``invalid FtsConfig: k1: ...`` (a field the user never typed);
    now the option, its value and the valid values, as every command's options, before the
    store is opened."""
    db = str(tmp_path / "never.duckdb")
    for args, said in ((["--k1", "-1"], "--k1 -1.0: out of range; valid: a finite number from 0 "
                                        "to 1e+09"),
                       (["--b", "1.5"], "--b 1.5: out of range; valid: a finite number from 0 "
                                        "to 1"),
                       (["--k1", "nan"], "--k1 nan: not a finite number"),
                       (["--k1", "0", "--method", "bm25+"], "--k1 0 under --method 'bm25+': "
                                                            "its term-frequency part is 0/0"),
                       (["--k1", "0", "--method", "bm25l"], "--k1 0 under --method 'bm25l': "
                                                            "its term-frequency part is 1")):
        r = _run("index", "build", "--db", db, "--no-vectors", *args)
        assert r.exit_code == 2, r.output
        assert " ".join(r.output.split()) == f"error: {said}" or said in r.output, r.output
        assert "FtsConfig" not in r.output
    assert not (tmp_path / "never.duckdb").exists()


def test_a_damaged_index_is_listed_as_damaged_and_rebuilt_with_its_reason(tmp_path):
    """QA: a manifest ``[]`` crashed ``index list`` and ``index build`` (internal errors until
    the index was dropped); a folder without a manifest was listed ``stale`` like an outdated
    index; ``rebuilt damaged: NAME`` threw the reason away."""
    from aiblox.indexes import forget_loaded

    db = str(tmp_path / "s.duckdb")
    assert _run("ingest", "sample", "--db", db, "--embedder", "hashing").exit_code == 0
    assert _run("index", "build", "--db", db, "--no-vectors").exit_code == 0
    (folder,) = (tmp_path / "s.duckdb.indexes").iterdir()
    (folder / "manifest.json").write_text("[]")
    forget_loaded()
    r = _run("index", "list", "--db", db)
    assert r.exit_code == 0 and "damaged" in r.output and "stale" not in r.output, r.output
    (listed,) = json.loads(_run("index", "list", "--db", db, "--json").stdout)["indexes"]
    assert (listed["kind"], listed["damaged"], listed["current"]) == ("bm25", True, False)
    r = _run("index", "build", "--db", db, "--no-vectors")
    assert r.exit_code == 0, r.output
    assert f"rebuilt damaged: {folder.name} (no readable manifest)" in r.output
    forget_loaded()
    target = folder / "data.npy"
    target.write_bytes(target.read_bytes()[:-8])
    # listed as damaged with why before anything reads it (QA: listed current, not damaged)
    r = _run("index", "list", "--db", db)
    assert "damaged (data.npy has the wrong size)" in " ".join(r.output.split()), r.output
    (listed,) = json.loads(_run("index", "list", "--db", db, "--json").stdout)["indexes"]
    assert (listed["damaged"], listed["current"], listed["problem"]) == (
        True, False, "data.npy has the wrong size")
    r = _run("index", "build", "--db", db, "--no-vectors")
    assert f"rebuilt damaged: {folder.name} (data.npy has the wrong size)" in r.output
    (listed,) = json.loads(_run("index", "list", "--db", db, "--json").stdout)["indexes"]
    assert (listed["damaged"], listed["current"], listed["problem"]) == (False, True, None)
