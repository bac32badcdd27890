"""Real processes without paying for their imports each time: a fork server for the tests that
start many short Python processes of the same program (a sweep, killed and resumed).

:class:`ForkServer` starts one Python process that imports the given modules and then waits;
each :meth:`ForkServer.start` forks it, and the child runs the given Python source as
``python -c SOURCE ARGS...`` would (its own pid, its own stdout/stderr files, the extra
environment variables set, the working folder changed), ending as any process does: at a
``SystemExit`` or the source's end the interpreter shuts down as usual (atexit handlers, non-daemon
threads, buffers flushed), at a signal it dies of it. Only the imports are shared, done once
before any fork: nothing else runs in the server, which has no thread of its own to fork (it
fails to start when an import left one running). ``python -c`` of a sweep spent 5-8 s of CPU
importing MLflow, aiblox and numba before doing anything; a forked child starts at once.

The server reaps its children and reports how each ended, so :class:`Child` is read as a
:class:`subprocess.Popen`: ``pid``, ``poll()``, ``wait()``, ``kill()``, ``communicate()``,
``returncode`` (``-N`` for a signal). A child's pid is gone (reaped) once ``wait()`` returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

SERVER = r"""
import json, os, select, sys, threading
for name in sys.argv[1:]:
    __import__(name)
if threading.active_count() != 1:
    raise SystemExit(f"an import started a thread: {threading.enumerate()}")
os.write(1, b'{"ready": true}\n')
children, buf, cmd = set(), b"", None
while True:
    ready, _, _ = select.select([0], [], [], 0.01 if children else None)
    while children:  # reap: report how each child ended (-N: killed by signal N)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        children.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        os.write(1, json.dumps({"exit": pid, "code": code}).encode() + b"\n")
    if not ready:
        continue
    chunk = os.read(0, 65536)
    if not chunk:  # the test ended: wait for the children still running, then go
        while children:
            children.discard(os.wait()[0])
        raise SystemExit(0)
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        cmd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            break
        children.add(pid)
        os.write(1, json.dumps({"pid": pid}).encode() + b"\n")
    else:
        continue
    break  # a child: leave the loop
# the child: stdin from /dev/null, stdout and stderr to their files, its environment, folder
# and arguments; then the source, as the program of this process
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
for fd, path in ((1, cmd["stdout"]), (2, cmd["stderr"])):
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, fd)
    os.close(out)
os.close(null)
os.environ.update(cmd["env"])
os.chdir(cmd["cwd"])
sys.argv = ["-c", *cmd["args"]]
program = {"__name__": "__main__", "__builtins__": __builtins__}
exec(compile(cmd["source"], "<string>", "exec"), program)
"""


AIBLOX_CLI = ("import runpy\n"
              "runpy.run_module('aiblox.cli', run_name='__main__', alter_sys=True)\n")
"""The source of ``python -m aiblox.cli`` (the ``aiblox`` command) for :meth:`ForkServer.start`."""

PRELOAD = ("mlflow.tracking", "mlflow.store.tracking.sqlalchemy_store", "mlflow.artifacts",
           "sqlalchemy.orm", "aiblox.cli.main", "aiblox.cli.sweep", "aiblox.cli.ingest",
           "aiblox.sweep", "aiblox.engine.tracking", "aiblox.engine.cache",
           "aiblox.engine.context", "aiblox.engine.workspace", "aiblox.indexes.kernels",
           "aiblox.data", "aiblox.stores", "aiblox.retrieval.retriever")
"""What a fork server imports for ``aiblox sweep`` and ``aiblox ingest``: what their processes
import, but DuckDB and faiss (their libraries start threads, which a forked child lacks: it
aborted at exit)."""


class Child:
    """One forked process (see :class:`ForkServer`), read as a :class:`subprocess.Popen`."""

    def __init__(self, server: ForkServer, pid: int, args: list[str], out: Path,
                 err: Path) -> None:
        self.server, self.pid, self.args = server, pid, args
        self.out, self.err = out, err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server._exits.get(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.server._changed:
            while self.poll() is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                if self.server._dead:
                    raise RuntimeError(f"the fork server died: {self.server.log()}")
                self.server._changed.wait(left if left is None else min(left, 1.0))
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return (self.out.read_text(encoding="utf-8", errors="replace"),
                self.err.read_text(encoding="utf-8", errors="replace"))

    def completed(self, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        out, err = self.communicate(timeout)
        return subprocess.CompletedProcess(self.args, self.returncode, out, err)


class ForkServer:
    """A Python process (``python -c``, ``env`` its environment, ``cwd`` its folder) that has
    imported ``preload`` and forks a child for each :meth:`start`; a context manager (the
    server stops when the block ends, after its children: they are killed)."""

    def __init__(self, preload: Iterable[str], env: Mapping[str, str], cwd: Path,
                 folder: Path, timeout: float = 300) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._log = folder / "server.log"
        self._proc = subprocess.Popen([sys.executable, "-c", SERVER, *preload],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log.open("wb"), env=dict(env), cwd=cwd)
        self._exits: dict[int, int] = {}
        self._pids: queue.Queue[int] = queue.Queue()
        self._ready = threading.Event()
        self._changed = threading.Condition()
        self._dead = False
        self._lock = threading.Lock()
        self._n = 0
        self._children: list[Child] = []
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout) or self._dead:
            self.close()
            raise RuntimeError(f"the fork server did not start: {self.log()}")

    def log(self) -> str:
        return self._log.read_text(errors="replace")[-3000:]

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            msg = json.loads(line)
            if "ready" in msg:
                self._ready.set()
            elif "pid" in msg:
                self._pids.put(msg["pid"])
            else:
                with self._changed:
                    self._exits[msg["exit"]] = msg["code"]
                    self._changed.notify_all()
        with self._changed:
            self._dead = True
            self._changed.notify_all()
        self._ready.set()

    def start(self, source: str, args: list[str], env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Child:
        """Fork a child running ``source`` with ``sys.argv[1:] == args``, the variables
        ``env`` added to the server's environment, in ``cwd`` (the server's folder if
        None); its stdout and stderr go to files of its own."""
        with self._lock:
            self._n += 1
            out = self.folder / f"child{self._n}.out"
            err = self.folder / f"child{self._n}.err"
            cmd = {"source": source, "args": [str(a) for a in args], "env": dict(env or {}),
                   "cwd": str(cwd or os.getcwd()), "stdout": str(out), "stderr": str(err)}
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(cmd).encode() + b"\n")
            self._proc.stdin.flush()
            pid = self._pids.get(timeout=60)
        child = Child(self, pid, ["python", "-c", "...", *cmd["args"]], out, err)
        self._children.append(child)
        return child

    def close(self) -> None:
        for child in self._children:
            child.kill()
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
