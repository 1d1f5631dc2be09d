"""Play one episode of an `agentenv serve-env` server with OpenEnv's own MCP tool client
(`pip install openenv-core`): reset, list the tools, run a command, submit; the reward
comes from the task's hidden verifier.

    agentenv serve-env examples/harness/answer --port 8811 &
    python examples/openenv_client.py http://127.0.0.1:8811
"""

from __future__ import annotations

import asyncio
import sys

from openenv.core import MCPToolClient
from openenv.core.env_server import CallToolAction


async def main(url: str) -> None:
    """Write the answer the example task asks for, then submit it."""
    async with MCPToolClient(base_url=url) as env:
        r = await env.reset()
        print("instruction:", r.observation.metadata["instruction"].strip())
        print("tools:", [t.name for t in await env.list_tools()])
        print(await env.call_tool("bash", command="echo ok > answer.txt && ls"))
        last = await env.step(CallToolAction(tool_name="submit", arguments={}))
        meta = last.observation.metadata
        frozen = meta["timings"]["paused_s"]
        print("reward", last.reward, meta["stop_reason"], f"{frozen:.2f} s frozen")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000"))
