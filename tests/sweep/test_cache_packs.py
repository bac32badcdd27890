"""Packs (:mod:`aiblox.engine.cache_packs`): a batch's entries written as a few files, read,
checked, repaired, listed and pruned like entries in their own files."""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import pytest

from aiblox.engine import cache as cache_mod
from aiblox.engine import cache_packs
from aiblox.engine.cache import StageCache, StageCacheCorrupt
from aiblox.engine.housekeeping import (
    LEFTOVER_AGE_S,
    cache_entries,
    cache_usage,
    prune_cache,
    verify_cache,
)
from aiblox.engine.task import stage_key


def _store(cache: StageCache, i: int, stage: str = "metrics") -> str:
    return cache.store(stage, 1, {"i": i}, [], {"v": np.arange(i + 1, dtype=np.float64)},
                       codec="arrays").key


def _flip_outputs(root, entries: tuple[int, ...]) -> None:
    """Flip the last byte of the output of the metrics pack's entries at ``entries``, in place
    (the pack's index unchanged)."""
    (pack,) = (root / "metrics" / "packs").iterdir()
    data = pack.read_bytes()
    bad = bytearray(data)
    for i in entries:
        _, meta, out = cache_packs.read_pack(data)[i]
        bad[data.index(meta) + len(meta) + len(out) - 1] ^= 0x01
    pack.write_bytes(bytes(bad))


def _files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_batch_is_read_from_memory_then_from_one_pack_per_stage(tmp_path):
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(5)]
        rec = cache.store("fusion", 1, {"w": 1}, keys[:1], {"a": np.arange(3)}, "arrays",
                          stored=False)
        assert cache.has("metrics", keys[2]) and _files(tmp_path) == []  # nothing written yet
        assert cache.load("metrics", keys[2])["v"].tolist() == [0.0, 1.0, 2.0]
    files = _files(tmp_path)
    assert len(files) == 2 and all(f.endswith(".pack") for f in files)
    assert {f.split("/")[0] for f in files} == {"fusion", "metrics"}
    again = StageCache(tmp_path)  # a new reader: the packs' index
    assert [again.load("metrics", k)["v"].size for k in keys] == [1, 2, 3, 4, 5]
    assert again.stored("fusion", rec.key) is False and again.intact("fusion", rec.key)
    assert again.record("fusion", rec.key) == rec
    assert [(e.stage, e.key) for e in cache_entries(again)] == \
        [("fusion", rec.key), *sorted(("metrics", k) for k in keys)]
    # what the folders hold is what is listed: the entries and each pack's 16 bytes more
    rows = {r.folder: r for r in cache_usage(again)}
    assert rows["metrics"].entries == 5
    assert rows["metrics"].size == sum(p.stat().st_size
                                       for p in (tmp_path / "metrics").rglob("*.pack"))


def test_a_batch_writes_a_pack_every_so_many_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "_FLUSH_ENTRIES", 4)
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(10)]
        assert len(_files(tmp_path)) == 2  # 8 entries packed, 2 in memory
    assert len(_files(tmp_path)) == 3
    assert all(StageCache(tmp_path).has("metrics", k) for k in keys)


def test_another_writer_s_pack_is_found_by_a_cache_that_looked_before(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_packs, "_REFRESH_S", 0.0)
    reader, writer = StageCache(tmp_path), StageCache(tmp_path)
    with writer.batched():
        key = _store(writer, 3)
    assert reader.has("metrics", key)
    with writer.batched():
        later = _store(writer, 4)
    assert reader.load("metrics", later)["v"].size == 5  # published after the reader looked


def test_a_removed_entry_leaves_its_pack_s_others_and_their_age(tmp_path):
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(4)]
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    old = time.time() - 7 * 86400
    os.utime(pack, (old, old))
    cache = StageCache(tmp_path)
    cache.remove("metrics", keys[1])
    (rewritten,) = (tmp_path / "metrics" / "packs").iterdir()
    assert rewritten.name != pack.name and abs(rewritten.stat().st_mtime - old) < 1
    assert not cache.has("metrics", keys[1])
    assert [StageCache(tmp_path).load("metrics", k)["v"].size for k in (0, 2, 3)
            for k in [keys[k]]] == [1, 3, 4]
    prune_cache(cache, everything=True)
    assert not (tmp_path / "metrics" / "packs").exists()  # the last entry took its folder


