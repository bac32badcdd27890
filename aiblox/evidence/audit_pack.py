"""The audit pack: the auditable, immutable record of one answered query (the seed's evidence
pack, :class:`EvidencePack`).

Adapted from the evidence pack specification seed to this harness. A pack records what was
decided (the answer or the refusal), the sources it rests on (verbatim excerpts of at most
2,000 characters, the sha256 of the full content, retrieval time, confidence), every tool call
(retrieval and LLM calls, failed ones too, with intended and actual action and a contradiction
flag), the prompts (template, version, sha256 of the prompt bytes), model, trace id and a memo
whose body cites the top three sources as ``[1]``, ``[2]``, ``[3]``.

Integrity:

- ``pack_id`` is ``pack_`` + the first 16 hex digits of the sha256 of the pack's canonical
  content (everything but ``pack_id``, ``signature``, ``created_at`` and ``observations``).
  ``observations`` holds what a run saw that is not evidence (cache hits, misses and writes,
  the retrieval's batch size): shown with the pack, never hashed or signed, so the same inputs
  give the same id on a warm or a cold cache, retrieved alone or in a batch.
- Packs are frozen models; :func:`revise_pack` makes a new pack with a new id whose
  ``parent_pack_id`` is the old one, which stays as it was.
- :func:`sign_pack` adds an HMAC-SHA256 over ``pack_id`` and the content with a per-tenant key;
  :func:`verify_pack` reports any change to the content, the id or the signature.

Export: :func:`pack_to_json` (canonical JSON) and :func:`pack_to_html` (a readable page).
Every store keeps packs in one insert-only table, ``evidence_packs(pack_id PK, parent_pack_id,
tenant_id, trace_id, created_at, sha256, signed, json)`` (``Store.put_evidence_pack``).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from aiblox.hashing import canonical_json, sha256_hex, sha256_text

__all__ = [
    "Decision",
    "EXCERPT_MAX_CHARS",
    "EvidencePack",
    "Memo",
    "MemoText",
    "PACK_VERSION",
    "PackSignature",
    "PackSource",
    "PromptRecord",
    "ToolCallRecord",
    "build_evidence_pack",
    "compute_pack_id",
    "pack_content",
    "pack_from_json",
    "pack_to_html",
    "pack_to_json",
    "revise_pack",
    "sign_pack",
    "verify_pack",
]

PACK_VERSION = "2"
"""Version of the pack's record, hashed into every pack id. 2: the retrieval call's inputs
record the chunks asked for (``top_k_chunks``) and no longer the batch size (an observation)."""
EXCERPT_MAX_CHARS = 2000
_PACK_ID = re.compile(r"^pack_[0-9a-f]{16}$")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Decision(_Frozen):
    """What was decided for the query."""

    kind: Literal["answer", "refusal"]
    """An answer was given, or the system refused (e.g. no evidence)."""
    text: str
    """The answer text, or the refusal message."""
    status: str = "OK"
    """The pipeline's status (``OK``, ``NO_EVIDENCE``, ``FAILED`` ...)."""
    reason: str | None = None
    """Why the system refused, when it did."""


