"""Sweeps and the notebooks' workspace run unchanged on PostgreSQL (issue 8)."""

import pytest

from aiblox.explore import fusion_prefs, open_notebook_workspace, score_point
from aiblox.sweep import load_spec, run_sweep
from tests.conftest import REPO


def _url(pg_url):
    return pg_url if isinstance(pg_url, str) else pg_url.render_as_string(hide_password=False)


@pytest.fixture()
def empty_pg_url(pg_store, pg_url):
    """The session database emptied first (another module may have left its dataset there:
    under pytest-xdist the modules a worker runs before this one vary), as its URL."""
    pg_store.close()
    return pg_url


def test_sample_sweep_on_postgres(empty_pg_url, tmp_path):
    spec = load_spec(REPO / "evals/sweeps/sample_fusion.toml")
    pg = run_sweep(spec, cache_dir=tmp_path / "pg-stages", db=_url(empty_pg_url),
                   progress=False)
    duck = run_sweep(spec, cache_dir=tmp_path / "duck-stages", db=str(tmp_path / "s.duckdb"),
                     progress=False)
    assert len(pg.points) == len(duck.points) > 1
    pg_cfg = {p.config_hash for p in pg.points}
    assert pg_cfg.isdisjoint({p.config_hash for p in duck.points})  # backend is in the hash
    best = pg.best.metrics[spec.tune_split][spec.primary]
    assert 0.3 < best <= 1.0


def test_spec_backend_must_match_db(tmp_path):
    spec = load_spec(REPO / "evals/sweeps/sample_fusion.toml")
    with pytest.raises(ValueError, match="does not match db"):
        spec.model_validate({**spec.model_dump(), "backend": "postgres", "db": "x.duckdb"})


def test_notebook_workspace_on_postgres(empty_pg_url):
    ws = open_notebook_workspace(backend="postgres", db=_url(empty_pg_url))
    assert ws.store.kind == "postgres"
    point = score_point(ws, fusion_prefs(blend="rrf", rrf_k=60))
    assert 0.3 < point.metrics["ndcg@10"] <= 1.0
    with pytest.raises(ValueError, match="needs db="):
        open_notebook_workspace(backend="postgres")
