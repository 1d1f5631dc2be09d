"""A task's MCP servers (Harbor's ``[[environment.mcp_servers]]``, refused before): their
tools offered to the model beside the built-in ones, named ``<server>__<tool>``, called
through the ``mcp`` SDK from the host at the compose service's address on the task's private
network (the sandbox gets no network for it), the calls and results in the trajectory; a
failing call or a server that went down is an error result for the model, never a crash.
A second server of the same program over SSE (Harbor's default transport) sits beside it.

The task mirrors Harbor's cookbook ``mcp-tools`` (a FastMCP server, streamable-http, as a
compose service ``main`` depends on, healthy; the agent must write the secret it returns to
/app/secret.txt). Its server is built with the real SDK (``MCPServer``, FastMCP's name in
mcp 2), run FROM the offline base image with the host's own copy of the SDK and its
dependencies bound in (the base image has no pip and no network; both run CPython 3.11)."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from agentenv.agent.mcp import McpServer, _Endpoint, call, tool_name
from agentenv.agent.tools import Tool, tool_schemas
from agentenv.errors import TaskError
from agentenv.runner.episode import run_task
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.formats.test_harbor import harbor_task
from tests.helpers import chat_model

pytestmark = pytest.mark.anyio

SECRET = "cookbook-mcp-secret-42"

SERVER = f"""\
import os, threading
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("mcp-tools")

@mcp.tool()
def get_secret() -> str:
    \"\"\"Returns a secret value.\"\"\"
    return {SECRET!r}

@mcp.tool()
def add(a: int, b: int) -> int:
    \"\"\"Adds two numbers.\"\"\"
    return a + b

@mcp.tool()
def fail() -> str:
    \"\"\"Always fails.\"\"\"
    raise RuntimeError("the tool broke")

@mcp.tool()
def shutdown() -> str:
    \"\"\"Stops the server.\"\"\"
    threading.Timer(0.3, os._exit, [0]).start()
    return "stopping"

import sys
mcp.run(transport=sys.argv[1], host="0.0.0.0", port=8000)
"""

COMPOSE = f"""\
services:
  main:
    depends_on:
      mcp-server:
        condition: service_healthy
  mcp-server:
    image: {BASE_IMAGE}
    # the container outlives the server: a side service that exits cannot be paused
    command: ["sh", "-c", "python3 /srv/server.py streamable-http; exec sleep 3600"]
    environment:
      PYTHONPATH: /deps
    volumes:
      - ./mcp-server:/srv:ro
      - ./deps:/deps:ro
    expose:
      - "8000"
    healthcheck:
      test: ["CMD", "python3", "-c", "import socket as s; s.create_connection(('127.0.0.1', 8000))"]
      interval: 1s
      timeout: 5s
      retries: 30
  mcp-sse:
    image: {BASE_IMAGE}
    command: ["python3", "/srv/server.py", "sse"]
    environment:
      PYTHONPATH: /deps
    volumes:
      - ./mcp-server:/srv:ro
      - ./deps:/deps:ro
"""

TOML = """\
version = "1.0"
[verifier]
timeout_sec = 60.0
[agent]
timeout_sec = 300.0
[environment]
cpus = 1
memory_mb = 1024

[[environment.mcp_servers]]
name = "mcp-server"
transport = "streamable-http"
url = "http://mcp-server:8000/mcp"

[[environment.mcp_servers]]
name = "mcp-sse"
url = "http://mcp-sse:8000/sse"
"""

TEST = f"""\
if [ "$(cat /app/secret.txt 2>/dev/null)" = {SECRET} ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def _closure(name: str) -> list[metadata.Distribution]:
    """The installed distribution ``name`` and everything it needs (the extras its
    requirements name included, as ``pyjwt[crypto]``)."""
    seen: dict[tuple[str, str], metadata.Distribution] = {}
    todo = [(name, "")]
    while todo:
        wanted, extra = todo.pop()
        dist = metadata.distribution(wanted)
        key = (dist.metadata["Name"].lower().replace("_", "-"), extra)
        if key in seen:
            continue
        seen[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(req.name, "")] + [(req.name, e) for e in req.extras]
    return list({d.metadata["Name"]: d for d in seen.values()}.values())


def _copy_sdk(into: Path) -> None:
    """The host's ``mcp`` and its dependencies, file by file, into ``into``."""
    for dist in _closure("mcp"):
        for file in dist.files or []:
            if str(file).startswith(".."):  # scripts outside site-packages
                continue
            source = Path(str(dist.locate_file(file)))
            target = into / str(file)
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_file():
                shutil.copy2(source, target)


def mcp_task(root: Path, toml: str = TOML) -> Path:
    """A Harbor task like the cookbook's mcp-tools, its server FROM the base image."""
    folder = harbor_task(root, "mcp-tools", test=TEST, toml=toml)
    env = folder / "environment"
    (env / "mcp-server").mkdir()
    (env / "mcp-server" / "server.py").write_text(SERVER)
    (env / "docker-compose.yaml").write_text(COMPOSE)
    _copy_sdk(env / "deps")
    return folder


def _call(name: str, **arguments: object) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=json.dumps(arguments))


