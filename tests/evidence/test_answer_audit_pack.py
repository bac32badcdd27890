"""The evidence pack of a real answered query on the sample dataset (hashing embedder, offline
extractive reader): decision, sources, tool calls, prompts, memo, determinism."""

from __future__ import annotations

import asyncio
import socket

import pytest
from typer.testing import CliRunner

from aiblox.assembly import (
    REFUSAL_TEXT,
    LLMSettings,
    OpenAIChatLLM,
    answer_question,
    get_llm,
    load_policy,
)
from aiblox.cli.main import app
from aiblox.contracts.retrieval import RequestContext, RetrievalPrefs
from aiblox.embedding import CachedEmbedder, get_embedder
from aiblox.evidence import (
    DefaultEvidencePacker,
    answer_evidence_pack,
    pack_from_json,
    pack_to_json,
    sign_pack,
    verify_pack,
)
from aiblox.evidence.answer_audit_pack import INTENDED_ANSWER, INTENDED_RETRIEVAL
from aiblox.hashing import sha256_text
from aiblox.retrieval.late_chunking import make_retriever
from aiblox.stores import open_store

QUESTION = "Who developed the probabilistic relevance framework behind BM25?"
OFF_TOPIC = "What is the boiling point of liquid nitrogen on Jupiter's moons?"
AT = "2024-01-15T10:30:00Z"
NO_CHUNKS = "no evidence chunks"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """Retrieve for both questions once; returns {question: (bundle, cards, item texts)}."""
    db = str(tmp_path_factory.mktemp("answer_pack") / "s.duckdb")
    r = CliRunner().invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    store = open_store(db)
    try:
        emb = CachedEmbedder(get_embedder("hashing"), store, progress=False)
        out = {}
        for key, q, chunking in ((QUESTION, QUESTION, True), (OFF_TOPIC, OFF_TOPIC, True),
                                 (NO_CHUNKS, OFF_TOPIC, False)):
            prefs = RetrievalPrefs(query_text=q, chunking={"enabled": chunking})
            bundle = asyncio.run(make_retriever(store, emb).search(RequestContext(), prefs))
            items = store.get_items([c.item_id for c in bundle.candidates])
            cards = DefaultEvidencePacker().pack(bundle.candidates, bundle.evidence)
            out[key] = (bundle, cards, {k: v.text for k, v in items.items()}, emb.model_id)
    finally:
        store.close()
    return out


def _answer(sample, question, llm=None, key=None):
    bundle, cards, texts, model_id = sample[key or question]
    result = answer_question(question, bundle, load_policy("R2_POLICY_V1"),
                             llm or get_llm("extractive"), index_version="ix",
                             embedding_model=model_id, retrieval_top_k=12)
    return bundle, cards, texts, result


def test_answer_pack_records_the_answer_its_sources_and_calls(sample):
    bundle, cards, texts, result = _answer(sample, QUESTION)
    assert result.validation.validation_status == "PASSED"
    pack = answer_evidence_pack(QUESTION, bundle, result, retrieved_at=AT, source_cards=cards,
                                item_texts=texts)
    assert verify_pack(pack) == []
    assert pack.decision.kind == "answer" and pack.decision.text == result.answer_text
    assert pack.trace_id == result.request_id
    # sources: cited chunks first, in citation order, then the rest of the selected evidence
    cited = result.validation.cited_chunk_ids
    refs = [s.internal_ref for s in pack.sources]
    assert [r.split("#")[1] for r in refs[: len(cited)]] == cited
    assert len(pack.sources) == len(result.answer_bundle.selected_evidence)
    chunks = {ev.chunk_id: ev for ev in bundle.evidence}
    for s in pack.sources:
        item_id, chunk_id = s.internal_ref.split("#")
        assert s.name == "sample" and s.retrieved_at == AT
        assert s.excerpt == chunks[chunk_id].text[:2000]  # verbatim
        assert s.excerpt in texts[item_id]
        assert s.content_sha256 == sha256_text(texts[item_id])  # the whole item
        assert s.confidence == round(min(1.0, max(0.0, chunks[chunk_id].score)), 6)
        assert 0.0 <= s.confidence <= 1.0
    retrieval, llm = pack.tool_calls
    assert (retrieval.kind, retrieval.intended_action, retrieval.actual_action) == (
        "retrieval", INTENDED_RETRIEVAL, INTENDED_RETRIEVAL)
    assert retrieval.outputs["evidence_chunks"] == len(bundle.evidence)
    assert (llm.kind, llm.tool_name, llm.status) == ("llm", "extractive", "ok")
    assert llm.actual_action == INTENDED_ANSWER and not llm.contradiction_flag
    assert llm.inputs["prompt_sha256"] == result.prompt.prompt_sha256
    assert [(p.template_version, p.prompt_sha256) for p in pack.prompts] == [
        ("PROMPT_CONTRACT_V1", result.prompt.prompt_sha256)]
    assert pack.model == result.llm_result.model_name
    body = pack.memo.primary.body
    assert all(f"[{i}]" in body for i in (1, 2, 3))
    assert "[C0] = [1]" in body and pack.memo.primary.language == "en"


