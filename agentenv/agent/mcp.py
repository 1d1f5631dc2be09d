"""A task's MCP servers (Harbor's ``[[environment.mcp_servers]]``): their tools offered to the
model beside agentenv's own, through the ``mcp`` SDK (the ``mcp`` extra), never a protocol of
our own.

Where a server is and how it is reached: an ``sse`` or ``streamable-http`` server is a
service of the task's compose file (its URL names the service, as the task's ``main`` sees
it). The host connects to that service's container at its address on a network of the
group's that only such services join (not ``main``; the group's own gives the host no
address), with the URL's own ``Host`` header, so the sandbox never gets a network for it;
a URL naming anything else is refused when the tools are opened. A ``stdio`` server is
``command`` + ``args`` run inside the sandbox as the agent's user, in its workdir, its stdin
and stdout carried over the engine's exec (:mod:`agentenv.agent.mcp_stdio`), one process
for the episode.

Each server's tools are listed once when the episode starts (a server that never answers
is an infrastructure error, the task's environment did not come up); each tool is named
``<server>__<tool>`` so that two servers, or a server and a built-in tool, cannot clash.
Each call to an HTTP server opens its own MCP session, so a server that dies, hangs or
answers garbage costs that call only: it becomes an error result for the model, never a
crash (what a stateful server keeps per session is not kept from one call to the next). A
stdio server's calls share its one session; one that dies fails the call in flight, and
the next call starts it again.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv.agent.mcp_stdio import StdioServer
from agentenv.agent.tools import Tool, ToolOutput
from agentenv.sandbox.errors import SandboxError

if TYPE_CHECKING:
    from agentenv.sandbox.protocol import Sandbox

CALL_TIMEOUT_S = 120.0  # one tool call, connection included
LIST_WAIT_S = 30.0  # a server not answering its tool list by then is down
_RETRY_S = 0.5
_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpServer(BaseModel):
    """One MCP server of a task: its ``name`` (the prefix of its tools' names), its
    ``transport``; for ``sse`` and ``streamable-http`` its ``url`` (a compose service's, as
    ``main`` would reach it) and HTTP ``headers`` sent with each request (``${VAR}`` in a
    value is the host's variable, looked up when the tools are opened, so a credential is
    never written in the task); for ``stdio`` the ``command`` and ``args`` run in the
    sandbox (no shell: ``command`` is looked up in its PATH)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    transport: Literal["sse", "streamable-http", "stdio"] = "sse"  # Harbor's default
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = {}
    command: str | None = Field(None, min_length=1)
    args: list[str] = []

    @model_validator(mode="after")
    def _fields_of_its_transport(self) -> McpServer:
        if self.transport == "stdio":
            if self.command is None or self.url is not None or self.headers:
                raise ValueError("a stdio MCP server has a command (and args), no url or headers")
        elif self.url is None or self.command is not None or self.args:
            raise ValueError(f"a {self.transport} MCP server has a url, no command or args")
        return self


class McpArgs(BaseModel):
    """Any JSON object: an MCP tool's arguments are checked by its server against the
    schema it declared, which is what the model is shown."""

    model_config = ConfigDict(extra="allow")


class _Connector(Protocol):
    """How the host reaches one server: an initialised ``mcp.Client`` per :meth:`session`."""

    @property
    def server(self) -> McpServer:
        """The server, as the task gives it."""
        ...

    @property
    def where(self) -> str:
        """The server's URL or command line, for messages."""
        ...

    def session(self) -> AbstractAsyncContextManager[Any]:
        """An initialised ``mcp.Client`` on the server."""
        ...


@dataclass(frozen=True)
class _Endpoint:
    """Where the host reaches one HTTP server: the URL with the service's address, the
    headers (with ``Host`` as the task's URL names it); a session of its own each time."""

    server: McpServer
    url: str
    headers: dict[str, str]

    @property
    def where(self) -> str:
        """The task's URL of the server."""
        return self.server.url or self.url

    def session(self) -> AbstractAsyncContextManager[Any]:
        """A new session on the server."""
        return _session(self)


def tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>``, in the characters a tool name may hold, at most 64 of them."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{tool}")
    return clean[:64]


@asynccontextmanager
async def mcp_tools(servers: Sequence[McpServer], sandbox: Sandbox) -> AsyncIterator[list[Tool]]:
    """The tools of ``servers`` for an episode in ``sandbox``: listed now, each call in a
    session of its own. Raises :class:`SandboxError` naming the server that cannot be
    reached, or a URL that is not a service of ``sandbox``'s compose group."""
    tools: list[Tool] = []
    if servers:
        _sdk()
    async with AsyncExitStack() as running:  # the stdio servers' processes
        for server in servers:
            if server.transport == "stdio":
                connector: _Connector = await running.enter_async_context(
                    StdioServer(server, sandbox)
                )
                tools += await _list(connector, wait_s=0.0)  # nothing to wait for
            else:
                tools += await _list(await _endpoint(server, sandbox), wait_s=LIST_WAIT_S)
        names = [tool.name for tool in tools]
        clashing = sorted({name for name in names if names.count(name) > 1})
        if clashing:
            raise SandboxError(f"MCP tools share a name once prefixed: {', '.join(clashing)}")
        yield tools


