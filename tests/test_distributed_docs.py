"""docs/distributed.md's files hold together: the compose file's services point at each other
(store URL, tracking URL, Ray head), the cluster YAML starts a head and workers, and every cache
URI the guide shows is one the stage cache accepts."""

from __future__ import annotations

import re

import fsspec
import yaml

from aiblox.engine.cache import local_cache_root
from tests.conftest import REPO

DOCS = REPO / "docs"


def test_compose_services_point_at_each_other():
    compose = yaml.safe_load((DOCS / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "mlflow", "ray-head", "ray-worker"}
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    mlflow = " ".join(services["mlflow"]["command"].split())
    port = re.search(r"--port (\d+)", mlflow).group(1)
    assert "--backend-store-uri postgresql://" in mlflow and "@postgres:5432/mlflow" in mlflow
    assert "--artifacts-destination /mlflow/artifacts" in mlflow
    assert "CREATE DATABASE mlflow" in compose["configs"]["create-mlflow-db"]["content"]
    head, worker = services["ray-head"], services["ray-worker"]
    assert head["command"].split()[:3] == ["ray", "start", "--head"]
    head_port = re.search(r"--port=(\d+)", head["command"]).group(1)
    assert f"--address=ray-head:{head_port}" in worker["command"]
    for node in (head, worker):
        env = node["environment"]
        assert env["AIBLOX_DB"].startswith("postgresql+psycopg://")
        assert "@postgres:5432/" + services["postgres"]["environment"]["POSTGRES_DB"] \
            in env["AIBLOX_DB"]
        assert env["AIBLOX_TRACKING"] == f"http://mlflow:{port}"
        assert "stages:/shared/stages" in node["volumes"]


def test_cluster_yaml_starts_a_head_and_workers():
    cluster = yaml.safe_load((DOCS / "ray-cluster.yaml").read_text())
    assert any("ray start --head" in c for c in cluster["head_start_ray_commands"])
    assert any("ray start --address=$RAY_HEAD_IP:" in c
               for c in cluster["worker_start_ray_commands"])
    assert any("aiblox[" in c for c in cluster["setup_commands"])


def test_the_guide_names_cache_uris_the_cache_accepts():
    text = (DOCS / "distributed.md").read_text()
    uris = re.findall(r"^--cache-dir (\S+)", text, re.MULTILINE)  # the guide's list
    assert len(uris) >= 4
    known = set(fsspec.registry) | set(fsspec.available_protocols())
    for uri in uris:
        if local_cache_root(uri) is None:
            assert uri.split("://")[0] in known, uri
    assert "## Running on Ray" in text and "--executor ray --address" in text
