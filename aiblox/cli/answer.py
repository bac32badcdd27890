"""``aiblox answer``: retrieve, select evidence, build the prompt, answer, validate citations."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from aiblox.cli._common import (
    DATASET_STORE_HELP,
    DEVICE_HELP,
    STORE_HELP,
    cached_embedder,
    check_store_searchable,
    checked_at_least,
    checked_chunker,
    checked_device,
    checked_embedder,
    checked_prefs,
    existing_store,
    fail,
    open_db,
    out,
    print_json,
)
from aiblox.cli._errors import print_error

if TYPE_CHECKING:  # the pipeline and the stores are imported when the command runs
    from aiblox.evidence import EvidencePack
    from aiblox.stores import Store


def answer(
    question: str = typer.Argument(..., help="The question."),
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    policy: str = typer.Option("R2_POLICY_V1", "--policy",
                               help="Selection policy version (evals/policies/NAME.toml) or path."),
    llm: str = typer.Option("extractive", "--llm",
                            help="extractive (offline, deterministic) or openai (AIBLOX_LLM_* "
                                 "settings)."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder the store was built with."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    chunker: str = typer.Option("sentences", "--chunker", help="Chunker for late chunking."),
    top_k_chunks: int = typer.Option(12, "--top-k-chunks",
                                     help="Evidence chunks retrieved (at least 1)."),
    as_json: bool = typer.Option(False, "--json", help="Print every artifact as JSON."),
    retrieved_at: str | None = typer.Option(
        None, "--retrieved-at",
        help="Retrieval time recorded in the evidence pack (ISO-8601 with a timezone, "
             "recorded in UTC; default: now, to the second). Give it to reproduce a pack "
             "id."),
    tenant: str = typer.Option("default", "--tenant", help="Tenant id of the evidence pack."),
    key_file: Path | None = typer.Option(
        None, "--key-file", help="Sign the evidence pack with the tenant key in this file "
                                 "(HMAC-SHA256, key id = the tenant)."),
) -> None:
    """Answer QUESTION from the store's evidence with citations, or give the exact refusal."""
    import asyncio

    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from aiblox.assembly import (
        PolicyError,
        answer_question,
        get_llm,
        load_policy,
        normalize_question,
    )
    from aiblox.contracts.retrieval import MAX_DEPTH, RequestContext
    from aiblox.evidence import (
        answer_evidence_pack,
        answer_source_cards,
        rag_sources_event,
        sign_pack,
    )
    from aiblox.hashing import sha256_hex
    from aiblox.retrieval.late_chunking import make_retriever
    from aiblox.stores import StoreError
    from aiblox.text import count_tokens, has_controls

    try:
        pol = load_policy(policy)
        reader = get_llm(llm)
    except (PolicyError, ValueError, KeyError) as exc:
        fail(str(exc))
    # a question the assembly would refuse is refused before any retrieval (it retrieved,
    # stored an evidence pack of the FAILED answer, then said so)
    asked = normalize_question(question)
    if not asked:
        fail("QUESTION is empty (whitespace and control characters do not count)")
    tokens = count_tokens(asked, pol.token_encoding)
    if tokens > pol.max_question_tokens:
        fail(f"QUESTION has {tokens} tokens, over the policy {pol.policy_version}'s "
             f"max_question_tokens = {pol.max_question_tokens}")
    if not tenant or any(c.isspace() for c in tenant) or has_controls(tenant):
        # the pack's tenant, and a signature's key id: blank, or spaced, names nobody clearly;
        # a control or bidi character (an escape sequence) would reach the terminal of every
        # `aiblox pack list` (listings escape it, but the tenant would not read as typed)
        fail(f"--tenant {tenant!r}: give a tenant id without spaces, control or bidi "
             f"characters (default: default)")
    if retrieved_at is not None:  # recorded and hashed into the pack id: a time, or refused
        retrieved_at = _utc_time(retrieved_at)
    model = checked_embedder(embedder, checked_device(device))
    checked_chunker(chunker)
    # 0 chunks would always be a NO_EVIDENCE refusal: a bad option, not an answer
    checked_at_least(top_k_chunks, 1, "--top-k-chunks", maximum=MAX_DEPTH)
    prefs = checked_prefs({"query_text": question, "top_k_chunks": top_k_chunks,
                           "chunking": {"chunker_id": chunker}},
                          {"top_k_chunks": ("--top-k-chunks", top_k_chunks),
                           "chunking.chunker_id": ("--chunker", chunker)})
    db = existing_store(db, dataset)
    store = open_db(db)
    try:
        check_store_searchable(store, model.model_id, embedder, bm25_hint=False,
                               dim=model.dim)
        emb = cached_embedder(model, store, progress=False)
        bundle = asyncio.run(make_retriever(store, emb).search(RequestContext(), prefs))
        index_version = sha256_hex(store.item_hashes())[:16]
        items = store.get_items(sorted({c.item_id for c in bundle.candidates}))
    except StoreError as exc:
        fail(str(exc))
        raise
    finally:
        store.close()
    result = answer_question(question, bundle, pol, reader, index_version=index_version,
                             embedding_model=emb.model_id, retrieval_top_k=top_k_chunks)
    sources = answer_source_cards(bundle, result)  # every cited document has its card
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    pack = answer_evidence_pack(question, bundle, result, retrieved_at=retrieved_at or now,
                                source_cards=sources,
                                item_texts={k: v.text for k, v in items.items()},
                                tenant_id=tenant, created_at=now)
    if key_file is not None:
        pack = sign_pack(pack, read_key(key_file), key_id=tenant)
    store = open_db(db)
    try:  # packs are never rewritten: one stored unsigned stays so (said at the end)
        unsigned = _signature_kept(store, pack) if not put_pack(store, pack) else None
    finally:
        store.close()
    if as_json:
        print_json({**result.model_dump(mode="json"),
                    "sources": rag_sources_event(sources)["payload"]["sources"],
                    "pack_id": pack.pack_id,
                    "decision": pack.decision.model_dump(mode="json")})
        _exit_if_generation_failed(pack, reader)
        _exit_if_left_unsigned(pack, unsigned)
        return
    v = result.validation
    # in the pack's words (`answer (OK)`, `refusal (NO_EVIDENCE)`, as `aiblox pack show`),
    # not validation's PASSED beside the pack's "status": "OK"
    title = f"{pack.decision.kind} ({pack.decision.status})"
    # the answer (quoted evidence) as text, never as rich markup: "[/red]" in a document
    # crashed the command, "[bold]x[/bold]" lost its characters
    body = Text(result.answer_text) if result.answer_text else \
        Text(str(v.failure_reason), style="red")
    out.print(Panel(body, title=Text(title), expand=False))
    if v.validated_citations and not v.is_refusal:  # a failed answer cites nothing shown
        table = Table(title="cited evidence")
        for col in ("anchor", "item", "chunk", "score"):
            table.add_column(col)
        cited = set(v.validated_citations)
        for ev in result.answer_bundle.selected_evidence:
            if f"[{ev.citation_anchor}]" in cited or ev.citation_anchor in cited:
                table.add_row(ev.citation_anchor, ev.knowledge_id, ev.chunk_id,
                              f"{ev.similarity_score:.3f}")
        out.print(table)
    out.print(f"drops: {result.drop_counts}")
    for k, h in result.hashes.items():  # by their first 16 hex digits; --json: whole
        out.print(f"{k}: {h[:16] if h else h}", soft_wrap=True)
    from aiblox.stores import mask_password  # the hint is shown: never the password in it

    out.print(f"evidence pack: {pack.pack_id} (aiblox pack show {pack.pack_id} "
              f"--db {mask_password(db)})", soft_wrap=True)
    _exit_if_generation_failed(pack, reader)
    _exit_if_left_unsigned(pack, unsigned)


