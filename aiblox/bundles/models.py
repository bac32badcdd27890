"""Pydantic models of the evidence bundles seed: policy, items, bounding records, bundle.

Departures from the seed, for determinism: ``bundle_id`` is a UUID derived from the bundle's
content (uuid5 of its content hash) instead of a random UUID, and ``created_utc`` is optional
(None by default) and never part of any hash.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "BundleBounding",
    "BundleSummary",
    "EVIDENCE_BUILD_VERSION",
    "EVIDENCE_POLICY_VERSION",
    "EVIDENCE_TYPES",
    "EvidenceBundle",
    "EvidenceItem",
    "EvidencePolicy",
    "EvidenceType",
    "FullRef",
    "ItemBounding",
    "LoadError",
    "RedactionRecord",
    "SamplingStrategy",
]

EVIDENCE_BUILD_VERSION = "2.4"
"""Version of the evidence builder (the seed's ``build_version``). A bundle's ``bundle_id`` is
derived from its content and this version, and the seed promises ids "stable for the same
inputs and policy": bump it whenever the builder gives other content for the same inputs and
policy (loading, redaction, bounding, sampling, summary), so one version never names two
bundles for one input. 2.1: redaction catches Unicode emails, grouped card numbers, short
``key=value`` secrets and ``Authorization`` headers (``aiblox/bundles/redaction.py``), so a
redacted bundle holding them has other content, and another ``bundle_id``, than at 2.0
(``tests/bundles/test_build_version.py`` pins one). 2.2: ``key=value`` secrets under compound
and environment-variable keys (``DB_PASSWORD``, ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``,
``refresh_token``) and PEM private key blocks are redacted too. 2.3: a quoted ``key=value``
secret is redacted whole (``password="correct horse"`` kept ``horse``), also after ``=>``, ``(``
and a JSON ``"key": "value"``, with URL userinfo passwords, PGP private key blocks, Stripe and
Hugging Face keys; with redaction on, metadata (an HTTP capture's URL), ``source_ref`` and load
errors are redacted too; and a cut HTTP capture's ``full_ref`` is the redacted content written to
the lake, never the raw capture file (``tests/bundles/test_build_version.py``). 2.4: a SQL
result's cells are redacted before they are cut to ``max_cell_chars`` (a secret across the cut
leaked its first characters), its full result in the lake is redacted in column names, nested
(``STRUCT``/``LIST``, JSON object) cells and numbers too (``full_ref`` and
``full_result_sha256`` change), and with redaction on ``sql_sha256`` is the redacted SQL's."""
EVIDENCE_POLICY_VERSION = "1"
"""Version of the bounding rules an :class:`EvidencePolicy` describes."""

EvidenceType = Literal[
    "inline_text",
    "lake_text",
    "lake_http",
    "sql_result",
    "sql_query_def",
    "doc_chunk",
    "transcript_chunk",
]
EVIDENCE_TYPES: tuple[str, ...] = (
    "inline_text",
    "lake_text",
    "lake_http",
    "sql_query_def",
    "sql_result",
    "doc_chunk",
    "transcript_chunk",
)
"""Every evidence type, in the order the builder loads them (after inline evidence)."""

SamplingStrategy = Literal["first_only", "first_last", "stride"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class EvidencePolicy(_Strict):
    """Bounding, sampling and redaction rules for one evidence bundle."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    policy_version: str = EVIDENCE_POLICY_VERSION
    """Version of these bounding rules; logged with every bundle."""
    max_items: int = Field(default=50, ge=1)
    """Maximum evidence items in a bundle."""
    max_total_bytes: int = Field(default=100_000, ge=1)
    """Maximum UTF-8 bytes of content across all items."""
    max_item_bytes: int = Field(default=10_000, ge=1)
    """Maximum UTF-8 bytes of content per item; longer content is cut (never mid-character)."""
    max_sql_rows: int = Field(default=100, ge=1)
    """Maximum rows of a SQL result rendered into an item."""
    max_sql_cols: int = Field(default=20, ge=1)
    """Maximum columns of a SQL result rendered into an item (the first ones are kept)."""
    sampling_strategy: SamplingStrategy = "first_last"
    """Row sampling when a SQL result has more than ``max_sql_rows`` rows: the first rows only,
    the first half and last half, or evenly spaced rows (every ``total/max``-th)."""
    max_cell_chars: int = Field(default=200, ge=1)
    """A rendered SQL cell longer than this is cut, marked with an ellipsis."""
    chunk_size: int = Field(default=5_000, ge=1)
    """UTF-8 bytes per chunk when a document or transcript is split into chunks."""
    chunk_overlap: int = Field(default=200, ge=0)
    """UTF-8 bytes shared by consecutive chunks."""
    enable_redaction: bool = False
    """Run the redactors before bounding over every item's content (a document or transcript
    whole, before it is split into chunks; a SQL result cell by cell, before a cell is cut, and
    its full result written to the lake, column names and nested values included), over its
    metadata (a title, an HTTP capture's URL) and its ``source_ref`` (an inline
    ``source_uri`` is redacted), and over load errors. Identifiers an evidence id repeats
    (``doc_id``, ``transcript_id``, ``query_key``, lake URIs, a SQL ``database``) and hashes
    are kept as given: they name the source; a SQL result's ``sql_sha256`` is then the hash of
    the redacted SQL, so it cannot confirm a guess at a secret the bundle shows masked."""
    redactors: tuple[str, ...] | None = None
    """Names of the redactors to run (in registry order); None: every registered redactor."""

    @model_validator(mode="after")
    def _overlap_below_size(self) -> EvidencePolicy:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be below chunk_size ({self.chunk_size})"
            )
        return self


class ItemBounding(_Strict):
    """How one item's content was bounded (the seed's ``metadata.bounding``)."""

    applied: bool
    """True when the content was cut."""
    original_size: int
    """UTF-8 bytes of the content before bounding (after redaction)."""
    bounded_size: int
    """UTF-8 bytes of the content kept."""
    truncation_point: int | None = None
    """Byte offset where the content was cut, None when it was not."""
    note: str
    """Human-readable account of the decision."""


class RedactionRecord(_Strict):
    """One redactor's work on one item; the redacted text itself is never recorded."""

    redactor: str
    """Name of the redactor."""
    count: int
    """Number of matches replaced."""
    spans: list[tuple[int, int]]
    """(start, end) character offsets of each replacement in the redacted content."""
    replacement: str
    """The text each match was replaced with."""


class FullRef(_Strict):
    """Where the full, unbounded content lives when an item's content was cut."""

    lake_uri: str | None = None
    """Lake-relative URI of the full artifact; None when no lake was given to persist into."""
    content_sha256: str
    """sha256 of the full content (after redaction, before bounding)."""
    byte_count: int
    """UTF-8 bytes of the full content."""
    row_count: int | None = None
    """Rows of the full SQL result (SQL results only)."""
    col_count: int | None = None
    """Columns of the full SQL result (SQL results only)."""


class EvidenceItem(_Strict):
    """One bounded piece of evidence."""

    evidence_id: str
    """Deterministic id: ``inline:N``, ``lake:PREFIX:CHUNK``, ``sql:PREFIX:CHUNK``,
    ``sqldef:PREFIX``, ``doc:PREFIX:CHUNK`` or ``transcript:PREFIX:CHUNK``."""
    evidence_type: EvidenceType
    """What kind of evidence this is."""
    source_ref: dict[str, Any] = Field(default_factory=dict)
    """Where the evidence came from (``source_uri``, ``lake_uri``, ``query_key``, ``doc_id``)."""
    content: str
    """The bounded (and, with redaction on, redacted) content."""
    content_sha256: str
    """sha256 of ``content``'s UTF-8 bytes."""
    byte_count: int
    """UTF-8 bytes of ``content``."""
    approx_tokens: int
    """Tokens of ``content`` under the default tiktoken encoding."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """``bounding`` (an :class:`ItemBounding`), ``redactions`` and type-specific records
    (``sql`` sampling, ``http`` status, chunk ranges)."""
    full_ref: FullRef | None = None
    """Pointer to the full content, set when the content was cut."""


class BundleBounding(_Strict):
    """How the bundle as a whole was bounded (the seed's ``bundle_bounding``)."""

    applied: bool
    """True when items were dropped."""
    original_count: int
    """Items loaded."""
    final_count: int
    """Items kept."""
    items_dropped: int
    """Items dropped."""
    total_bytes: int
    """UTF-8 bytes of content of the kept items."""
    dropped: list[dict[str, str]] = Field(default_factory=list)
    """``{"evidence_id", "reason"}`` per dropped item, reason ``max_items`` or
    ``max_total_bytes``."""
    note: str
    """Human-readable account of the decision."""


class LoadError(_Strict):
    """An evidence reference that could not be loaded (with ``on_error="skip"``)."""

    ref: str
    """Where the reference sits, e.g. ``evidence_refs.lake_text[2]``."""
    error: str
    """What went wrong."""


class BundleSummary(_Strict):
    """Statistics of a bundle."""

    item_count: int
    """Items in the bundle."""
    type_counts: dict[str, int]
    """Items per evidence type."""
    total_bytes: int
    """UTF-8 bytes of content across items."""
    approx_tokens: int
    """Sum of the items' ``approx_tokens``."""
    bundle_bounding: BundleBounding
    """How the bundle was bounded."""
    load_errors: list[LoadError] = Field(default_factory=list)
    """References skipped because they failed to load."""


class EvidenceBundle(_Strict):
    """A deterministic, bounded, auditable collection of evidence."""

    bundle_id: str
    """UUID derived from the content (same items and policy: same id)."""
    created_utc: str | None = None
    """Creation time when the caller records one; never hashed."""
    build_version: str = EVIDENCE_BUILD_VERSION
    """Version of the evidence builder."""
    policy: EvidencePolicy
    """The bounding policy applied."""
    items: list[EvidenceItem]
    """The evidence, in load order."""
    summary: BundleSummary
    """Statistics and bundle-level bounding record."""
