"""``aiblox answer`` end to end on the sample dataset with the offline extractive reader."""

import json
from pathlib import Path

from typer.testing import CliRunner

from aiblox.assembly import REFUSAL_TEXT
from aiblox.cli.main import app
from tests.conftest import shared_dataset

runner = CliRunner()


def _answer(db, question, *extra):
    r = runner.invoke(app, ["answer", question, "--db", db, "--embedder", "hashing", "--json",
                            *extra], env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_answer_cites_evidence_and_is_deterministic(tmp_path):
    db = str(tmp_path / "a.duckdb")
    ing = runner.invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"],
                        env={"AIBLOX_NO_PROGRESS": "1"})
    assert ing.exit_code == 0, ing.output
    q = "Who developed the probabilistic relevance framework behind BM25?"
    first = _answer(db, q)
    assert first["validation"]["validation_status"] == "PASSED"
    assert "Robertson" in first["answer_text"] and "[C0]" in first["answer_text"]
    assert first["sources"] and first["sources"][0]["rank"] == 1
    second = _answer(db, q)  # same inputs, same bytes; only the LLM latency may differ
    for key in ("hashes", "answer_text", "answer_bundle", "prompt", "validation", "sources"):
        assert first[key] == second[key], key
    refused = _answer(db, "What is the boiling point of liquid nitrogen on Jupiter's moons?")
    assert refused["answer_text"] == REFUSAL_TEXT and refused["validation"]["is_refusal"]
    # one status vocabulary: the answer says what its pack says (issue 29: PASSED beside OK)
    assert (first["decision"]["kind"], first["decision"]["status"]) == ("answer", "OK")
    assert refused["decision"]["kind"] == "refusal"
    shown = runner.invoke(app, ["answer", q, "--db", db, "--embedder", "hashing"],
                          env={"AIBLOX_NO_PROGRESS": "1"})
    assert shown.exit_code == 0, shown.output
    assert "answer (OK)" in shown.stdout and "PASSED" not in shown.stdout
    for k, h in first["hashes"].items():  # shown by their first 16 hex digits, as every hash
        assert f"{k}: {h[:16]}\n" in shown.stdout, k
    pack_id = shown.stdout.split("evidence pack: ")[1].split()[0]
    pack = runner.invoke(app, ["pack", "show", pack_id, "--db", db])
    assert json.loads(pack.stdout)["decision"]["status"] == "OK"
    assert f"{pack_id}: answer (OK)" in pack.stderr
    v2 = _answer(db, q, "--policy", "R2_POLICY_V2")
    assert v2["hashes"]["policy_sha256"] != first["hashes"]["policy_sha256"]


def test_a_heading_is_kept_apart_from_the_sentence_under_it(tmp_path):
    """The sample's documents open with a Markdown heading (`# BM25`); evidence keeps it as
    written (sanitised, not rewritten) and a quoted sentence never carries it (issue 29:
    `# BM25 BM25 is a ranking function ...`)."""
    db = str(tmp_path / "h.duckdb")
    ing = runner.invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"],
                        env={"AIBLOX_NO_PROGRESS": "1"})
    assert ing.exit_code == 0, ing.output
    out = _answer(db, "who developed BM25?")
    cited = [e["sanitized_text"] for e in out["answer_bundle"]["selected_evidence"]]
    assert any(t.startswith("# BM25 BM25 is a ranking function") for t in cited)
    lines = out["answer_text"].splitlines()
    assert lines and out["answer_text"] != REFUSAL_TEXT
    assert not any("#" in ln for ln in lines)
    assert all(any(ln.rsplit(" [", 1)[0] in t for t in cited) for ln in lines)  # verbatim


def test_unknown_policy_is_a_clear_error(tmp_path):
    r = runner.invoke(app, ["answer", "q", "--db", str(tmp_path / "x.duckdb"), "--policy",
                            "R2_POLICY_V9"])
    assert r.exit_code == 2 and "R2_POLICY_V9" in r.output


