"""A reader's failed generations in a sweep (QA, 2026-11-30): an endpoint that refused the
connection or answered an HTTP error gave FAILED results that the stage cache stored as the
reader stage's output and served to every later run, a working endpoint or not, so a sweep's
answer metrics depended on what the cache had seen before; and the sweep said nothing.

Now such an output is kept under a key that names it (its sha256), never under the reader
stage's own key: the next run asks the endpoint again, and the stages after it, keyed by the
reader's key, are computed again with it. A refusal is the model's answer, data, and reused.
The endpoint is a real HTTP server on 127.0.0.1 (tests/chat_server.py)."""

from __future__ import annotations

import warnings

import pytest

from aiblox.assembly import REFUSAL_TEXT
from aiblox.engine.cache import StageCache
from aiblox.sweep import SweepSpec, run_sweep
from tests.chat_server import ChatServer

pytest.importorskip("httpx")

ANSWER = "The sample's answer is here [C0]."


def reader_spec(sample_spec, name: str = "reader_failures") -> SweepSpec:
    data = sample_spec.model_dump()
    data["base"] = {**data["base"], "top_k_chunks": 4}
    data.update({"name": name, "grid": {"selection": {"policy": ["R2_POLICY_V1"]}},
                 "baseline": None, "primary": "answer_f1", "query_limit": 2,
                 "metrics": ["ndcg@10"], "chunk_k": [1, 4], "reader": "openai"})
    return SweepSpec.model_validate(data)


@pytest.fixture()
def endpoint(monkeypatch):
    """``endpoint(url)`` points the ``openai`` reader at ``url`` (one attempt, no backoff)."""
    monkeypatch.setenv("AIBLOX_LLM_MODEL", "test-model")
    monkeypatch.setenv("AIBLOX_LLM_API_KEY", "k")
    monkeypatch.setenv("AIBLOX_LLM_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AIBLOX_LLM_TIMEOUT_S", "10")
    return lambda url: monkeypatch.setenv("AIBLOX_LLM_BASE_URL", url)


def closed_url() -> str:
    """The URL of a port nothing listens on (a server started and stopped)."""
    server = ChatServer()
    server.close()
    return server.url


def sweep(spec, cache, db, dataset):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_sweep(spec, cache_dir=cache, db=db, progress=False, dataset=dataset)
    said = [str(w.message) for w in caught if "generation" in str(w.message)]
    return result, said


def metric(result, name: str) -> list[float]:
    return [p.metrics[s][name] for p in result.points for s in p.metrics]


@pytest.mark.parametrize("failing", ["refused", "http 503"])
def test_a_failed_generation_is_asked_again_on_the_next_run(
        failing, tmp_path, endpoint, sample_spec, sweep_db, sample_dataset):
    spec = reader_spec(sample_spec)
    server = ChatServer(content=ANSWER)
    try:
        if failing == "refused":
            endpoint(closed_url())
        else:
            server.status = 503
            endpoint(server.url)
        first, said = sweep(spec, tmp_path, sweep_db, sample_dataset)
        assert metric(first, "status:FAILED") == [1.0, 1.0]
        assert len(said) == 1, said  # one line for the sweep, with the count and first reason
        assert said[0].startswith("the reader failed 4 generations")
        assert ("Connection refused" in said[0] or "ConnectError" in said[0]
                if failing == "refused" else "HTTP 503" in said[0]), said[0]
        server.status = 200
        endpoint(server.url)
        second, said = sweep(spec, tmp_path, sweep_db, sample_dataset)
        assert second.computed["reader"] == 2  # asked again, not served the failures
        assert {"validation", "answer_metrics"} <= set(second.computed)
        assert metric(second, "status:FAILED") == [0.0, 0.0]
        assert min(metric(second, "status:ANSWERED")) > 0 and said == []
        # the answers are the reader's result now: a third run reuses them, to the same bytes
        asked = len(server.auth)
        third, _ = sweep(spec, tmp_path, sweep_db, sample_dataset)
        assert "reader" not in third.computed and len(server.auth) == asked
        assert [p.manifest.manifest_hash for p in third.points] == \
            [p.manifest.manifest_hash for p in second.points]
    finally:
        server.close()


def test_the_failed_output_is_kept_under_a_key_naming_it(
        tmp_path, endpoint, sample_spec, sweep_db, sample_dataset):
    """Every stage record of the point is in the cache (MLflow, the significance table and
    ``runs export`` read them by key), but the reader's is not the stage's own key, so no later
    run finds it; the same failure twice gives the same bytes and keys."""
    spec = reader_spec(sample_spec)
    endpoint(closed_url())
    first, _ = sweep(spec, tmp_path, sweep_db, sample_dataset)
    again, _ = sweep(spec, tmp_path, sweep_db, sample_dataset)
    assert again.computed["reader"] == 2
    assert [p.manifest.manifest_hash for p in again.points] == \
        [p.manifest.manifest_hash for p in first.points]
    cache = StageCache(tmp_path)
    stages = {s["name"]: s for s in first.points[0].manifest.splits["test"].stages}
    rec = stages["reader"]
    meta = cache.meta("reader", rec["key"])
    assert meta["config"]["output_sha256"] == rec["output_hash"]
    reader = cache.load("reader", rec["key"])["queries"]
    assert {r["generation_status"] for r in reader.values() if r is not None} == {"FAILED"}
    assert stages["validation"]["inputs"][1] == rec["key"]
    for name in ("validation", "answer_metrics"):
        assert cache.has(name, stages[name]["key"])


