"""A throwaway ``mlflow server`` on 127.0.0.1 for the tests that log over HTTP (a remote store:
no file lock applies): started on a free port in a process group of its own, its URL yielded
once ``/health`` answers, the group stopped afterwards. MLflow's job runner is off
(``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``, as docs/distributed.md advises): aiblox submits
no server jobs, and its seven ``huey`` consumer processes cost 23 s of CPU at every start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mlflow_server(root: Path, *artifacts: str, env: dict[str, str] | None = None,
                  timeout: float = 180) -> Iterator[str]:
    """``mlflow server`` with a sqlite backend under ``root`` and the artifact flags given
    (``--default-artifact-root DIR`` or ``--artifacts-destination DIR``); its log is
    ``root/server.log``. The test fails, naming the log's end, when it does not answer within
    ``timeout`` seconds."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {**(os.environ if env is None else env), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
             f"sqlite:///{root}/mlflow.db", *artifacts, "--host", "127.0.0.1", "--port",
             str(port), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root,
            start_new_session=True)  # stopped as a group: the CLI and its uvicorn at once
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"mlflow server did not start: "
                                f"{(root / 'server.log').read_text()[-2000:]}")
                time.sleep(0.25)
            yield url
        finally:
            # its data is thrown away: a graceful stop waits ~5 s for clients' keep-alive
            # connections
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(1)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
