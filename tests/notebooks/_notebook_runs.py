"""Helpers of the notebook tests: the notebooks' paths and their headless runs (imported by
the test modules beside it; pytest puts this folder on sys.path)."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO / "notebooks"
NOTEBOOKS = ("fusion_explorer", "chunking_lab", "policy_compare", "query_inspector",
             "sweep_board")



def run_notebook_once(name: str) -> tuple[list[Any], dict[str, Any]]:
    """Run ``notebooks/<name>.py`` headless in this process (what ``python <name>.py`` does:
    ``app.run()``, every widget at its default), in the current folder and environment:
    ``(the cells' outputs, the cells' definitions)``. Not cached."""
    pytest.importorskip("marimo")
    spec = importlib.util.spec_from_file_location(f"aiblox_notebook_{name}",
                                                  NOTEBOOKS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    outputs, defs = module.app.run()
    return list(outputs), dict(defs)


@cache
def run_notebook(name: str) -> dict[str, Any]:
    """:func:`run_notebook_once`'s definitions, cached: each notebook runs once per test
    session."""
    return run_notebook_once(name)[1]


def output_text(outputs: list[Any]) -> str:
    """The text the cells' outputs show (their HTML, for the ones that are HTML), one output
    a line."""
    return "\n".join(o.text for o in outputs if isinstance(getattr(o, "text", None), str))


POINT_VALUES = {"a": {"q1": 0.0, "q2": 0.5, "q3": 1.0}, "b": {"q1": 1.0, "q2": 0.5, "q3": 1.0}}
"""Per-query ndcg@10 on ``test`` of the two runs :func:`log_two_points` logs."""


def log_two_points(client: Any, experiment: str, folder: Path) -> dict[str, str]:
    """Two finished runs ``point-a``, ``point-b`` in ``experiment``, logged the way ``aiblox
    sweep`` logs a point (a ``test.ndcg_at_10`` metric, ``per_query.test.parquet`` in long
    layout, written under ``folder``): ``{"a": run id, "b": run id}``."""
    import pandas as pd

    ids = {}
    for name, per in POINT_VALUES.items():
        rid = client.create_run(experiment, run_name=f"point-{name}").info.run_id
        client.log_metric(rid, "test.ndcg_at_10", sum(per.values()) / 3)
        out = folder / f"out-{name}"
        out.mkdir()
        pd.DataFrame([{"query_id": q, "metric": "ndcg@10", "value": v} for q, v in per.items()]
                     ).to_parquet(out / "per_query.test.parquet", index=False)
        client.log_artifacts(rid, str(out))
        client.set_terminated(rid)
        ids[name] = rid
    return ids