def test_a_refusal_is_the_model_s_answer_and_is_reused(
        tmp_path, endpoint, sample_spec, sweep_db, sample_dataset):
    spec = reader_spec(sample_spec)
    server = ChatServer(content=REFUSAL_TEXT)
    try:
        endpoint(server.url)
        first, said = sweep(spec, tmp_path, sweep_db, sample_dataset)
        assert metric(first, "status:REFUSED") == [1.0, 1.0] and said == []
        asked = len(server.auth)
        server.status = 503  # were it asked again, every answer would fail
        second, said = sweep(spec, tmp_path, sweep_db, sample_dataset)
    finally:
        server.close()
    assert len(server.auth) == asked and said == []
    assert "reader" not in second.computed and second.reused["reader"] == 2
    assert metric(second, "status:REFUSED") == [1.0, 1.0]


def test_the_cli_says_once_that_generations_failed(tmp_path, endpoint, sweep_db):
    from typer.testing import CliRunner

    from aiblox.cli.main import app

    endpoint(closed_url())
    spec = tmp_path / "sel_fail.toml"
    spec.write_text("""
name = "sel_fail"
dataset = "sample"
tune_split = "train"
report_split = "test"
embedder = "hashing"
reader = "openai"
query_limit = 2
metrics = ["ndcg@10"]
primary = "evidence_answer_recall"
[grid.selection]
policy = ["R2_POLICY_V1"]
top_similarity_gate = [0.0, 1000000.0]
""")
    r = CliRunner().invoke(app, ["sweep", str(spec), "--db", sweep_db, "--cache-dir",
                                 str(tmp_path / "stages"), "--no-tracking"],
                           env={"AIBLOX_NO_PROGRESS": "1", "COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("warning: the reader failed 4 generations")
    assert "ConnectError" in lines[0] or "Connection refused" in lines[0]


def test_a_reader_that_is_a_function_of_its_prompt_keeps_its_failures():
    """The extractive reader's FAILED (a prompt that is not a Prompt Contract V1 prompt) is
    what that prompt gives every time: data, stored under the stage's key."""
    from aiblox.assembly import get_llm
    from aiblox.engine.compute import reader_reusable

    assert reader_reusable(get_llm("extractive")) is None
    check = reader_reusable(get_llm("openai", base_url="http://127.0.0.1:9/v1", model="m"))
    assert check is not None
    failed = {"queries": {"1": {"generation_status": "FAILED", "failure_reason": "x"},
                          "2": None}}
    assert check(failed) is False
    assert check({"queries": {"1": {"generation_status": "OK"}, "2": None}}) is True


def test_a_stage_cache_keeps_an_output_it_may_not_reuse_under_its_own_key(tmp_path):
    from aiblox.engine.task import make_task, output_keyed_config, stage_key

    cache = StageCache(tmp_path)
    calls: list[int] = []

    def compute() -> dict[str, int]:
        calls.append(1)
        return {"n": len(calls)}

    task = make_task("reader", {"name": "r"}, ["p"], compute, reusable=lambda out: False)
    rec, out = cache.run_stage(task)
    assert out == {"n": 1} and rec.key != task.key and not cache.has("reader", task.key)
    assert rec.key == stage_key("reader", task.version,
                                output_keyed_config({"name": "r"}, rec.output_hash), ["p"])
    assert cache.load("reader", rec.key) == {"n": 1}
    rec2, out2 = cache.run_stage(task)  # computed again: nothing under its key
    assert out2 == {"n": 2} and rec2.key != rec.key and cache.computed["reader"] == 2


def test_verify_says_its_recomputation_failed_and_names_the_reader(
        tmp_path, endpoint, sample_spec, sweep_db, sample_dataset):
    """A point scored on failed generations recomputes to the same bytes while the endpoint
    fails the same way, and verification says the generations failed; with a working endpoint
    its first difference is the reader."""
    from aiblox.sweep import verify_point

    spec = reader_spec(sample_spec)
    endpoint(closed_url())
    first, _ = sweep(spec, tmp_path, sweep_db, sample_dataset)
    manifest = first.points[0].manifest
    with pytest.warns(UserWarning, match="the reader failed 4 generations"):
        same = verify_point(manifest, db=sweep_db, dataset=sample_dataset)
    assert same.identical, same.first_difference
    server = ChatServer(content=ANSWER)
    try:
        endpoint(server.url)
        again = verify_point(manifest, db=sweep_db, dataset=sample_dataset)
    finally:
        server.close()
    assert not again.identical and again.first_difference == "train/reader"
