"""Evidence loaders: one per evidence type, registered by name, each turning a reference into
raw (unbounded; unredacted, but for what must be redacted before it is cut or written: a
document split into chunks, a SQL result's cells and full result) evidence.

Reference shapes (a plain string is shorthand for the first key listed):

- ``inline_text``: ``{"text", "source_uri"?, "title"?}``.
- ``lake_text``: ``{"lake_uri"}``, a UTF-8 text file in the lake.
- ``lake_http``: ``{"lake_uri"}``, an HTTP capture: JSON ``{"url"?, "method"?, "status" |
  "status_code", "reason"?, "headers": {..} | [[name, value], ..], "body"}`` or a raw HTTP
  response (status line, headers, blank line, body). Credentials in headers (Authorization,
  Cookie, Set-Cookie, API-key headers) are always masked.
- ``sql_query_def``: ``{"query_key", "sql", "description"?}``.
- ``sql_result``: ``{"query_key"}`` plus one of ``"lake_uri"`` (a JSON result in the lake,
  ``{"columns", "rows"}`` or a list of objects), ``"columns"`` + ``"rows"``, ``"records"`` (a
  list of objects), or ``"sql"`` (run in DuckDB, on ``"database"``, a DuckDB file in the lake,
  on the builder's connection, or on an empty in-memory database; ``"params"`` optional).
  ``source_ref.sql_sha256`` is the sha256 of the SQL, with redaction on of the redacted SQL.
  With redaction on, the table is redacted cell by cell before a cell is cut, and so is the
  full result written to the lake (:mod:`aiblox.bundles.sql_redaction`).
- ``doc_chunk`` / ``transcript_chunk``: ``{"doc_id"`` (or ``"transcript_id"``), ``"text"`` or
  ``"lake_uri"``, ``"chunk_index"``?, ``"title"``?``}``. With ``chunk_index`` the text is that
  one chunk; without, the text is split into ``chunk_size``-byte chunks overlapping by
  ``chunk_overlap`` bytes.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiblox.bundles.ids import (
    doc_evidence_id,
    inline_evidence_id,
    lake_evidence_id,
    sql_evidence_id,
    sqldef_evidence_id,
    transcript_evidence_id,
)
from aiblox.bundles.lake import normalize_lake_uri, resolve_lake_uri
from aiblox.bundles.models import EvidencePolicy, FullRef
from aiblox.bundles.redaction import Redactor, redact
from aiblox.bundles.sql_redaction import full_result_cell_filter, render_redacted_table
from aiblox.bundles.sql_result import (
    SampledTable,
    render_table,
    rows_from_records,
    run_duckdb_query,
    sample_table,
)
from aiblox.bundles.utf8 import split_utf8
from aiblox.hashing import sha256_bytes

__all__ = [
    "EvidenceLoadError",
    "LOADERS",
    "LoadContext",
    "Loader",
    "RawEvidence",
    "SENSITIVE_HEADERS",
    "register_loader",
]

SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "x-amz-security-token",
        "x-goog-api-key",
    }
)
_MASK = "[REDACTED:header]"
FULL_ARTIFACT_DIR = "evidence/full"


class EvidenceLoadError(ValueError):
    """An evidence reference that cannot be loaded; the message names the reference."""


@dataclass
class RawEvidence:
    """Loaded evidence before redaction and bounding."""

    evidence_id: str
    evidence_type: str
    source_ref: dict[str, Any]
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    full_ref: FullRef | None = None
    """Set by a loader that already cut the content (SQL rows or columns)."""
    lake_uri: str | None = None
    """Lake URI of the artifact the content was read from, verbatim."""
    lake_sha256: str | None = None
    """sha256 of that artifact's bytes."""
    lake_size: int | None = None
    """Size of that artifact in bytes."""
    line_oriented: bool = False
    """Cut at a line end when bounding (tables)."""


@dataclass
class LoadContext:
    """What loaders may use."""

    policy: EvidencePolicy
    lake_root: Path | None = None
    sql_connection: Any = None
    redactors: list[Redactor] | None = None
    """Active redactors (None: redaction off); used for full artifacts written while loading."""
    persist_full: bool = True


Loader = Callable[[Any, LoadContext, int, str], list[RawEvidence]]
"""``loader(ref, ctx, index, where)``: ``index`` is the ref's position in its list, ``where``
names it for error messages (``evidence_refs.lake_text[2]``)."""

