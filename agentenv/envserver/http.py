"""The plain-HTTP side of the server: ``GET /health``, ``/metadata`` and ``/schema`` as
OpenEnv's tools read them, and ``/reset`` / ``/step`` / ``/state`` refused with why.

OpenEnv's own HTTP ``/reset`` and ``/step`` are stateless (each request gets a fresh
environment), so no episode can run over them; its clients use the WebSocket at ``/ws``.
Here they say so instead of pretending.

The ``websockets`` library only answers requests without a body (a WebSocket handshake has
none): a ``POST /step`` with a JSON body would get no answer at all. :class:`Connection`
drops a request's body before the library parses the request, so that such a request is
answered (refused) like any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from pydantic import TypeAdapter
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from agentenv.envserver.observation import (
    ListedTools,
    MessageObservation,
    ResetObservation,
    ToolCallObservation,
)
from agentenv.envserver.protocol import AssistantMessage, CallTool, EpisodeState, ListTools

__all__ = ["WS_PATH", "Connection", "routes", "schema"]

WS_PATH = "/ws"
_STATELESS = ("/reset", "/step", "/state")
_REFUSED = (
    "episodes run over the WebSocket at {ws} (OpenEnv's EnvClient, GenericEnvClient and "
    "MCPToolClient use it): HTTP {path} would be stateless, a new episode per request, "
    "so this server does not serve it"
)


def schema() -> dict[str, Any]:
    """The JSON schemas of the actions, observations and state served (``GET /schema``)."""
    action = TypeAdapter(ListTools | CallTool | AssistantMessage).json_schema()
    observation = TypeAdapter(
        ResetObservation | ListedTools | ToolCallObservation | MessageObservation
    ).json_schema()
    return {"action": action, "observation": observation, "state": EpisodeState.model_json_schema()}


def routes(
    metadata: Callable[[], dict[str, Any]],
) -> Callable[[ServerConnection, Request], Response | None]:
    """The ``process_request`` hook: a WebSocket handshake on :data:`WS_PATH` goes on to
    the session (``None``); everything else is answered here."""
    schemas = schema()

    def process_request(connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0].rstrip("/") or "/"
        upgrade = "websocket" in request.headers.get("Upgrade", "").lower()
        if path == WS_PATH and upgrade:
            return None
        if path == "/health":
            return _json(connection, HTTPStatus.OK, {"status": "healthy"})
        if path == "/metadata":
            return _json(connection, HTTPStatus.OK, metadata())
        if path == "/schema":
            return _json(connection, HTTPStatus.OK, schemas)
        if path in _STATELESS:
            message = _REFUSED.format(ws=WS_PATH, path=path)
            return _json(connection, HTTPStatus.METHOD_NOT_ALLOWED, {"detail": message})
        if path == WS_PATH:
            return None  # not a handshake: the library answers 426 Upgrade Required
        return _json(connection, HTTPStatus.NOT_FOUND, {"detail": f"Not Found: {path}"})

    return process_request


def _json(connection: ServerConnection, status: HTTPStatus, body: dict[str, Any]) -> Response:
    response = connection.respond(status, json.dumps(body) + "\n")
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = "application/json"
    return response


class Connection(ServerConnection):
    """The library's server connection, with a request's body dropped before it parses the
    request (it refuses any body by closing the connection without a word). A WebSocket
    handshake has no body: its bytes pass unchanged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head: bytes | None = b""  # None once the request's head has gone through
        self._skip = 0  # body bytes still to drop

    def data_received(self, data: bytes) -> None:
        """Feed the library the request without its body, then everything as it comes."""
        if self._head is None:
            if self._skip:
                dropped, data = data[: self._skip], data[self._skip :]
                self._skip -= len(dropped)
                if not data:
                    return
            super().data_received(data)
            return
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0 and len(self._head) < 65536:
            return  # the head is not all here yet (the library refuses one too long)
        if end < 0:
            head, rest = self._head, b""
        else:
            head, rest = self._head[: end + 4], self._head[end + 4 :]
        self._head = None
        head, body = _without_body(head)
        dropped, rest = rest[:body], rest[body:]
        self._skip = body - len(dropped)
        super().data_received(head + rest)


def _without_body(head: bytes) -> tuple[bytes, int]:
    """A request head without its body's headers, and how many body bytes follow (all
    that comes, for a chunked body)."""
    lines = head.split(b"\r\n")
    kept, body = [], 0
    for line in lines:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            body = int(value.strip()) if value.strip().isdigit() else 0
            continue
        if key == b"transfer-encoding":
            body = 1 << 62  # refused anyway: drop whatever comes
            continue
        kept.append(line)
    return b"\r\n".join(kept), body
