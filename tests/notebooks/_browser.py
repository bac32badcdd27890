"""A headless Chromium driven over the DevTools protocol (no extra dependency: the websocket
client is the ``websockets`` package marimo already needs), and :func:`local_server`, which runs
a server process (Chromium, ``marimo run``, ``jupyter lab``) for as long as a test needs it.

A marimo app renders after its kernel has run the cells and streamed the outputs over a
websocket, so a fixed ``--virtual-time-budget`` screenshot catches a spinner. Here the page is
polled for the text it must show, and the screenshot is taken once it does.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-dev-shm-usage", "--hide-scrollbars",
]


def find_chromium() -> str | None:
    """Debian's ``chromium`` (or another Chromium/Chrome on PATH)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float) -> None:
    """Wait until ``url`` answers (any HTTP status), or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer in {timeout:.0f} s") from None
            time.sleep(0.2)


@contextlib.contextmanager
def local_server(args: Sequence[str], url: str, timeout: float, stop_timeout: float = 15,
                 **popen: Any) -> Iterator[subprocess.Popen]:
    """Start ``args`` (``popen`` goes to :class:`subprocess.Popen`), wait up to ``timeout``
    seconds until ``url`` answers and yield the process; on exit terminate it, and kill it if it
    has not ended ``stop_timeout`` seconds later."""
    proc = subprocess.Popen(list(args), **popen)
    try:
        wait_http(url, timeout)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


DEEP_TEXT = """(() => {
  const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE"]);
  const walk = (node) => {
    let out = "";
    if (node.shadowRoot) out += walk(node.shadowRoot);
    for (const child of node.childNodes) {
      if (child.nodeType === 3) out += child.textContent + " ";
      else if (child.nodeType === 1 && !skip.has(child.tagName)) out += walk(child);
    }
    return out;
  };
  return document.body ? walk(document.body).replace(/\\s+/g, " ") : "";
})()"""


def squash(text: str) -> str:
    """``text`` without any whitespace (for matching rendered text)."""
    return "".join(text.split())


class Page:
    """One browser tab over a DevTools websocket."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events in between are skipped)."""
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def text(self) -> str:
        """The page's text, shadow roots included (marimo renders outputs as web components)."""
        return self.evaluate(DEEP_TEXT) or ""

    def wait_for_text(self, needles: Sequence[str], timeout: float,
                      settle: float = 1.5) -> str:
        """Poll until every string of ``needles`` is on the page and the text has stopped
        changing for ``settle`` seconds; return the text (or raise TimeoutError with it).
        Whitespace is ignored on both sides (text nodes are joined with spaces)."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        text = ""
        wanted = [squash(n) for n in needles]
        while time.monotonic() < deadline:
            text = self.text()
            if text != last:
                last, since = text, time.monotonic()
            elif all(w in squash(text) for w in wanted) \
                    and time.monotonic() - since >= settle:
                return text
            time.sleep(0.25)
        missing = [n for n, w in zip(needles, wanted, strict=True) if w not in squash(text)]
        raise TimeoutError(f"page never showed {missing!r}; it shows:\n{text[:3000]}")

    def screenshot(self, path: Path, width: int = 1280) -> None:
        """A PNG of the whole page (every scrolled-away part included)."""
        height = self.evaluate(
            "Math.max(document.body.scrollHeight, document.documentElement.scrollHeight,"
            " ...Array.from(document.querySelectorAll('*')).map(e => e.scrollHeight))") or 900
        height = max(600, min(int(height), 6000))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        time.sleep(0.5)
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))


@contextlib.contextmanager
def chromium_page(url: str, width: int = 1280, height: int = 1600) -> Iterator[Page]:
    """Headless Chromium showing ``url``; yields a :class:`Page`."""
    from websockets.sync.client import connect

    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("chromium not found (apt-get install -y chromium)")
    port = free_port()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile, local_server(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
             f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1",
             f"--window-size={width},{height}", "about:blank"],
            f"http://127.0.0.1:{port}/json/version", 30, stop_timeout=10,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank",
                                     method="PUT")
        with urllib.request.urlopen(req, timeout=10) as resp:
            target = json.loads(resp.read())
        with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as ws:
            page = Page(ws)
            page.call("Page.enable")
            page.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                      deviceScaleFactor=1, mobile=False)
            page.call("Page.navigate", url=url)
            yield page
