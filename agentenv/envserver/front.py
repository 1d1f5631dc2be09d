"""The one URL a trainer connects to when the environment server runs on many nodes: a
WebSocket front that hands each incoming ``/ws`` session to a node's own server and relays
its frames both ways, untouched, until either side closes.

It speaks only what OpenEnv's clients need of a server's edge (``GET /health`` and the
``/ws`` upgrade) and knows nothing of episodes: a session is a connection, and what travels
on it is the node's business. Per session it picks the live node with the most free
capacity (the sessions the front has open on it against that node's
``max_concurrent_envs``). When every node is full it answers as OpenEnv's own capacity
back-pressure does: the handshake succeeds, one ``CAPACITY_REACHED`` error frame, then a
normal close. A node that dies fails only the sessions it held (an error frame, then a
close); it is marked down, so new sessions go to the others, and it comes back when its
``/health`` answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from agentenv.log import get_logger

__all__ = ["Front", "NodeServer", "NodeStatus", "open_front"]

log = get_logger(__name__)
MAX_FRAME = 100 * 1024 * 1024  # OpenEnv's clients allow 100 MB messages; so does the front
CONNECT_TIMEOUT_S = 10.0  # opening the relay to a node (a live node answers in ms)
HEALTH_EVERY_S = 2.0  # how often a node marked down is asked whether it is back
HEALTH_TIMEOUT_S = 3.0


class NodeServer(BaseModel):
    """One node's environment server, as the front sees it: its base URL
    (``http://IP:PORT``), how many sessions it takes at once, and a name for logs and
    ``/health`` (its Ray node, say); ``pid`` is the server's process on that node and
    ``tasks`` the number of tasks it said it serves."""

    url: str
    max_concurrent_envs: int
    name: str = ""
    pid: int | None = None
    tasks: int | None = None


class NodeStatus(BaseModel):
    """A node in the front's ``/health``: whether it is taken to be up, the sessions the
    front has open on it, and how many it was given in all."""

    url: str
    name: str
    pid: int | None
    alive: bool
    active_sessions: int
    max_sessions: int
    served: int
    error: str | None = None


@dataclass
class _Node:
    server: NodeServer
    alive: bool = True
    open: int = 0
    served: int = 0
    error: str | None = None
    ws_url: str = field(init=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.server.url)
        scheme = "wss" if parts.scheme in ("https", "wss") else "ws"
        self.ws_url = f"{scheme}://{parts.netloc}/ws"

    @property
    def free(self) -> int:
        return self.server.max_concurrent_envs - self.open

    def status(self) -> NodeStatus:
        s = self.server
        return NodeStatus(
            url=s.url,
            name=s.name or s.url,
            pid=s.pid,
            alive=self.alive,
            active_sessions=self.open,
            max_sessions=s.max_concurrent_envs,
            served=self.served,
            error=self.error,
        )


def _error_frame(message: str, code: str, **extra: Any) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})


class Front:
    """Sessions spread over node servers (see the module's docstring). Serve it with
    :func:`open_front`; :meth:`health` is what ``GET /health`` answers."""

    def __init__(self, nodes: list[NodeServer]) -> None:
        if not nodes:
            raise ValueError("a front needs at least one node server")
        self._nodes = [_Node(n) for n in nodes]

    @property
    def max_sessions(self) -> int:
        """The sessions the live nodes take at once, together."""
        return sum(n.server.max_concurrent_envs for n in self._nodes if n.alive)

    @property
    def active_sessions(self) -> int:
        """The sessions open through the front now."""
        return sum(n.open for n in self._nodes)

    def health(self) -> dict[str, Any]:
        """``GET /health``: ``healthy`` while some node is up, and every node's status."""
        up = any(n.alive for n in self._nodes)
        return {
            "status": "healthy" if up else "unhealthy",
            "active_sessions": self.active_sessions,
            "max_sessions": self.max_sessions,
            "nodes": [n.status().model_dump() for n in self._nodes],
        }

    def _pick(self, tried: set[int]) -> _Node | None:
        """The live node with the most free slots (ties: the one given fewest sessions,
        so an idle cluster still spreads them)."""
        fits = [n for i, n in enumerate(self._nodes) if n.alive and n.free > 0 and i not in tried]
        return max(fits, key=lambda n: (n.free, -n.served), default=None)

    def _down(self, node: _Node, why: str) -> None:
        if node.alive:
            log.warning("front.node_down", node=node.server.name, url=node.server.url, why=why)
        node.alive, node.error = False, why

    async def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path.rstrip("/")
        if path == "/ws" and "upgrade" in request.headers.get("Connection", "").lower():
            return None  # the WebSocket handshake goes on
        if path == "/health":
            body = self.health()
            status = (
                HTTPStatus.OK if body["status"] == "healthy" else HTTPStatus.SERVICE_UNAVAILABLE
            )
            return _json_response(status, body)
        return _json_response(HTTPStatus.NOT_FOUND, {"detail": "Not Found"})

    async def _session(self, client: ServerConnection) -> None:
        """One trainer session: a node's ``/ws`` opened for it and the frames relayed."""
        tried: set[int] = set()
        while True:
            node = self._pick(tried)
            if node is None:
                await self._refuse(client)
                return
            tried.add(self._nodes.index(node))
            node.open += 1
            try:
                try:
                    upstream = await connect(
                        node.ws_url,
                        open_timeout=CONNECT_TIMEOUT_S,
                        max_size=MAX_FRAME,
                        compression=None,
                    )
                except Exception as e:  # refused, timed out, or not a WebSocket server
                    self._down(node, f"cannot open {node.ws_url}: {type(e).__name__}: {e}")
                    continue  # another node takes the session
                node.served += 1
                log.info("front.session", node=node.server.name, url=node.server.url)
                async with upstream:
                    await self._relay(client, upstream, node)
                return
            finally:
                node.open -= 1

    async def _refuse(self, client: ServerConnection) -> None:
        # as OpenEnv's server: accepted, one error frame, a normal close
        active, most = self.active_sessions, self.max_sessions
        message = (
            f"Server at capacity: {active}/{most} sessions active on "
            f"{sum(n.alive for n in self._nodes)} live node(s). Cannot accept new connections."
        )
        with contextlib.suppress(ConnectionClosed):
            await client.send(
                _error_frame(message, "CAPACITY_REACHED", active_sessions=active, max_sessions=most)
            )
            await client.close(1000)

    async def _relay(
        self, client: ServerConnection, upstream: ClientConnection, node: _Node
    ) -> None:
        """Frames both ways until one side closes; the node's failure is the client's error."""

        async def pump(src: ServerConnection | ClientConnection, dst: Any) -> None:
            async for frame in src:
                await dst.send(frame)

        tasks = {
            asyncio.create_task(pump(client, upstream)),
            asyncio.create_task(pump(upstream, client)),
        }
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        failed = next((t.exception() for t in done if t.exception() is not None), None)
        if client.state is not State.OPEN:  # the client closed (or dropped): let go of the node
            with contextlib.suppress(ConnectionClosed):
                await upstream.close()
            return
        rcvd = upstream.protocol.close_rcvd
        if rcvd is not None and rcvd.code in (1000, 1001):  # the node ended it as it should
            with contextlib.suppress(ConnectionClosed):
                await client.close(rcvd.code, rcvd.reason)
            return
        why = f"environment node {node.server.name or node.server.url} lost the session: " + (
            f"{type(failed).__name__}: {failed}" if failed else f"closed {rcvd}"
        )
        self._down(node, why)
        log.warning("front.session_failed", node=node.server.name, why=why)
        with contextlib.suppress(ConnectionClosed):
            await client.send(_error_frame(why, "SESSION_ERROR"))
            await client.close(1011, "environment node lost")

    async def watch(self) -> None:
        """Forever: ask each node marked down for its ``/health`` and take it back when it
        answers 200 (a node that restarted, or one only briefly unreachable)."""
        while True:
            await asyncio.sleep(HEALTH_EVERY_S)
            for node in self._nodes:
                if not node.alive and await _healthy(node.server.url):
                    log.info("front.node_up", node=node.server.name, url=node.server.url)
                    node.alive, node.error = True, None


def _json_response(status: HTTPStatus, body: dict[str, Any]) -> Response:
    data = json.dumps(body).encode()
    headers = Headers(
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("Connection", "close"),
        ]
    )
    return Response(status.value, status.phrase, headers, data)


async def _healthy(url: str) -> bool:
    """Whether ``GET {url}/health`` answers 200 (plain HTTP/1.1 over a socket: the front
    needs nothing more to ask)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                head = f"GET /health HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n"
                writer.write(head.encode())
                await writer.drain()
                status_line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    fields = status_line.split()
    return len(fields) >= 2 and fields[1] == b"200"


@contextlib.asynccontextmanager
async def open_front(
    nodes: list[NodeServer], host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[tuple[Front, Server]]:
    """Serve a :class:`Front` over ``nodes`` on ``host:port`` (``0``: a free port; the
    bound one is ``server.sockets[0].getsockname()[1]``) until the block ends."""
    front = Front(nodes)
    watcher = asyncio.create_task(front.watch())
    try:
        async with serve(
            front._session,
            host,
            port,
            process_request=front._process_request,
            max_size=MAX_FRAME,
            compression=None,
        ) as server:
            yield front, server
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
