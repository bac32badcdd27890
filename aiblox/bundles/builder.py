"""Build a bounded, redacted, deterministic evidence bundle (evidence bundles seed).

Steps, in the seed's order: (1) load every reference with its type's loader, (2) redact when
the policy enables it, (3) bound each item to ``max_item_bytes`` (never splitting a UTF-8
character), (4) bound the bundle: items are taken in order; one that would take the total past
``max_total_bytes`` is dropped (a later, smaller one may still fit) and once ``max_items`` are
kept the rest are dropped, each drop recorded with its reason, (5) record
every decision in item and bundle metadata.

Items come in a fixed order: inline evidence (``job_input["extra_params"]["evidence"]``, then
``job_input["evidence"]``), then the reference lists in :data:`EVIDENCE_TYPES` order, each in
its given order. When an item's content is cut, ``full_ref`` points at the full content (after
redaction, before bounding; its ``content_sha256`` and ``byte_count`` are that content's, so
``byte_count`` equals ``bounding.original_size``): the lake artifact it was read from when that
file holds exactly this content, else a copy written to ``evidence/full/<sha256>.txt`` in the
lake (the redacted text: a lake file redaction changed still holds the secrets, and an HTTP
capture holds its credential headers unmasked, so neither is ever the pointer); without a lake
root, ``full_ref`` carries only the hash and size.

With redaction on, nothing in the bundle keeps a secret: besides the content, every string in
an item's metadata (a title, an HTTP capture's URL ...) and its ``source_ref`` (an inline
``source_uri``) and every load error is redacted too; hashes and the identifiers an evidence id
repeats (lake URIs, query keys, document ids) are names the caller chose and stay as given. A
hash of something the bundle shows redacted is the redacted text's (``sql_sha256``: the raw
SQL's would confirm a guess at its secret), and a full copy written to the lake holds no more
than the content (a SQL result's full result is redacted cell by cell, nested cells and column
names included: :mod:`aiblox.bundles.sql_redaction`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from aiblox.bundles.lake import write_lake_bytes
from aiblox.bundles.loaders import (
    FULL_ARTIFACT_DIR,
    LOADERS,
    EvidenceLoadError,
    LoadContext,
    RawEvidence,
)
from aiblox.bundles.models import (
    EVIDENCE_BUILD_VERSION,
    EVIDENCE_TYPES,
    BundleBounding,
    BundleSummary,
    EvidenceBundle,
    EvidenceItem,
    EvidencePolicy,
    FullRef,
    ItemBounding,
    LoadError,
)
from aiblox.bundles.redaction import Redactor, RedactorRegistry, redact
from aiblox.bundles.utf8 import truncate_utf8
from aiblox.hashing import sha256_hex, sha256_text
from aiblox.text.tokens import count_tokens

__all__ = [
    "BUNDLE_NAMESPACE",
    "REF_KEYS",
    "build_evidence_bundle",
    "bundle_content_hash",
]

BUNDLE_NAMESPACE = uuid.UUID("6f1d2c4e-8a57-5b0e-9c3a-7e2f41d0b8a9")
"""uuid5 namespace of bundle ids."""

# evidence_refs keys accepted for each type (the seed's usage example uses plural names).
REF_KEYS: dict[str, str] = {
    "inline_text": "inline_text",
    "lake_text": "lake_text",
    "lake_http": "lake_http",
    "sql_query_def": "sql_query_def",
    "sql_query_defs": "sql_query_def",
    "sql_result": "sql_result",
    "sql_results": "sql_result",
    "doc_chunk": "doc_chunk",
    "doc_chunks": "doc_chunk",
    "transcript_chunk": "transcript_chunk",
    "transcript_chunks": "transcript_chunk",
}


def _inline_refs(job_input: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    if job_input is None:
        return []
    if not isinstance(job_input, Mapping):
        raise EvidenceLoadError(f"job_input: expected an object, got {type(job_input).__name__}")
    out: list[tuple[str, Any]] = []
    extra = job_input.get("extra_params")
    if isinstance(extra, Mapping) and extra.get("evidence") is not None:
        ev = extra["evidence"]
        if not isinstance(ev, list):
            raise EvidenceLoadError("job_input.extra_params.evidence: expected a list")
        out += [(f"job_input.extra_params.evidence[{i}]", e) for i, e in enumerate(ev)]
    if job_input.get("evidence") is not None:
        ev = job_input["evidence"]
        if not isinstance(ev, list):
            raise EvidenceLoadError("job_input.evidence: expected a list")
        out += [(f"job_input.evidence[{i}]", e) for i, e in enumerate(ev)]
    return out


def _grouped_refs(evidence_refs: Mapping[str, Any] | None) -> dict[str, list[tuple[str, Any]]]:
    groups: dict[str, list[tuple[str, Any]]] = {t: [] for t in EVIDENCE_TYPES}
    if evidence_refs is None:
        return groups
    if not isinstance(evidence_refs, Mapping):
        raise EvidenceLoadError(
            f"evidence_refs: expected an object, got {type(evidence_refs).__name__}"
        )
    for key in evidence_refs:  # grouped below by type order; keys only name the type
        if key not in REF_KEYS and key not in LOADERS:
            raise EvidenceLoadError(
                f"evidence_refs.{key}: unknown evidence type; known: {sorted(REF_KEYS)}"
            )
        refs = evidence_refs[key]
        if not isinstance(refs, list):
            raise EvidenceLoadError(f"evidence_refs.{key}: expected a list")
        etype = REF_KEYS.get(key, key)
        groups.setdefault(etype, [])
        groups[etype] += [(f"evidence_refs.{key}[{i}]", r) for i, r in enumerate(refs)]
    return groups


def _bound(raw: RawEvidence, content: str, policy: EvidencePolicy) -> tuple[str, ItemBounding]:
    size = len(content.encode("utf-8"))
    if size <= policy.max_item_bytes:
        return content, ItemBounding(
            applied=False, original_size=size, bounded_size=size, note="Within the item byte limit"
        )
    kept = truncate_utf8(content, policy.max_item_bytes, prefer_newline=raw.line_oriented)
    kept_size = len(kept.encode("utf-8"))
    return kept, ItemBounding(
        applied=True,
        original_size=size,
        bounded_size=kept_size,
        truncation_point=kept_size,
        note=f"Truncated to {policy.max_item_bytes} byte limit"
        + (" at a line end" if raw.line_oriented else ""),
    )


def bundle_content_hash(
    build_version: str,
    policy: EvidencePolicy,
    items: Sequence[EvidenceItem],
    summary: BundleSummary,
) -> str:
    """sha256 of what a bundle holds (everything but ``bundle_id`` and ``created_utc``)."""
    return sha256_hex(
        {"build_version": build_version, "policy": policy, "items": list(items), "summary": summary}
    )


def build_evidence_bundle(
    job_input: Mapping[str, Any] | None = None,
    evidence_refs: Mapping[str, Any] | None = None,
    policy: EvidencePolicy | None = None,
    lake_root: str | os.PathLike[str] | None = None,
    *,
    redactors: RedactorRegistry | None = None,
    sql_connection: Any = None,
    persist_full: bool = True,
    on_error: Literal["raise", "skip"] = "raise",
    created_utc: str | None = None,
) -> EvidenceBundle:
    """Load, redact, bound and record evidence into an :class:`EvidenceBundle`.

    ``on_error="raise"`` (default) raises :class:`EvidenceLoadError` (or ``LakePathError`` for a
    URI that would leave the lake) naming the failing reference; ``"skip"`` records it in
    ``summary.load_errors`` and goes on (a refused lake URI is never skipped silently: it is
    recorded too). ``persist_full`` writes the full content of cut items into the lake.
    """
    policy = policy or EvidencePolicy()
    root = Path(lake_root) if lake_root is not None else None
    active = None
    if policy.enable_redaction:
        active = (redactors or RedactorRegistry()).get(policy.redactors)
    ctx = LoadContext(
        policy=policy,
        lake_root=root,
        sql_connection=sql_connection,
        redactors=active,
        persist_full=persist_full,
    )

    work: list[tuple[str, str, int, Any]] = [
        ("inline_text", where, i, ref) for i, (where, ref) in enumerate(_inline_refs(job_input))
    ]
    for etype, refs in _grouped_refs(evidence_refs).items():
        if etype == "inline_text":  # continue inline numbering after the job input's entries
            base = len(work)
            work += [(etype, where, base + i, ref) for i, (where, ref) in enumerate(refs)]
        else:
            work += [(etype, where, i, ref) for i, (where, ref) in enumerate(refs)]
    order = {t: i for i, t in enumerate(EVIDENCE_TYPES)}  # inline_text first
    work.sort(key=lambda w: order.get(w[0], len(order)))  # stable: list order within a type

    # 1. load
    raws: list[RawEvidence] = []
    errors: list[LoadError] = []
    for etype, where, index, ref in work:
        try:
            raws += LOADERS[etype](ref, ctx, index, where)
        except (EvidenceLoadError, ValueError, OSError) as exc:
            if on_error == "raise":
                raise
            error = f"{type(exc).__name__}: {exc}"  # may quote the reference, secrets too
            errors.append(LoadError(ref=where, error=error if active is None
                                    else redact(error, active)[0]))
    seen: dict[str, int] = {}
    for raw in raws:  # duplicate ids would make the bundle ambiguous
        seen[raw.evidence_id] = seen.get(raw.evidence_id, 0) + 1
    dup = sorted(k for k, n in seen.items() if n > 1)
    if dup:
        raise EvidenceLoadError(f"evidence ids repeat: {dup} (the same source referenced twice)")

    # 2-3. redact and bound each item
    items: list[tuple[RawEvidence, str, str, dict[str, Any], ItemBounding]] = []
    for raw in raws:
        full = raw.content
        meta = dict(raw.metadata)
        if active is not None:
            # a chunk of a text redacted whole before its split carries that text's records,
            # a SQL table those of its cells, redacted before they were cut: carried through
            full, records = redact(full, active, prior=raw.metadata.get("redactions", ()))
            meta = {k: v if k == "redactions" else _redact_value(k, v, active)
                    for k, v in meta.items()}
            meta["redactions"] = [r.model_dump(mode="json") for r in records]
            raw = replace(raw, source_ref={k: _redact_value(k, v, active)
                                           for k, v in raw.source_ref.items()})
        kept, bounding = _bound(raw, full, policy)
        meta["bounding"] = bounding.model_dump(mode="json")
        items.append((raw, full, kept, meta, bounding))

    # 4. bound the bundle
    kept_items: list[tuple[RawEvidence, str, str, dict[str, Any], ItemBounding]] = []
    dropped: list[dict[str, str]] = []
    total = 0
    for entry in items:
        raw, _, kept, _, _ = entry
        size = len(kept.encode("utf-8"))
        if len(kept_items) >= policy.max_items:
            dropped.append({"evidence_id": raw.evidence_id, "reason": "max_items"})
        elif total + size > policy.max_total_bytes:
            dropped.append({"evidence_id": raw.evidence_id, "reason": "max_total_bytes"})
        else:
            kept_items.append(entry)
            total += size

    # 5. record
    out: list[EvidenceItem] = []
    type_counts: dict[str, int] = {}
    tokens = 0
    for raw, full, kept, meta, bounding in kept_items:
        full_ref = raw.full_ref
        if full_ref is None and bounding.applied:
            full_ref = _full_ref(raw, full, root if persist_full else None)
        n_tok = count_tokens(kept)
        tokens += n_tok
        type_counts[raw.evidence_type] = type_counts.get(raw.evidence_type, 0) + 1
        out.append(
            EvidenceItem(
                evidence_id=raw.evidence_id,
                evidence_type=raw.evidence_type,  # type: ignore[arg-type]
                source_ref=raw.source_ref,
                content=kept,
                content_sha256=sha256_text(kept),
                byte_count=len(kept.encode("utf-8")),
                approx_tokens=n_tok,
                metadata=meta,
                full_ref=full_ref,
            )
        )
    n_drop = len(dropped)
    summary = BundleSummary(
        item_count=len(out),
        type_counts=dict(sorted(type_counts.items())),
        total_bytes=total,
        approx_tokens=tokens,
        load_errors=errors,
        bundle_bounding=BundleBounding(
            applied=n_drop > 0,
            original_count=len(items),
            final_count=len(out),
            items_dropped=n_drop,
            total_bytes=total,
            dropped=dropped,
            note=(
                f"Dropped {n_drop} items to meet bundle limits"
                if n_drop
                else "Within bundle limits"
            ),
        ),
    )
    digest = bundle_content_hash(EVIDENCE_BUILD_VERSION, policy, out, summary)
    return EvidenceBundle(
        bundle_id=str(uuid.uuid5(BUNDLE_NAMESPACE, digest)),
        created_utc=created_utc,
        build_version=EVIDENCE_BUILD_VERSION,
        policy=policy,
        items=out,
        summary=summary,
    )


_IDENTIFIERS = frozenset({"lake_uri", "database", "query_key", "doc_id", "transcript_id"})
"""``source_ref`` and metadata keys whose values name a source (the evidence id repeats them):
kept as given when redacting."""


def _redact_value(key: str, value: Any, active: Sequence[Redactor]) -> Any:
    """``value`` (metadata or a ``source_ref`` entry under ``key``) with every string in it
    redacted, in dicts and lists to any depth; identifiers and hashes stay as they are."""
    if key in _IDENTIFIERS or key.endswith("sha256"):
        return value
    if isinstance(value, str):
        return redact(value, active)[0]
    if isinstance(value, Mapping):
        return {k: _redact_value(str(k), v, active) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(key, v, active) for v in value]
    return value


def _full_ref(raw: RawEvidence, full: str, root: Path | None) -> FullRef:
    """The pointer to ``full`` (the item's content after redaction): the lake file it was read
    from only when that file holds exactly ``full`` (not when redaction changed it, nor for an
    HTTP capture, whose content is rendered from the file with its credentials masked)."""
    data = full.encode("utf-8")
    sha = sha256_text(full)
    if raw.lake_uri is not None and raw.lake_sha256 == sha:
        return FullRef(lake_uri=raw.lake_uri, content_sha256=sha, byte_count=len(data))
    uri = None
    if root is not None:
        uri = f"{FULL_ARTIFACT_DIR}/{sha}.txt"
        write_lake_bytes(root, uri, data)
    return FullRef(lake_uri=uri, content_sha256=sha, byte_count=len(data))