LOADERS: dict[str, Loader] = {}


def register_loader(evidence_type: str) -> Callable[[Loader], Loader]:
    """Register a loader for ``evidence_type`` (replacing any earlier one)."""

    def deco(fn: Loader) -> Loader:
        LOADERS[evidence_type] = fn
        return fn

    return deco


def _as_ref(ref: Any, key: str, where: str, allowed: set[str]) -> dict[str, Any]:
    if isinstance(ref, str):
        ref = {key: ref}
    if not isinstance(ref, Mapping):
        raise EvidenceLoadError(
            f"{where}: expected a string or an object, got {type(ref).__name__}"
        )
    unknown = sorted(set(ref) - allowed - {key})
    if unknown:
        raise EvidenceLoadError(
            f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed | {key})}"
        )
    return dict(ref)


def _need_str(ref: Mapping[str, Any], key: str, where: str) -> str:
    value = ref.get(key)
    if not isinstance(value, str) or not value:
        raise EvidenceLoadError(f"{where}.{key}: a non-empty string is required, got {value!r}")
    return value


def _read_lake(ctx: LoadContext, uri: str, where: str) -> tuple[str, bytes]:
    if ctx.lake_root is None:
        raise EvidenceLoadError(f"{where}: lake URI {uri!r} given but no lake_root")
    path = _resolve(ctx.lake_root, uri, where)
    return normalize_lake_uri(uri), path.read_bytes()


def _resolve(lake_root: Path, uri: str, where: str) -> Path:
    """The file at ``uri`` in the lake; a missing file or a refused URI names ``where``."""
    try:
        return resolve_lake_uri(lake_root, uri)
    except FileNotFoundError as exc:
        raise EvidenceLoadError(f"{where}: {exc}") from exc
    except ValueError as exc:  # LakePathError
        raise type(exc)(f"{where}: {exc}") from exc