class PackSource(_Frozen):
    """One source the decision rests on."""

    name: str
    """Source name (dataset, connector, store)."""
    uri: str | None = None
    """Where the source lives (URL, lake URI)."""
    internal_ref: str | None = None
    """An internal reference (item id, evidence id) when there is no URI."""
    excerpt: str = Field(max_length=EXCERPT_MAX_CHARS)
    """Verbatim excerpt, at most 2,000 characters."""
    content_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the full retrieved content."""
    retrieved_at: str
    """When the content was retrieved (ISO-8601, as recorded by the retriever)."""
    confidence: float = Field(ge=0.0, le=1.0)
    """Confidence in this source for the decision, in [0, 1]."""

    @model_validator(mode="after")
    def _has_location(self) -> PackSource:
        if not self.uri and not self.internal_ref:
            raise ValueError(f"source {self.name!r}: give a uri or an internal_ref")
        return self

    @classmethod
    def from_content(
        cls,
        *,
        name: str,
        content: str,
        retrieved_at: str,
        confidence: float,
        uri: str | None = None,
        internal_ref: str | None = None,
        excerpt: str | None = None,
    ) -> PackSource:
        """A source whose hash is taken from ``content`` and whose excerpt is ``excerpt`` or
        the first 2,000 characters of ``content``."""
        return cls(
            name=name,
            uri=uri,
            internal_ref=internal_ref,
            excerpt=(content if excerpt is None else excerpt)[:EXCERPT_MAX_CHARS],
            content_sha256=sha256_text(content),
            retrieved_at=retrieved_at,
            confidence=confidence,
        )


class ToolCallRecord(_Frozen):
    """One tool invocation (retrieval, LLM call, other), successful or not."""

    tool_name: str
    """Name of the tool or component called."""
    kind: Literal["retrieval", "llm", "other"] = "other"
    """What kind of call it was."""
    intended_action: str
    """What the system meant to do."""
    actual_action: str
    """What the call actually did."""
    contradiction_flag: bool = False
    """True when intended and actual action differ (set automatically)."""
    side_effects: list[str] = Field(default_factory=list)
    """Side effects, stated plainly (none for read-only calls)."""
    status: Literal["ok", "failed"] = "ok"
    """Whether the call succeeded; failed calls are evidence too."""
    error: str | None = None
    """Error message of a failed call."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """Parameters of the call (no secrets)."""
    outputs: dict[str, Any] = Field(default_factory=dict)
    """Summary of what the call returned."""

    @model_validator(mode="before")
    @classmethod
    def _flag(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "intended_action" in data and "actual_action" in data:
            differs = data["intended_action"] != data["actual_action"]
            if data.get("contradiction_flag", differs) != differs:
                raise ValueError(
                    "contradiction_flag must be true exactly when intended and actual action differ"
                )
            data = {**data, "contradiction_flag": differs}
        return data


class PromptRecord(_Frozen):
    """A prompt sent to a model."""

    template_name: str
    """Name of the prompt template."""
    template_version: str
    """Version of the template."""
    prompt_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the exact prompt bytes."""


