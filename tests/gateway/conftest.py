"""What the gateway's tests share: a gateway on a real Unix socket in front of a scripted
K3 server, and the real SDK clients pointed at it through the socket."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentenv.agent.loop import new_trajectory
from agentenv.agent.trajectory import Limits, Trajectory
from agentenv.gateway import Gateway, open_gateway
from agentenv.model import OpenAIChatModel
from agentenv.sandbox.protocol import Sandbox
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn

ORIGIN = "http://gateway"  # any host: the transport goes to the socket


def tool(name: str, **args: Any) -> ScriptedToolCall:
    """A scripted call with ``args`` as its JSON arguments."""
    return ScriptedToolCall(name=name, arguments=json.dumps(args))


TWO_TURNS = [
    ScriptedTurn(
        reasoning="I should list the files first.",
        tool_calls=[tool("bash", command="ls -la")],
    ),
    ScriptedTurn(reasoning="The folder is empty; nothing to do.", content="All done."),
]

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short folder for the socket (a Unix socket's path is at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="gw-", dir="/tmp") as d:
        yield Path(d) / "sock"


@asynccontextmanager
async def gateway_on(
    server: K3Server,
    socket_dir: Path,
    *,
    sandbox: Sandbox | None = None,
    limits: Limits | None = None,
    trajectory: Trajectory | None = None,
    **kwargs: Any,
) -> AsyncIterator[Gateway]:
    """A gateway in front of ``server`` (which must be listening), its model the real
    client with quick retries."""
    model = OpenAIChatModel(
        base_url=server.base_url,
        api_key="upstream-key",
        max_attempts=2,
        backoff_initial_s=0.01,
        backoff_max_s=0.02,
    )
    traj = trajectory or new_trajectory("harness episode", task_id="gw")
    try:
        async with open_gateway(
            model,
            traj,
            socket_dir=socket_dir,
            sandbox=sandbox,
            limits=limits or Limits(),
            **kwargs,
        ) as gateway:
            yield gateway
    finally:
        await model.aclose()


def openai_client(gateway: Gateway, token: str | None = None) -> Any:
    """The real ``openai`` client, its HTTP going to the gateway's socket."""
    import httpx2
    from openai import AsyncOpenAI

    transport = httpx2.AsyncHTTPTransport(uds=str(gateway.socket_path))
    return AsyncOpenAI(
        base_url=f"{ORIGIN}/v1",
        api_key=gateway.token if token is None else token,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )


def anthropic_client(gateway: Gateway, token: str | None = None) -> Any:
    """The real ``anthropic`` client, its HTTP going to the gateway's socket."""
    import httpx2
    from anthropic import AsyncAnthropic

    transport = httpx2.AsyncHTTPTransport(uds=str(gateway.socket_path))
    return AsyncAnthropic(
        base_url=ORIGIN,
        api_key=gateway.token if token is None else token,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )
