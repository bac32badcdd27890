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

from pydantic import ValidationError  # noqa: E402

from aiblox.assembly import LLMSettings, OpenAIChatLLM, get_llm  # noqa: E402
from aiblox.hashing import sha256_text  # noqa: E402
from aiblox.inputs import EnvVarError  # noqa: E402

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
                if isinstance(action, tuple):  # (status, body[, headers]) sent as they are
                    self._send(*action)
                    return
                if action == "hdrtrickle":  # a status line, then a header line every 0.05 s
                    try:
                        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                        for _ in range(200):
                            self.wfile.write(b"X-Slow: 1\r\n")
                            self.wfile.flush()
                            time.sleep(0.05)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                if action == "timeout":
                    time.sleep(1.5)  # past _llm's 1 s deadline
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


def _llm(server: FakeServer, sleeps: list[float] | None = None, timeout_s: float = 1.0,
         **over: object) -> OpenAIChatLLM:
    """The client on ``server``; ``timeout_s`` is each attempt's hard deadline (connect, headers,
    body), 1 s: room for a loaded machine (two test workers and more) to finish a good exchange,
    which a deadline of 0.25 s did not always leave."""
    settings = LLMSettings(
        base_url=server.url,
        model="test-model",
        api_key=API_KEY,
        timeout_s=timeout_s,
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
    assert result.failure_reason == f"HTTP {status} (not retried): injected"  # what it said
    assert len(server.bodies) == 1


def test_malformed_response_fails_without_retry(server: FakeServer) -> None:
    server.actions = ["garbage", 200]
    result = _llm(server).generate(PROMPT, request_id="r5", max_output_tokens=64)
    assert result.generation_status == "FAILED" and result.attempts == 1
    assert (result.failure_reason or "").startswith("malformed response")


def _ok(content: object) -> bytes:
    return json.dumps({"choices": [{"message": {"content": content}}]}).encode()


@pytest.mark.parametrize(("body", "reason"), [
    (b"not json", "body is not JSON (Expecting value: line 1 column 1 (char 0)); it starts "
                  "'not json'"),
    (b"<html>oops</html>", "body is not JSON (Expecting value: line 1 column 1 (char 0)); it "
                           "starts '<html>oops</html>'"),
    (b"", "empty body"),
    (b'{"result": "hi"}', "no choices"),
    (b"[1, 2, 3]", "the body is a list, not an object"),
    (b'{"choices": []}', "choices is empty"),
    (b'{"choices": {"a": 1}}', "choices is an object, not a list"),
    (b'{"choices": [{"text": "hi"}]}', "no choices[0].message"),
    (b'{"choices": [{"message": {"role": "assistant"}}]}', "no choices[0].message.content"),
    (_ok(None), "choices[0].message.content is null, not a string"),
    (_ok(["a", "b"]), "choices[0].message.content is a list, not a string"),
    # JSON may hold a lone surrogate, UTF-8 may not: the answer's hash crashed the CLI (exit 2,
    # "text that is not valid Unicode", no pack)
    (b'{"choices":[{"message":{"content":"BM25 \\ud800 [C0]"}}]}',
     "choices[0].message.content is not valid Unicode (a lone surrogate)"),
    # RecursionError was an internal error (exit 1, no pack)
    (b"[" * 200_000 + b"]" * 200_000, "JSON nested too deeply to decode (400000 bytes)"),
    (b'{"choices": "\xc3("}', "body is not UTF-8 text (17 bytes)"),
], ids=["text", "html", "empty", "nochoices", "list", "emptychoices", "choicesobject",
        "nomessage", "nocontent", "nullcontent", "listcontent", "surrogate", "deep", "notutf8"])
def test_a_malformed_response_says_what_is_wrong(server: FakeServer, body: bytes,
                                                 reason: str) -> None:
    """The reason named only the exception type (``malformed response: KeyError``), so an HTML
    page and cut JSON recorded the same pack; it says what is missing or of the wrong type."""
    server.actions = [(200, body), (200, body)]
    results = [_llm(server).generate(PROMPT, request_id="r-bad", max_output_tokens=64)
               for _ in range(2)]
    assert results[0].generation_status == "FAILED" and results[0].attempts == 1
    assert results[0].failure_reason == f"malformed response: {reason}"
    assert results[1].failure_reason == results[0].failure_reason  # the same response, reason


def test_a_redirect_is_named_not_read_as_json(server: FakeServer) -> None:
    server.actions = [(302, b"", {"Location": "https://u:pw@other.example/v2/chat?key=s#f"}),
                      (307, b"", {"Location": "/v2/chat/completions?token=abc"}), (301, b"")]
    reasons = [_llm(server).generate(PROMPT, request_id="r-302", max_output_tokens=8)
               .failure_reason for _ in range(3)]
    assert reasons == [
        "HTTP 302 redirect to https://other.example/v2/chat not followed (not retried)",
        "HTTP 307 redirect to /v2/chat/completions not followed (not retried)",
        "HTTP 301 redirect (no Location) not followed (not retried)"]
    assert len(server.bodies) == 3


def test_a_client_error_keeps_the_servers_message_sanitised_and_short(server: FakeServer) -> None:
    said = "Invalid API key\n\x1b[31mprovided\u202e " + "x" * 500
    server.actions = [(401, json.dumps({"error": {"message": said}}).encode()),
                      (404, b"<html>\n<h1>Not   Found</h1></html>"), (400, b"")]
    reasons = [_llm(server).generate(PROMPT, request_id="r-4xx", max_output_tokens=8)
               .failure_reason or "" for _ in range(3)]
    assert reasons[0].startswith("HTTP 401 (not retried): Invalid API key [31mprovided xxx")
    assert reasons[0].endswith("x...") and len(reasons[0]) == len("HTTP 401 (not retried): ") + 160
    assert reasons[1] == "HTTP 404 (not retried): <html> <h1>Not Found</h1></html>"
    assert reasons[2] == "HTTP 400 (not retried)"


def test_headers_sent_slowly_do_not_outlive_the_timeout(server: FakeServer) -> None:
    """One header line every 0.05 s kept each read under httpx's 0.25 s read timeout: an
    attempt ran as long as the server kept sending (45 s and more at timeout_s=2). The whole
    attempt has a hard deadline; it is retried as a timeout."""
    server.actions = ["hdrtrickle", "hdrtrickle"]
    t0 = time.perf_counter()
    result = _llm(server, timeout_s=0.25, max_attempts=2).generate(
        PROMPT, request_id="r-hdr", max_output_tokens=64)
    took = time.perf_counter() - t0
    assert result.generation_status == "FAILED" and result.attempts == 2
    assert result.failure_reason == ("transient failure after 2 attempts: AttemptTooLong: no "
                                     "whole response within the attempt's timeout_s=0.25")
    assert took < 2.0, took  # two attempts of 0.25 s, not two of 10 s


def test_a_body_over_the_byte_cap_is_not_read_whole(server: FakeServer) -> None:
    """A 100 MiB body was buffered whole (RSS +300 MB); reading stops at max_response_bytes."""
    server.actions = [(200, b'{"pad": "' + b"x" * (8 * 1024 * 1024) + b'"}'), 200]
    result = _llm(server, max_response_bytes=64 * 1024).generate(
        PROMPT, request_id="r-big", max_output_tokens=64)
    assert result.generation_status == "FAILED" and result.attempts == 1
    assert result.failure_reason == ("response body over 65536 bytes (max_response_bytes, "
                                     "AIBLOX_LLM_MAX_RESPONSE_BYTES; not retried)")
    assert LLMSettings(base_url=server.url, model="m").max_response_bytes == 4 * 1024 * 1024
    env = {"AIBLOX_LLM_BASE_URL": server.url, "AIBLOX_LLM_MODEL": "m",
           "AIBLOX_LLM_MAX_RESPONSE_BYTES": "2048"}
    assert LLMSettings.from_env(env).max_response_bytes == 2048


def test_an_answer_far_over_max_tokens_fails(server: FakeServer) -> None:
    """9.9 M characters for max_tokens=800 passed validation; more than ANSWER_TOKEN_FACTOR
    (4) times max_tokens tokens is FAILED, and the text is not kept."""
    from aiblox.assembly.llm.openai_chat import ANSWER_TOKEN_FACTOR
    from aiblox.text.tokens import count_tokens

    at_limit = " ".join(["word"] * (ANSWER_TOKEN_FACTOR * 64))  # 4 x 64 tokens exactly
    assert count_tokens(at_limit) == ANSWER_TOKEN_FACTOR * 64
    server.actions = [(200, _ok(at_limit)), (200, _ok(at_limit + " word"))]
    ok = _llm(server).generate(PROMPT, request_id="r-long", max_output_tokens=64)
    assert ok.generation_status == "OK" and ok.raw_model_text == at_limit
    over = _llm(server).generate(PROMPT, request_id="r-long", max_output_tokens=64)
    assert over.generation_status == "FAILED" and over.raw_model_text is None
    assert over.failure_reason == ("answer longer than the reserved output tokens: 257 tokens "
                                   "(cl100k_base), over 4 x max_tokens=64")


KEY_CR = "sk-TOPSECRET-0123456789\r"


def test_a_key_with_a_control_character_is_refused_unshown() -> None:
    """A pasted trailing CR made an illegal header whose error (the failure reason, the error
    line, the stored pack) quoted the key."""
    from pydantic import ValidationError

    from aiblox.inputs import EnvVarError

    for bad in (KEY_CR, "sk-abc\n", "sk abc", "sk-\x00abc", "sk-ключ"):
        env = {"AIBLOX_LLM_BASE_URL": "http://127.0.0.1:9/v1", "AIBLOX_LLM_MODEL": "m",
               "AIBLOX_LLM_API_KEY": bad}
        with pytest.raises(EnvVarError) as err:
            LLMSettings.from_env(env)
        said = str(err.value)
        assert said.startswith("environment variable AIBLOX_LLM_API_KEY=(the value, not "
                               "shown): expected an API key of printable ASCII characters")
        assert bad.strip() not in said and "\n" not in said
        with pytest.raises(ValidationError) as verr:  # given as an argument: not quoted either
            LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key=bad)
        assert bad.strip() not in str(verr.value)
        with pytest.raises(ValueError) as oerr:
            LLMSettings.from_env({"AIBLOX_LLM_MODEL": "m"}, base_url="http://h/v1", api_key=bad)
        assert bad.strip() not in str(oerr.value)