def _signature_kept(store: Store, pack: EvidencePack) -> str | None:
    """Why the signature ``--key-file`` asked for is not the stored one, when the same pack
    (same id, same content) was stored before: unsigned, or signed with another key; None when
    it was not asked for or is the one stored."""
    if pack.signature is None:
        return None
    row = store.get_evidence_pack(pack.pack_id) or {}
    try:
        stored = json.loads(row.get("json") or "{}").get("signature")
    except (TypeError, ValueError, AttributeError):
        stored = None
    if not row.get("signed") or stored is None:
        return "unsigned"
    if stored != pack.signature.model_dump(mode="json"):
        return f"signed with another key (key id {stored.get('key_id')!r})"
    return None


def _exit_if_left_unsigned(pack: EvidencePack, unsigned: str | None) -> None:
    """Exit 1 with one line when ``--key-file`` asked for a signature but the same pack (same
    id, same content) was already stored unsigned, or signed with another key: packs are
    insert-only, so the stored one stays as it was, and ``pack verify --key-file`` with this
    key would fail."""
    if unsigned:
        print_error(f"evidence pack {pack.pack_id} was already stored {unsigned} and packs "
                    f"are never rewritten: this signature was not stored (a new "
                    f"--retrieved-at makes a new pack)")
        raise typer.Exit(1)


