"""``aiblox cache list|prune|verify`` over a real sweep's stage cache: what is listed is what
is on disk, pruning never keeps an entry whose inputs went, and a pruned cache re-runs to the
same bytes computing exactly what was removed."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from aiblox.engine.cache import StageCache
from aiblox.engine.housekeeping import (
    LEFTOVER_AGE_S,
    cache_entries,
    cache_usage,
    parse_age,
    parse_size,
    prune_cache,
    verify_cache,
)
from tests.sweep import entries

ENV = {"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "200"}


@pytest.fixture(scope="module")
def swept(tmp_path_factory, sample_spec, small_spec, sweep_db):
    """A small fusion sweep (two depths: two signals entries per split) run once."""
    from aiblox.sweep import run_sweep

    spec = small_spec(sample_spec, blend=["linear", "rrf"], w_text=[0.25, 0.75],
                      normalize=["minmax"], rrf_k=[60], depth=[10, 20])
    root = tmp_path_factory.mktemp("swept") / "stages"
    result = run_sweep(spec, cache_dir=root, db=sweep_db, progress=False)
    from aiblox.engine.outputs import StageReader

    reader = StageReader(StageCache(root))  # the document tables TREC run files are made from
    for e in cache_entries(StageCache(root), ["signals"]):
        reader.doc_table(e.key)
    return spec, root, result


@pytest.fixture
def copy(tmp_path, swept):
    dst = tmp_path / "stages"
    shutil.copytree(swept[1], dst)
    return dst


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _age(root: Path, stage: str, seconds_ago: float, now: float) -> None:
    for p in (root / stage).rglob("*"):  # its entries' files, and its packs
        os.utime(p, (now - seconds_ago, now - seconds_ago))


def _inputs(cache: StageCache) -> dict[str, list[str]]:
    return {e.key: cache.meta(e.stage, e.key)["inputs"] for e in cache_entries(cache)}


def test_usage_counts_what_is_on_disk(swept):
    _, root, result = swept
    rows = {r.folder: r for r in cache_usage(StageCache(root))}
    for stage, n in result.computed.items():
        assert rows[stage].kind == "stage" and rows[stage].entries == n
        assert rows[stage].size == sum(_files(root / stage).values())
    # per signals entry (two depths, two splits): its document table and its fusion index
    assert rows["doc_tables"].kind == "derived" and rows["doc_tables"].entries == 8
    assert sorted({p.suffix for p in (root / "doc_tables").iterdir()}) == [".index", ".txt"]
    assert list(rows)[:3] == sorted(result.computed)  # stage folders first, by name


def test_a_trained_model_is_one_entry_of_models(tmp_path):
    """``models`` holds one folder of files per trained model: listed as one entry each (not
    one per file), its size every file's bytes."""
    cache = StageCache(tmp_path / "stages")
    cache.store("signals", 1, {"i": 0}, [], {"run": 0})
    sizes = 0
    for name, n in (("ce-0123456789abcdef", 9), ("ft-fedcba9876543210", 4)):
        folder = tmp_path / "stages" / "models" / name / "sub"
        folder.mkdir(parents=True)
        for i in range(n):
            (folder.parent if i % 2 else folder).joinpath(f"f{i}").write_bytes(b"x" * (i + 1))
            sizes += i + 1
    rows = {r.folder: r for r in cache_usage(cache)}
    assert rows["models"].kind == "kept" and rows["models"].entries == 2
    assert rows["models"].size == sizes and rows["models"].newest is not None
    assert rows["signals"].entries == 1
    shown = CliRunner().invoke(app, ["cache", "list", "--cache-dir", str(tmp_path / "stages"),
                                     "--json"], env=ENV)
    folders = {f["folder"]: f for f in json.loads(shown.stdout)["folders"]}
    assert folders["models"]["entries"] == 2 and folders["models"]["size"] == sizes