async def test_the_model_calls_an_mcp_tool_and_a_dead_server_is_an_error_result(
    tmp_path: Path,
) -> None:
    task = load_task(mcp_task(tmp_path))  # refused before: "MCP servers ... not supported"
    assert [s.name for s in task.mcp_servers] == ["mcp-server", "mcp-sse"]
    assert task.mcp_servers[1].transport == "sse"  # Harbor's default
    calls = [
        [_call("mcp-server__get_secret"), _call("mcp-server__add", a=2, b=3)],
        [_call("mcp-server__fail"), _call("mcp-server__add", a="x")],
        [_call("bash", command=f"printf {SECRET} > /app/secret.txt")],
        [_call("mcp-server__shutdown")],
        [_call("bash", command="sleep 1"), _call("mcp-server__get_secret")],
        [_call("mcp-sse__add", a=40, b=2), _call("submit")],
    ]
    script = [ScriptedTurn(reasoning="Next step.", tool_calls=turn) for turn in calls]
    server = K3Server(script)
    model = chat_model(server, "in-process")
    traj, _ = await run_task(task, model)
    offered = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert {"bash", "submit", "mcp-server__get_secret", "mcp-server__add"} <= set(offered)
    assert offered["mcp-server__add"]["description"] == "Adds two numbers."
    assert offered["mcp-server__add"]["parameters"]["required"] == ["a", "b"]
    results = [r for turn in traj.turns for r in turn.tool_results]
    by = [(r.name, r.error, r.output) for r in results]
    assert by[0] == ("mcp-server__get_secret", False, SECRET), by
    assert by[1] == ("mcp-server__add", False, "5"), by
    assert by[2][:2] == ("mcp-server__fail", True), by  # the server said it failed
    assert by[3][:2] == ("mcp-server__add", True), by  # the server's own argument check
    assert by[5][:2] == ("mcp-server__shutdown", False), by
    gone = by[7]
    assert gone[:2] == ("mcp-server__get_secret", True) and "failed" in gone[2], by
    assert by[8] == ("mcp-sse__add", False, "42"), by  # the other server, over SSE
    tool_messages = [m for m in traj.messages if m["role"] == "tool"]
    assert tool_messages[0]["content"] == SECRET  # what the model was sent back
    assert traj.stop_reason == "submitted"
    assert traj.score is not None and traj.score.error is None and traj.reward == 1.0


@pytest.mark.no_docker
def test_harbor_mcp_servers_load_or_are_refused_by_name(tmp_path: Path) -> None:
    with tarfile.open(
        Path(__file__).parents[1] / "formats" / "harbor_tasks" / "cookbook.tar.gz"
    ) as tar:
        tar.extractall(tmp_path, filter="data")
    task = load_task(tmp_path / "mcp-tools")  # the real cookbook task: refused before
    assert task.mcp_servers == [
        McpServer(name="mcp-server", transport="streamable-http", url="http://mcp-server:8000/mcp")
    ]
    cases = {
        'transport = "stdio"\nheaders = { A = "b" }\n': "command: a stdio server ('m') needs",
        'url = "http://elsewhere:8000/mcp"\n': "url: http://elsewhere:8000/mcp: agentenv reaches",
        'url = "http://mcp-server/m"\nheaders = { Authorization = "Bearer abc" }\n': (
            "headers.Authorization: a credential must be named as ${VAR}"
        ),
        'url = "ftp://mcp-server/"\n': "needs an http(s) url",
    }
    for i, (body, said) in enumerate(cases.items()):
        folder = tmp_path / f"bad{i}"
        shutil.copytree(tmp_path / "mcp-tools", folder)
        toml = (folder / "task.toml").read_text().split("[[environment.mcp_servers]]")[0]
        (folder / "task.toml").write_text(toml + f'[[environment.mcp_servers]]\nname = "m"\n{body}')
        with pytest.raises(TaskError) as caught:
            load_task(folder)
        assert "environment.mcp_servers[0]." in str(caught.value) and said in str(caught.value)


@pytest.mark.no_docker
async def test_a_call_to_a_server_that_is_not_there_is_an_error_result() -> None:
    server = McpServer(name="m", transport="streamable-http", url="http://127.0.0.1:9/mcp")
    output = await call(_Endpoint(server, server.url, {}), "anything", {})
    assert output.error and "MCP server 'm': anything failed" in output.text


@pytest.mark.no_docker
def test_mcp_tools_keep_their_own_schema_and_a_namespaced_name() -> None:
    from agentenv.agent.mcp import McpArgs

    async def run(box: object, args: McpArgs) -> str:
        return ""

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = Tool(tool_name("my.server", "search"), McpArgs, run, "Searches.", json.dumps(schema))
    (entry,) = tool_schemas([tool])
    assert entry["function"] == {
        "name": "my_server__search",
        "description": "Searches.",
        "parameters": schema,
    }
    assert len(tool_name("s" * 50, "t" * 50)) == 64