def _exit_if_generation_failed(pack: EvidencePack, reader: object = None) -> None:
    """Exit 1 with one line when the reader's call failed (generation status ``FAILED``, the
    pack's failed LLM call), or the decision's status is ``FAILED`` (the question empty or too
    long, an answer citing an anchor it was not given: its reason): the answer bundle, the
    status and the evidence pack were printed and stored all the same, since a failed call is
    data; the exit status says the question went unanswered. The line names the endpoint of a
    reader that has one (``AIBLOX_LLM_BASE_URL``, without credentials)."""
    from aiblox.assembly.llm.openai_chat import shown_url

    failed = [c for c in pack.tool_calls if c.kind == "llm" and c.status == "failed"]
    if failed:
        call = failed[0]
        url = getattr(getattr(reader, "settings", None), "base_url", None)
        at = f" at {shown_url(url)}" if isinstance(url, str) else ""
        print_error(f"generation failed ({call.tool_name} {pack.model}{at}): {call.error}; "
                    f"evidence pack {pack.pack_id}")
        raise typer.Exit(1)
    if pack.decision.status == "FAILED":  # an empty or too long question, an answer citing
        print_error(f"answer failed: {pack.decision.reason or 'status FAILED'}; "  # no anchor
                    f"evidence pack {pack.pack_id}")
        raise typer.Exit(1)


def read_key(path: Path) -> bytes:
    """A tenant key from a file (trailing newlines removed); exits when unreadable or empty."""
    try:
        key = path.read_bytes().rstrip(b"\r\n")
    except OSError as exc:
        fail(f"cannot read key file {path}: {exc}")
        raise
    if not key:
        fail(f"key file {path} is empty")
    return key


def put_pack(store: Store, pack: EvidencePack) -> bool:
    """Store ``pack`` (insert-only); True when it was new."""
    from aiblox.evidence import pack_content, pack_to_json
    from aiblox.hashing import sha256_hex

    return store.put_evidence_pack(
        pack.pack_id, pack.parent_pack_id, sha256_hex(pack_content(pack)), pack_to_json(pack),
        tenant_id=pack.tenant_id, trace_id=pack.trace_id, created_at=pack.created_at,
        signed=pack.signature is not None)


def _utc_time(text: str) -> str:
    """``--retrieved-at`` as the pack records it: the instant in UTC, ``...Z`` (one instant,
    one pack id, however it was written: ``01:00:00+01:00`` is ``00:00:00Z``); a time
    without a timezone (or a date alone) is refused, as it names no instant, and so is one whose
    UTC instant is outside the years 1 to 9999 (no ``datetime`` holds it)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        fail(f"--retrieved-at {text!r} is not an ISO-8601 time (e.g. 2026-02-02T00:00:00Z)")
    if when.tzinfo is None:
        fail(f"--retrieved-at {text!r} has no timezone, so it names no one instant: add one "
             f"(e.g. {when.isoformat()}Z for UTC)")
    try:
        utc = when.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is in the year 10000 in UTC
        fail(f"--retrieved-at {text!r} is out of range: in UTC it falls outside the years 1 "
             f"to 9999")
        raise
    return utc.isoformat().replace("+00:00", "Z")