def test_same_inputs_same_pack_id_and_retrieval_time_is_hashed(sample):
    bundle, cards, texts, result = _answer(sample, QUESTION)
    kw = {"source_cards": cards, "item_texts": texts}
    a = answer_evidence_pack(QUESTION, bundle, result, retrieved_at=AT, **kw)
    b = answer_evidence_pack(QUESTION, bundle, result, retrieved_at=AT, created_at="2030", **kw)
    c = answer_evidence_pack(QUESTION, bundle, result, retrieved_at="2024-01-16T00:00:00Z", **kw)
    assert a.pack_id == b.pack_id and pack_to_json(a) != pack_to_json(b)
    assert c.pack_id != a.pack_id
    assert pack_from_json(pack_to_json(a)) == a
    # without the item texts the hash covers the retrieved chunk
    d = answer_evidence_pack(QUESTION, bundle, result, retrieved_at=AT, source_cards=cards)
    first = {ev.chunk_id: ev.text for ev in bundle.evidence}[
        d.sources[0].internal_ref.split("#")[1]]
    assert d.sources[0].content_sha256 == sha256_text(first) != a.sources[0].content_sha256


def test_a_model_refusal_is_a_refusal_with_its_evidence(sample):
    bundle, cards, texts, result = _answer(sample, OFF_TOPIC)
    assert result.answer_text == REFUSAL_TEXT and result.validation.is_refusal
    pack = answer_evidence_pack(OFF_TOPIC, bundle, result, retrieved_at=AT, source_cards=cards,
                                item_texts=texts)
    assert (pack.decision.kind, pack.decision.status) == ("refusal", "OK")
    assert pack.decision.text == REFUSAL_TEXT and "model refused" in pack.decision.reason
    llm = pack.tool_calls[-1]
    assert llm.actual_action == "refused to answer" and llm.contradiction_flag
    assert len(pack.sources) == len(result.answer_bundle.selected_evidence) > 0
    assert verify_pack(pack) == []


def test_refusal_before_the_model_lists_the_consulted_cards(sample):
    bundle, cards, texts, result = _answer(sample, OFF_TOPIC, key=NO_CHUNKS)
    assert bundle.evidence == [] and bundle.candidates
    assert result.answer_text == REFUSAL_TEXT and result.llm_result is None
    pack = answer_evidence_pack(OFF_TOPIC, bundle, result, retrieved_at=AT, source_cards=cards,
                                item_texts=texts, max_sources=3)
    assert pack.decision.kind == "refusal" and pack.decision.status == "NO_EVIDENCE"
    assert pack.decision.text == REFUSAL_TEXT and pack.decision.reason
    assert [s.internal_ref for s in pack.sources] == [c.source_id for c in cards[:3]]
    assert [t.kind for t in pack.tool_calls] == ["retrieval"]  # no model was called
    assert pack.tool_calls[0].actual_action == "retrieved candidates but no evidence chunks"
    assert pack.tool_calls[0].contradiction_flag
    assert pack.prompts == [] and pack.model is None
    assert all(f"[{i}]" in pack.memo.primary.body for i in range(1, len(pack.sources) + 1))
    assert pack.memo.primary.title.startswith("Refusal:")
    assert verify_pack(pack) == []


