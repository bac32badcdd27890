"""Evidence: source cards (``rag.sources``), bounded evidence bundles and audit packs."""

from aiblox.evidence.artifact import (
    BundleArtifact,
    bundle_artifact_bytes,
    read_evidence_bundle,
    tracking_rows,
    verify_evidence_bundle,
    write_evidence_bundle,
)
from aiblox.evidence.builder import build_evidence_bundle
from aiblox.evidence.contracts import (
    EVIDENCE_BUILD_VERSION,
    EVIDENCE_POLICY_VERSION,
    EVIDENCE_TYPES,
    BundleBounding,
    BundleSummary,
    EvidenceBundle,
    EvidenceItem,
    EvidencePolicy,
    FullRef,
    ItemBounding,
    LoadError,
    RedactionRecord,
)
from aiblox.evidence.events import rag_debug_event, rag_sources_event
from aiblox.evidence.ids import (
    doc_evidence_id,
    inline_evidence_id,
    lake_evidence_id,
    sql_evidence_id,
    sqldef_evidence_id,
    transcript_evidence_id,
)
from aiblox.evidence.lake import LakePathError, normalize_lake_uri, resolve_lake_uri
from aiblox.evidence.loaders import EvidenceLoadError, register_loader
from aiblox.evidence.packer import (
    PACKER_VERSION,
    DefaultEvidencePacker,
    EvidencePacker,
    EvidencePackOptions,
    PackDebug,
    PackResult,
    SourceItem,
    cut_snippet,
    retrieval_rank,
    safe_metadata,
)
from aiblox.evidence.redaction import Redactor, RedactorRegistry, luhn_valid, redact
from aiblox.evidence.sampling import sample_row_indices
from aiblox.evidence.sql_result import render_table, run_duckdb_query, sample_table
from aiblox.evidence.utf8 import split_utf8, truncate_utf8, utf8_len

__all__ = [
    "BundleArtifact",
    "BundleBounding",
    "BundleSummary",
    "DefaultEvidencePacker",
    "EVIDENCE_BUILD_VERSION",
    "EVIDENCE_POLICY_VERSION",
    "EVIDENCE_TYPES",
    "EvidenceBundle",
    "EvidenceItem",
    "EvidenceLoadError",
    "EvidencePackOptions",
    "EvidencePacker",
    "EvidencePolicy",
    "FullRef",
    "ItemBounding",
    "LakePathError",
    "LoadError",
    "PACKER_VERSION",
    "PackDebug",
    "PackResult",
    "RedactionRecord",
    "Redactor",
    "RedactorRegistry",
    "SourceItem",
    "build_evidence_bundle",
    "bundle_artifact_bytes",
    "cut_snippet",
    "doc_evidence_id",
    "inline_evidence_id",
    "lake_evidence_id",
    "luhn_valid",
    "normalize_lake_uri",
    "rag_debug_event",
    "rag_sources_event",
    "read_evidence_bundle",
    "redact",
    "register_loader",
    "render_table",
    "resolve_lake_uri",
    "retrieval_rank",
    "run_duckdb_query",
    "safe_metadata",
    "sample_row_indices",
    "sample_table",
    "split_utf8",
    "sql_evidence_id",
    "sqldef_evidence_id",
    "tracking_rows",
    "transcript_evidence_id",
    "truncate_utf8",
    "utf8_len",
    "verify_evidence_bundle",
    "write_evidence_bundle",
]