def test_a_key_quoted_by_an_error_is_scrubbed_from_the_reason(server: FakeServer) -> None:
    """Settings built without validation may still hold such a key: whatever quotes it (here
    h11's illegal header value, as a bytes repr), the reason does not."""
    from pydantic import SecretStr

    settings = LLMSettings.model_construct(
        base_url=server.url, model="m", api_key=SecretStr(KEY_CR), timeout_s=1.0,
        max_attempts=2, backoff_initial_s=0.0, backoff_max_s=0.0, temperature=0.0,
        max_response_bytes=1 << 20)
    result = OpenAIChatLLM(settings, sleep=lambda s: None).generate(
        PROMPT, request_id="r-key", max_output_tokens=8)
    reason = result.failure_reason or ""
    assert result.generation_status == "FAILED" and "Illegal header value" in reason
    assert "TOPSECRET" not in reason and "***" in reason
    assert server.bodies == []  # never sent


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
    result = _llm(server, timeout_s=0.25, max_attempts=2).generate(
        PROMPT, request_id="r-slow", max_output_tokens=64)
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


def test_request_timeout_and_conflict_are_retried_like_a_rate_limit(server: FakeServer) -> None:
    """408 and 409 are the server's load or a race (OpenAI's own client retries them); they
    failed the answer as the request's fault (QA, 2026-11-29)."""
    server.actions = [408, 409, 200]
    result = _llm(server).generate(PROMPT, request_id="r9", max_output_tokens=64)
    assert (result.generation_status, result.attempts) == ("OK", 3)
    server.actions = [400]
    result = _llm(server).generate(PROMPT, request_id="r10", max_output_tokens=64)
    assert result.failure_reason is not None and result.failure_reason.startswith(
        "HTTP 400 (not retried)")


