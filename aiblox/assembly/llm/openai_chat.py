"""``openai``: an OpenAI-compatible chat-completions client (a reader, step 5 of answer assembly).

The prompt is sent as the single user message of one ``POST {base_url}/chat/completions``, its
text unchanged; no system message or other instruction is added. The JSON body is serialised once
(sorted keys, compact, UTF-8) and the same bytes are re-sent on every retry. Only transient
failures are retried (timeouts, network errors, HTTP 408, 409, 429 and 5xx), at most
``max_attempts`` in all, with exponential backoff bounded by ``backoff_max_s`` (a ``Retry-After``
header is honoured within the same bound). Each attempt (connect, headers and body together)
ends at ``timeout_s``, however slowly the server sends, and reads at most
``max_response_bytes``. The
model is never switched and its text never edited. Logs (INFO, one per attempt) carry the request
id, model, prompt sha256, attempt, status or network error and latency; never the prompt text or
the key. Network and HTTP trouble is never raised: the result is FAILED with a reason that says
what was wrong (``transient failure after 4 attempts: ConnectError: [Errno 111] Connection
refused``, ``HTTP 401 (not retried): invalid api key``, ``malformed response: no
choices[0].message.content``); the key never appears in a reason, whatever an error quotes.

An answer far longer than the ``max_tokens`` the request reserved is FAILED too (``answer longer
than the reserved output tokens``): "far" is more than :data:`ANSWER_TOKEN_FACTOR` times
``max_tokens`` tokens, counted with ``cl100k_base`` (the factor absorbs the difference between
that tokenizer and the model's own; a model that honours ``max_tokens`` never comes near it).

Settings come from :class:`LLMSettings` (``AIBLOX_LLM_BASE_URL``, ``AIBLOX_LLM_MODEL``,
``AIBLOX_LLM_API_KEY``, ``AIBLOX_LLM_TIMEOUT_S``, ``AIBLOX_LLM_MAX_ATTEMPTS``,
``AIBLOX_LLM_MAX_RESPONSE_BYTES``), each checked when read: a value that is not valid (a base URL
that is not ``http(s)://host...``, attempts that are not a whole number from 1 to 10, a key with
a space or a control character such as a pasted trailing newline) is
:class:`~aiblox.inputs.EnvVarError` naming the variable, its value (never the key's) and what is
expected, before any request. Needs ``httpx`` (``pip install 'aiblox[llm]'``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from aiblox.assembly.llm._http import AttemptTooLong, ResponseTooLarge, exchange, run_sync
from aiblox.assembly.llm._response import (
    MalformedResponse,
    answer_text,
    redirect_reason,
    server_message,
    shown_url,
)
from aiblox.assembly.records import LLMExecutionResult
from aiblox.hashing import sha256_text
from aiblox.inputs import EnvVarError, mask_url_passwords

__all__ = [
    "ANSWER_TOKEN_FACTOR",
    "ENV_PREFIX",
    "LLMSettings",
    "OpenAIChatLLM",
    "build_request_body",
    "shown_url",
]

logger = logging.getLogger(__name__)
ENV_PREFIX = "AIBLOX_LLM_"
ANSWER_TOKEN_FACTOR = 4
"""An answer of more than this many times the request's ``max_tokens`` tokens (cl100k_base) is
FAILED: no model that honours ``max_tokens`` writes it."""
_KEY = re.compile(r"[\x21-\x7e]+")
"""An API key: printable ASCII, no space (a bearer token's characters and more)."""


class LLMSettings(BaseModel):
    """Connection settings of an OpenAI-compatible endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True,
                              hide_input_in_errors=True)  # an error never quotes the key

    base_url: str = Field(min_length=1)
    """API root, e.g. ``https://api.openai.com/v1`` (``/chat/completions`` is appended)."""
    model: str = Field(min_length=1)
    """Model name sent with every request; never switched on failure."""
    api_key: SecretStr | None = None
    """Bearer token: printable ASCII without spaces or control characters; kept out of reprs,
    logs and failure reasons."""
    timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    """Per-attempt timeout in seconds: for each network step (connect, read, write, pool) and
    a hard deadline on the whole attempt, connect, headers and body together (a server sending
    its headers or body slowly past it fails the attempt, retried as a timeout)."""
    max_attempts: int = Field(default=4, ge=1, le=10)
    """Attempts in all, the first included."""
    backoff_initial_s: float = Field(default=0.5, ge=0)
    """Wait before the second attempt; doubled for each later one."""
    backoff_max_s: float = Field(default=8.0, ge=0)
    """Upper bound of any single wait (Retry-After included)."""
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature (0 for the most repeatable answers)."""
    max_response_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """At most this many bytes of a response body are read (after decompression; default 4
    MiB, far above any chat answer); a longer one fails the attempt, not retried."""

    @field_validator("api_key")
    @classmethod
    def _printable_key(cls, value: SecretStr | None) -> SecretStr | None:
        """A key with a space or a control character (a trailing newline or carriage return
        pasted with it) is refused here; sent, it made an illegal header whose error quoted
        it."""
        if value is not None and not _KEY.fullmatch(value.get_secret_value()):
            raise ValueError(f"expected {_EXPECTED['api_key']}")
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        """An ``http://`` or ``https://`` URL with a host (and a numeric port, if any): anything
        else is refused here, not when the first request fails."""
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            parts = None
        if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname
                or any(c.isspace() for c in value)):
            raise ValueError(f"expected {_EXPECTED['base_url']}")
        if parts.query or parts.fragment or value.endswith(("?", "#")):
            # "/chat/completions" is appended to the path: after a query it landed in the
            # query ("?x=1/chat/completions") and the server answered 404 for the bare path
            raise ValueError(f"expected {_EXPECTED['base_url']}: without a query or fragment "
                             f"(the request goes to its path + /chat/completions)")
        if not _idna_host(value):
            # httpx encodes a non-ASCII host and decodes an "xn--" one with the idna package:
            # "http://xn--ls8h.la/v1" raised idna's error out of the first request
            raise ValueError(f"expected {_EXPECTED['base_url']}: its host "
                             f"{parts.hostname!r} is not a valid internationalised domain name "
                             f"(IDNA)")
        return value

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str) -> str:
        """A name with visible characters and no whitespace or control characters at its ends
        or inside a line: a pasted newline or a name of spaces was sent as it was."""
        if not value.strip() or value != value.strip() or any(
                not c.isprintable() for c in value):
            raise ValueError(f"expected {_EXPECTED['model']}")
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """Settings from ``AIBLOX_LLM_*`` variables; ``overrides`` win. A missing required
        variable raises ``ValueError`` naming it; a value that is not valid
        :class:`~aiblox.inputs.EnvVarError` naming the variable, the value (never the API key's)
        and what is expected."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        from_env: dict[str, str] = {}
        for field in ("base_url", "model", "api_key", "timeout_s", "max_attempts",
                      "max_response_bytes"):
            var = ENV_PREFIX + field.upper()
            if env.get(var):
                values[field] = from_env[field] = env[var]
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        for field in ("base_url", "model"):
            if field not in values:
                raise ValueError(f"LLM setting '{field}' missing: set {ENV_PREFIX}{field.upper()}")
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            for err in exc.errors():
                field = str(err["loc"][0]) if err.get("loc") else ""
                if field in from_env and field not in given:
                    value = mask_url_passwords(from_env[field])
                    raise EnvVarError(ENV_PREFIX + field.upper(), value, _expected(field, err),
                                      shown=field != "api_key") from None
                if field == "api_key":
                    raise ValueError(f"LLM setting 'api_key': expected {_EXPECTED[field]}"
                                     ) from None
            raise


def _idna_host(url: str) -> bool:
    """False when httpx cannot encode or decode the host of ``url`` (IDNA): a malformed
    ``xn--`` label (``xn--``, ``xn--ls8h``), or a non-ASCII name IDNA 2008 refuses; True
    without httpx (the reader needs it and says so)."""
    try:
        import httpx
    except ModuleNotFoundError:  # pragma: no cover - depends on the environment
        return True
    try:
        httpx.URL(url).host  # noqa: B018 - the host as httpx builds a request's
    except (httpx.InvalidURL, UnicodeError):
        return False
    return True


_EXPECTED = {
    "base_url": "an http:// or https:// URL with a host, e.g. https://api.openai.com/v1",
    "model": "a model name (printable, no surrounding whitespace)",
    "api_key": "an API key of printable ASCII characters, without spaces or control "
               "characters (a trailing newline or carriage return?)",
    "timeout_s": "a finite number of seconds > 0",
    "max_attempts": "a whole number from 1 to 10",
    "max_response_bytes": "a whole number of bytes >= 1024",
}
"""What each ``AIBLOX_LLM_*`` variable must hold, for its error."""


def _expected(field: str, err: Any) -> str:
    """What ``field`` must hold, as its validator said (``... without a query``, ``... its
    host ... is not ... (IDNA)``) or else from :data:`_EXPECTED`."""
    said = str((err.get("ctx") or {}).get("error", ""))
    if field != "api_key" and said.startswith("expected "):
        return said[len("expected "):]
    return _EXPECTED[field]


_TRANSIENT = frozenset({408, 409, 429})
"""Client errors retried as the server's load or a race (request timeout, conflict, rate
limit), as OpenAI's own client retries them; other 4xx are the request's fault."""


def build_request_body(
    prompt_text: str, model: str, max_output_tokens: int, temperature: float
) -> bytes:
    """The exact request bytes: the prompt as the one user message, canonical JSON."""
    body = {
        "max_tokens": max_output_tokens,
        "messages": [{"content": prompt_text, "role": "user"}],
        "model": model,
        "temperature": temperature,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _error_text(exc: BaseException) -> str:
    """``ConnectError: [Errno 111] Connection refused``: the type, and its message when it has
    one (at most 200 characters)."""
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _scrubbed(text: str, key: str | None) -> str:
    """``text`` with every form of ``key`` an error may quote (as is, stripped, escaped as in a
    ``repr`` of the str or of its bytes) replaced by ``***``."""
    if not key:
        return text
    forms = {key, key.strip(), repr(key)[1:-1], repr(key.encode("utf-8", "backslashreplace"))[2:-1]}
    for form in sorted((f for f in forms if len(f) >= 4), key=len, reverse=True):
        text = text.replace(form, "***")
    return text


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class OpenAIChatLLM:
    """OpenAI-compatible chat-completions client implementing the ``LLM`` protocol."""

    name = "openai"

    def __init__(
        self,
        settings: LLMSettings | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        **overrides: Any,
    ) -> None:
        try:
            import httpx  # noqa: F401
        except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
            raise ModuleNotFoundError(
                "the 'openai' LLM needs httpx: pip install 'aiblox[llm]'"
            ) from exc
        if settings is None:
            settings = LLMSettings.from_env(**overrides)
        elif overrides:
            settings = LLMSettings.model_validate({**settings.model_dump(), **overrides})
        self.settings = settings
        self.model_name = settings.model
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"OpenAIChatLLM(base_url={self.settings.base_url!r}, model={self.model_name!r})"

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        wait = self.settings.backoff_initial_s * (2 ** (attempt - 1))
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.settings.backoff_max_s)

    def generate(
        self, prompt_text: str, *, request_id: str, max_output_tokens: int = 800
    ) -> LLMExecutionResult:
        """Send the prompt; retry transient failures with the same bytes; never raise for HTTP or
        network trouble (FAILED result instead)."""
        return run_sync(lambda: self._generate(prompt_text, request_id, max_output_tokens))

    async def _generate(
        self, prompt_text: str, request_id: str, max_output_tokens: int
    ) -> LLMExecutionResult:
        import httpx

        s = self.settings
        key = s.api_key.get_secret_value() if s.api_key is not None else None
        prompt_sha = sha256_text(prompt_text)
        body = build_request_body(prompt_text, s.model, max_output_tokens, s.temperature)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        url = s.base_url.rstrip("/") + "/chat/completions"
        common: dict[str, Any] = {
            "request_id": request_id,
            "llm_name": self.name,
            "model_name": s.model,
            "prompt_sha256": prompt_sha,
        }
        start = time.perf_counter()
        attempts = 0
        last_error = "no attempt made"

        def failed(reason: str) -> LLMExecutionResult:
            return LLMExecutionResult(
                **common,
                generation_status="FAILED",
                failure_reason=_scrubbed(reason, key),
                attempts=attempts,
                llm_latency_ms=(time.perf_counter() - start) * 1000.0,
            )

        async with httpx.AsyncClient(timeout=s.timeout_s) as client:
            while attempts < s.max_attempts:
                attempts += 1
                retry_after = None
                t0 = time.perf_counter()
                try:
                    reply = await exchange(client, url, body, headers, timeout_s=s.timeout_s,
                                           max_bytes=s.max_response_bytes)
                except (
                    httpx.TimeoutException,
                    httpx.NetworkError,
                    httpx.RemoteProtocolError,
                    AttemptTooLong,
                ) as exc:
                    last_error = _scrubbed(_error_text(exc), key)
                    logger.info(  # like an HTTP failure's: the result (FAILED) is what reports
                        "llm attempt failed request_id=%s model=%s prompt_sha256=%s attempt=%d "
                        "error=%s latency_ms=%.1f",
                        request_id,
                        s.model,
                        prompt_sha,
                        attempts,
                        last_error,
                        (time.perf_counter() - t0) * 1000.0,
                    )
                except ResponseTooLarge as exc:
                    return failed(f"{exc} (max_response_bytes, AIBLOX_LLM_MAX_RESPONSE_BYTES; "
                                  f"not retried)")
                except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:
                    # e.g. a proxy refusing, or a host name IDNA refuses (idna's IDNAError is a
                    # UnicodeError) that the settings' check let through
                    return failed(f"{_error_text(exc)} (not retried)")
                else:
                    status = reply.status
                    logger.info(
                        "llm attempt request_id=%s model=%s prompt_sha256=%s attempt=%d "
                        "http_status=%d latency_ms=%.1f",
                        request_id,
                        s.model,
                        prompt_sha,
                        attempts,
                        status,
                        (time.perf_counter() - t0) * 1000.0,
                    )
                    if status in _TRANSIENT or status >= 500:
                        last_error = f"HTTP {status}"
                        retry_after = _retry_after(reply.headers.get("retry-after"))
                    elif status >= 400:
                        said = server_message(reply.content)
                        return failed(f"HTTP {status} (not retried)" + (f": {said}" if said
                                                                          else ""))
                    elif status >= 300:
                        return failed(redirect_reason(status, reply.headers.get("location"))
                                      + " (not retried)")
                    else:
                        return _parsed(reply.content, common, attempts, start, failed,
                                       max_output_tokens)
                if attempts < s.max_attempts:
                    self._sleep(self._backoff(attempts, retry_after))
        return failed(f"transient failure after {attempts} attempts: {last_error}")


def _parsed(
    content: bytes,
    common: dict[str, Any],
    attempts: int,
    start: float,
    failed: Callable[[str], LLMExecutionResult],
    max_output_tokens: int,
) -> LLMExecutionResult:
    """The result of a 2xx response: OK with its text, or FAILED saying what is wrong."""
    try:
        data, choice, text = answer_text(content)
    except MalformedResponse as exc:
        return failed(f"malformed response: {exc}")
    too_long = _too_long(text, max_output_tokens)
    if too_long:
        return failed(too_long)
    # what the endpoint reports besides the text is kept when it has the right type, else
    # None: an odd "usage" must not turn a good answer into a crash
    usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    return LLMExecutionResult(
        **common,
        generation_status="OK",
        raw_model_text=text,
        finish_reason=finish if isinstance(finish, str) else None,
        attempts=attempts,
        llm_latency_ms=(time.perf_counter() - start) * 1000.0,
        prompt_tokens_actual=_count(usage.get("prompt_tokens")),
        completion_tokens_actual=_count(usage.get("completion_tokens")),
        total_tokens_actual=_count(usage.get("total_tokens")),
        model_reported=data.get("model") if isinstance(data.get("model"), str) else None,
    )


def _too_long(text: str, max_output_tokens: int) -> str | None:
    """The failure reason of an answer of more than ``ANSWER_TOKEN_FACTOR * max_output_tokens``
    tokens (cl100k_base), else None (also for ``max_output_tokens`` 0: no limit asked)."""
    limit = ANSWER_TOKEN_FACTOR * max_output_tokens
    if limit <= 0 or len(text.encode("utf-8")) <= limit:  # a token is one byte or more
        return None
    from aiblox.text.tokens import DEFAULT_ENCODING, count_tokens

    tokens = count_tokens(text, DEFAULT_ENCODING)
    if tokens <= limit:
        return None
    return (f"answer longer than the reserved output tokens: {tokens} tokens "
            f"({DEFAULT_ENCODING}), over {ANSWER_TOKEN_FACTOR} x max_tokens={max_output_tokens}")


def _count(value: Any) -> int | None:
    """A token count the endpoint reported: a whole number >= 0, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None
