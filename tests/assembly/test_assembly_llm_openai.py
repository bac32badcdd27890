"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 that injects timeouts,
429 and 500 responses and records every request body it receives."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("httpx", reason="the openai LLM needs the 'llm' extra (httpx)")

from aiblox.assembly import LLMSettings, OpenAIChatLLM, get_llm  # noqa: E402
from aiblox.hashing import sha256_text

PROMPT = "### SYSTEM INSTRUCTIONS ###\nSecret prompt text é中😀 {x}\n"
API_KEY = "sk-test-DO-NOT-LOG-1234567890"


class FakeServer:
    """Scripted chat-completions server: each request pops the next action."""

    def __init__(self) -> None:
        self.actions: list[object] = []
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with server.lock:
                    server.bodies.append(body)
                    server.headers.append(dict(self.headers))
                    server.paths.append(self.path)
                    action = server.actions.pop(0) if server.actions else 200
                if action == "timeout":
                    time.sleep(0.5)
                    return  # the client gave up already
                if action == "garbage":
                    self._send(200, b"not json")
                    return
                if action == "oddmeta":  # the text is good; what is reported beside it is not
                    self._send(200, json.dumps({
                        "model": 5, "usage": "n/a",
                        "choices": [{"message": {"content": "Paris. [C0]"},
                                     "finish_reason": 7}]}).encode())
                    return
                if action == "oddusage":
                    self._send(200, json.dumps({
                        "usage": {"prompt_tokens": "many", "completion_tokens": -1,
                                  "total_tokens": True},
                        "choices": [{"message": {"content": "Paris. [C0]"}}]}).encode())
                    return
                if action == "trickle":  # headers, then the body a byte at a time, slowly
                    payload = b'{"choices": [{"message": {"content": "late [C0]"}}]}'
                    try:
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(payload)))
                        self.end_headers()
                        for i in range(len(payload)):
                            self.wfile.write(payload[i:i + 1])
                            self.wfile.flush()
                            time.sleep(0.05)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                if action == 200:
                    self._send(
                        200,
                        json.dumps(
                            {
                                "model": "served-model-1",
                                "choices": [
                                    {
                                        "message": {
                                            "role": "assistant",
                                            "content": "Paris is the capital. [C0]",
                                        },
                                        "finish_reason": "stop",
                                    }
                                ],
                                "usage": {
                                    "prompt_tokens": 11,
                                    "completion_tokens": 7,
                                    "total_tokens": 18,
                                },
                            }
                        ).encode(),
                    )
                    return
                status = int(action)  # type: ignore[call-overload]
                extra = {"Retry-After": "0"} if status == 429 else {}
                self._send(status, b'{"error": "injected"}', extra)

            def _send(
                self, status: int, payload: bytes, extra: dict[str, str] | None = None
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in (extra or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def _llm(server: FakeServer, sleeps: list[float] | None = None, **over: object) -> OpenAIChatLLM:
    settings = LLMSettings(
        base_url=server.url,
        model="test-model",
        api_key=API_KEY,
        timeout_s=0.25,
        max_attempts=4,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
    )
    record = sleeps if sleeps is not None else []
    return OpenAIChatLLM(settings, sleep=record.append, **over)


def test_ok_call_records_every_field(server: FakeServer) -> None:
    result = _llm(server).generate(PROMPT, request_id="r1", max_output_tokens=64)
    assert result.generation_status == "OK" and result.failure_reason is None
    assert result.raw_model_text == "Paris is the capital. [C0]"
    assert (result.finish_reason, result.attempts) == ("stop", 1)
    assert (
        result.prompt_tokens_actual,
        result.completion_tokens_actual,
        result.total_tokens_actual,
    ) == (11, 7, 18)
    assert result.model_name == "test-model" and result.model_reported == "served-model-1"
    assert result.llm_name == "openai" and result.request_id == "r1"
    assert result.prompt_sha256 == sha256_text(PROMPT)
    assert result.llm_latency_ms > 0
    body = json.loads(server.bodies[0])
    assert body["messages"] == [{"role": "user", "content": PROMPT}]  # exact text, nothing added
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("test-model", 64, 0.0)
    assert server.paths == ["/v1/chat/completions"]
    assert server.headers[0]["Authorization"] == f"Bearer {API_KEY}"


def test_transient_failures_are_retried_with_identical_bytes(server: FakeServer) -> None:
    server.actions = ["timeout", 429, 500, 200]
    sleeps: list[float] = []
    result = _llm(server, sleeps).generate(PROMPT, request_id="r2", max_output_tokens=64)
    assert result.generation_status == "OK"
    assert result.attempts == 4
    assert len(server.bodies) == 4
    assert len({hashlib.sha256(b).hexdigest() for b in server.bodies}) == 1
    assert json.loads(server.bodies[0])["messages"][0]["content"] == PROMPT
    assert len(sleeps) == 3 and all(0 <= s <= 0.05 for s in sleeps)  # bounded backoff
    assert sleeps == sorted(sleeps)


def test_gives_up_after_max_attempts_and_never_switches_model(server: FakeServer) -> None:
    server.actions = [503, 502, 500, 500, 200]
    result = _llm(server).generate(PROMPT, request_id="r3", max_output_tokens=64)
    assert result.generation_status == "FAILED"
    assert result.attempts == 4 and len(server.bodies) == 4
    assert result.failure_reason == "transient failure after 4 attempts: HTTP 500"
    assert result.raw_model_text is None
    assert {json.loads(b)["model"] for b in server.bodies} == {"test-model"}


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(server: FakeServer, status: int) -> None:
    server.actions = [status, 200]
    result = _llm(server).generate(PROMPT, request_id="r4", max_output_tokens=64)
    assert result.generation_status == "FAILED" and result.attempts == 1
    assert result.failure_reason == f"HTTP {status} (not retried)"
    assert len(server.bodies) == 1


def test_malformed_response_fails_without_retry(server: FakeServer) -> None:
    server.actions = ["garbage", 200]
    result = _llm(server).generate(PROMPT, request_id="r5", max_output_tokens=64)
    assert result.generation_status == "FAILED" and result.attempts == 1
    assert (result.failure_reason or "").startswith("malformed response")


def test_odd_metadata_beside_a_good_answer_is_dropped_not_a_crash(server: FakeServer) -> None:
    """``"usage": "n/a"`` raised AttributeError (an internal error: no bundle, no pack), and a
    token count or finish reason of the wrong type failed validation as an input fault (exit
    2). The text is what the reader asked for: it is kept, the odd fields are None."""
    server.actions = ["oddmeta", "oddusage"]
    for rid in ("r-meta", "r-usage"):
        result = _llm(server).generate(PROMPT, request_id=rid, max_output_tokens=64)
        assert result.generation_status == "OK" and result.raw_model_text == "Paris. [C0]"
        assert (result.prompt_tokens_actual, result.completion_tokens_actual,
                result.total_tokens_actual) == (None, None, None)
        assert result.finish_reason is None and result.model_reported is None


def test_a_body_trickling_past_the_timeout_fails_the_attempt(server: FakeServer) -> None:
    """httpx's timeout bounds each read: a body sent a byte every 0.05 s took 2.5 s against a
    0.25 s timeout, and was accepted. The attempt is bounded whole, and retried."""
    server.actions = ["trickle", "trickle"]
    t0 = time.perf_counter()
    result = _llm(server, max_attempts=2).generate(PROMPT, request_id="r-slow",
                                                   max_output_tokens=64)
    assert result.generation_status == "FAILED" and result.attempts == 2
    assert "AttemptTooLong" in (result.failure_reason or "")
    assert time.perf_counter() - t0 < 2.0  # two attempts of ~0.25 s, not two of 2.5 s


def test_connection_refused_is_transient_and_reported() -> None:
    settings = LLMSettings(
        base_url="http://127.0.0.1:9/v1",
        model="m",
        timeout_s=0.2,
        max_attempts=2,
        backoff_initial_s=0.0,
    )
    result = OpenAIChatLLM(settings, sleep=lambda s: None).generate(
        PROMPT, request_id="r6", max_output_tokens=8
    )
    assert result.generation_status == "FAILED" and result.attempts == 2
    assert (result.failure_reason or "").startswith(  # the error, and what it said
        "transient failure after 2 attempts: ConnectError: ")


def test_a_url_the_transport_refuses_is_failed_not_raised() -> None:
    """Trouble that is not transient (here a scheme httpx has no transport for, in settings
    built without validation) is a FAILED result at the first attempt, never an exception."""
    settings = LLMSettings.model_construct(
        base_url="gopher://127.0.0.1:9/v1", model="m", api_key=None, timeout_s=0.2,
        max_attempts=3, backoff_initial_s=0.0, backoff_max_s=0.0, temperature=0.0)
    result = OpenAIChatLLM(settings, sleep=lambda s: None).generate(
        PROMPT, request_id="r6b", max_output_tokens=8)
    assert result.generation_status == "FAILED" and result.attempts == 1
    assert (result.failure_reason or "").startswith("UnsupportedProtocol: ")
    assert (result.failure_reason or "").endswith("(not retried)")


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("AIBLOX_LLM_BASE_URL", "notaurl", "an http:// or https:// URL with a host, e.g. "
                                       "https://api.openai.com/v1"),
    ("AIBLOX_LLM_BASE_URL", "ftp://example.org/v1", "an http:// or https:// URL"),
    ("AIBLOX_LLM_BASE_URL", "https:///v1", "an http:// or https:// URL"),
    ("AIBLOX_LLM_BASE_URL", "http://h:99999/v1", "an http:// or https:// URL"),
    ("AIBLOX_LLM_MAX_ATTEMPTS", "abc", "a whole number from 1 to 10"),
    ("AIBLOX_LLM_MAX_ATTEMPTS", "0", "a whole number from 1 to 10"),
    ("AIBLOX_LLM_MAX_ATTEMPTS", "2.5", "a whole number from 1 to 10"),
    ("AIBLOX_LLM_TIMEOUT_S", "soon", "a finite number of seconds > 0"),
    ("AIBLOX_LLM_TIMEOUT_S", "inf", "a finite number of seconds > 0"),
])
def test_a_malformed_variable_is_named_with_its_value(variable: str, value: str,
                                                      expected: str) -> None:
    from aiblox.inputs import EnvVarError

    env = {"AIBLOX_LLM_BASE_URL": "http://127.0.0.1:9/v1", "AIBLOX_LLM_MODEL": "m",
           "AIBLOX_LLM_API_KEY": API_KEY, variable: value}
    with pytest.raises(EnvVarError) as err:
        LLMSettings.from_env(env)
    said = str(err.value)
    assert said.startswith(f"environment variable {variable}={value!r}: expected {expected}")
    assert API_KEY not in said and "\n" not in said
    if variable != "AIBLOX_LLM_BASE_URL":  # an optional one empty: its default
        assert LLMSettings.from_env({**env, variable: ""}).model == "m"


