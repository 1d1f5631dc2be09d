"""The gateway's cost per model call: the same ``openai`` client asks the scripted K3 server
directly, and through the gateway (its Unix socket, the session, the episode's model client
calling the same server), interleaved call by call; printed as p50/p99 of each, their ratio
and the milliseconds the gateway adds.

The answer is a short streamed turn with a tool call (reasoning, content, one call), so
that parsing and streaming are counted, not the model's decoding. No sandbox is frozen (the
freeze's own cost is ``bench/freeze.py``'s figure).

Usage: ``.venv/bin/python bench/gateway.py [--n N] [--dialect chat|responses]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from openai import AsyncOpenAI

from agentenv.agent.loop import new_trajectory
from agentenv.agent.trajectory import Limits
from agentenv.gateway import open_gateway
from agentenv.model import OpenAIChatModel
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn

TURN = ScriptedTurn(
    reasoning="Look at the folder first.",
    content="Listing.",
    tool_calls=[ScriptedToolCall(name="bash", arguments='{"command": "ls -la"}')],
)
MESSAGES = [
    {"role": "system", "content": "You are a harness."},
    {"role": "user", "content": "List the files."},
]
BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}


def pct(samples: list[float], q: float) -> float:
    """The ``q`` quantile in milliseconds."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


async def call(client: AsyncOpenAI, dialect: str) -> None:
    """One streamed call, read to its end."""
    if dialect == "chat":
        stream: Any = await client.chat.completions.create(
            model="kimi-k3",
            messages=MESSAGES,
            tools=[BASH],
            stream=True,  # type: ignore[arg-type]
        )
    else:
        stream = await client.responses.create(
            model="kimi-k3",
            input="List the files.",
            instructions="You are a harness.",
            tools=[
                {"type": "function", "name": "bash", "parameters": BASH["function"]["parameters"]}
            ],  # type: ignore[list-item,index]
            stream=True,
        )
    async for _ in stream:
        pass


async def main(n: int, dialect: str) -> None:
    with K3Server([TURN]) as server, tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        direct = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        model = OpenAIChatModel(base_url=server.base_url, api_key="k")
        traj = new_trajectory("bench")
        limits = Limits(max_turns=10 * n + 100)
        async with open_gateway(
            model, traj, socket_dir=Path(tmp), sandbox=None, limits=limits
        ) as gateway:
            transport = httpx2.AsyncHTTPTransport(uds=str(gateway.socket_path))
            via = AsyncOpenAI(
                base_url="http://gateway/v1",
                api_key=gateway.token,
                max_retries=0,
                http_client=httpx2.AsyncClient(transport=transport),
            )
            # the direct server speaks chat only
            direct_dialect = "chat" if dialect == "responses" else dialect
            for _ in range(20):  # warm both paths (connections, imports)
                await call(direct, direct_dialect)
                await call(via, dialect)
            straight: list[float] = []
            gated: list[float] = []
            upstream: list[float] = []  # the model client's call inside the gateway
            for _ in range(n):
                t0 = time.perf_counter()
                await call(direct, direct_dialect)
                t1 = time.perf_counter()
                await call(via, dialect)
                t2 = time.perf_counter()
                straight.append(t1 - t0)
                gated.append(t2 - t1)
                upstream.append(traj.turns[-1].model_s)
            await via.close()
        await direct.close()
        await model.aclose()
    d50, d99 = pct(straight, 0.5), pct(straight, 0.99)
    g50, g99 = pct(gated, 0.5), pct(gated, 0.99)
    print(f"gateway overhead per call ({dialect}, n={n}, streamed tool-call turn)")
    print(f"  direct   p50 {d50:7.2f} ms   p99 {d99:7.2f} ms")
    print(f"  gateway  p50 {g50:7.2f} ms   p99 {g99:7.2f} ms")
    print(f"  ratio    p50 {g50 / d50:7.2f}x     added p50 {g50 - d50:6.2f} ms")
    added = statistics.median(g - s for g, s in zip(gated, straight, strict=True)) * 1e3
    own = statistics.median(g - u for g, u in zip(gated, upstream, strict=True)) * 1e3
    print(f"  added per call, median of pairs: {added:.2f} ms")
    inner = pct(upstream, 0.5)
    print(f"  where it goes: the model client's call inside the gateway p50 {inner:.2f} ms")
    print(f"                 the rest (socket, HTTP, dialect, record) p50 {own:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="calls per path")
    parser.add_argument("--dialect", choices=("chat", "responses"), default="chat")
    args = parser.parse_args()
    anyio.run(main, args.n, args.dialect)
