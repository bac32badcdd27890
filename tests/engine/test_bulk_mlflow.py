"""The bulk MLflow writer against a real SQLite store: runs written in one transaction read back
exactly as runs the client writes (params, metrics, tags, artifacts, search by tag)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from aiblox.engine.bulk_mlflow import BulkRunWriter, RunRecord  # noqa: E402


def records(n, parent):
    return [RunRecord(name=f"p{i}", tags={"mlflow.parentRunId": parent, "aiblox.config_hash":
                                         f"h{i}", "aiblox.kind": "point"},
                      params={"prefs.mode": "hybrid", "w": str(i / 10), "long": "x" * 7000},
                      metrics={"test.ndcg_at_10": 0.5 + i / 100, "test.nan": math.nan},
                      artifacts={"manifest.json": b'{"i": %d}' % i})
            for i in range(n)]


def read(client, rid, tmp_path):
    run = client.get_run(rid)
    path = client.download_artifacts(rid, "manifest.json", str(tmp_path / rid))
    tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.source")}
    tags.pop("mlflow.user", None)
    return (run.info.status, run.info.run_name, run.data.params, run.data.metrics, tags,
            Path(path).read_bytes())


def test_bulk_runs_read_back_as_the_clients_runs(tmp_path, mlflow_uri):
    from aiblox.engine.tracking import tracking_client

    client = tracking_client(mlflow_uri, create=True)
    exp = client.create_experiment(f"bulk-{tmp_path.name}",
                                   artifact_location=str(tmp_path / "art"))
    parent = client.create_run(exp).info.run_id
    bulk = BulkRunWriter(client, exp)
    assert bulk.bulk  # a SQLite store with local artifacts
    fast = bulk.write(records(3, parent))
    slow = [BulkRunWriter._one(bulk, r) for r in records(3, parent)]
    for a, b in zip(fast, slow, strict=True):
        ra, rb = read(client, a, tmp_path), read(client, b, tmp_path)
        assert ra[:3] == rb[:3] and ra[4:] == rb[4:]
        assert ra[3]["test.ndcg_at_10"] == rb[3]["test.ndcg_at_10"]
        assert math.isnan(ra[3]["test.nan"]) and math.isnan(rb[3]["test.nan"])
        assert len(ra[2]["long"]) == 6000
    found = client.search_runs([exp], "tags.`aiblox.config_hash` = 'h1'")
    assert sorted(r.info.run_id for r in found) == sorted([fast[1], slow[1]])
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{parent}'")
    assert len(children) == 6


def test_a_remote_artifact_root_falls_back_to_the_client(tmp_path, mlflow_uri):
    from aiblox.engine.tracking import tracking_client

    client = tracking_client(mlflow_uri, create=True)
    exp = client.create_experiment(f"remote-{tmp_path.name}",
                                   artifact_location="s3://bucket/somewhere")
    assert not BulkRunWriter(client, exp).bulk