def test_a_local_policies_folder_may_not_change_a_shipped_policy(tmp_path, monkeypatch):
    """`--policy R2_POLICY_V1` in a folder whose evals/policies held an edited R2_POLICY_V1.toml
    answered with its values under the shipped name (QA): one error line, exit 2."""
    from aiblox.assembly.policy import POLICIES_DIR_ENV

    monkeypatch.delenv(POLICIES_DIR_ENV, raising=False)
    shipped = Path(__file__).resolve().parents[2] / "evals" / "policies" / "R2_POLICY_V1.toml"
    local = tmp_path / "evals" / "policies"
    local.mkdir(parents=True)
    (local / "R2_POLICY_V1.toml").write_text(shipped.read_text(encoding="utf-8").replace(
        "max_chunks = 6\n", "max_chunks = 1\n"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["answer", "q", "--db", str(tmp_path / "x.duckdb"), "--policy",
                            "R2_POLICY_V1"])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        f"error: {local / 'R2_POLICY_V1.toml'}: field 'policy_version': 'R2_POLICY_V1' is a "
        f"shipped frozen policy, and this file changes max_chunks (6 -> 1); give the changed "
        f"policy a version name of its own"]


def test_top_k_chunks_names_both_bounds_whichever_is_crossed(tmp_path):
    """`--top-k-chunks 0` said `>= 1` and `--top-k-chunks 99999999999` said `>= 0 (at most
    2147483647)` (the contract's words): both say both bounds of the CLI (QA)."""
    for k in ("0", "99999999999"):
        r = runner.invoke(app, ["answer", "q", "--db", str(tmp_path / "x.duckdb"),
                                "--embedder", "hashing", "--top-k-chunks", k])
        assert r.exit_code == 2 and r.output.strip().splitlines() == [
            f"error: --top-k-chunks {k}: out of range; valid: a whole number >= 1 (at most "
            f"2147483647)"]


def test_a_question_the_assembly_would_refuse_is_refused_before_any_work(tmp_path):
    """An empty question retrieved, stored an evidence pack of its FAILED answer and then said
    "answer failed" (exit 1; QA 27): a question typed at the command line is input, refused
    before any work, and nothing is stored. The library still answers it with a FAILED bundle
    (data, for a service's audit trail); a failed generation still stores its pack and exits 1
    (tests/cli/test_answer_llm_cli.py)."""
    from aiblox.stores import open_store

    db = str(tmp_path / "a.duckdb")
    ing = runner.invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"],
                        env={"AIBLOX_NO_PROGRESS": "1"})
    assert ing.exit_code == 0, ing.output
    for question, words in (("  \t ", "QUESTION is empty (whitespace and control characters "
                                       "do not count)"),
                            ("word " * 600, "QUESTION has 600 tokens, over the policy "
                                            "R2_POLICY_V1's max_question_tokens = 512")):
        r = runner.invoke(app, ["answer", question, "--db", db, "--embedder", "hashing"],
                          env={"AIBLOX_NO_PROGRESS": "1"})
        (line,) = r.output.strip().splitlines()
        assert r.exit_code == 2 and line == f"error: {words}"
    store = open_store(db)
    try:
        assert store.list_evidence_packs() == []
    finally:
        store.close()


def test_the_source_cards_are_the_documents_the_answer_was_given(tmp_path):
    """`sources` (the `rag.sources` cards a UI shows beside the answer) list the documents of
    the evidence in the prompt, cited ones first: on adi three of the six evidence documents
    rank below the top six candidates, whose cards were shown instead (QA 19)."""
    db = str(tmp_path / "adi.duckdb")
    ing = runner.invoke(app, ["ingest", str(shared_dataset("adi")), "--db", db, "--embedder",
                              "hashing"], env={"AIBLOX_NO_PROGRESS": "1"})
    assert ing.exit_code == 0, ing.output
    out = _answer(db, "What problems arise in computerized information retrieval of abstracts?",
                  "--retrieved-at", "2026-01-01T00:00:00Z")
    evidence = out["answer_bundle"]["selected_evidence"]
    given = list(dict.fromkeys(e["knowledge_id"] for e in evidence))
    cited = {e["knowledge_id"] for e in evidence
             if e["chunk_id"] in out["validation"]["cited_chunk_ids"]}
    shown = [s["source_id"] for s in out["sources"]]
    assert cited and sorted(shown) == sorted(given)
    assert set(shown[:len(cited)]) == cited  # cited documents first
    assert [s["rank"] for s in out["sources"]] == list(range(1, len(shown) + 1))
    shown_pack = runner.invoke(app, ["pack", "show", out["pack_id"], "--db", db],
                               env={"AIBLOX_NO_PROGRESS": "1"})
    assert shown_pack.exit_code == 0, shown_pack.output
    pack_docs = [s["internal_ref"].split("#")[0] for s in json.loads(shown_pack.stdout)["sources"]]
    assert list(dict.fromkeys(pack_docs)) == shown  # the pack's sources, document by document
