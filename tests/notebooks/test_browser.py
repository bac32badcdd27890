"""The notebooks as apps: ``marimo run --headless`` on 127.0.0.1 serves them, headless Chromium
(Debian's ``chromium``) loads each one, the rendered page must show the values the same
notebook computes headless, and a full-page screenshot is saved as a test artifact.

Artifacts go to ``$AIBLOX_TEST_ARTIFACTS/notebooks`` (default ``.aiblox/test-artifacts``); with
``AIBLOX_SCREENSHOTS=notebooks/screenshots`` the test also refreshes the README's screenshots.
marimo serves its frontend from the installed package, so nothing is fetched from outside.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _browser import chromium_page, find_chromium, free_port, local_server
from _notebook_runs import NOTEBOOKS, NOTEBOOKS_DIR, REPO, run_notebook

pytest.importorskip("marimo")
pytest.importorskip("websockets")

if find_chromium() is None:
    if os.environ.get("CI"):
        raise RuntimeError("chromium is missing in CI: .ci/run installs it with apt-get")
    pytest.skip("chromium not installed (apt-get install -y chromium)", allow_module_level=True)

PAGE_TIMEOUT = 240.0


def artifacts_dir() -> Path:
    root = Path(os.environ.get("AIBLOX_TEST_ARTIFACTS") or REPO / ".aiblox" / "test-artifacts")
    folder = root / "notebooks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``marimo run notebooks/ --headless --port P --host 127.0.0.1``: the base URL."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("marimo") / "server.log"
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "MPLBACKEND": "Agg"}
    with log_path.open("w") as log, local_server(
            [sys.executable, "-m", "marimo", "run", str(NOTEBOOKS_DIR), "--headless",
             "--port", str(port), "--host", "127.0.0.1", "--no-token"],
            f"http://127.0.0.1:{port}/", 90,
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT):
        yield f"http://127.0.0.1:{port}", log_path


def expected_text(name: str, defs: dict[str, Any]) -> list[str]:
    """What the page must show: values the notebook computed headless with the same defaults."""
    if name == "fusion_explorer":
        point, moved = defs["point"], defs["moved"]
        changed = int(((moved["delta"] != 0) | moved["top_changed"]).sum())
        return ["Fusion explorer", f"{point.metrics['ndcg@10']:.4f}",
                f"{point.metrics['mrr@10']:.4f}", point.hashes["run"][:16],
                f"What moved vs RRF k=60: {changed} of {len(moved)} queries"]
    if name == "chunking_lab":
        doc, tables = defs["doc"], defs["tables"]
        return ["Chunking lab", f"{doc.id}: {len(doc.text)} characters",
                *[f"{n}: {len(t)} chunks" for n, t in tables.items()],
                *defs["comparison"]["chunker"].tolist()]
    if name == "policy_compare":
        changes, deltas = defs["changes"], defs["deltas"]
        n = int(deltas["n"].iloc[0])
        return ["Policy compare", "R2_POLICY_V2 (B) vs R2_POLICY_V1 (A)",
                f"Evidence that changed: {len(changes)} of {n} queries", "MLflow runs",
                "No runs in" if defs["runs"].empty else "run A"]
    if name == "query_inspector":
        trace = defs["trace"]
        return ["Query inspector", "Answer (PASSED)", defs["prompt_sha256"],
                "matches the recorded hash", *trace.result.validation.cited_chunk_ids,
                "Determinism hashes", trace.hashes["index_version"]]
    if name == "sweep_board":
        result = defs["result"]
        best, tune, report = result.best, result.tune_split, result.report_split
        return ["Sweep board", f"{result.name}: {len(result.points)} points on",
                "stages reused", f"Best on {tune}: {best.label}", "Quality against cost",
                f"{best.metrics[tune][result.primary]:.4f}",
                f"{best.metrics[report][result.primary]:.4f}",
                f"Significance vs baseline {result.baseline.label}", best.config_hash,
                defs["reproduce"], defs["verify"]]
    raise KeyError(name)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_app_renders_the_computed_values(name, served):
    base, log_path = served
    needles = expected_text(name, run_notebook(name))
    shot = artifacts_dir() / f"{name}.png"
    with chromium_page(f"{base}/?file={name}.py") as page:
        try:
            text = page.wait_for_text(needles, PAGE_TIMEOUT)
        except TimeoutError as exc:
            page.screenshot(shot)
            raise AssertionError(f"{exc}\n--- marimo log ---\n{log_path.read_text()[-3000:]}") \
                from None
        page.screenshot(shot)
    assert "Traceback" not in text and "An ancestor raised" not in text
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    readme_dir = os.environ.get("AIBLOX_SCREENSHOTS")
    if readme_dir:
        Path(readme_dir).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(readme_dir) / shot.name)
