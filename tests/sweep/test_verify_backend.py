"""``aiblox eval verify`` of a point scored on PostgreSQL re-runs it on PostgreSQL or refuses
(QA: with no ``--db`` it fell back to the dataset's own DuckDB store, ingested the dataset into
a new ``.aiblox/datasets/*.duckdb``, and reported the point reproduced: the stage keys were
built from the manifest's backend label, not from the store opened, so they matched).

The manifest records the backend, never the URL (its password is never logged): verifying a
PostgreSQL point needs ``--db``; a store of the other backend is refused before anything is
made, by the verification and by the run context that keys the stages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from typer.testing import CliRunner  # noqa: E402

from aiblox.cli.main import app  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def pg_point(tmp_path_factory, sample_spec, small_spec, mlflow_uri, sample_dataset,
             pg_admin_url):
    """A two-point sweep of the sample dataset scored on a real PostgreSQL store, logged."""
    from aiblox.engine.tracking import SweepTracker
    from aiblox.stores.postgres import scratch_database
    from aiblox.sweep import SweepSpec, run_sweep

    spec = small_spec(sample_spec, blend=["rrf"], rrf_k=[10, 60])
    spec = SweepSpec.model_validate({**spec.model_dump(), "name": "verify_pg"})
    with scratch_database(pg_admin_url) as url:
        db = url.render_as_string(hide_password=False)
        tr = SweepTracker(mlflow_uri, "verify-pg", spec.hash, spec.model_dump(mode="json"))
        result = run_sweep(spec, cache_dir=tmp_path_factory.mktemp("verify_pg") / "stages",
                           db=db, progress=False, dataset=sample_dataset, tracker=tr)
        children = {c.data.tags["aiblox.config_hash"]: c.info.run_id for c in tr.children()}
        point = result.points[0]
        yield {"uri": mlflow_uri, "db": db, "run": children[point.config_hash],
               "config_hash": point.config_hash}


def _verify(pg_point, *extra):
    return runner.invoke(app, ["eval", "verify", pg_point["run"], "--tracking-uri",
                               pg_point["uri"], *extra], env={"AIBLOX_NO_PROGRESS": "1"})


def test_a_postgres_point_verifies_on_its_store(pg_point, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _verify(pg_point, "--db", pg_point["db"], "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["identical"] and out["config_hash"] == pg_point["config_hash"]
    assert any(c["where"].endswith("/signals") for c in out["checks"])
    assert not Path(".aiblox/datasets").exists()  # no DuckDB store: the point's is PostgreSQL


def test_a_postgres_point_without_db_is_one_error_and_makes_nothing(pg_point, tmp_path,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _verify(pg_point)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "PostgreSQL" in lines[0] and "--db" in lines[0]
    assert res.stdout == ""  # no "identical" table
    assert list(tmp_path.iterdir()) == []  # no DuckDB store made or ingested into


def test_a_postgres_point_on_a_duckdb_store_is_refused(pg_point, sweep_db, tmp_path,
                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _verify(pg_point, "--db", str(tmp_path / "other.duckdb"))
    assert res.exit_code == 2, res.output
    assert "names a duckdb store" in res.stderr and len(res.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    res = _verify(pg_point, "--db", sweep_db)  # a store holding the very dataset
    assert res.exit_code == 2 and "names a duckdb store" in res.stderr


def test_a_run_context_never_keys_a_store_of_another_backend(sample_dataset, tmp_path,
                                                             monkeypatch, sweep_db):
    """The stage keys name the context's backend: a store of another kind is refused before
    it is opened (no default store made), and a workspace given of another kind too."""
    from aiblox.engine.cache import StageCache
    from aiblox.engine.context import RunContext
    from aiblox.engine.settings import SweepSettings
    from aiblox.engine.workspace import open_workspace

    monkeypatch.chdir(tmp_path)
    settings = SweepSettings(name="x", embedder="hashing", metrics=("ndcg@10",))
    ctx = RunContext(settings, sample_dataset, StageCache(tmp_path / "stages"), None,
                     "postgres", ["test"], progress=False)
    with pytest.raises(ValueError, match="is a duckdb store, but the stages are keyed for "
                                         "backend 'postgres'"):
        ctx.workspace()
    assert not (tmp_path / ".aiblox").exists()
    ws = open_workspace(sample_dataset, sweep_db, "hashing", progress=False)
    try:
        with pytest.raises(ValueError, match="keyed for backend 'postgres'"):
            RunContext(settings, sample_dataset, StageCache(tmp_path / "stages"), sweep_db,
                       "postgres", ["test"], progress=False, workspace=ws)
    finally:
        ws.close()
