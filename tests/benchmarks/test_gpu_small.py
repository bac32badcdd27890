"""``benchmarks/gpu.py`` at tiny sizes on a machine without a GPU (a smoke test, no timings
checked): it says there is no GPU, runs every job's CPU side (embedding with a dense evaluation,
one fine-tuning step of a ``[finetune]`` spec's recipe, reranking) and writes the numbers as
JSON, so the one command meant for a GPU machine is known to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("sentence_transformers")

SPEC = """
name = "sample_ft"
dataset = "sample"
tune_split = "test:0/2"
report_split = "test:1/2"
embedder = "minilm"
metrics = ["ndcg@10"]
primary = "ndcg@10"

[finetune]
split = "train"
epochs = 1
batch_size = 2
hard_negatives = 0

[base]
scoring = { blend = "linear", normalize = "minmax" }

[grid]
w_text = [0.3, 0.7]
"""


def test_without_a_gpu_the_cpu_side_runs_at_tiny_sizes(tmp_path):
    from aiblox.embedding.device import gpu_count

    if gpu_count():
        pytest.skip("a GPU is here: this is the no-GPU smoke test")
    spec = tmp_path / "ft.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "gpu.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu.py"), "--docs", "500", "--queries", "4",
         "--cpu-docs", "12", "--cpu-steps", "1", "--cpu-rerank-pairs", "8", "--spec", str(spec),
         "--workdir", str(tmp_path / "work"), "--out", str(out), "--markdown"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no GPU" in proc.stderr
    assert "| GPU | not measured |" in proc.stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["gpu"] is None and "torch sees no GPU" in data["no_gpu_reason"]
    assert data["docs"] == 12  # capped to what the CPU embeds
    jobs = data["jobs"]
    assert set(jobs) == {"embed", "dense_eval", "finetune", "rerank"}
    assert all(set(sides) == {"cpu"} for sides in jobs.values())
    assert jobs["embed"]["cpu"]["docs"] == 12 and jobs["embed"]["cpu"]["docs_per_s"] > 0
    ev = jobs["dense_eval"]["cpu"]
    assert ev["docs"] == 12 and ev["queries"] == 4 and ev["faiss_gpu"] is False
    assert ev["recall@100"] == 1.0  # 12 documents: every relevant one is in the top 100
    ft = jobs["finetune"]["cpu"]
    assert ft["steps"] == 1 and ft["extrapolated"] and ft["recipe_steps"] == 4  # 8 pairs / 2
    assert ft["recipe_s"] == pytest.approx(ft["per_step_s"] * 4, rel=0.01)
    assert jobs["rerank"]["cpu"]["pairs"] == 8 and jobs["rerank"]["cpu"]["pairs_per_s"] > 0


def test_the_gpu_side_embeds_in_parts_and_reports_each(tmp_path):
    """The GPU's long embedding runs in parts, each reported (a run cut short at 1M keeps the
    rate it measured), and the parts' vectors are the vectors of one call, in order."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import gpu
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    texts = [f"document {i} about {w}" for i, w in enumerate(
        ["proteins", "wings", "libraries", "cells", "shock waves"])]
    seen: list[tuple[int, float]] = []
    vectors, seconds = gpu.embed_in_parts(texts, "cpu", 2, lambda n, s: seen.append((n, s)))
    whole, _, _ = gpu.embed(texts, "cpu")
    assert [n for n, _ in seen] == [2, 4, 5]
    assert all(b >= a for (_, a), (_, b) in zip(seen, seen[1:], strict=False))  # they add up
    assert seconds == pytest.approx(seen[-1][1])
    assert vectors.shape == (5, 384)
    assert abs(vectors - whole).max() < 1e-5
