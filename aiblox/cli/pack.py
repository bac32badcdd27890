"""``aiblox pack list|show|verify|export``: list, read, check and export the evidence packs in a
store.

``pack verify`` checks the id against the content, the content against the sha256 recorded when
it was stored, the stored row's columns (tenant, trace, parent, signed) against the pack they
index and, with a key, the signature; without one it says the signature was not checked.
``pack list`` and ``pack show`` show what the pack itself says (its JSON), never a column that
could disagree with it. ``created_at`` and ``observations`` (the
retrieval's chunk-cache hits, misses and writes) are shown with the pack but are not content:
the id, the stored sha256 and the signature leave them out, so a warm and a cold chunk cache
give the same pack id.

``pack export`` writes ``created_at`` as null and ``observations`` empty: the first is when
this store stored the pack (its row keeps it, ``pack show`` prints it), the second what this
store's chunk cache did when it answered (warm or cold); neither is part of the pack, so a pack
exports to the same bytes from any store that holds it, whenever and however it was answered
and stored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from aiblox.cli._common import (
    DATASET_STORE_HELP,
    STORE_HELP,
    checked_at_least,
    console,
    existing_store,
    fail,
    open_db,
    option_message,
    outputs_spare_inputs,
    stored_text,
)
from aiblox.cli._common import out as results
from aiblox.cli.answer import read_key

if TYPE_CHECKING:  # the evidence module is imported when a command runs
    from aiblox.evidence import EvidencePack

pack_app = typer.Typer(
    name="pack",
    help="Evidence packs: the auditable record of each answered query.",
    no_args_is_help=True,
    add_completion=False,
)

def _load_row(pack_id: str, db: str, dataset: str = "") -> dict[str, Any]:
    from aiblox.stores.base import PACK_ID_RE

    if not PACK_ID_RE.match(pack_id):  # not "no such pack" for a mistyped id (QA 23)
        fail(f"{pack_id!r} is not a pack id (pack_ + 16 lowercase hex, as `aiblox answer` "
             f"prints it)")
    from aiblox.stores import mask_password

    db = existing_store(db, dataset)
    store = open_db(db)
    try:
        row = store.get_evidence_pack(pack_id)
    finally:
        store.close()
    if row is None:
        fail(f"no evidence pack {pack_id} in {mask_password(db)}")
        raise AssertionError  # unreachable: fail exits
    return row


def _out_spares_store(out: Path, db: str) -> None:
    """One ``error:`` line when ``--out`` is the DuckDB store file the pack is read from (by
    path or as a hard link), its write-ahead log, or inside its indexes folder: ``--out`` over
    ``--db`` replaced the store with one page of HTML."""
    from aiblox.stores import StoreError, store_backend

    try:
        if store_backend(db) != "duckdb" or db == ":memory:":
            return
    except StoreError:  # an unknown scheme: opening the store says so
        return
    path = Path(db[len("duckdb:///"):] if db.startswith("duckdb:///") else db)
    outputs_spare_inputs({out: "--out"}, {path: "the store", Path(f"{path}.wal"): "its log"},
                         {Path(f"{path}.indexes"): "the store's indexes"})


def _parse(row: dict[str, Any], db: str, verdict: Any = None) -> EvidencePack:
    """The stored pack; one that no longer parses (its stored JSON changed) is an error (exit
    2), or with ``verdict`` (a console: verify, export) a ``FAILED`` verdict (exit 1), as any
    other change to a stored pack."""
    from aiblox.evidence import pack_from_json
    from aiblox.stores import mask_password

    try:
        return pack_from_json(row["json"])
    except ValueError as exc:
        why = f"its stored JSON is not a valid pack: {' '.join(option_message(exc).split())}"
        if verdict is not None:
            _failed(verdict, row["pack_id"], [why])
        fail(f"{mask_password(db)}: evidence pack {row['pack_id']}: {why}")
        raise


def _failed(where: Any, pack_id: str, problems: list[str]) -> NoReturn:
    """Print a ``FAILED`` verdict per problem on the console ``where`` and exit 1. A problem
    quotes stored text (a tenant, a field): printed as text, never as rich markup."""
    from rich.text import Text

    for p in problems:
        where.print(Text.assemble(("FAILED", "red"), f" {pack_id}: {p}"), soft_wrap=True)
    raise typer.Exit(1)


def _problems(row: dict[str, Any], pack: EvidencePack, keys: dict[str, bytes] | None,
              require_signature: bool) -> list[str]:
    from aiblox.evidence import pack_content, verify_pack
    from aiblox.hashing import sha256_hex

    # without keys a signature cannot be checked: check the id and content alone
    checked = pack if keys is not None else pack.model_copy(update={"signature": None})
    problems = verify_pack(checked, keys, require_signature=require_signature)
    if pack.pack_id != row["pack_id"]:
        problems.append(f"stored under {row['pack_id']} but the pack says {pack.pack_id}")
    if sha256_hex(pack_content(pack)) != row["sha256"]:
        problems.append("content does not match the sha256 recorded when it was stored")
    # the row's columns stand beside the pack (a query reads them, not the JSON): a column
    # changed since the pack was stored would show a tenant, a parent or a signature the
    # pack does not have
    said = {"tenant_id": pack.tenant_id, "trace_id": pack.trace_id,
            "parent_pack_id": pack.parent_pack_id, "signed": pack.signature is not None}
    for column, value in said.items():
        stored = bool(row.get(column)) if column == "signed" else row.get(column)
        if stored != value:
            problems.append(f"the stored row's {column} is {stored!r} but the pack says "
                            f"{value!r}")
    return problems


@pack_app.command("list")
def list_packs(
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON array."),
    limit: int | None = typer.Option(
        None, "--limit", help="The newest N packs only (only their JSON is read: a store of "
                              "many packs lists in a moment)."),
) -> None:
    """The store's evidence packs, newest first: id, when stored, the decision (answer or
    refusal, and its status), the question, tenant, signed, parent pack."""
    from rich.table import Table
    from rich.text import Text

    from aiblox.stores import mask_password

    if limit is not None:
        checked_at_least(limit, 1, "--limit")
    db = existing_store(db, dataset)
    store = open_db(db)
    try:
        if limit is None:
            rows = store.list_evidence_packs(with_json=True)
            total = len(rows)
        else:  # the rows' columns sorted as the listing sorts, then the newest N's JSON
            heads = store.list_evidence_packs()
            total = len(heads)
            heads.sort(key=lambda r: (str(r.get("created_at")), r["pack_id"]), reverse=True)
            rows = [store.get_evidence_pack(r["pack_id"]) or r for r in heads[:limit]]
    finally:
        store.close()
    listed = []
    for row in rows:
        # what a list needs, read from the stored JSON, never from the row's columns (the
        # tenant, signed and parent the pack says: `pack verify` checks the row against them)
        try:
            data = json.loads(row.get("json") or "{}")
            decision = data.get("decision") or {}
            question = str(data.get("query") or "")
            said = f"{decision.get('kind', '?')} ({decision.get('status', '?')})"
            own = {"tenant": data.get("tenant_id", "default"),
                   "signed": data.get("signature") is not None,
                   "parent": data.get("parent_pack_id")}
        except (TypeError, ValueError, AttributeError):
            question, said = "", "unreadable (aiblox pack verify)"
            own = {"tenant": None, "signed": None, "parent": None}
        listed.append({"pack_id": row["pack_id"], "created_at": str(row.get("created_at")),
                       "decision": said, "question": question, **own})
    listed.sort(key=lambda r: (r["created_at"], r["pack_id"]), reverse=True)
    if as_json:
        typer.echo(json.dumps(listed, indent=2, ensure_ascii=False))
        return
    if not listed:
        console.print(f"no evidence packs in {mask_password(db)} (aiblox answer stores one per "
                      "question)", markup=False)
        return
    shown = f"the newest {len(listed)} of {total}" if len(listed) < total else str(total)
    table = Table(title=Text(f"evidence packs in {mask_password(db)}: {shown}"))
    for col in ("pack", "stored (UTC)", "decision", "question", "tenant", "signed", "parent"):
        table.add_column(col)
    for r in listed:  # stored text (a question, a tenant) escaped, never rich markup
        table.add_row(stored_text(r["pack_id"]), stored_text(r["created_at"]),
                      stored_text(r["decision"]), stored_text(r["question"]),
                      stored_text(r["tenant"]), {True: "yes", False: "no"}.get(r["signed"], "?"),
                      stored_text("?" if r["signed"] is None else r["parent"] or "-"))
    results.print(table)


@pack_app.command("show")
def show(
    pack_id: str = typer.Argument(..., help="Pack id (pack_ + 16 hex)."),
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
) -> None:
    """Print the stored pack as JSON on stdout (a summary goes to stderr)."""
    row = _load_row(pack_id, db, dataset)
    pack = _parse(row, db)
    console.print(f"{pack.pack_id}: {pack.decision.kind} ({pack.decision.status}), "
                  f"{len(pack.sources)} sources, {len(pack.tool_calls)} tool calls, "
                  f"signed: {'yes' if pack.signature else 'no'}, parent: {pack.parent_pack_id}",
                  soft_wrap=True)
    typer.echo(json.dumps(json.loads(row["json"]), sort_keys=True, indent=2,
                          ensure_ascii=False))


@pack_app.command("verify")
def verify(
    pack_id: str = typer.Argument(..., help="Pack id (pack_ + 16 hex)."),
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    key_file: Path | None = typer.Option(
        None, "--key-file", help="Tenant key to check the signature with (then a signature "
                                 "is required)."),
    key_id: str | None = typer.Option(None, "--key-id",
                                      help="Key id of --key-file (default: the pack's tenant)."),
) -> None:
    """Check that the stored pack is intact: its id matches its content, the content matches
    what was stored and, with --key-file, its signature matches. Exit 1 when it does not."""
    row = _load_row(pack_id, db, dataset)
    pack = _parse(row, db, verdict=results)
    keys = None
    if key_file is not None:
        keys = {key_id or pack.tenant_id: read_key(key_file)}
    problems = _problems(row, pack, keys, require_signature=key_file is not None)
    if problems:  # the verdict is the result: stdout, as OK is
        _failed(results, pack_id, problems)
    signed = ""
    if pack.signature is not None:  # never "OK" alone for a signature nobody checked
        signed = (f", signature ok (key {pack.signature.key_id})" if keys else
                  ", signature not checked (give --key-file to check it)")
    typer.echo(f"OK {pack_id}: id matches content{signed}")


@pack_app.command("export")
def export(
    pack_id: str = typer.Argument(..., help="Pack id (pack_ + 16 hex)."),
    db: str = typer.Option("", "--db", help=STORE_HELP),
    dataset: str = typer.Option("", "--dataset", help=DATASET_STORE_HELP),
    fmt: str = typer.Option("json", "--format", help="json (canonical JSON) or html."),
    out: str = typer.Option("-", "--out",
                            help="File to write; - (the default) prints it to standard output."),
) -> None:
    """Write the stored pack as canonical JSON or as a readable HTML page, to a file or to
    standard output; the same pack gives the same bytes from any store (its created_at, when
    the store stored it, is left out: null, and its observations, what the store's chunk cache
    did: empty). A pack that fails verification is not exported (exit 1)."""
    if fmt not in ("json", "html"):
        fail(f"--format must be json or html, not {fmt!r}")
    if out != "-":
        _out_spares_store(Path(out), existing_store(db, dataset))
    row = _load_row(pack_id, db, dataset)
    pack = _parse(row, db, verdict=console)
    problems = _problems(row, pack, None, require_signature=False)
    if problems:
        _failed(console, pack_id, problems)
    from aiblox.evidence import pack_to_html, pack_to_json

    # the store's, not the pack's: when it stored it, what its chunk cache did
    pack = pack.model_copy(update={"created_at": None, "observations": {}})
    text = pack_to_json(pack) if fmt == "json" else pack_to_html(pack)
    if out == "-":  # the exact bytes, nothing added: `aiblox pack export ID > pack.json`
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.flush()
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    console.print(f"wrote {path} ({fmt}, {len(text.encode('utf-8'))} bytes)", markup=False,
                  soft_wrap=True)  # informational: stderr, silenced by aiblox --quiet
