"""``benchmarks/stage_costs.py``'s two steps on the sample collection, on the CPU (a smoke test of
the commands the stage table's GPU column was measured with; no timing is checked): ``pairs``
writes each query with its BM25 top n as the ``cross_encoder`` stage builds them, ``measure``
prices the model stages on them and writes every number."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "stage_costs.py"

pytest.importorskip("sentence_transformers")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)


def test_pairs_then_measure_on_the_cpu(tmp_path):
    from aiblox.data import load_dataset

    pairs = tmp_path / "pairs.json.xz"
    proc = _run(tmp_path, "pairs", "--out", str(pairs), "--datasets", "sample", "--top-n", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    with lzma.open(pairs, "rt", encoding="utf-8") as f:
        data = json.load(f)
    assert data["top_n"] == 3 and [c["name"] for c in data["collections"]] == ["sample"]
    sample = data["collections"][0]
    queries = dict(load_dataset("sample").split_queries("test"))
    assert [q["qid"] for q in sample["queries"]] == sorted(queries)
    assert all(q["text"] == queries[q["qid"]] and 1 <= len(q["docs"]) <= 3
               for q in sample["queries"])

    out = tmp_path / "costs.json"
    proc = _run(tmp_path, "measure", "--pairs", str(pairs), "--device", "cpu", "--queries", "2",
                "--repeat", "1", "--out", str(out), "--markdown")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["device"].startswith("cpu (") and res["queries_per_collection"] == 2
    (row,) = res["collections"]
    want = sum(len(q["docs"]) for q in sample["queries"][:2])
    assert row["queries"] == 2 and row["pairs"] == want
    assert row["embed_s_per_query"] > 0 and row["ce_s_per_query"] > 0
    assert row["ce_pairs_per_s"] == pytest.approx(want / (row["ce_s_per_query"] * 2))
    assert f"| sample | 2 | {want} |" in proc.stdout


def test_measure_without_the_pairs_file_is_one_usage_error(tmp_path):
    proc = _run(tmp_path, "measure", "--pairs", str(tmp_path / "missing.json.xz"))
    assert proc.returncode == 2
    assert "missing.json.xz: no such file (write it with the `pairs` step)" in proc.stderr
