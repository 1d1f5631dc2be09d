"""A ``stdio`` MCP server of a task (Harbor's ``transport = "stdio"``): ``command`` and
``args`` started inside the sandbox, as Harbor's agents start them in the agent's container
(as its user, in its workdir, with its environment), and spoken to over the process's stdin
and stdout, which :meth:`Sandbox.stream` carries to the host over the engine's exec with
stdin attached: the same channel as the sandbox's own executor (Docker's attach socket,
``podman exec -i``), so no network is given to the sandbox and no engine CLI is needed.

The SDK's own ``stdio_client`` spawns a host process; here the transport is ours, a few
lines turning the stream into the SDK's message streams (newline-delimited JSON-RPC, as
the stdio transport defines it), and the session above it is the SDK's.

One server process lives for the episode (frozen with the sandbox while the model thinks,
it answers after resume), so a stateful server keeps its state between calls. One that
dies fails the call in flight as an error result; the next call starts it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from agentenv.sandbox.errors import SandboxError

if TYPE_CHECKING:
    from agentenv.agent.mcp import McpServer
    from agentenv.sandbox.channel import ByteStream
    from agentenv.sandbox.protocol import Sandbox

_SAID_MAX = 2000  # characters of what a failing server printed, quoted in errors


class StdioServer:
    """One stdio server of an episode: ``async with`` it around the episode, then each
    :meth:`session` is the running server's (started on first use, again after it died)."""

    def __init__(self, server: McpServer, sandbox: Sandbox):
        self.server = server
        self.where = " ".join([server.command or "", *server.args])  # for messages
        self._sandbox = sandbox
        self._group: TaskGroup | None = None
        self._live: tuple[Any, anyio.Event] | None = None  # its client, set when it ends
        self._starting = anyio.Lock()

    async def __aenter__(self) -> StdioServer:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._group is not None
        self._group.cancel_scope.cancel()  # every server's task closes its stream
        await self._group.__aexit__(None, None, None)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        """The server's ``mcp.Client``, the server started if it is not running. A call
        that times out or loses the server retires it (the next call starts it anew); an
        error the server answered does not."""
        from mcp.shared.exceptions import MCPError

        client, ended = await self._running()
        try:
            yield client
        except MCPError:
            raise
        except BaseException:
            ended.set()  # a hung or dead server is not asked again
            raise

    async def _running(self) -> tuple[Any, anyio.Event]:
        async with self._starting:
            if self._live is None or self._live[1].is_set():
                assert self._group is not None
                self._live = await self._group.start(self._serve)
            return self._live

    async def _serve(self, *, task_status: TaskStatus[tuple[Any, anyio.Event]]) -> None:
        """Run the server until it ends or is retired (``ended`` set); its client and
        ``ended`` through ``task_status``."""
        from mcp import Client

        argv = [self.server.command or "", *self.server.args]
        stream = await self._sandbox.stream(argv)
        ended = anyio.Event()
        said: list[str] = []
        started = False
        try:
            # no timeout of the SDK's: the caller's bound cancels the call, which retires a
            # hung server (an SDK timeout would come back as the server's own answer)
            async with Client(_transport(stream, ended, said)) as client:
                started = True
                task_status.started((client, ended))
                await ended.wait()
        except Exception as e:
            if started:  # it died: the call in flight says so, the next one starts it anew
                return
            output = (" ".join(said) + " " + bytes(stream.stderr).decode(errors="replace")).strip()
            raise SandboxError(
                f"MCP server {self.server.name!r} ({self.where}) did not start: "
                f"{output[-_SAID_MAX:] or _said(e)}"
            ) from e
        finally:
            ended.set()
            stream.close()


@asynccontextmanager
async def _transport(stream: ByteStream, ended: anyio.Event, said: list[str]) -> AsyncIterator[Any]:
    """The SDK's (read, write) message streams over ``stream``: one JSON-RPC message a
    line each way. Sets ``ended`` when the server's stdout ends; lines that are not
    JSON-RPC (an engine's error, a server's stray print) are kept in ``said``."""
    to_session, from_server = anyio.create_memory_object_stream[Any](0)
    to_server, from_session = anyio.create_memory_object_stream[Any](0)

    async def read() -> None:
        try:
            async with to_session:
                await _lines(stream, to_session, said)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, EOFError):
            pass  # the session went away, or the stream did: either way it is over
        finally:
            ended.set()  # the server is gone: its session's requests fail, it is retired

    async def write() -> None:
        try:
            async with from_session:
                async for message in from_session:
                    body = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stream.send(body.encode() + b"\n")
        except Exception:  # its stdin is gone (StreamClosed): it died, or is stopping
            ended.set()

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        group.start_soon(write)
        try:
            yield from_server, to_server
        finally:
            stream.close()  # the server sees end of file on stdin; the reader ends
            group.cancel_scope.cancel()


async def _lines(stream: ByteStream, to_session: Any, said: list[str]) -> None:
    """Hand each JSON-RPC line of the server's stdout to the session until it ends."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    buffer = b""
    while data := await stream.receive_stdout():
        *lines, buffer = (buffer + data).split(b"\n")
        for line in filter(None, (raw.strip() for raw in lines)):
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:  # not a message: an engine's error, a stray print
                said.append(line.decode(errors="replace"))
                del said[:-20]
                continue
            await to_session.send(SessionMessage(message))
    if buffer.strip():
        said.append(buffer.decode(errors="replace"))


def _said(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


__all__ = ["StdioServer"]
