"""Evidence bundle tracking: which bundles each run used, and what each bundle held.

The seed's tracking tables, kept beside a store's own tables (same database, same connection)
and created the first time :func:`~aiblox.bundles.open.open_bundle_store` is called on it,
never by the store itself:

- ``evidence_bundles``: one row per bundle (:data:`BUNDLE_COLUMNS`);
- ``run_evidence``: ``(run_id, bundle_id)`` links;
- ``evidence_items``: one row per item of a bundle, by ordinal (:data:`ITEM_COLUMNS`).

All three are insert-only. :class:`BundleStore` is the protocol; DuckDB
(:class:`~aiblox.bundles.duckdb_store.DuckDBBundleStore`) and PostgreSQL
(:class:`~aiblox.bundles.postgres_store.PostgresBundleStore`) implement it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from aiblox.stores.base import StoreError

__all__ = [
    "BUNDLE_COLUMNS",
    "BundleStore",
    "ITEM_COLUMNS",
    "check_same_artifact",
    "split_bundle_rows",
]

BUNDLE_COLUMNS = ("bundle_id", "build_version", "policy_version", "policy_sha256", "lake_uri",
                  "artifact_sha256", "byte_count", "item_count", "total_bytes", "approx_tokens",
                  "items_dropped", "created_utc")
"""Columns of the evidence bundle tracking row (every backend stores these)."""
ITEM_COLUMNS = ("bundle_id", "ordinal", "evidence_id", "evidence_type", "content_sha256",
                "byte_count", "approx_tokens", "truncated", "full_lake_uri")
"""Columns of an evidence item tracking row."""


@runtime_checkable
class BundleStore(Protocol):
    """Evidence bundle tracking (evidence bundles seed), insert-only."""

    location: str
    """Where the tables live: the location of the store they sit beside."""

    def record_evidence_bundle(self, rows: dict[str, list[dict[str, Any]]]) -> int:
        """Track one evidence bundle; returns the number of rows newly written.

        ``rows`` is what :func:`aiblox.bundles.tracking_rows` returns: plain JSON values under
        three keys, each a list of dicts (a missing key counts as an empty list):

        - ``"evidence_bundle"``: exactly one row with ``bundle_id``, ``build_version``,
          ``policy_version``, ``policy_sha256``, ``lake_uri`` (str or None),
          ``artifact_sha256``, ``byte_count``, ``item_count``, ``total_bytes``,
          ``approx_tokens``, ``items_dropped`` (ints) and ``created_utc`` (str or None);
        - ``"run_evidence"``: rows ``{"run_id": str, "bundle_id": str}`` linking runs to it;
        - ``"evidence_item"``: one row per item with ``bundle_id``, ``ordinal`` (0-based int),
          ``evidence_id``, ``evidence_type``, ``content_sha256``, ``byte_count``,
          ``approx_tokens`` (int), ``truncated`` (bool) and ``full_lake_uri`` (str or None).

        Insert-only: a bundle id already stored keeps its first record (0 rows for it), but is
        refused with :class:`~aiblox.stores.StoreError` when ``build_version``,
        ``policy_sha256``, ``item_count``, ``total_bytes`` or any item row differ (bundle ids
        derive from the content, so that means corruption), and when it names the same lake
        artifact (``lake_uri``) with another ``artifact_sha256``: the tracked sha256 is the lake
        file's (:func:`~aiblox.bundles.write_evidence_bundle` never overwrites it), so another
        one means the file was rewritten after it was tracked. Run links are added if new. One
        transaction.
        """
        ...

    def get_evidence_bundle(self, bundle_id: str) -> dict[str, list[dict[str, Any]]] | None:
        """The tracked bundle in the same shape :meth:`record_evidence_bundle` takes (items by
        ordinal, run links sorted by run id), or None when the bundle is not tracked."""
        ...

    def list_run_bundles(self, run_id: str) -> list[str]:
        """Bundle ids linked to ``run_id``, sorted (empty when none)."""
        ...


_STR, _INT, _BOOL, _OPT_STR = "a non-empty string", "an int", "a bool", "a string or null"
_BUNDLE_TYPES = {"bundle_id": _STR, "build_version": _STR, "policy_version": _STR,
                 "policy_sha256": _STR, "lake_uri": _OPT_STR, "artifact_sha256": _STR,
                 "byte_count": _INT, "item_count": _INT, "total_bytes": _INT,
                 "approx_tokens": _INT, "items_dropped": _INT, "created_utc": _OPT_STR}
_ITEM_TYPES = {"bundle_id": _STR, "ordinal": _INT, "evidence_id": _STR, "evidence_type": _STR,
               "content_sha256": _STR, "byte_count": _INT, "approx_tokens": _INT,
               "truncated": _BOOL, "full_lake_uri": _OPT_STR}
_LINK_TYPES = {"run_id": _STR, "bundle_id": _STR}


def _fits(value: Any, kind: str) -> bool:
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _OPT_STR and value is None:
        return True
    return isinstance(value, str) and bool(value)


def _rows(rows: Mapping[str, Any], table: str) -> list[Mapping[str, Any]]:
    given = rows.get(table, [])
    if not isinstance(given, list):
        raise StoreError(f"record_evidence_bundle: {table} must be a list of rows, "
                         f"got {type(given).__name__}")
    for i, row in enumerate(given):
        if not isinstance(row, Mapping):
            raise StoreError(f"record_evidence_bundle: {table}[{i}] must be an object, "
                             f"got {type(row).__name__}")
    return given


def _checked(table: str, i: int, row: Mapping[str, Any], types: dict[str, str]
             ) -> dict[str, Any]:
    """``row`` (``rows[table][i]``) with the fields of ``types``; a field missing or of
    another type is a :class:`StoreError` naming the table, the row and the field."""
    for field, kind in types.items():
        if not _fits(row.get(field), kind):
            raise StoreError(f"record_evidence_bundle: {table}[{i}].{field} must be {kind}, "
                             f"got {row.get(field)!r}")
    return {k: row.get(k) for k in types}


def split_bundle_rows(rows: dict[str, list[dict[str, Any]]]
                      ) -> tuple[dict[str, Any], list[dict[str, Any]], list[tuple[str, str]]]:
    """Validate ``tracking_rows(...)`` output for ``record_evidence_bundle``, before anything
    is written.

    Returns the bundle row, its items sorted by ordinal and the sorted ``(run_id, bundle_id)``
    links (a link without ``bundle_id`` is to this bundle); raises
    :class:`~aiblox.stores.StoreError` naming the table, row and field when there is not
    exactly one bundle row, a field is missing or not of the type the protocol gives (a
    ``run_id`` None is not the run ``"None"``), two items share an ordinal, or an item or link
    names another bundle.
    """
    if not isinstance(rows, Mapping):
        raise StoreError(f"record_evidence_bundle: rows must be an object of lists, "
                         f"got {type(rows).__name__}")
    bundles = _rows(rows, "evidence_bundle")
    if len(bundles) != 1:
        raise StoreError(f"record_evidence_bundle: expected one 'evidence_bundle' row, "
                         f"got {len(bundles)}")
    b = _checked("evidence_bundle", 0, bundles[0], _BUNDLE_TYPES)
    bundle_id = b["bundle_id"]
    items = sorted((_checked("evidence_item", i, r, _ITEM_TYPES)
                    for i, r in enumerate(_rows(rows, "evidence_item"))),
                   key=lambda r: r["ordinal"])
    for r, after in zip(items, items[1:], strict=False):
        if r["ordinal"] == after["ordinal"]:
            raise StoreError(f"record_evidence_bundle: evidence_item: two rows have ordinal "
                             f"{r['ordinal']}")
    for r in items:
        if r["bundle_id"] != bundle_id:
            raise StoreError(f"evidence_item ordinal {r['ordinal']}: bundle_id "
                             f"{r['bundle_id']!r} is not {bundle_id!r}")
    links = sorted({(r["run_id"], r["bundle_id"]) for r in (
        _checked("run_evidence", i, {"bundle_id": bundle_id, **r}, _LINK_TYPES)
        for i, r in enumerate(_rows(rows, "run_evidence")))})
    for _run, linked in links:
        if linked != bundle_id:
            raise StoreError(f"run_evidence: bundle_id {linked!r} is not {bundle_id!r}")
    return b, items, links


def check_same_artifact(location: str, row: dict[str, Any], lake_uri: str | None,
                        artifact_sha256: str | None) -> None:
    """Refuse ``row`` (a bundle row being recorded again) when the bundle is tracked with the
    same lake artifact but another sha256: one lake file cannot hash to both, so one of them
    is not the file (it was rewritten after it was tracked); the tracked sha256 must stay the
    file's. An artifact written outside a lake (``lake_uri`` None) is the caller's own."""
    if lake_uri is None or row["lake_uri"] != lake_uri or row["artifact_sha256"] == artifact_sha256:
        return
    raise StoreError(f"{location}: evidence bundle {row['bundle_id']} is tracked with its "
                     f"artifact {lake_uri} of sha256 {artifact_sha256}, not "
                     f"{row['artifact_sha256']}: the file was rewritten after it was tracked "
                     "(write_evidence_bundle keeps the first one); restore it")
