"""Bundling a SQL result costs memory bounded by the policy, not by the result: the tracemalloc
peak of a build barely moves when the result grows tenfold (rows in memory and a DuckDB query,
the full result streamed to the lake)."""

from __future__ import annotations

import gc
import tracemalloc

import duckdb
import pytest

from aiblox.bundles import EvidencePolicy, build_evidence_bundle

POLICY = EvidencePolicy(max_sql_rows=50)
QUERY = ("SELECT i AS id, 'name ' || i AS name, i * 0.5 AS x, repeat('ab', 20) AS pad "
         "FROM range(?) t(i)")


def _peak(fn) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("source", ["rows", "sql"])
def test_peak_memory_does_not_grow_with_the_result(tmp_path, source):
    con = duckdb.connect()
    # warm up untraced: the tokenizer's BPE tables load once and must not count as the build's
    build_evidence_bundle(evidence_refs={"inline_text": [{"text": "warm up"}]}, policy=POLICY)
    con.execute(QUERY, [10]).fetchall()
    peaks, sizes = [], []
    for n in (3_000, 30_000):  # both above the 2,048-row fetch batch of the DuckDB path
        rows = [[i, f"name {i}", i * 0.5, "ab" * 20] for i in range(n)]  # built before tracing
        if source == "rows":
            ref = {"query_key": "q", "columns": ["id", "name", "x", "pad"], "rows": rows}
        else:
            ref = {"query_key": "q", "sql": QUERY, "params": [n]}
        out = {}

        def build(ref=ref, out=out):
            out["b"] = build_evidence_bundle(evidence_refs={"sql_results": [ref]}, policy=POLICY,
                                             lake_root=tmp_path / "lake", sql_connection=con)

        peaks.append(_peak(build))
        item = out["b"].items[0]
        assert item.metadata["sql"]["total_rows"] == n
        assert item.metadata["sql"]["shown_rows"] == 50
        sizes.append(item.full_ref.byte_count)
    con.close()
    assert sizes[1] > 9 * sizes[0]  # the full result grew tenfold ...
    assert peaks[1] < 1.5 * peaks[0] + 256 * 1024, peaks  # ... the build's memory did not