def _decode(data: bytes, where: str, uri: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvidenceLoadError(f"{where}: lake file {uri!r} is not UTF-8 text ({exc})") from exc


@register_loader("inline_text")
def load_inline_text(ref: Any, ctx: LoadContext, index: int, where: str) -> list[RawEvidence]:
    """Inline evidence from the job payload: ``inline:N``."""
    r = _as_ref(ref, "text", where, {"source_uri", "title"})
    if not isinstance(r.get("text"), str):
        raise EvidenceLoadError(f"{where}.text: a string is required, got {r.get('text')!r}")
    source = {"source_uri": str(r.get("source_uri") or "job_input")}
    meta = {"title": r["title"]} if isinstance(r.get("title"), str) else {}
    return [RawEvidence(inline_evidence_id(index), "inline_text", source, r["text"], meta)]


@register_loader("lake_text")
def load_lake_text(ref: Any, ctx: LoadContext, index: int, where: str) -> list[RawEvidence]:
    """A text file in the lake: ``lake:PREFIX:0``."""
    r = _as_ref(ref, "lake_uri", where, set())
    uri, data = _read_lake(ctx, _need_str(r, "lake_uri", where), where)
    return [
        RawEvidence(
            lake_evidence_id(uri),
            "lake_text",
            {"lake_uri": uri},
            _decode(data, where, uri),
            lake_uri=uri,
            lake_sha256=sha256_bytes(data),
            lake_size=len(data),
        )
    ]


def _parse_raw_http(text: str) -> dict[str, Any]:
    head, sep, body = text.replace("\r\n", "\n").partition("\n\n")
    lines = head.split("\n")
    status_line = lines[0].split(" ", 2)
    if not status_line[0].upper().startswith("HTTP/") or len(status_line) < 2:
        raise ValueError("not an HTTP response: the first line is not 'HTTP/x y reason'")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers.append([name.strip(), value.strip()])
    return {
        "status": int(status_line[1]),
        "reason": status_line[2] if len(status_line) > 2 else "",
        "headers": headers,
        "body": body if sep else "",
    }


@register_loader("lake_http")
def load_lake_http(ref: Any, ctx: LoadContext, index: int, where: str) -> list[RawEvidence]:
    """An HTTP capture in the lake: status line and headers, then the body (cut first)."""
    r = _as_ref(ref, "lake_uri", where, set())
    uri, data = _read_lake(ctx, _need_str(r, "lake_uri", where), where)
    text = _decode(data, where, uri)
    try:
        cap = json.loads(text) if text.lstrip().startswith("{") else _parse_raw_http(text)
        if not isinstance(cap, dict):
            raise ValueError("capture is not an object")
        status = cap.get("status", cap.get("status_code"))
        headers = cap.get("headers") or []
        if isinstance(headers, Mapping):
            headers = list(headers.items())
        headers = [(str(k), str(v)) for k, v in headers]
        body = cap.get("body") or ""
        if not isinstance(body, str):
            body = json.dumps(body, sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError) as exc:
        raise EvidenceLoadError(
            f"{where}: lake file {uri!r} is not an HTTP capture ({exc})"
        ) from exc
    masked = sorted({k.lower() for k, _ in headers if k.lower() in SENSITIVE_HEADERS})
    lines = [f"HTTP {status} {cap.get('reason') or ''}".rstrip()]
    if cap.get("url"):
        lines.append(f"URL: {cap.get('method') or 'GET'} {cap['url']}")
    lines += [f"{k}: {_MASK if k.lower() in SENSITIVE_HEADERS else v}" for k, v in headers]
    content = "\n".join(lines) + "\n\n" + body
    meta = {
        "http": {
            "status": status,
            "url": cap.get("url"),
            "header_count": len(headers),
            "masked_headers": masked,
            "body_bytes": len(body.encode("utf-8")),
        }
    }
    return [
        RawEvidence(
            lake_evidence_id(uri),
            "lake_http",
            {"lake_uri": uri},
            content,
            meta,
            lake_uri=uri,
            lake_sha256=sha256_bytes(data),
            lake_size=len(data),
        )
    ]


@register_loader("sql_query_def")
def load_sql_query_def(ref: Any, ctx: LoadContext, index: int, where: str) -> list[RawEvidence]:
    """A SQL query definition: ``sqldef:PREFIX`` (same prefix as its results)."""
    r = _as_ref(ref, "sql", where, {"query_key", "description"})
    key, sql = _need_str(r, "query_key", where), _need_str(r, "sql", where)
    lines = [f"-- query_key: {key}"]
    if isinstance(r.get("description"), str):
        lines += [f"-- {line}" for line in r["description"].splitlines()]
    content = "\n".join(lines) + "\n" + sql.strip() + "\n"
    return [RawEvidence(sqldef_evidence_id(key), "sql_query_def", {"query_key": key}, content)]


@register_loader("sql_result")
def load_sql_result(ref: Any, ctx: LoadContext, index: int, where: str) -> list[RawEvidence]:
    """A SQL result, rows and columns bounded and sampled: ``sql:PREFIX:0``."""
    r = _as_ref(
        ref,
        "query_key",
        where,
        {"lake_uri", "columns", "rows", "records", "sql", "database", "params"},
    )
    key = _need_str(r, "query_key", where)
    sources = [k for k in ("lake_uri", "rows", "records", "sql") if k in r]
    if len(sources) != 1:
        raise EvidenceLoadError(
            f"{where}: give exactly one of lake_uri, columns+rows, records or sql; got {sources}"
        )
    pol = ctx.policy
    kw: dict[str, Any] = {
        "max_rows": pol.max_sql_rows,
        "max_cols": pol.max_sql_cols,
        "strategy": pol.sampling_strategy,
    }
    source_ref: dict[str, Any] = {"query_key": key}
    lake_uri = lake_sha = None
    lake = ctx.lake_root if ctx.persist_full else None  # where the full result may go
    # Where the full result is written while streaming (non-lake sources, when it will be cut):
    # a temporary file, renamed when it is kept, deleted otherwise (a failed load too).
    sink: _Sink | None = None
    cell_filter = full_result_cell_filter(ctx.redactors) if ctx.redactors else None
    redacted = False  # redaction changed a cell: a lake file is not the full content then

    def watched(v: Any) -> Any:
        nonlocal redacted
        out = cell_filter(v) if cell_filter is not None else v
        redacted = redacted or out != v
        return out

    try:
        if "lake_uri" in r:
            lake_uri, data = _read_lake(ctx, _need_str(r, "lake_uri", where), where)
            lake_sha = sha256_bytes(data)
            source_ref["lake_uri"] = lake_uri
            if cell_filter is not None and lake is not None:
                sink = _Sink(lake)  # the redacted full result
            try:
                cols, rows = rows_from_records(json.loads(_decode(data, where, lake_uri)))
                table = sample_table(cols, rows, len(rows), sink=_file(sink),
                                     cell_filter=watched if cell_filter is not None else None,
                                     **kw)
            except EvidenceLoadError:
                raise
            except ValueError as exc:  # not JSON, not a result, a row of another width
                raise EvidenceLoadError(f"{where}: {lake_uri!r}: {exc}") from exc
        elif "sql" in r:
            sql = _need_str(r, "sql", where)
            # with redaction on, the hash of the SQL as the bundle may show it: the raw SQL's
            # would confirm a guess at the secret its sqldef item shows masked
            shown = redact(sql, ctx.redactors)[0] if ctx.redactors else sql
            source_ref["sql_sha256"] = sha256_bytes(shown.encode("utf-8"))
            database = None
            if r.get("database") is not None:
                if ctx.lake_root is None:
                    raise EvidenceLoadError(f"{where}.database: needs a lake_root")
                db_uri = _need_str(r, "database", where)
                database = _resolve(ctx.lake_root, db_uri, f"{where}.database")
                source_ref["database"] = normalize_lake_uri(db_uri)
            if lake is not None:
                sink = _Sink(lake)
            try:
                table = run_duckdb_query(
                    sql,
                    database=database,
                    connection=ctx.sql_connection,
                    params=r.get("params"),
                    sink=_file(sink),
                    cell_filter=cell_filter,
                    **kw,
                )
            except EvidenceLoadError:
                raise
            except Exception as exc:  # duckdb errors: name the ref
                raise EvidenceLoadError(
                    f"{where}: query failed: {type(exc).__name__}: {exc}"
                ) from exc
        else:
            try:
                if "records" in r:
                    cols, rows = rows_from_records(r["records"])
                else:
                    cols, rows = rows_from_records({"columns": r.get("columns"), "rows": r["rows"]})
            except (ValueError, TypeError) as exc:
                raise EvidenceLoadError(f"{where}: {exc}") from exc
            if lake is not None:
                sink = _Sink(lake)
            try:
                table = sample_table(
                    cols, rows, len(rows), sink=_file(sink), cell_filter=cell_filter, **kw
                )
            except ValueError as exc:
                raise EvidenceLoadError(f"{where}: {exc}") from exc
        full_ref = None
        if table.rows_cut or table.cols_cut:
            # the lake file is the full content unless redaction changed a cell of it (then the
            # redacted full result, as a query's: FullRef is the content after redaction)
            uri = lake_uri if not redacted else None
            sha, nbytes = ((lake_sha, len(data)) if uri is not None
                           else (table.full_sha256, table.full_bytes))
            if uri is None and sink is not None and lake is not None:
                uri = f"{FULL_ARTIFACT_DIR}/{table.full_sha256}.json"
                sink.keep(resolve_lake_uri(lake, uri, must_exist=False))
            full_ref = FullRef(
                lake_uri=uri,
                content_sha256=sha or "",
                byte_count=nbytes,
                row_count=table.total_rows,
                col_count=table.total_columns,
            )
    finally:
        if sink is not None:
            sink.discard()
    meta: dict[str, Any] = {"sql": _sql_meta(table)}
    if ctx.redactors:  # each cell redacted before it is cut (the builder adds these records)
        content, meta["redactions"] = render_redacted_table(
            table, query_key=key, max_cell_chars=pol.max_cell_chars, redactors=ctx.redactors)
    else:
        content = render_table(table, query_key=key, max_cell_chars=pol.max_cell_chars)
    return [
        RawEvidence(
            sql_evidence_id(key),
            "sql_result",
            source_ref,
            content,
            meta,
            full_ref=full_ref,
            lake_uri=lake_uri,
            lake_sha256=lake_sha,
            lake_size=len(data) if lake_uri else None,
            line_oriented=True,
        )
    ]


def _sql_meta(t: SampledTable) -> dict[str, Any]:
    return {
        "total_rows": t.total_rows,
        "shown_rows": len(t.row_numbers),
        "total_columns": t.total_columns,
        "shown_columns": len(t.columns),
        "sampling_strategy": t.strategy,
        "rows_sampled": t.rows_cut,
        "columns_dropped": t.cols_cut,
        "full_result_sha256": t.full_sha256,
    }


def _file(sink: _Sink | None) -> Any:
    return None if sink is None else sink.file


class _Sink:
    """A temporary file in the lake's ``evidence/full/`` that the full result streams into."""

    def __init__(self, lake_root: Path) -> None:
        d = resolve_lake_uri(lake_root, FULL_ARTIFACT_DIR, must_exist=False)
        d.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".sql-", suffix=".tmp", dir=d)
        self.path: Path | None = Path(name)
        self.file = os.fdopen(fd, "w", encoding="utf-8", newline="")

    def keep(self, path: Path) -> None:
        """Close it and move it to ``path``."""
        self.file.close()
        if self.path is not None:
            os.replace(self.path, path)
            self.path = None

    def discard(self) -> None:
        """Close it and delete it, unless it was kept."""
        self.file.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None


