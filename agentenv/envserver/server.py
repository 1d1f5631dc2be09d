"""The environment server: OpenEnv's WebSocket sessions over agentenv's tasks.

Each connection to ``/ws`` is one :class:`~agentenv.envserver.session.Session` (one episode
at a time, in its own sandbox, frozen between steps). At most ``max_concurrent_envs``
sessions are open: one more is told ``CAPACITY_REACHED`` and closed, as OpenEnv's server
does (a client retries later). A session idle for ``session_ttl_s`` (no frame while no step
runs) is collected: its episode closed and its connection closed, so the client cannot go
on with an episode that is gone. A dropped connection's episode is closed. The sandboxes
are labelled with this process as their owner: ``agentenv gc`` collects what a killed
server left.

The ``websockets`` library answers the client's pings while a step runs (its protocol
replies as frames arrive, whatever the session is doing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from agentenv import log
from agentenv.agent.trajectory import Limits
from agentenv.envserver.http import Connection, routes
from agentenv.envserver.protocol import ErrorCode, ProtocolError, error_frame, parse_frame
from agentenv.envserver.session import Session
from agentenv.envserver.taskset import TaskSet
from agentenv.sandbox.recycling import recycling
from agentenv.tasks import Task

__all__ = ["EnvServer"]

_log = log.get_logger(__name__)

MAX_MESSAGE = 64 * 2**20  # an action with token ids can be large; OpenEnv's client allows 100 MiB


class EnvServer:
    """An OpenEnv-compatible server for ``tasks``: :meth:`serve_forever` runs it (``port``
    0: a free one, then :attr:`port` says which). :meth:`start` and :meth:`close` (or
    ``async with``) run it without recycling sandboxes; closing closes every session's
    episode."""

    def __init__(
        self,
        tasks: list[Task],
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        max_concurrent_envs: int = 64,
        session_ttl_s: float | None = 600.0,
        limits: Limits | None = None,
        backend: str | None = None,
    ):
        if max_concurrent_envs < 1:
            raise ValueError("max_concurrent_envs must be at least 1")
        self.tasks = TaskSet(tasks)
        self.host = host
        self.port = port
        self.max_concurrent_envs = max_concurrent_envs
        self.session_ttl_s = session_ttl_s or None  # 0: never collected
        self.limits = limits
        self.backend = backend
        self.sessions: set[Session] = set()
        self._server: Server | None = None

    @property
    def url(self) -> str:
        """The server's base URL (what an OpenEnv client's ``base_url`` takes)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving."""
        self._server = await serve(
            self._session,
            self.host,
            self.port,
            process_request=routes(self.metadata),
            create_connection=Connection,
            compression=None,  # localhost traffic; deflate's buffers would cost memory per session
            max_size=MAX_MESSAGE,
            server_header="agentenv",
        )
        sockets = list(self._server.sockets)
        if self.port == 0 and sockets:
            self.port = sockets[0].getsockname()[1]

    async def serve_forever(self, ready: Callable[[], object] | None = None) -> None:
        """Bind, call ``ready`` (:attr:`port` is then the bound one) and serve until
        cancelled; then close, as :meth:`close`. The sandbox of an episode that ended is
        recycled for a later reset of the same kind (made as new, kept paused: see
        :mod:`agentenv.sandbox.recycling`), which costs milliseconds where a new one costs a
        third of a CPU-second; the idle ones are removed when the server stops."""
        # the sessions' tasks are started from here, so they share this block's recycler
        async with recycling():
            await self.start()
            assert self._server is not None
            try:
                if ready is not None:
                    ready()
                await self._server.serve_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await self.close()

    async def close(self) -> None:
        """Stop accepting connections, close the open ones and wait for their sessions
        to close their episodes."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> EnvServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def metadata(self) -> dict[str, Any]:
        """``GET /metadata``: OpenEnv's ``EnvironmentMetadata``."""
        from agentenv import __version__

        n = len(self.tasks)
        return {
            "name": "agentenv",
            "description": f"agentenv tasks ({n} task{'s' if n != 1 else ''}) in sandboxes "
            "frozen between steps; the reward from the hidden verifier on the last step",
            "readme_content": None,
            "version": __version__,
            "author": None,
            "documentation_url": None,
        }

    async def _session(self, ws: ServerConnection) -> None:
        """One connection: refused at capacity, else its frames answered until it closes,
        drops, or idles past the TTL; its episode closed in every case."""
        if len(self.sessions) >= self.max_concurrent_envs:
            n, most = len(self.sessions), self.max_concurrent_envs
            message = (
                f"Server at capacity: {n}/{most} sessions active. Cannot accept new connections."
            )
            frame = error_frame(
                ErrorCode.CAPACITY_REACHED, message, active_sessions=n, max_sessions=most
            )
            await ws.send(frame)
            await ws.close(1000, message[:120])
            return
        session = Session(self.tasks, limits=self.limits, backend=self.backend)
        self.sessions.add(session)
        try:
            await self._serve(ws, session)
        except ConnectionClosed:
            pass  # the client went: its episode is closed below
        finally:
            self.sessions.discard(session)
            await session.close()

    async def _serve(self, ws: ServerConnection, session: Session) -> None:
        while True:
            try:
                text = await asyncio.wait_for(ws.recv(), self.session_ttl_s)
            except TimeoutError:
                _log.info("envserver.session_expired", episode=session.episode_id)
                await session.close()
                reason = (
                    f"session idle for more than {self.session_ttl_s:g} s: its episode was closed"
                )
                await ws.close(1000, reason)
                return
            try:
                frame = parse_frame(text)
            except ProtocolError as e:
                await ws.send(error_frame(e.code, e.message))
                continue
            if frame.type == "close":
                await ws.close(1000)
                return
            try:
                reply = await session.answer(frame)
            except Exception as e:  # a bug of ours: this frame's answer, not the server
                _log.exception("envserver.frame_failed", episode=session.episode_id)
                reply = error_frame(ErrorCode.EXECUTION_ERROR, f"{type(e).__name__}: {e}")
            await ws.send(reply)