def test_cache_list_escapes_a_folder_name_with_control_characters(tmp_path):
    """A folder's name is shown as the disk has it, but an escape sequence or a bidi override
    in it is written as an escape (it reached the terminal raw), and never read as markup."""
    cache = StageCache(tmp_path / "stages")
    cache.store("signals", 1, {"i": 0}, [], {"run": 0})
    shutil.copytree(tmp_path / "stages" / "signals",
                    tmp_path / "stages" / "sig\x1b[2J\u202e[b]nals")
    r = CliRunner().invoke(app, ["cache", "list", "--cache-dir", str(tmp_path / "stages")],
                           env={**ENV, "COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout
    assert "sig\\x1b[2J\\u202e[b]nals" in r.stdout


def test_prune_by_size_keeps_inputs_and_reruns_to_the_same_bytes(copy, swept, sweep_db):
    from aiblox.sweep import run_sweep

    spec, _, first = swept
    cache = StageCache(copy)
    total = sum(e.size for e in cache_entries(cache))
    signals = sum(e.size for e in cache_entries(cache, ["signals"]))
    limit = signals + (total - signals) // 3
    r = prune_cache(cache, max_size=limit)
    kept = cache_entries(cache)
    assert sum(e.size for e in kept) <= limit < total
    assert {e.stage for e in r.removed} == {"fusion", "metrics"}  # retrieval goes last
    inputs, have = _inputs(cache), {e.key for e in kept}
    gone = {e.key for e in r.removed}
    assert not any(k in gone for e in kept for k in inputs[e.key])  # no orphaned output
    assert gone.isdisjoint(have)
    again = run_sweep(spec, cache_dir=copy, db=sweep_db, progress=False)
    removed = {s: sum(e.stage == s for e in r.removed) for s in ("fusion", "metrics")}
    assert again.computed == removed
    assert [p.metrics for p in again.points] == [p.metrics for p in first.points]
    assert [p.manifest.manifest_hash for p in again.points] == \
        [p.manifest.manifest_hash for p in first.points]


def test_prune_by_age_spares_old_inputs_of_new_entries(copy):
    cache, now = StageCache(copy), time.time()
    _age(copy, "signals", 40 * 86400, now)
    for stage in ("fusion", "metrics"):
        _age(copy, stage, 3600, now)
    before = _files(copy)
    r = prune_cache(cache, older_than=parse_age("30d"), now=now)
    assert r.removed == [] and _files(copy) == before  # the old signals feed kept entries
    for stage in ("fusion", "metrics"):
        _age(copy, stage, 31 * 86400, now)
    r = prune_cache(cache, older_than=parse_age("30d"), now=now)
    assert cache_entries(cache) == [] and r.kept == []
    assert not (copy / "doc_tables").exists() or not any((copy / "doc_tables").iterdir())


def test_dry_run_removes_nothing_and_all_of_one_stage(copy):
    cache, before = StageCache(copy), _files(copy)
    r = prune_cache(cache, everything=True, dry_run=True)
    assert _files(copy) == before and len(r.removed) == len(cache_entries(cache))
    r = prune_cache(cache, stages=["fusion"], everything=True)
    assert {e.stage for e in cache_entries(cache)} == {"metrics", "signals"}
    assert r.freed == sum(before.values()) - sum(_files(copy).values())


def test_leftovers_of_interrupted_writes_go_once_an_hour_old(copy):
    cache, now = StageCache(copy), time.time()
    old_tmp = copy / "fusion" / f".{'a' * 64}.bin.123-456-7.tmp"
    orphan = copy / "fusion" / f"{'b' * 64}.bin"  # an output whose meta was never written
    fresh = copy / "fusion" / f".{'c' * 64}.bin.123-456-8.tmp"
    for p in (old_tmp, orphan, fresh):
        p.write_bytes(b"x" * 10)
    for p in (old_tmp, orphan):
        os.utime(p, (now - LEFTOVER_AGE_S - 60, now - LEFTOVER_AGE_S - 60))
    row = next(r for r in cache_usage(cache) if r.folder == "fusion")
    assert row.leftovers == 3 and row.leftover_size == 30
    r = prune_cache(cache, older_than=parse_age("365d"), now=now)
    assert r.removed == [] and {x.file for x in r.leftovers} == {old_tmp.name, orphan.name}
    assert fresh.exists() and not old_tmp.exists() and not orphan.exists()


def test_a_stray_file_is_neither_an_entry_nor_removed(copy):
    stray = copy / "fusion" / "notes.txt"
    stray.write_text("mine")
    cache = StageCache(copy)
    assert next(r for r in cache_usage(cache) if r.folder == "fusion").kind == "stage"
    prune_cache(cache, stages=["fusion"], everything=True)
    assert [p.name for p in (copy / "fusion").iterdir()] == ["notes.txt"]  # packs gone too


def test_verify_finds_and_removes_a_damaged_entry(copy):
    cache = StageCache(copy)
    assert verify_cache(cache, progress=False).damaged == []
    key = entries.keys(copy, "metrics")[0]  # in a pack
    entries.change(copy, "metrics", key, "out", lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]))
    r = verify_cache(cache, ["metrics"], progress=False)
    assert [(s, k) for s, k, _ in r.damaged] == [("metrics", key)]
    assert "sha256" in r.damaged[0][2] and key not in entries.keys(copy, "metrics")
    assert r.checked == len(cache_entries(cache, ["metrics"])) + 1
    # a hybrid point's fusion is recorded (meta only, no output): nothing stored to damage
    assert all(entries.read(copy, "fusion", k)[1] == b"" for k in entries.keys(copy, "fusion"))
    assert verify_cache(cache, ["fusion"], progress=False).damaged == []


