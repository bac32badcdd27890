"""A chat-completions endpoint on 127.0.0.1 for tests of the OpenAI-compatible reader: it
answers every POST with ``status`` (200: a cited answer, ``content``, which stopped for
``finish_reason``) and records the Authorization header of each request."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """Start on construction; :meth:`close` stops it. ``url`` is the ``/v1`` base URL."""

    def __init__(self, status: int = 200, content: str = "Robertson. [C0]",
                 finish_reason: str = "stop") -> None:
        self.status = status
        self.auth: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                server.auth.append(self.headers.get("Authorization", ""))
                if server.status == 200:
                    body = json.dumps({"model": "served", "choices": [{"message": {
                        "role": "assistant", "content": content},
                        "finish_reason": finish_reason}]}).encode()
                else:
                    body = b'{"error": "injected"}'
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