def _chunk_loader(evidence_type: str, id_key: str, make_id: Callable[[str, int], str]) -> Loader:
    def load(ref: Any, ctx: LoadContext, index: int, where: str) -> list[RawEvidence]:
        r = _as_ref(ref, id_key, where, {"doc_id", "text", "lake_uri", "chunk_index", "title"})
        key = id_key if id_key in r else "doc_id"
        doc_id = _need_str(r, key, where)
        if ("text" in r) == ("lake_uri" in r):
            raise EvidenceLoadError(f"{where}: give exactly one of 'text' or 'lake_uri'")
        src: dict[str, Any] = {key: doc_id}
        lake_uri = lake_sha = None
        lake_size: int | None = None
        if "text" in r:
            if not isinstance(r["text"], str):
                raise EvidenceLoadError(f"{where}.text: a string is required")
            text = r["text"]
        else:
            lake_uri, data = _read_lake(ctx, _need_str(r, "lake_uri", where), where)
            lake_sha = sha256_bytes(data)
            lake_size = len(data)
            src["lake_uri"] = lake_uri
            text = _decode(data, where, lake_uri)
        base = {"title": r["title"]} if isinstance(r.get("title"), str) else {}
        ci = r.get("chunk_index")
        if ci is not None:
            if not isinstance(ci, int) or isinstance(ci, bool) or ci < 0:
                raise EvidenceLoadError(f"{where}.chunk_index: a non-negative int is required")
            meta = {**base, "chunk": {"index": ci}}
            return [
                RawEvidence(
                    make_id(doc_id, ci),
                    evidence_type,
                    {**src, "chunk_index": ci},
                    text,
                    meta,
                    lake_uri=lake_uri,
                    lake_sha256=lake_sha,
                    lake_size=lake_size,
                )
            ]
        # redacted whole before it is split: a secret across a chunk boundary matches no
        # redactor in either piece (offsets are then the redacted text's)
        found = redact(text, ctx.redactors) if ctx.redactors else None
        if found is not None:
            text = found[0]
        data_b = text.encode("utf-8")
        ranges = split_utf8(text, ctx.policy.chunk_size, ctx.policy.chunk_overlap)
        out = []
        for i, (s, e) in enumerate(ranges):
            meta = {
                **base,
                "chunk": {"index": i, "count": len(ranges), "byte_start": s, "byte_end": e},
            }
            if found is not None:
                meta["redactions"] = _chunk_records(found[1], data_b, s, e)
            out.append(
                RawEvidence(
                    make_id(doc_id, i),
                    evidence_type,
                    {**src, "chunk_index": i},
                    data_b[s:e].decode("utf-8"),
                    meta,
                )
            )
        return out

    return load


def _chunk_records(records: list[Any], data: bytes, start: int, end: int) -> list[Any]:
    """The whole text's redaction records as they fall in its chunk ``data[start:end]``
    (bytes): each replacement that overlaps the chunk, in the chunk's character offsets."""
    lo = len(data[:start].decode("utf-8"))
    hi = lo + len(data[start:end].decode("utf-8"))
    out = []
    for rec in records:
        spans = [(max(a, lo) - lo, min(b, hi) - lo) for a, b in rec.spans if a < hi and b > lo]
        if spans:
            out.append(rec.model_copy(update={"count": len(spans), "spans": spans}))
    return out


LOADERS["doc_chunk"] = _chunk_loader("doc_chunk", "doc_id", doc_evidence_id)
LOADERS["transcript_chunk"] = _chunk_loader(
    "transcript_chunk", "transcript_id", transcript_evidence_id
)