def test_verify_goes_on_past_a_meta_that_does_not_parse(copy):
    """It stopped at the first unreadable meta with an error, the rest unchecked (QA 20)."""
    cache = StageCache(copy)
    keys = entries.keys(copy, "metrics")
    entries.change(copy, "metrics", keys[0], "meta", lambda raw: raw[:20])
    entries.change(copy, "metrics", keys[1], "out", lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]))
    r = verify_cache(cache, ["metrics"], progress=False)
    assert sorted(k for _, k, _ in r.damaged) == keys[:2]
    assert verify_cache(cache, ["metrics"], progress=False).damaged == []


def test_a_memory_uri_cache_is_listed_and_pruned():
    cache = StageCache("memory://aiblox-housekeeping-test")
    for i in range(3):
        cache.store("signals", 1, {"i": i}, [], {"run": i})
    cache.store("fusion", 1, {"w": 1}, [cache_entries(cache, ["signals"])[0].key],
                {"fused": 1})
    rows = {r.folder: r for r in cache_usage(cache)}
    assert rows["signals"].entries == 3 and rows["fusion"].entries == 1
    assert rows["signals"].newest is not None  # the memory filesystem's created time
    r = prune_cache(cache, max_size=0)
    assert len(r.removed) == 4 and cache_entries(cache) == []


def test_sizes_and_ages_parse_and_refuse_clearly():
    assert parse_size("2GiB") == 2 * 2**30 and parse_size("500MB") == 500 * 10**6
    assert parse_size("1000") == 1000 and parse_age("2w") == 14 * 86400
    with pytest.raises(ValueError, match="not a size: '2 GB!'"):
        parse_size("2 GB!")
    with pytest.raises(ValueError, match="not an age: '3x'"):
        parse_age("3x")


def test_the_cli_lists_prunes_and_verifies(copy):
    def cli(*args):
        return CliRunner().invoke(app, ["cache", *args, "--cache-dir", str(copy)], env=ENV)

    listed = cli("list", "--json")
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.stdout)
    assert data["size"] == sum(_files(copy).values())
    assert [f["folder"] for f in data["folders"]][:3] == ["fusion", "metrics", "signals"]
    table = cli("list")
    assert table.exit_code == 0 and "fusion" in table.stdout and "derived" in table.stdout
    # its headline gives the stage entries as `cache verify` counts them (QA 27: 2.3 MiB in
    # the list beside 2.2 MiB checked, unexplained), then the derived files
    checked = re.search(r"checked (\d+ entries \([^)]*\))", cli("verify").stdout).group(1)
    n, size = re.match(r"(\d+) entries \((.*)\)", checked).groups()
    assert f"({n} stage entries in {size}, other files " in " ".join(table.stdout.split())
    before = _files(copy)
    dry = cli("prune", "--all", "--stage", "metrics", "--dry-run")
    assert dry.exit_code == 0 and dry.stdout.startswith("would remove ")
    assert _files(copy) == before
    # what stays is counted across the cache: the other stages' entries too
    counts = {f["folder"]: f["entries"] for f in data["folders"] if f["kind"] == "stage"}
    others = counts["fusion"] + counts["signals"]
    assert others > 0 and (f"would keep {others} entries" in " ".join(dry.stderr.split()))
    assert f"0 of metrics (0 B), {others} of the other stages" in " ".join(dry.stderr.split())
    done = cli("prune", "--all", "--stage", "metrics", "--json")
    assert done.exit_code == 0, done.output
    n = json.loads(done.stdout)["removed"]["metrics"]["entries"]
    assert json.loads(done.stdout)["kept"]["entries"] == others
    assert n == data["folders"][1]["entries"] and not list((copy / "metrics").iterdir())
    above = cli("prune", "--stage", "signals", "--max-size", "0")  # fusion entries use them
    assert above.exit_code == 0 and above.stdout.startswith("removed 0 entries")
    assert "still above --max-size 0" in " ".join(above.stderr.split())
    ok = cli("verify")
    assert ok.exit_code == 0 and "none damaged" in ok.stdout
    victim = next(p for p in sorted((copy / "signals").iterdir()) if p.name.endswith(".gz"))
    victim.write_bytes(victim.read_bytes()[:-1])
    bad = cli("verify")
    assert bad.exit_code == 1 and f"signals/{victim.name[:16]}" in bad.stdout
    pack = sorted((copy / "fusion" / "packs").iterdir())[0]  # its index line damaged
    pack.write_bytes(pack.read_bytes().replace(b"[[", b"[{", 1))
    bad = cli("verify")
    assert bad.exit_code == 1 and not pack.exists()
    assert (f"damaged, removed: fusion/packs/{pack.name}: the pack does not parse (its index "
            f"line is not JSON); the entries it held are lost"
            in " ".join(bad.stdout.split())), bad.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["prune"], "say what to remove: --older-than AGE, --max-size SIZE or --all"),
    (["prune", "--older-than", "3x"], "--older-than: not an age: '3x'"),
    (["prune", "--max-size", "lots"], "--max-size: not a size: 'lots'"),
    (["prune", "--all", "--stage", "fusoin"], "stage 'fusoin' of the cache"),
    (["prune", "--all", "--stage", "doc_tables"], "holds no stage entries"),
    (["verify", "--stage", "nope"], "its stages: fusion, metrics, signals"),
    # the name a sweep's counts give a single list cut to top_k_items (QA 27)
    (["prune", "--all", "--stage", "cut"], "as 'cut': its entries are in fusion)"),
])
def test_bad_input_is_one_error_line_and_removes_nothing(copy, args, message):
    before = _files(copy)
    r = CliRunner().invoke(app, ["cache", *args, "--cache-dir", str(copy)], env=ENV)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert _files(copy) == before


