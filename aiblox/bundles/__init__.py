"""Evidence bundles: evidence from outside the corpus, bounded, redacted and tracked per run.

A bundle gathers inline text, lake files, HTTP captures, SQL results and their definitions, and
document or transcript chunks into one deterministic :class:`EvidenceBundle` under an
:class:`EvidencePolicy` (item and byte limits, row sampling, redaction), written as a canonical
JSON artifact, and tracked per run in tables beside a store's own (:func:`open_bundle_store`:
a :class:`BundleStore` over a DuckDB or PostgreSQL store's connection). It stands apart from the
answer path (``aiblox answer`` records its evidence in an audit pack, :mod:`aiblox.evidence`):
the core store protocol carries no bundle method and nothing outside this package imports it.
"""

from aiblox.bundles.artifact import (
    BundleArtifact,
    bundle_artifact_bytes,
    read_evidence_bundle,
    tracking_rows,
    verify_evidence_bundle,
    write_evidence_bundle,
)
from aiblox.bundles.builder import build_evidence_bundle
from aiblox.bundles.duckdb_store import DuckDBBundleStore
from aiblox.bundles.lake import LakePathError
from aiblox.bundles.loaders import EvidenceLoadError, register_loader
from aiblox.bundles.models import (
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
from aiblox.bundles.open import open_bundle_store
from aiblox.bundles.redaction import Redactor, RedactorRegistry, redact
from aiblox.bundles.store import BundleStore

__all__ = [
    "BundleArtifact",
    "BundleBounding",
    "BundleStore",
    "BundleSummary",
    "DuckDBBundleStore",
    "EVIDENCE_BUILD_VERSION",
    "EVIDENCE_POLICY_VERSION",
    "EVIDENCE_TYPES",
    "EvidenceBundle",
    "EvidenceItem",
    "EvidenceLoadError",
    "EvidencePolicy",
    "FullRef",
    "ItemBounding",
    "LakePathError",
    "LoadError",
    "RedactionRecord",
    "Redactor",
    "RedactorRegistry",
    "build_evidence_bundle",
    "bundle_artifact_bytes",
    "open_bundle_store",
    "read_evidence_bundle",
    "redact",
    "register_loader",
    "tracking_rows",
    "verify_evidence_bundle",
    "write_evidence_bundle",
]
