"""JupyterLab: ``marimo export ipynb`` of each notebook runs top to bottom in a real IPython
kernel (where ``import aiblox`` must work), executed by nbclient, the engine of ``jupyter
nbconvert --execute``, in this process: the notebooks' kernels are processes of their own, as
under nbconvert, without five more Python processes importing Jupyter (16 s of CPU). The
export is marimo's own ``marimo export ipynb`` command (its click command), run in this process
as well: five ``python -m marimo export`` processes took 4.4 s of CPU each, in-process the
five take 4 s together."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _notebook_runs import NOTEBOOKS, NOTEBOOKS_DIR, REPO

pytest.importorskip("marimo")
pytest.importorskip("nbconvert", reason="the notebooks extra (nbconvert) is not installed")
pytest.importorskip("ipykernel", reason="the notebooks extra (ipykernel) is not installed")

# what each notebook must show once executed in Jupyter (text of its cell outputs)
EXPECTED = {
    "fusion_explorer": ["What moved vs RRF k=60", "ndcg@10"],
    "chunking_lab": ["sentences", "token_window", "headings"],
    "policy_compare": ["R2_POLICY_V2 (B) vs R2_POLICY_V1 (A)", "Evidence that changed"],
    "query_inspector": ["Determinism hashes", "matches the recorded hash"],
    "sweep_board": ["Leaderboard", "Quality against cost", "Significance vs baseline",
                    "Reproduce the best point"],
}


def _outputs_text(nb: dict) -> str:
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                parts.append("ERROR " + out.get("ename", "") + ": " + out.get("evalue", ""))
            data = out.get("data", {})
            for mime in ("text/html", "text/plain", "text/markdown"):
                if mime in data:
                    value = data[mime]
                    parts.append("".join(value) if isinstance(value, list) else value)
            if "text" in out:
                parts.append("".join(out["text"]) if isinstance(out["text"], list)
                             else out["text"])
    return "\n".join(parts)


_EXPORT_LOCK = threading.Lock()


def _export_ipynb(notebook: Path, ipynb: Path) -> str:
    """``marimo export ipynb NOTEBOOK -o IPYNB -f``, marimo's click command run in this process
    (one export at a time): ``""``, or what went wrong (its output and the error)."""
    from marimo._cli.cli import main

    out = io.StringIO()
    with _EXPORT_LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(["export", "ipynb", str(notebook), "-o", str(ipynb), "-f"],
                 prog_name="marimo", standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                return f"{out.getvalue()}exit {exc.code}"
        except Exception as exc:  # noqa: BLE001 - the test reports it
            return f"{out.getvalue()}{exc!r}"
    return "" if ipynb.is_file() else f"{out.getvalue()}no file written"


def _export_and_execute(name: str, folder: Path) -> tuple[str, dict | None, str]:
    """``marimo export ipynb``, then every cell run in a new kernel (cwd ``folder``), as
    ``jupyter nbconvert --execute`` runs them: (exported, executed, log)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    ipynb = folder / f"{name}.ipynb"
    env = {**os.environ, "AIBLOX_NO_PROGRESS": "1", "MPLBACKEND": "Agg"}
    failed = _export_ipynb(NOTEBOOKS_DIR / f"{name}.py", ipynb)
    if failed:
        return "", None, failed
    nb = nbformat.read(ipynb, as_version=4)
    client = NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(folder)}})
    try:
        client.execute(env=env)  # the kernel's environment
    except CellExecutionError as exc:
        return ipynb.read_text(encoding="utf-8"), None, str(exc)[-5000:]
    return ipynb.read_text(encoding="utf-8"), json.loads(nbformat.writes(nb)), ""


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict[str, tuple[str, dict | None, str]]:
    """Every notebook exported and executed, the kernels running side by side (each pays for
    its own imports, so in parallel the tier takes about as long as the slowest notebook)."""
    folder = tmp_path_factory.mktemp("ipynb")
    with ThreadPoolExecutor(max_workers=len(NOTEBOOKS)) as pool:
        futures = {n: pool.submit(_export_and_execute, n, folder) for n in NOTEBOOKS}
        return {n: f.result() for n, f in futures.items()}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_exported_ipynb_executes_top_to_bottom(name, executed):
    exported, result, log = executed[name]
    assert exported, f"marimo export ipynb failed:\n{log}"
    nb = json.loads(exported)
    assert nb["nbformat"] == 4 and len(nb["cells"]) >= 5
    assert any("import marimo as mo" in "".join(c["source"]) for c in nb["cells"])
    assert result is not None, f"a cell failed:\n{log}"
    code_cells = [c for c in result["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code_cells), "a cell did not run"
    text = _outputs_text(result)
    assert "ERROR" not in text
    for needle in EXPECTED[name]:
        assert needle in text, f"{name}: {needle!r} not in the executed notebook's outputs"


def test_jupyter_lab_serves_the_lab_and_a_python_kernel(tmp_path):
    """The notebooks extra gives a working ``jupyter lab``: the server answers on 127.0.0.1,
    serves the Lab page and lists a Python kernel (the kernel in which nbconvert ran the
    exported notebooks above, importing aiblox)."""
    pytest.importorskip("jupyterlab")
    from _browser import free_port, local_server

    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    with local_server(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
             f"--port={port}", "--allow-root", "--IdentityProvider.token=",
             f"--ServerApp.root_dir={REPO}"],
            f"http://127.0.0.1:{port}/api", 90,
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=30) as resp:
            assert resp.status == 200
            assert b"JupyterLab" in resp.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs",
                                    timeout=30) as resp:
            specs = json.loads(resp.read())
        assert any(s["spec"]["language"] == "python" for s in specs["kernelspecs"].values())