def test_damage_inside_a_pack_is_found_and_only_that_entry_recomputed(tmp_path):
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(3)]
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    raw = bytearray(pack.read_bytes())
    raw[-3] ^= 0x10  # the last entry's output
    pack.write_bytes(bytes(raw))
    r = verify_cache(StageCache(tmp_path), progress=False)
    assert [k for _, k, _ in r.damaged] == [keys[2]] and r.checked == 3
    cache = StageCache(tmp_path)
    assert [cache.has("metrics", k) for k in keys] == [True, True, False]
    with pytest.raises(StageCacheCorrupt, match="its meta file is missing"):
        cache.load("metrics", keys[2])


def test_a_pack_that_does_not_parse_is_a_leftover(tmp_path):
    cache = StageCache(tmp_path)
    with cache.batched():
        key = _store(cache, 1)
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    pack.write_bytes(b"aiblox-pack/1\n[[not json\n")
    fresh = StageCache(tmp_path)
    assert not fresh.has("metrics", key)  # computed again when needed
    row = next(r for r in cache_usage(fresh) if r.folder == "metrics")
    assert row.entries == 0 and row.leftovers == 1
    old = time.time() - LEFTOVER_AGE_S - 60
    os.utime(pack, (old, old))
    r = prune_cache(fresh, older_than=3600)
    assert [x.file for x in r.leftovers] == [f"packs/{pack.name}"] and not pack.exists()


def test_a_batch_on_an_fsspec_cache():
    cache = StageCache("memory://aiblox-packs-test")
    with cache.batched():
        keys = [_store(cache, i) for i in range(3)]
    again = StageCache("memory://aiblox-packs-test")
    assert [again.load("metrics", k)["v"].size for k in keys] == [1, 2, 3]
    again.remove("metrics", keys[0])
    assert [StageCache("memory://aiblox-packs-test").has("metrics", k) for k in keys] == \
        [False, True, True]


def test_verify_writes_a_pack_again_once_for_all_its_damaged_entries(tmp_path, monkeypatch):
    """Each removal wrote the pack again (a pack of 2,000 damaged entries: 2,000 rewrites of
    tens of megabytes); inside a batch, and so in ``verify``, removals are written out once."""
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(5)]
    _flip_outputs(tmp_path, (0, 3))  # two entries' outputs
    written = []
    add = cache_packs.Packs.add
    monkeypatch.setattr(cache_packs.Packs, "add",
                        lambda self, stage, entries: written.append(len(entries))
                        or add(self, stage, entries))
    r = verify_cache(StageCache(tmp_path), progress=False)
    assert sorted(k for _, k, _ in r.damaged) == sorted([keys[0], keys[3]])
    assert written == [3]  # one pack written again, with the three good entries
    fresh = StageCache(tmp_path)
    assert [fresh.has("metrics", k) for k in keys] == [False, True, True, False, True]


def _pack_sizes(root, stage: str = "metrics") -> int:
    return sum(p.stat().st_size for p in (root / stage / "packs").glob("*.pack"))


def test_an_entry_two_processes_packed_counts_both_copies_and_goes_whole(tmp_path):
    """Two sweeps computing the same points at once pack the same entries twice (QA 22): the
    listing counted one copy, so sizes fell short of the files and ``--max-size`` kept more
    than it said."""
    a, b = StageCache(tmp_path), StageCache(tmp_path)
    with a.batched(), b.batched():
        for i in range(4):
            _store(a, i)
        for i in range(2, 6):  # 2 and 3 in both packs
            _store(b, i)
    cache = StageCache(tmp_path)
    rows = {r.folder: r for r in cache_usage(cache)}
    before = _pack_sizes(tmp_path)
    assert rows["metrics"].entries == 6 and rows["metrics"].size == before
    r = prune_cache(cache, max_size=before // 2)
    assert before - _pack_sizes(tmp_path) == r.freed  # both copies of a removed entry
    assert sum(e.size for e in cache_entries(StageCache(tmp_path))) <= before // 2


def test_a_pack_written_again_keeps_only_whole_entries(tmp_path):
    """Two processes repairing one pack at once each wrote it again without the entries it
    had found damaged, so each copy kept the other's (QA 22): a pack written again now keeps
    only entries whose bytes check."""
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(5)]
    _flip_outputs(tmp_path, (1, 3))
    with pytest.warns(UserWarning, match="1 damaged metrics entry"):
        StageCache(tmp_path).remove("metrics", keys[1])  # found damaged by one process
    fresh = StageCache(tmp_path)
    assert [fresh.has("metrics", k) for k in keys] == [True, False, True, False, True]
    assert verify_cache(fresh, progress=False).damaged == []


