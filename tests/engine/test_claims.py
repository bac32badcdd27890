"""Claims (:mod:`aiblox.engine.claims`): of two processes asking for one long piece of work at
once (two sweeps training the same model), one does it and the other waits for it; a claim
whose maker is gone is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aiblox.engine import claims
from aiblox.engine.claims import claimed, holder

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from aiblox.engine.claims import claimed
    claim, result = Path(sys.argv[1]), Path(sys.argv[2])
    with claimed(claim, done=result.exists, poll_s=0.05) as mine:
        assert mine
        Path(sys.argv[3]).write_text("held")  # the parent may ask now
        time.sleep(1.5)
        result.write_text("done")
""")


def _other_process_holds(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    claim, result, started = tmp_path / "m.claim", tmp_path / "m.done", tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(claim), str(result), str(started)])
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    return proc, claim, result


def test_a_second_process_waits_for_the_first_instead_of_doing_the_work(tmp_path):
    proc, claim, result = _other_process_holds(tmp_path)
    told = []
    t0 = time.monotonic()
    with claimed(claim, done=result.exists, poll_s=0.05, waiting=told.append) as mine:
        assert not mine  # the other process did it
        assert result.read_text() == "done"
    assert proc.wait(30) == 0 and time.monotonic() - t0 > 0.5
    assert [w["pid"] for w in told] == [proc.pid]  # said once, naming who
    assert not claim.exists()  # its maker removed it


def test_done_work_is_not_claimed(tmp_path):
    (tmp_path / "m.done").write_text("done")
    with claimed(tmp_path / "m.claim", done=(tmp_path / "m.done").exists) as mine:
        assert not mine and not (tmp_path / "m.claim").exists()


def test_the_claim_is_removed_when_the_work_fails(tmp_path):
    claim = tmp_path / "m.claim"
    with pytest.raises(RuntimeError), claimed(claim, done=lambda: False) as mine:
        assert mine and holder(claim)["pid"] == os.getpid()
        raise RuntimeError("the work failed")
    assert not claim.exists()  # a waiter takes it and tries


def test_a_claim_whose_maker_is_gone_is_taken_over(tmp_path, monkeypatch):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    claim = tmp_path / "m.claim"
    claim.write_text(json.dumps({"host": socket.gethostname(), "pid": int(dead.stdout),
                                 "since": time.time()}))
    with claimed(claim, done=lambda: False, poll_s=0.05) as mine:
        assert mine and holder(claim)["pid"] == os.getpid()
    # another host's claim is trusted until it is stale_s old; one that does not parse, for
    # a minute (it may be being written)
    claim.write_text(json.dumps({"host": "elsewhere", "pid": 1, "since": 0}))
    old = time.time() - 120
    os.utime(claim, (old, old))
    with claimed(claim, done=lambda: False, poll_s=0.05, stale_s=60) as mine:
        assert mine
    claim.write_text("{cut sh")
    monkeypatch.setattr(claims, "_UNREADABLE_S", 0.3)
    told = []
    with claimed(claim, done=lambda: False, poll_s=0.05, waiting=told.append) as mine:
        assert mine and told == [{}]  # waited for it first


def test_a_model_another_sweep_is_training_is_waited_for_not_trained_twice(tmp_path, capfd):
    """Two sweeps at once over one cache each trained the same fine-tuned model (QA 27)."""
    from aiblox.embedding.finetune import RECIPE_FILE
    from aiblox.sweep.finetune import shared_model

    folder = tmp_path / "models" / "ft-0123456789abcdef"
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from aiblox.engine.claims import claimed
        folder = Path({str(folder)!r})
        with claimed(folder.with_name(folder.name + ".claim"),
                     done=(folder / {RECIPE_FILE!r}).is_file) as mine:
            assert mine
            Path({str(tmp_path / "started")!r}).write_text("x")
            time.sleep(1.5)
            folder.mkdir(parents=True)
            (folder / {RECIPE_FILE!r}).write_text("{{}}")
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    while not (tmp_path / "started").exists():
        assert proc.poll() is None
        time.sleep(0.02)
    trained = []
    assert shared_model(folder, tmp_path, lambda: trained.append(1) or True) == folder
    assert proc.wait(30) == 0 and trained == [] and (folder / RECIPE_FILE).is_file()
    assert f"process {proc.pid} on " in capfd.readouterr().err