@pytest.mark.parametrize("tail", ["?api-version=2024-01-01", "?", "#frag"])
def test_a_base_url_with_a_query_is_refused_before_any_request(tail: str) -> None:
    """``/chat/completions`` is appended to the path: after a query it went into the query
    (``?x=1/chat/completions``), the server saw the bare path and answered 404."""
    with pytest.raises(ValidationError, match="without a query or fragment"):
        LLMSettings(base_url="http://127.0.0.1:9/v1" + tail, model="m")
    with pytest.raises(EnvVarError, match="AIBLOX_LLM_BASE_URL"):
        LLMSettings.from_env({"AIBLOX_LLM_BASE_URL": "http://127.0.0.1:9/v1" + tail,
                              "AIBLOX_LLM_MODEL": "m"})


@pytest.mark.parametrize("model", ["   ", "gpt-4o\n", " gpt-4o", "a\nb", "a\x1bb"])
def test_a_model_name_of_spaces_or_with_a_pasted_newline_is_refused(model: str) -> None:
    with pytest.raises(EnvVarError, match="AIBLOX_LLM_MODEL"):
        LLMSettings.from_env({"AIBLOX_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                              "AIBLOX_LLM_MODEL": model})
    assert LLMSettings(base_url="http://127.0.0.1:9/v1", model="org/model-1 v2").model


@pytest.mark.parametrize("host", ["xn--ls8h.la", "xn--", "xn--zz.example"])
def test_a_host_idna_refuses_is_refused_naming_the_variable_and_never_raised(host: str) -> None:
    """``http://xn--ls8h.la/v1`` passed the settings, and the first request raised idna's
    IDNAError (httpx decodes an ``xn--`` host): ``aiblox answer`` printed "error: text that is
    not valid Unicode ..." after retrieval and stored no pack (QA, 2026-11-29)."""
    url = f"http://{host}/v1"
    with pytest.raises(EnvVarError) as err:
        LLMSettings.from_env({"AIBLOX_LLM_BASE_URL": url, "AIBLOX_LLM_MODEL": "m"})
    said = str(err.value)
    assert said.startswith(f"environment variable AIBLOX_LLM_BASE_URL={url!r}: expected an "
                           f"http:// or https:// URL with a host")
    assert said.endswith(f"its host {host!r} is not a valid internationalised domain name "
                         f"(IDNA)") and "\n" not in said
    with pytest.raises(ValidationError, match="IDNA"):
        LLMSettings(base_url=url, model="m")
    # settings built without the check: a FAILED result with its reason, never an exception
    settings = LLMSettings.model_construct(
        base_url=url, model="m", api_key=None, timeout_s=0.2, max_attempts=3,
        backoff_initial_s=0.0, backoff_max_s=0.0, temperature=0.0, max_response_bytes=4096)
    result = OpenAIChatLLM(settings, sleep=lambda s: None).generate(
        PROMPT, request_id="idna", max_output_tokens=8)
    assert (result.generation_status, result.attempts) == ("FAILED", 1)
    assert (result.failure_reason or "").endswith("(not retried)")
    assert LLMSettings(base_url="http://b\u00fccher.example/v1", model="m")  # a valid IDN