def test_a_pack_another_process_wrote_again_is_found_again(tmp_path):
    """A cache that had indexed a pack read an entry of it after another process had written
    it again (a repair, a prune): the old file was gone, and the intact entry was reported
    damaged and computed again (QA 22)."""
    writer = StageCache(tmp_path)
    with writer.batched():
        keys = [_store(writer, i) for i in range(4)]
    reader = StageCache(tmp_path)
    assert reader.load("metrics", keys[0])["v"].size == 1  # the pack indexed
    StageCache(tmp_path).remove("metrics", keys[1])  # another process writes it again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reader.load("metrics", keys[2])["v"].size == 3
        assert reader.run("metrics", 1, {"i": 3}, [], lambda: 1 / 0, codec="arrays"
                          )[1]["v"].size == 4
    assert reader.repaired == {} and not reader.has("metrics", keys[1])


def test_a_pack_cut_short_lists_its_every_entry_by_the_bytes_left(tmp_path):
    """A pack cut short listed only its whole entries: the cut ones vanished from the listing
    and from ``verify`` ("none damaged"), and a sweep computed them again as new (QA 27)."""
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(4)]
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    pack.write_bytes(pack.read_bytes()[:-5])  # the last entry's output cut
    fresh = StageCache(tmp_path)
    rows = {r.folder: r for r in cache_usage(fresh)}
    assert rows["metrics"].entries == 4 and rows["metrics"].size == _pack_sizes(tmp_path)
    assert fresh.has("metrics", keys[3])  # found damaged when read, not hidden
    with pytest.raises(StageCacheCorrupt, match=r"is cut short: its output ends at byte \d+, "
                                                r"past the pack's end"):
        fresh.load("metrics", keys[3])
    assert [StageCache(tmp_path).has("metrics", k) for k in keys] == [True] * 3 + [False]


def test_verify_reports_and_removes_a_pack_s_cut_entries(tmp_path):
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(4)]
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    data = pack.read_bytes()
    _, meta, _ = cache_packs.read_pack(data)[2]
    pack.write_bytes(data[:data.index(meta) + 10])  # entry 2's meta cut, entry 3 beyond the end
    r = verify_cache(StageCache(tmp_path), progress=False)
    assert r.checked == 4 and [k for _, k, _ in r.damaged] == keys[2:]
    assert all("cut short" in why for _, _, why in r.damaged)
    fresh = StageCache(tmp_path)
    assert [fresh.has("metrics", k) for k in keys] == [True, True, False, False]
    assert verify_cache(fresh, progress=False).damaged == []  # written again whole
    assert fresh.pack_overhead("metrics") == 16


def test_an_entry_held_whole_by_another_pack_is_read_from_it(tmp_path):
    """Two processes packed one entry at once, and one of the two packs was cut short: the
    whole copy is read, whichever pack sorts last (the cut one made a sweep recompute it)."""
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(2)]
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    data = pack.read_bytes()
    for name in ("00" + pack.name[2:], "ff" + pack.name[2:]):  # sorting first and last
        for other in (tmp_path / "metrics" / "packs").iterdir():
            other.unlink()
        (tmp_path / "metrics" / "packs" / name).write_bytes(data[:-3])  # entry 1 cut
        (tmp_path / "metrics" / "packs" / ("77" + pack.name[2:])).write_bytes(data)
        again = StageCache(tmp_path)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert again.load("metrics", keys[1])["v"].size == 2
        assert again.repaired == {}


def test_a_sweep_counts_a_cut_entry_as_repaired(tmp_path):
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(3)]
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    pack.write_bytes(pack.read_bytes()[:-1])
    again = StageCache(tmp_path)
    with pytest.warns(UserWarning, match="was damaged .*cut short"):
        rec, out = again.run("metrics", 1, {"i": 2}, [],
                             lambda: {"v": np.arange(3, dtype=np.float64)}, codec="arrays")
    assert rec.key == keys[2] and out["v"].size == 3
    assert again.repaired == {"metrics": 1} and again.computed == {"metrics": 1}


