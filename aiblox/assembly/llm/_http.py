"""One HTTP exchange of the ``openai`` reader under a hard deadline and a size cap.

httpx's timeouts bound each network step (one read, one write), not an exchange: a server that
sends a header line or a body byte a little faster than the read timeout keeps an attempt alive
for as long as it likes. Each exchange therefore runs on an asyncio event loop under
``asyncio.timeout``: at the deadline the exchange is cancelled wherever it waits (connecting,
reading the headers, reading the body) and its connection closed, and :class:`AttemptTooLong`
is raised. The body is read up to ``max_bytes`` (decoded) and no further:
:class:`ResponseTooLarge`.

The caller stays synchronous: :func:`run_sync` runs a coroutine on a fresh event loop, in a
worker thread when the calling thread already runs one (a notebook kernel).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["AttemptTooLong", "Reply", "ResponseTooLarge", "exchange", "run_sync"]

T = TypeVar("T")


class AttemptTooLong(Exception):
    """An attempt whose response did not arrive whole within ``timeout_s`` (connect, headers
    and body together)."""


class ResponseTooLarge(Exception):
    """A response body longer than ``max_response_bytes``."""


@dataclass(frozen=True)
class Reply:
    """What one exchange received: the status, the headers and the whole body."""

    status: int
    headers: Any
    """The response's headers (an ``httpx.Headers``: case-insensitive ``get``)."""
    content: bytes


async def exchange(client: Any, url: str, body: bytes, headers: dict[str, str], *,
                   timeout_s: float, max_bytes: int) -> Reply:
    """POST ``body`` with ``client`` (an ``httpx.AsyncClient``) and read the whole response
    within ``timeout_s`` seconds (:class:`AttemptTooLong`), its body no longer than
    ``max_bytes`` (:class:`ResponseTooLarge`)."""
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", url, content=body, headers=headers) as response:
                parts: list[bytes] = []
                size = 0
                async for part in response.aiter_bytes():
                    size += len(part)
                    if size > max_bytes:
                        raise ResponseTooLarge(f"response body over {max_bytes} bytes")
                    parts.append(part)
                return Reply(response.status_code, response.headers, b"".join(parts))
    except TimeoutError:  # asyncio.timeout's own: httpx raises its TimeoutException subclasses
        raise AttemptTooLong(
            f"no whole response within the attempt's timeout_s={timeout_s:g}") from None


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make()`` to its end on a fresh event loop and return its result (in a
    worker thread when this thread runs a loop already)."""
    async def main() -> T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="aiblox-llm") as pool:
        return pool.submit(asyncio.run, main()).result()