def test_a_password_in_a_malformed_url_is_masked_and_an_override_is_not_a_variable() -> None:
    from pydantic import ValidationError

    from aiblox.inputs import EnvVarError

    env = {"AIBLOX_LLM_BASE_URL": "http://me:hunter2@host:port/v1", "AIBLOX_LLM_MODEL": "m"}
    with pytest.raises(EnvVarError) as err:
        LLMSettings.from_env(env)
    assert "hunter2" not in str(err.value) and "http://me:***@host:port/v1" in str(err.value)
    with pytest.raises(ValidationError):  # an argument, not the environment: pydantic's error
        LLMSettings.from_env({"AIBLOX_LLM_MODEL": "m"}, base_url="notaurl")


def test_prompt_and_key_never_logged(server: FakeServer, caplog: pytest.LogCaptureFixture) -> None:
    server.actions = ["timeout", 429, 500, 401]
    caplog.set_level(logging.DEBUG)
    llm = _llm(server)
    llm.generate(PROMPT, request_id="r7", max_output_tokens=64)
    server.actions = [200]
    llm.generate(PROMPT, request_id="r8", max_output_tokens=64)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "prompt_sha256=" + sha256_text(PROMPT) in text  # audit trail is there
    assert "Secret prompt text" not in text
    assert API_KEY not in text
    assert API_KEY not in repr(llm) and API_KEY not in repr(llm.settings)
    assert API_KEY not in str(llm.settings.model_dump())


def test_settings_from_env_and_registry(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "AIBLOX_LLM_BASE_URL": server.url,
        "AIBLOX_LLM_MODEL": "env-model",
        "AIBLOX_LLM_API_KEY": API_KEY,
        "AIBLOX_LLM_MAX_ATTEMPTS": "2",
    }
    settings = LLMSettings.from_env(env)
    assert (settings.base_url, settings.model, settings.max_attempts) == (
        server.url,
        "env-model",
        2,
    )
    assert settings.api_key is not None and settings.api_key.get_secret_value() == API_KEY
    with pytest.raises(ValueError, match="AIBLOX_LLM_MODEL"):
        LLMSettings.from_env({"AIBLOX_LLM_BASE_URL": server.url})
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    llm = get_llm("openai", timeout_s=1.0)
    assert isinstance(llm, OpenAIChatLLM) and llm.model_name == "env-model"
    assert llm.generate(PROMPT, request_id="r9", max_output_tokens=8).generation_status == "OK"
