"""Sweep fixtures: a small spec, an MLflow store (the sample store is ``sweep_db``, in
tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE_SPEC = REPO / "evals" / "sweeps" / "sample_fusion.toml"


@pytest.fixture(scope="session")
def sample_spec():
    from aiblox.sweep import load_spec

    return load_spec(SAMPLE_SPEC)


def _small_spec(spec, **grid):
    from aiblox.sweep import SweepSpec

    data = spec.model_dump()
    data["grid"] = grid
    data["baseline"] = grid.pop("baseline", None)
    return SweepSpec.model_validate(data)


@pytest.fixture(scope="session")
def small_spec():
    """``small_spec(spec, **grid)``: the sample spec with another grid (no baseline unless
    ``baseline=`` is given)."""
    return _small_spec