def _sdk() -> None:
    """Raise :class:`SandboxError` saying how to install the SDK when it is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise SandboxError(
            f"the task has MCP servers and the mcp SDK is missing ({e}): "
            "pip install 'agentenv[mcp]'"
        ) from e


async def _endpoint(server: McpServer, sandbox: Sandbox) -> _Endpoint:
    """The URL of ``server`` with the address at which the host reaches its service."""
    assert server.url is not None  # an HTTP server's
    parts = urlsplit(server.url)
    host = parts.hostname or ""
    address = await service_address(sandbox, host)
    if address is None:
        raise SandboxError(
            f"MCP server {server.name!r}: {server.url} does not name a service of the task's "
            "compose file; agentenv reaches MCP servers only there (never by giving the "
            "sandbox a network)"
        )
    netloc = address if parts.port is None else f"{address}:{parts.port}"
    url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    headers = {name: _expand(server, name, value) for name, value in server.headers.items()}
    headers["Host"] = parts.netloc.rsplit("@", 1)[-1]  # as the server expects to be named
    return _Endpoint(server, url, headers)


async def service_address(sandbox: Sandbox, service: str) -> str | None:
    """The IP address at which the host reaches the compose service ``service`` beside
    ``sandbox`` (on a network of the group's that ``main`` does not join), or None when
    ``sandbox`` has no such service."""
    group = getattr(sandbox, "group", None)  # a ComposeSandbox's ServiceGroup
    if group is None or service not in getattr(group, "containers", {}):
        return None
    return str(await group.host_address(service))


def _expand(server: McpServer, header: str, value: str) -> str:
    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise SandboxError(
            f"MCP server {server.name!r}: header {header} needs the host's environment "
            f"variable {name}, which is not set"
        )

    return _TEMPLATE.sub(one, value)


@asynccontextmanager
async def _session(endpoint: _Endpoint) -> AsyncIterator[Any]:
    """An initialised ``mcp.Client`` on ``endpoint`` (the SDK is imported only here: it is
    the ``mcp`` extra)."""
    import httpx2
    from mcp import Client
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    def http(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        # trust_env off: a host proxy must not carry a request meant for the group's bridge
        return httpx2.AsyncClient(
            headers={**endpoint.headers, **(headers or {})},
            timeout=timeout or httpx2.Timeout(30.0, read=CALL_TIMEOUT_S),
            auth=auth,
            trust_env=False,
        )

    if endpoint.server.transport == "sse":
        transport: Any = sse_client(
            endpoint.url, headers=endpoint.headers, httpx_client_factory=http
        )
        async with Client(transport, read_timeout_seconds=CALL_TIMEOUT_S) as client:
            yield client
        return
    async with http() as client_http:
        transport = streamable_http_client(endpoint.url, http_client=client_http)
        async with Client(transport, read_timeout_seconds=CALL_TIMEOUT_S) as client:
            yield client


async def _list(endpoint: _Connector, wait_s: float) -> list[Tool]:
    """The server's tools, asked until it answers (a compose service may still be starting)
    or ``wait_s`` have passed."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                async with endpoint.session() as client:
                    listed, cursor = [], None
                    while True:
                        page = await client.list_tools(cursor=cursor)
                        listed += page.tools
                        cursor = page.next_cursor
                        if cursor is None:
                            break
            break
        except SandboxError:  # a stdio server that did not start: it says why
            raise
        except Exception as e:  # the SDK's and the transport's errors, groups of them too
            if time.monotonic() >= deadline:
                raise SandboxError(
                    f"MCP server {endpoint.server.name!r} at {endpoint.where} did not "
                    f"list its tools in {wait_s:g} s: {_said(e)}"
                ) from e
            await anyio.sleep(_RETRY_S)
    return [_tool(endpoint, tool) for tool in listed]


def _tool(endpoint: _Connector, tool: Any) -> Tool:
    """One listed MCP tool as an agentenv :class:`Tool` (its own schema shown verbatim)."""
    remote = str(tool.name)

    async def run(box: Sandbox, args: McpArgs) -> ToolOutput:
        return await call(endpoint, remote, dict(args.model_extra or {}))

    schema = dict(tool.input_schema or {"type": "object", "properties": {}})
    return Tool(
        tool_name(endpoint.server.name, remote),
        McpArgs,
        run,
        description=str(tool.description or f"{remote} (MCP server {endpoint.server.name})"),
        parameters=json.dumps(schema, sort_keys=True),
    )


async def call(endpoint: _Connector, tool: str, arguments: dict[str, Any]) -> ToolOutput:
    """Call ``tool`` of the server at ``endpoint`` in a session of its own; whatever goes
    wrong (the server down, hanging past :data:`CALL_TIMEOUT_S`, an error it answers) is an
    error result for the model."""
    who = f"MCP server {endpoint.server.name!r}"
    try:
        with anyio.fail_after(CALL_TIMEOUT_S):
            async with endpoint.session() as client:
                result = await client.call_tool(tool, arguments)
    except TimeoutError:
        return ToolOutput(text=f"{who}: {tool} gave no answer in {CALL_TIMEOUT_S:g} s", error=True)
    except Exception as e:  # the SDK's and the transport's errors, groups of them too
        return ToolOutput(text=f"{who}: {tool} failed: {_said(e)}", error=True)
    return ToolOutput(text=_text(result), error=bool(getattr(result, "is_error", False)))


def _text(result: Any) -> str:
    """A tool result's content as text: text blocks as they are, others as JSON."""
    parts = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else block.model_dump_json(exclude_none=True))
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured))
    return "\n".join(parts)


def _said(e: BaseException) -> str:
    """What an error says, the first one inside an exception group."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


__all__ = ["CALL_TIMEOUT_S", "McpArgs", "McpServer", "call", "mcp_tools", "service_address"]