def test_a_file_is_not_a_cache(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    r = CliRunner().invoke(app, ["cache", "list", "--cache-dir", str(f)], env=ENV)
    assert r.exit_code == 2 and "is a file, not a stage cache folder" in r.output




def _cut_metrics_pack(root: Path) -> list[str]:
    """Cut a metrics pack inside its second to last entry's output (the last entry's meta
    past the end): the keys of those two, in pack order."""
    from aiblox.engine.cache_packs import read_pack

    pack = sorted((root / "metrics" / "packs").iterdir())[0]
    data = pack.read_bytes()
    rows = read_pack(data)
    (key, meta, out), (last, _, _) = rows[-2], rows[-1]
    pack.write_bytes(data[:data.index(meta) + len(meta) + len(out) // 2])
    return [key, last]


def test_a_dry_run_by_age_touches_no_damaged_entry_and_counts_them(copy):
    """A dry run by age or size read every meta through the repairing path: a damaged entry
    was removed and packs were written again, though it said "would remove 0 entries", and a
    real prune removed them without counting them (QA s7)."""
    broken = sorted((copy / "signals").glob("*.meta.json"))[0]
    broken.write_text('{"broken')
    cut, last = _cut_metrics_pack(copy)
    before = _files(copy)
    dry = prune_cache(StageCache(copy), older_than=parse_age("30d"), dry_run=True)
    assert _files(copy) == before
    signals_key = broken.name.removesuffix(".meta.json")
    assert dry.removed == [] and {e.key for e in dry.damaged} == {signals_key, last}
    assert not {e.key for e in dry.damaged} & {e.key for e in dry.kept}
    assert sorted(dry.doc_tables) == [f"{signals_key}.index", f"{signals_key}.txt"]
    shown = CliRunner().invoke(app, ["cache", "prune", "--cache-dir", str(copy),
                                     "--older-than", "30d", "--dry-run"], env=ENV)
    assert shown.exit_code == 0 and _files(copy) == before
    assert "would remove 0 entries: none; and 2 damaged entries" in shown.stdout
    assert "aiblox cache verify" in " ".join(shown.stderr.split())
    # a real prune removes them, and the pack's other damaged entry it leaves out, and says so
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        done = prune_cache(StageCache(copy), older_than=parse_age("30d"))
    assert done.removed == [] and {e.key for e in done.damaged} == {signals_key, cut, last}
    assert done.freed == sum(before.values()) - sum(_files(copy).values()) > 0
    assert verify_cache(StageCache(copy), progress=False).damaged == []


def test_the_cli_reports_the_damaged_entries_a_prune_removed(copy):
    cut, last = _cut_metrics_pack(copy)
    before = sum(_files(copy).values())
    r = CliRunner().invoke(app, ["cache", "prune", "--cache-dir", str(copy), "--max-size",
                                 "1TB", "--json"], env=ENV)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["removed"] == {} and data["damaged"]["entries"] == 2
    assert data["freed"] == before - sum(_files(copy).values()) >= data["damaged"]["size"] > 0


def test_an_entry_held_loose_and_packed_counts_both_copies(copy):
    """An entry a non-batched writer stored again after a sweep had packed it: `cache list`
    counted the loose copy only (QA s7: 135,208 bytes listed, 138,489 on disk)."""
    cache = StageCache(copy)
    for e in cache_entries(cache, ["metrics"])[:3]:
        m = cache.meta(e.stage, e.key)
        cache.store(m["name"], m["version"], m["config"], m["inputs"], cache.load(e.stage, e.key),
                    m.get("codec", "json"))
    rows = cache_usage(StageCache(copy))
    assert sum(r.size + r.leftover_size for r in rows) == sum(_files(copy).values())
    before = sum(_files(copy / "metrics").values())
    r = prune_cache(StageCache(copy), stages=["metrics"], max_size=0)
    assert r.freed == before and not _files(copy / "metrics")


@pytest.mark.parametrize("form", ["{}", "file://{}", "local://{}"])
def test_a_missing_cache_folder_is_one_error_line_for_every_command(tmp_path, form):
    """A mistyped --cache-dir: `list` said "empty (nothing cached yet)", and as local://
    `prune` and `verify` said "removed 0" / "checked 0" (QA s7)."""
    gone = form.format(tmp_path / "stagse")
    for args in (["list"], ["verify"], ["prune", "--all"], ["prune", "--older-than", "1d"]):
        r = CliRunner().invoke(app, ["cache", *args, "--cache-dir", gone], env=ENV)
        assert r.exit_code == 2 and f"--cache-dir {gone}: no such folder" in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "stagse").exists()


def test_a_folder_that_is_not_a_stage_cache_is_refused_and_left_alone(tmp_path):
    """A source folder was listed as a cache of kept folders, and pruning a folder holding
    doc_tables/notes.txt removed the file as a document table (QA s7)."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1")
    (src / "README.md").write_text("hi")
    before = _files(src)
    for args in (["list"], ["verify"], ["prune", "--all"], ["prune", "--older-than", "1d"]):
        for root in (str(src), f"local://{src}"):
            r = CliRunner().invoke(app, ["cache", *args, "--cache-dir", root], env=ENV)
            assert r.exit_code == 2 and "is not a stage cache: it holds README.md, pkg" \
                in " ".join(r.output.split()), r.output
    with pytest.raises(ValueError, match="is not a stage cache"):
        prune_cache(StageCache(src), everything=True)
    assert _files(src) == before
    mine = tmp_path / "notcache" / "doc_tables" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("hi")
    r = CliRunner().invoke(app, ["cache", "prune", "--cache-dir", str(tmp_path / "notcache"),
                                 "--older-than", "30d"], env=ENV)
    assert r.exit_code == 0 and "document tables" not in r.stdout and mine.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = CliRunner().invoke(app, ["cache", "list", "--cache-dir", str(empty)], env=ENV)
    assert r.exit_code == 0 and "empty (nothing cached yet)" in r.output


def test_prune_removes_only_the_document_tables_the_cache_names(copy):
    tables = copy / "doc_tables"
    mine = [tables / "notes.txt", tables / f"{'a' * 64}.txt.bak", tables / ".hidden.tmp"]
    old_tmp = tables / f".{'b' * 64}.index.123-456-7.tmp"
    fresh_tmp = tables / f".{'c' * 64}.txt.123-456-8.tmp"
    for p in (*mine, old_tmp, fresh_tmp):
        p.write_text("x")
    past = time.time() - LEFTOVER_AGE_S - 60
    for p in (*mine, old_tmp):
        os.utime(p, (past, past))
    r = prune_cache(StageCache(copy), stages=["signals", "fusion", "metrics"], everything=True)
    assert old_tmp.name in r.doc_tables and not old_tmp.exists()
    assert sorted(p.name for p in tables.iterdir()) == sorted(p.name for p in
                                                              (*mine, fresh_tmp))
