"""What a chat-completions response says, in words: the answer text, or why there is none.

Every reason is built from the response alone, so the same response gives the same reason (and
the same evidence pack): the JSON path that is missing or has the wrong type (``no
choices[0].message.content``, ``choices[0].message.content is null, not a string``), the decoder's
message and the body's first characters for a body that is not JSON, the server's own message for
a 4xx, the target of a redirect. Text taken from the server is sanitised (control and format
characters dropped, whitespace collapsed) and cut to a few hundred characters.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["MalformedResponse", "answer_text", "excerpt", "redirect_reason", "server_message",
           "shown_url"]

EXCERPT_CHARS = 160
"""At most this many characters of text from the server go into a reason."""


class MalformedResponse(ValueError):
    """A 2xx response that holds no answer text; the message says what is wrong."""


def excerpt(text: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """``text`` fit for one line of a reason: decoded as UTF-8 (bad bytes replaced), control
    and format characters dropped, whitespace collapsed, cut to ``limit`` characters (``...``
    marks a cut)."""
    if isinstance(text, bytes):
        text = text[: limit * 4].decode("utf-8", errors="replace")
    kept = "".join(" " if c.isspace() else c for c in text[: limit * 4]
                   if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co"))
    flat = " ".join(kept.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def _kind(value: Any) -> str:
    """The JSON type of ``value``, with its article (``null``, ``a list``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _step(value: Any, path: str, key: str | int) -> tuple[Any, str]:
    """``value[key]`` and its path, else :class:`MalformedResponse` naming the path."""
    where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
    if isinstance(key, int):
        if not isinstance(value, list):
            raise MalformedResponse(f"{path} is {_kind(value)}, not a list")
        if len(value) <= key:
            raise MalformedResponse(f"{path} is empty" if not value else f"no {where}")
        return value[key], where
    if not isinstance(value, dict):
        raise MalformedResponse(f"{path or 'the body'} is {_kind(value)}, not an object")
    if key not in value:
        raise MalformedResponse(f"no {where}")
    return value[key], where


def answer_text(content: bytes) -> tuple[dict[str, Any], Any, str]:
    """The decoded body, its ``choices[0]`` and ``choices[0].message.content``; else
    :class:`MalformedResponse` saying what is wrong."""
    try:
        data = json.loads(content)
    except RecursionError:
        raise MalformedResponse(f"JSON nested too deeply to decode ({len(content)} bytes)"
                                ) from None
    except MemoryError:
        raise MalformedResponse(f"JSON too large to decode ({len(content)} bytes)") from None
    except UnicodeDecodeError:
        raise MalformedResponse(f"body is not UTF-8 text ({len(content)} bytes)") from None
    except ValueError as exc:
        shown = excerpt(content, 60)
        raise MalformedResponse(f"body is not JSON ({exc}); it starts {shown!r}"
                                if shown else "empty body") from None
    choice, _ = _step(*_step(data, "", "choices"), 0)
    text, where = _step(*_step(choice, "choices[0]", "message"), "content")
    if not isinstance(text, str):
        raise MalformedResponse(f"{where} is {_kind(text)}, not a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (\ud800): JSON allows it, UTF-8 does not
        raise MalformedResponse(f"{where} is not valid Unicode (a lone surrogate)") from None
    return data, choice, text


def server_message(content: bytes) -> str:
    """The message of an error response, for its reason: ``error.message``, ``error``,
    ``message`` or ``detail`` of a JSON body, else the body's first characters; "" when there is
    nothing to say."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError, MemoryError):
        return excerpt(content)
    if isinstance(data, dict):
        error = data.get("error")
        for said in (error.get("message") if isinstance(error, dict) else error,
                     data.get("message"), data.get("detail")):
            if isinstance(said, str) and excerpt(said):
                return excerpt(said)
    return excerpt(content)


def shown_url(url: str) -> str:
    """``url`` as errors show it: without a user name, password or query (where credentials
    may sit), e.g. ``https://api.example.com/v1``."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(a malformed URL)"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}{parts.path}"


def redirect_reason(status: int, location: str | None) -> str:
    """``HTTP 302 redirect to /v2/chat/completions not followed``: the target without its query
    or fragment (where credentials may sit), nor a user name or password."""
    if not location:
        return f"HTTP {status} redirect (no Location) not followed"
    target = location.split("#")[0].split("?")[0]
    if "://" in target:
        target = shown_url(target)
    return f"HTTP {status} redirect to {excerpt(target)} not followed"
