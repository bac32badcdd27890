"""Shared state for a team (issue 19, docs/distributed.md): a sweep logged to a real
``mlflow server`` (database backend, proxied artifact root) logs what a local sqlite store
logs, hash for hash; a sweep on PostgreSQL + pgvector with a shared cache URI and that server
runs from the CLI and is reused whole the second time."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from aiblox.cli.main import app
from tests.mlflow_server import mlflow_server as start_mlflow_server
from tests.sweep.conftest import SAMPLE_SPEC

pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """``mlflow server`` on a free local port: sqlite backend, artifacts proxied to a folder;
    its URL once ``/health`` answers. Stopped (its own process group) afterwards."""
    root = tmp_path_factory.mktemp("mlflow-server")
    with start_mlflow_server(root, "--artifacts-destination", str(root / "artifacts")) as url:
        yield url


def _cli(*args):
    r = CliRunner().invoke(app, [str(a) for a in args],
                           env={"AIBLOX_NO_PROGRESS": "1"})
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("{"), r.stdout[:3000]
    return json.loads(r.stdout)


def _logged(uri: str, parent_id: str) -> dict[str, tuple]:
    """Per logged point (config hash): its hash tags and its metrics."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(parent_id)
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent_id}'",
                                  max_results=1000)
    out = {}
    for c in children:
        tags = {k: v for k, v in c.data.tags.items()
                if k.startswith("aiblox.") and "hash" in k}
        arts = sorted(a.path for a in client.list_artifacts(c.info.run_id))
        out[c.data.tags["aiblox.config_hash"]] = (tags, dict(c.data.metrics), arts)
    return out


def test_a_sweep_logged_to_an_mlflow_server_matches_a_local_sqlite_store(
        tmp_path, mlflow_server, mlflow_uri, sweep_db):
    experiment = f"shared-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "spec.toml"
    spec.write_text(SAMPLE_SPEC.read_text().replace('name = "sample_fusion"',
                                                    f'name = "sample_fusion"\n'
                                                    f'experiment = "{experiment}"', 1))
    common = ["sweep", spec, "--db", sweep_db, "--cache-dir", tmp_path / "stages", "--json"]
    server = _cli(*common, "--tracking-uri", mlflow_server)
    local = _cli(*common, "--tracking-uri", mlflow_uri)
    assert server["tracking"]["tracking_uri"] == mlflow_server
    assert server["tracking"]["logged"] == local["tracking"]["logged"] == server["n_points"]
    on_server = _logged(mlflow_server, server["tracking"]["parent_run_id"])
    on_sqlite = _logged(mlflow_uri, local["tracking"]["parent_run_id"])
    assert len(on_server) == server["n_points"] > 1
    assert on_server == on_sqlite  # hashes, metrics and artifact names, point for point
    best = on_server[server["best"]["config_hash"]][0]
    assert best["aiblox.manifest_hash"] == server["best"]["manifest_hash"]
    assert server["best"] == local["best"]


@pytest.fixture()
def team_db(pg_admin_url):
    """A database of its own (the session's scratch database holds other tests' datasets)."""
    from aiblox.stores.postgres import scratch_database

    with scratch_database(pg_admin_url) as url:
        yield url


def test_a_team_sweep_on_postgres_a_cache_uri_and_an_mlflow_server(
        tmp_path, mlflow_server, team_db):
    """The whole shared set-up from the CLI: the store at a PostgreSQL URL, the stages at a
    cache URI, the points at the tracking server; run again, nothing is computed or logged."""
    db = team_db if isinstance(team_db, str) else team_db.render_as_string(hide_password=False)
    cache = f"file://{tmp_path}/shared/stages"
    args = ["sweep", SAMPLE_SPEC, "--db", db, "--cache-dir", cache, "--tracking-uri",
            mlflow_server, "--json"]
    first = _cli(*args)
    again = _cli(*args)
    assert first["computed"] and again["computed"] == {}
    assert first["tracking"]["logged"] == first["n_points"] > 1
    assert again["tracking"]["logged"] == 0
    assert again["tracking"]["skipped"] == first["n_points"]
    assert again["best"] == first["best"]
    assert first["best"]["metrics"][first["tune_split"]][first["primary"]] > 0.3