def test_a_failed_llm_call_is_recorded_with_its_error(sample):
    with socket.socket() as s:  # a port nobody listens on: the real client, a real failure
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIChatLLM(LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                    max_attempts=1, timeout_s=2))
    bundle, cards, texts, result = _answer(sample, QUESTION, llm)
    assert result.llm_result.generation_status == "FAILED"
    pack = answer_evidence_pack(QUESTION, bundle, result, retrieved_at=AT, source_cards=cards)
    call = pack.tool_calls[-1]
    assert (call.kind, call.status, call.contradiction_flag) == ("llm", "failed", True)
    assert call.error and call.actual_action == "the call failed"
    assert pack.decision.kind == "refusal" and pack.decision.status == "FAILED"
    assert pack.model == "m" and pack.prompts  # the prompt was built and sent


class _MarkersOnlyLLM:
    """A model that answers with a citation marker and nothing else."""

    name = "markers-only"
    model_name = "markers-only"

    def generate(self, prompt_text, *, request_id, max_output_tokens):
        from aiblox.assembly import LLMExecutionResult

        return LLMExecutionResult(request_id=request_id, llm_name=self.name,
                                  model_name=self.model_name,
                                  prompt_sha256=sha256_text(prompt_text),
                                  generation_status="OK", raw_model_text="[C0]", attempts=1)


def test_an_answer_with_no_content_is_withheld_not_recorded_as_an_answer(sample):
    """``[C0]`` alone is neither the refusal nor a cited content sentence: validation fails it
    (NO_CONTENT) and the pack records a withheld answer, not ``kind="answer"``."""
    bundle, cards, texts, result = _answer(sample, QUESTION, _MarkersOnlyLLM())
    assert result.validation.validation_status == "FAILED"
    assert result.validation.failure_codes == ["NO_CONTENT"]
    pack = answer_evidence_pack(QUESTION, bundle, result, retrieved_at=AT, source_cards=cards)
    assert (pack.decision.kind, pack.decision.status) == ("refusal", "FAILED")
    assert verify_pack(pack) == []


def test_a_cold_and_a_warm_chunk_cache_give_the_same_pack_id(tmp_path):
    """The same question answered twice on one store: the first retrieval chunks and writes the
    chunk cache, the second reads it. The pack id is the same; the cache counts differ, and are
    shown in the (unhashed) observations."""
    db = str(tmp_path / "s.duckdb")
    r = CliRunner().invoke(app, ["ingest", "sample", "--db", db, "--embedder", "hashing"],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    packs = []
    store = open_store(db)
    try:
        emb = CachedEmbedder(get_embedder("hashing"), store, progress=False)
        for _ in range(2):
            prefs = RetrievalPrefs(query_text=QUESTION)
            bundle = asyncio.run(make_retriever(store, emb).search(RequestContext(), prefs))
            items = store.get_items([c.item_id for c in bundle.candidates])
            texts = {k: v.text for k, v in items.items()}
            result = answer_question(QUESTION, bundle, load_policy("R2_POLICY_V1"),
                                     get_llm("extractive"), index_version="ix",
                                     embedding_model=emb.model_id, retrieval_top_k=12)
            packs.append(answer_evidence_pack(
                QUESTION, bundle, result, retrieved_at=AT, item_texts=texts,
                source_cards=DefaultEvidencePacker().pack(bundle.candidates, bundle.evidence)))
    finally:
        store.close()
    cold, warm = packs
    c, w = cold.observations["retrieval"]["counts"], warm.observations["retrieval"]["counts"]
    assert c["chunk_cache_writes"] > 0 and c["chunk_cache_hits"] == 0  # really cold
    assert w["chunk_cache_hits"] > 0 and w["chunk_cache_writes"] == 0  # really warm
    assert cold.observations["retrieval"]["side_effects"] and \
        not warm.observations["retrieval"]["side_effects"]
    assert cold.pack_id == warm.pack_id
    assert verify_pack(cold) == [] and verify_pack(warm) == []
    assert pack_to_json(cold) != pack_to_json(warm)  # the observations are kept, visibly
    # the hashed retrieval record keeps the result counts and no cache counts
    counts = cold.tool_calls[0].outputs["counts"]
    assert counts["chunks_scored"] > 0 and not any(k.startswith("chunk_cache") for k in counts)
    # observations are outside the signature too: a signed pack still verifies
    signed = sign_pack(cold, b"k", key_id="t")
    assert verify_pack(signed, {"t": b"k"}, require_signature=True) == []
