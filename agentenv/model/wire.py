"""What came over the wire, for errors a person can act on: the first bytes of every answer
are kept beside the stream the SDK reads (``keep_head``, an HTTP response hook), so an
answer that is not the wire format is reported with its first line; and which transport
failures mean that nobody is there at all (``nobody_there``), as a breaker counts them.

The SDK's HTTP layer (httpx) is named by module here, not imported at the top: which
library that is varies by SDK version.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

HEAD_BYTES = 512  # enough for a status line, a JSON error or the start of an HTML page


def head_stream(response: Any) -> Any:
    """``response``'s body stream, that also keeps its first :data:`HEAD_BYTES`."""
    inner = response.stream
    # the stream class of the response's own library (the SDK's HTTP layer checks for it)
    http = sys.modules[type(response).__module__.split(".")[0]]

    class Head(http.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.head = b""

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in inner:
                if len(self.head) < HEAD_BYTES:
                    self.head += chunk[: HEAD_BYTES - len(self.head)]
                yield chunk

        async def aclose(self) -> None:
            await inner.aclose()

    return Head()


async def keep_head(response: Any) -> None:
    """An httpx response hook: keep the first bytes of ``response``'s body as it is read."""
    response.stream = head_stream(response)


def install(http_client: Any) -> None:
    """Add :func:`keep_head` to an httpx ``AsyncClient``'s response hooks (once)."""
    hooks = dict(http_client.event_hooks)
    responses = list(hooks.get("response", []))
    if keep_head not in responses:
        hooks["response"] = [*responses, keep_head]
        http_client.event_hooks = hooks


def first_line(response: Any) -> str:
    """The first line of what ``response`` has sent so far, as text a person can read
    (bytes that are not UTF-8 shown escaped); ``""`` when nothing was kept."""
    head = getattr(getattr(response, "stream", None), "head", b"")
    if not head:  # a body given whole (not streamed) is already the response's content
        try:
            head = bytes(response.content[:HEAD_BYTES])
        except Exception:  # not read: nothing was kept
            head = b""
    line = head.lstrip().split(b"\n", 1)[0].rstrip(b"\r")
    text = line.decode("utf-8", "backslashreplace")
    return text if len(text) <= 160 else text[:160] + "…"


def describe(response: Any) -> str:
    """``HTTP 200 (text/html), first line '…'``: what the endpoint answered."""
    kind = response.headers.get("content-type", "no content type")
    line = first_line(response)
    said = f", first line '{line}'" if line else ", an empty body"
    return f"HTTP {response.status_code} ({kind}){said}"


def _chain(error: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in out:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def nobody_there(error: BaseException) -> str | None:
    """Why ``error`` (the SDK's, or its HTTP layer's) says that no endpoint answers at all,
    for a breaker: the connection refused, the host unknown, a connect timeout, or an
    answer that is not HTTP; ``None`` for a failure of a server that is there."""
    for e in _chain(error):
        module = type(e).__module__.split(".")[0]
        if not module.startswith(("httpx", "httpcore")):
            continue
        name = type(e).__name__
        if name in ("ConnectError", "ConnectTimeout"):
            return f"{name}: {e}" if str(e) else name
        if name == "RemoteProtocolError" and not dropped(e):
            return f"not HTTP: {e}"
    return None


def dropped(error: BaseException) -> bool:
    """Whether a protocol error is a connection closed early (a server that is there but
    went away mid-answer), not an answer in another protocol."""
    text = str(error).lower()
    return "disconnected" in text or "peer closed" in text or "incomplete" in text


def cause_text(error: BaseException) -> str:
    """The SDK's message with what its HTTP layer said underneath (``Connection error.``
    alone does not say refused from unknown host)."""
    text = f"{type(error).__name__}: {error}"
    for e in _chain(error)[1:]:
        if str(e) and str(e) not in text:
            return f"{text} ({type(e).__name__}: {e})"
    return text


__all__ = ["cause_text", "describe", "first_line", "install", "keep_head", "nobody_there"]