class MemoText(_Frozen):
    """The memo in one language."""

    language: str = Field(pattern=r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
    """BCP 47 language tag, e.g. ``en`` or ``ar``."""
    title: str
    """Memo title."""
    executive_summary: str
    """Short summary for a reader in a hurry."""
    body: str
    """Full memo; cites the top sources inline as ``[1]``, ``[2]``, ``[3]``."""


class Memo(_Frozen):
    """The human-readable account: one language, with room for a second."""

    primary: MemoText
    """The memo in its main language."""
    secondary: MemoText | None = None
    """The same memo in a second language, when there is one."""

    @model_validator(mode="after")
    def _distinct_languages(self) -> Memo:
        if self.secondary is not None and self.secondary.language == self.primary.language:
            raise ValueError("the secondary memo must be in another language")
        return self


class PackSignature(_Frozen):
    """HMAC-SHA256 of a pack with a per-tenant key."""

    algorithm: Literal["hmac-sha256"] = "hmac-sha256"
    """Signature algorithm."""
    key_id: str
    """Which tenant key signed (the key itself is never stored)."""
    value: str
    """Hex HMAC over ``pack_id`` and the canonical content."""


class EvidencePack(_Frozen):
    """The auditable record of one answered query. Build with :func:`build_evidence_pack`."""

    pack_version: str = PACK_VERSION
    """Version of this record's format."""
    pack_id: str = Field(pattern=_PACK_ID.pattern)
    """``pack_`` + 16 hex digits derived from the content."""
    parent_pack_id: str | None = None
    """The pack this one revises, if any."""
    tenant_id: str = "default"
    """Tenant whose key signs the pack."""
    query: str
    """The question asked, verbatim."""
    query_id: str | None = None
    """The query's id in a labelled dataset, when there is one."""
    decision: Decision
    """The answer or the refusal."""
    sources: list[PackSource] = Field(default_factory=list)
    """Everything consulted, most important first."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """Every call made, failed ones included, in order."""
    prompts: list[PromptRecord] = Field(default_factory=list)
    """Prompts sent to models."""
    model: str | None = None
    """Model that produced the answer."""
    model_version: str | None = None
    """Version of that model."""
    trace_id: str | None = None
    """Trace id linking the decision to logs."""
    evidence_bundle_id: str | None = None
    """The evidence bundle the answer was assembled from, when there is one."""
    memo: Memo
    """Human-readable memo."""
    created_at: str | None = None
    """Creation time (ISO-8601); recorded, never hashed."""
    observations: dict[str, Any] = Field(default_factory=dict)
    """What the run observed that is not evidence, e.g. the retrieval's chunk-cache hits,
    misses and writes and how many queries shared its round (``{"retrieval": {"counts": {...},
    "side_effects": [...], "params": {"batch_size": n}}}``); recorded, never hashed or signed,
    so a warm or a cold cache, or a query retrieved alone or in a batch, gives the same pack
    id."""
    signature: PackSignature | None = None
    """Tenant signature, when signed."""

    @field_validator("parent_pack_id")
    @classmethod
    def _parent_format(cls, v: str | None) -> str | None:
        if v is not None and not _PACK_ID.match(v):
            raise ValueError(f"parent_pack_id {v!r} is not a pack id")
        return v

    @model_validator(mode="after")
    def _memo_cites_top_sources(self) -> EvidencePack:
        need = [f"[{i}]" for i in range(1, min(3, len(self.sources)) + 1)]
        for memo in (self.memo.primary, self.memo.secondary):
            if memo is None:
                continue
            missing = [c for c in need if c not in memo.body]
            if missing:
                raise ValueError(
                    f"memo.{memo.language}.body must cite the top sources inline; missing {missing}"
                )
        return self


_UNHASHED = ("pack_id", "signature", "created_at", "observations")


def pack_content(pack: EvidencePack | Mapping[str, Any]) -> dict[str, Any]:
    """The hashed part of a pack: every field but ``pack_id``, ``signature``, ``created_at``
    and ``observations``."""
    data = pack.model_dump(mode="json") if isinstance(pack, BaseModel) else dict(pack)
    return {k: v for k, v in data.items() if k not in _UNHASHED}


def compute_pack_id(content: Mapping[str, Any]) -> str:
    """``pack_`` + the first 16 hex digits of sha256 of the canonical content."""
    return "pack_" + sha256_hex(content)[:16]


def build_evidence_pack(**fields: Any) -> EvidencePack:
    """An :class:`EvidencePack` from its fields, with ``pack_id`` derived from them."""
    if "pack_id" in fields or "signature" in fields:
        raise ValueError("pack_id and signature are derived; do not pass them")
    draft = EvidencePack.model_validate({**fields, "pack_id": "pack_" + "0" * 16})
    return draft.model_copy(update={"pack_id": compute_pack_id(pack_content(draft))})


def revise_pack(pack: EvidencePack, **changes: Any) -> EvidencePack:
    """A new pack with ``changes`` applied, a new id and ``parent_pack_id`` = the old id; the
    old pack is untouched. Any signature is dropped (sign the new pack anew)."""
    if "parent_pack_id" in changes:
        raise ValueError("parent_pack_id is set by revise_pack")
    data = pack_content(pack)
    data.update(
        {
            k: (v.model_dump(mode="json") if isinstance(v, BaseModel) else v)
            for k, v in changes.items()
        }
    )
    data["parent_pack_id"] = pack.pack_id
    data["created_at"] = changes.get("created_at")
    data["observations"] = changes.get("observations", {})
    new = build_evidence_pack(**data)
    same = {**pack_content(new), "parent_pack_id": None} == {
        **pack_content(pack),
        "parent_pack_id": None,
    }
    if same:
        raise ValueError("revision changes nothing")
    return new


def _mac(pack: EvidencePack, key: bytes) -> str:
    msg = (pack.pack_id + "\n" + canonical_json(pack_content(pack))).encode("utf-8")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def sign_pack(pack: EvidencePack, key: bytes, key_id: str) -> EvidencePack:
    """A copy of ``pack`` signed with the tenant's ``key``."""
    if not key:
        raise ValueError("signing key must not be empty")
    return pack.model_copy(
        update={"signature": PackSignature(key_id=key_id, value=_mac(pack, key))}
    )


def verify_pack(
    pack: EvidencePack, keys: Mapping[str, bytes] | None = None, *, require_signature: bool = False
) -> list[str]:
    """Problems with ``pack`` (empty when it is intact): an id that does not match the content,
    a signature that does not match (``keys`` maps key ids to tenant keys), a missing one when
    ``require_signature``, or a signature whose key is unknown."""
    problems = []
    if compute_pack_id(pack_content(pack)) != pack.pack_id:
        problems.append("pack_id does not match the pack's content")
    sig = pack.signature
    if sig is None:
        if require_signature:
            problems.append("pack is not signed")
        return problems
    key = (keys or {}).get(sig.key_id)
    if key is None:
        problems.append(f"no key for signature key_id {sig.key_id!r}")
    elif not hmac.compare_digest(_mac(pack, key), sig.value):
        problems.append("signature does not match the pack")
    return problems


def pack_to_json(pack: EvidencePack) -> str:
    """Canonical JSON of the whole pack (the canonical export format)."""
    return canonical_json(pack.model_dump(mode="json"))


def pack_from_json(text: str) -> EvidencePack:
    """A pack from its JSON (validated; call :func:`verify_pack` to check its integrity)."""
    return EvidencePack.model_validate(json.loads(text))


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def pack_to_html(pack: EvidencePack) -> str:
    """A self-contained, readable HTML page of the pack (all text escaped)."""
    m = pack.memo.primary
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{_e(m.language)}"><head><meta charset="utf-8">',
        f"<title>{_e(m.title)} ({_e(pack.pack_id)})</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em;"
        "vertical-align:top}blockquote{white-space:pre-wrap;background:#f6f6f6}</style>",
        "</head><body>",
        f"<h1>{_e(m.title)}</h1>",
        f"<p><b>Pack</b> {_e(pack.pack_id)}"
        + (f" (revises {_e(pack.parent_pack_id)})" if pack.parent_pack_id else "")
        + f" &middot; <b>signed</b> {'yes' if pack.signature else 'no'}"
        f" &middot; <b>model</b> {_e(pack.model)} {_e(pack.model_version)}"
        f" &middot; <b>trace</b> {_e(pack.trace_id)}</p>",
        f"<h2>Question</h2><p>{_e(pack.query)}</p>",
        f"<h2>Decision: {_e(pack.decision.kind)} ({_e(pack.decision.status)})</h2>",
        f"<blockquote>{_e(pack.decision.text)}</blockquote>",
    ]
    for memo in (m, pack.memo.secondary):
        if memo is None:
            continue
        dir_ = ' dir="rtl"' if memo.language.split("-")[0] in {"ar", "he", "fa", "ur"} else ""
        parts += [
            f'<section lang="{_e(memo.language)}"{dir_}><h2>{_e(memo.title)}</h2>',
            f"<p><i>{_e(memo.executive_summary)}</i></p>",
            f"<p>{_e(memo.body)}</p></section>",
        ]
    parts.append("<h2>Sources</h2><ol>")
    for s in pack.sources:
        where = _e(s.uri or s.internal_ref)
        parts.append(
            f"<li><b>{_e(s.name)}</b> {where} &middot; confidence {s.confidence:.2f} &middot; "
            f"retrieved {_e(s.retrieved_at)} &middot; sha256 <code>{_e(s.content_sha256)}</code>"
            f"<blockquote>{_e(s.excerpt)}</blockquote></li>"
        )
    parts.append(
        "</ol><h2>Tool calls</h2><table><tr><th>tool</th><th>kind</th>"
        "<th>intended</th><th>actual</th><th>status</th><th>side effects</th></tr>"
    )
    for c in pack.tool_calls:
        flag = " &#9888; contradiction" if c.contradiction_flag else ""
        parts.append(
            f"<tr><td>{_e(c.tool_name)}</td><td>{_e(c.kind)}</td><td>{_e(c.intended_action)}</td>"
            f"<td>{_e(c.actual_action)}{flag}</td><td>{_e(c.status)} {_e(c.error)}</td>"
            f"<td>{_e('; '.join(c.side_effects) or 'none')}</td></tr>"
        )
    parts.append("</table>")
    if pack.observations:
        parts.append("<h2>Observations (not part of the pack id)</h2>"
                     f"<pre>{_e(json.dumps(pack.observations, sort_keys=True, indent=1))}</pre>")
    parts.append("<h2>Prompts</h2><ul>")
    parts += [
        f"<li>{_e(p.template_name)} v{_e(p.template_version)} "
        f"<code>{_e(p.prompt_sha256)}</code></li>"
        for p in pack.prompts
    ]
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"