def test_a_pack_that_does_not_parse_is_reported_by_verify_and_warned_of_once(tmp_path):
    """A damaged pack header: ``verify`` said "none damaged" and left it as a leftover, and a
    sweep computed its entries again without a word (QA 27)."""
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(2)]
        _store(cache, 0, stage="chunks")
    (pack,) = (tmp_path / "metrics" / "packs").iterdir()
    data = pack.read_bytes()
    pack.write_bytes(data[:20] + b"\x00" + data[21:])  # the index line no longer parses
    fresh = StageCache(tmp_path)
    with pytest.warns(UserWarning, match=rf"pack .*{pack.name} is damaged .*computed again"):
        assert not fresh.has("metrics", keys[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once
        assert not fresh.has("metrics", keys[1])
    r = verify_cache(StageCache(tmp_path), progress=False)
    assert [(s, k) for s, k, _ in r.damaged] == [("metrics", f"packs/{pack.name}")]
    assert "entries it held are lost" in r.damaged[0][2] and not pack.exists()
    assert r.checked == 1  # the chunks entry
    assert verify_cache(StageCache(tmp_path), progress=False).damaged == []


def test_entries_a_ctrl_c_stopped_packing_are_packed_when_the_batch_ends(tmp_path, monkeypatch):
    """Ctrl-C while a full batch is being packed (after one stage's pack, before the next's)
    lost the second stage's entries: the sweep's Ctrl-C test saw 0 of 2,048 points kept (CI)."""
    monkeypatch.setattr(cache_mod, "_FLUSH_ENTRIES", 4)
    cache = StageCache(tmp_path)
    add, calls = cache._packs.add, []

    def interrupted(stage, entries):
        calls.append(stage)
        if len(calls) == 2:  # the metrics pack of the first flush, after the fusion pack's
            raise KeyboardInterrupt
        return add(stage, entries)

    monkeypatch.setattr(cache._packs, "add", interrupted)
    keys = []
    with pytest.raises(KeyboardInterrupt), cache.batched():
        fused = cache.store("fusion", 1, {"w": 0}, [], {"a": np.arange(2)}, "arrays").key
        for i in range(3):  # the fourth entry makes a full batch: held, then packing starts
            keys.append(stage_key("metrics", 1, {"i": i}, []))
            _store(cache, i)
    assert calls == ["fusion", "metrics", "metrics"]  # the batch's end wrote them
    again = StageCache(tmp_path)
    assert again.has("fusion", fused) and all(again.has("metrics", k) for k in keys)
    assert [again.load("metrics", k)["v"].size for k in keys] == [1, 2, 3]


def test_damaged_entries_a_pack_written_again_leaves_out_are_counted_as_repaired(tmp_path):
    """A batch's pack written again (a task repairing one entry) keeps only whole entries: the
    other damaged ones vanished uncounted, so a Ray sweep, each task writing its packs again,
    reported fewer repairs and warnings than a local one (QA s7)."""
    from aiblox.sweep.distributed import RecordingCache, merge_counts

    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(5)]
    _flip_outputs(tmp_path, (1, 3))
    task = RecordingCache(tmp_path)
    with pytest.warns(UserWarning) as caught, task.batched():
        task.run("metrics", 1, {"i": 1}, [], lambda: {"v": np.arange(2, dtype=np.float64)},
                 codec="arrays")
    assert task.repaired == {"metrics": 2}  # the entry read, and the one its pack left out
    events = task.take_events()
    assert sorted(k for _, k, kind in events if kind == "repaired") == sorted([keys[1], keys[3]])
    assert merge_counts(events)[2] == {"metrics": 2}
    assert any(f"1 damaged metrics entry under {tmp_path} ({keys[3][:16]}) left out when "
               f"their pack was written again" in str(w.message) for w in caught)
    fresh = StageCache(tmp_path)
    assert [fresh.has("metrics", k) for k in keys] == [True, True, True, False, True]


def test_a_removal_outside_a_batch_returns_the_damaged_entries_it_left_out(tmp_path):
    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(4)]
    _flip_outputs(tmp_path, (2,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # report=False: the caller says so (cache prune)
        assert cache.remove_many("metrics", [keys[0]], report=False) == {keys[2]}
    assert cache.repaired == {}
    assert [StageCache(tmp_path).has("metrics", k) for k in keys] == [False, True, False, True]


def test_a_file_gone_between_a_folder_s_read_and_its_stat_is_left_out(tmp_path):
    """A pack renamed into place by another process between the folder's read and the stat of
    its temporary file made the whole listing empty: a cache forgot every pack of the stage and
    said a packed entry was absent (QA s7: 4 of 140,778 listings). A dangling link is such a
    name: listed by the folder, gone when stat'd."""
    from aiblox.engine.cache_files import LocalFiles

    cache = StageCache(tmp_path)
    with cache.batched():
        keys = [_store(cache, i) for i in range(3)]
    packs = tmp_path / "metrics" / "packs"
    (packs / ".other.pack.1-2-3.tmp").symlink_to(tmp_path / "gone")
    listed = {n for n, _, _ in LocalFiles(tmp_path).listing("metrics/packs")}
    assert listed == {p.name for p in packs.iterdir() if p.exists()} and len(listed) == 1
    fresh = StageCache(tmp_path)
    assert all(fresh.has("metrics", k) for k in keys)
