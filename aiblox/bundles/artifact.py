"""The evidence bundle as a JSON artifact: canonical bytes, sha256, write, read and verify.

The artifact is the canonical JSON (sorted keys, compact, UTF-8) of the bundle; the same
bundle always gives the same bytes and therefore the same sha256. In a lake the artifact is
addressed by the bundle id, which leaves ``created_utc`` out: the first artifact written for an
id is kept (the same evidence built again at another time gets that one back), so a tracked
``artifact_sha256`` is always the lake file's. :func:`tracking_rows` gives
the rows a :class:`~aiblox.bundles.store.BundleStore` keeps for it (the seed's
``evidence_bundle``, ``run_evidence`` and ``evidence_item`` tables).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from aiblox.bundles.builder import bundle_content_hash
from aiblox.bundles.lake import resolve_lake_uri
from aiblox.bundles.models import EvidenceBundle
from aiblox.hashing import canonical_json, sha256_bytes, sha256_text

__all__ = [
    "BUNDLE_ARTIFACT_DIR",
    "BundleArtifact",
    "bundle_artifact_bytes",
    "read_evidence_bundle",
    "tracking_rows",
    "verify_evidence_bundle",
    "write_evidence_bundle",
]

BUNDLE_ARTIFACT_DIR = "evidence/bundles"


class BundleArtifact(BaseModel):
    """Where a bundle artifact was written and what its bytes hash to."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    bundle_id: str
    """The bundle's id."""
    lake_uri: str | None
    """Lake-relative URI of the artifact (None when written outside a lake)."""
    path: str
    """File system path it was written to."""
    sha256: str
    """sha256 of the artifact bytes."""
    byte_count: int
    """Size of the artifact in bytes."""


def bundle_artifact_bytes(bundle: EvidenceBundle) -> bytes:
    """The canonical JSON bytes of ``bundle``."""
    return canonical_json(bundle.model_dump(mode="json")).encode("utf-8")


def write_evidence_bundle(
    bundle: EvidenceBundle,
    *,
    lake_root: str | os.PathLike[str] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> BundleArtifact:
    """Write ``bundle`` to ``lake_root/evidence/bundles/<bundle_id>.json`` or to ``path``.

    In a lake an artifact already there for the bundle id is never overwritten: when it is this
    bundle but for ``created_utc`` (the same evidence built again), it is kept and returned (its
    sha256 and size: what a tracking row records must be the file's); any other file there
    raises ``ValueError`` naming it. ``path`` is the caller's own and is overwritten."""
    if (lake_root is None) == (path is None):
        raise ValueError("give exactly one of lake_root or path")
    data = bundle_artifact_bytes(bundle)
    uri = None
    if lake_root is not None:
        uri = f"{BUNDLE_ARTIFACT_DIR}/{bundle.bundle_id}.json"
        target, data = _write_first(lake_root, uri, bundle, data)
    else:
        target = Path(path)  # type: ignore[arg-type]
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return BundleArtifact(
        bundle_id=bundle.bundle_id,
        lake_uri=uri,
        path=str(target),
        sha256=sha256_bytes(data),
        byte_count=len(data),
    )


def _write_first(lake_root: str | os.PathLike[str], uri: str, bundle: EvidenceBundle,
                 data: bytes) -> tuple[Path, bytes]:
    """Create ``uri`` holding ``data`` unless a file is there (atomically: a hard link of a
    temporary file fails when the name is taken, so of two writers racing the first wins);
    returns the path and the bytes the file holds."""
    target = resolve_lake_uri(lake_root, uri, must_exist=False)
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        # re-check after creating parents: a symlinked parent must not lead outside the root
        target = resolve_lake_uri(lake_root, uri, must_exist=False)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: replace, unless a file is there
            if not target.exists():
                os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    held = target.read_bytes()
    if held != data:
        try:
            first = EvidenceBundle.model_validate(json.loads(held))
        except (ValueError, TypeError):
            first = None
        if first is None or bundle_artifact_bytes(
                bundle.model_copy(update={"created_utc": first.created_utc})) != held:
            raise ValueError(f"{target}: holds another artifact than evidence bundle "
                             f"{bundle.bundle_id} (a damaged or altered file?); it is not "
                             "overwritten: move it away to write this one")
    return target, held


def verify_evidence_bundle(bundle: EvidenceBundle) -> list[str]:
    """Problems found in ``bundle`` (empty when sound): item hashes, sizes and summary totals
    that do not match the content, and a ``bundle_id`` that does not match the content."""
    import uuid

    from aiblox.bundles.builder import BUNDLE_NAMESPACE

    problems = []
    for item in bundle.items:
        if sha256_text(item.content) != item.content_sha256:
            problems.append(f"{item.evidence_id}: content_sha256 does not match the content")
        if len(item.content.encode("utf-8")) != item.byte_count:
            problems.append(f"{item.evidence_id}: byte_count does not match the content")
    total = sum(i.byte_count for i in bundle.items)
    if bundle.summary.total_bytes != total:
        problems.append(f"summary.total_bytes {bundle.summary.total_bytes} != {total}")
    if bundle.summary.item_count != len(bundle.items):
        problems.append(f"summary.item_count {bundle.summary.item_count} != {len(bundle.items)}")
    digest = bundle_content_hash(bundle.build_version, bundle.policy, bundle.items, bundle.summary)
    if str(uuid.uuid5(BUNDLE_NAMESPACE, digest)) != bundle.bundle_id:
        problems.append("bundle_id does not match the bundle's content")
    return problems


def read_evidence_bundle(path: str | os.PathLike[str], *, verify: bool = True) -> EvidenceBundle:
    """Read a bundle artifact; with ``verify``, raise ``ValueError`` naming the file when it
    does not validate or its content does not match its hashes."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        bundle = EvidenceBundle.model_validate(json.loads(text))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not an evidence bundle: {exc}") from exc
    if verify:
        problems = verify_evidence_bundle(bundle)
        if problems:
            raise ValueError(f"{path}: evidence bundle fails verification: {problems}")
    return bundle


def tracking_rows(
    bundle: EvidenceBundle, artifact: BundleArtifact, run_id: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Rows for the store's tracking tables: ``evidence_bundle`` (one row), ``run_evidence``
    (one row when ``run_id`` is given) and ``evidence_item`` (one row per item)."""
    s = bundle.summary
    return {
        "evidence_bundle": [
            {
                "bundle_id": bundle.bundle_id,
                "build_version": bundle.build_version,
                "policy_version": bundle.policy.policy_version,
                "policy_sha256": sha256_text(canonical_json(bundle.policy)),
                "lake_uri": artifact.lake_uri,
                "artifact_sha256": artifact.sha256,
                "byte_count": artifact.byte_count,
                "item_count": s.item_count,
                "total_bytes": s.total_bytes,
                "approx_tokens": s.approx_tokens,
                "items_dropped": s.bundle_bounding.items_dropped,
                "created_utc": bundle.created_utc,
            }
        ],
        "run_evidence": []
        if run_id is None
        else [{"run_id": run_id, "bundle_id": bundle.bundle_id}],
        "evidence_item": [
            {
                "bundle_id": bundle.bundle_id,
                "ordinal": i,
                "evidence_id": it.evidence_id,
                "evidence_type": it.evidence_type,
                "content_sha256": it.content_sha256,
                "byte_count": it.byte_count,
                "approx_tokens": it.approx_tokens,
                "truncated": bool(it.metadata.get("bounding", {}).get("applied")),
                "full_lake_uri": it.full_ref.lake_uri if it.full_ref else None,
            }
            for i, it in enumerate(bundle.items)
        ],
    }
