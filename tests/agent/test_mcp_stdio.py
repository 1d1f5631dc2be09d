"""A task's ``stdio`` MCP servers (Harbor's ``transport = "stdio"``, refused before): the
server's ``command`` + ``args`` run INSIDE the sandbox, as the agent's user, in its workdir,
with the task's environment, its stdin and stdout carried to the host over the engine's
exec (``Sandbox.stream``), never a network. The server is a real FastMCP server (the SDK's
``MCPServer``), installed in an image FROM the offline base image from wheels the host
downloads (``pip download --only-binary=:all:`` for the image's Python; the base image has
neither pip nor a network, so pip's own wheel installs them, offline).

One process for the episode: it keeps its state across calls and across the sandbox's
pause/resume (frozen with it while the model thinks); one that dies mid-call is an error
result for that call, the next call starts it anew; a command that is not there is an
error at the episode's start naming the server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv.agent.mcp import McpServer, call, mcp_tools
from agentenv.errors import TaskError
from agentenv.runner.episode import run_task
from agentenv.sandbox.backend import get_backend
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.spec import SandboxSpec
from agentenv.tasks import load_task
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.formats.test_harbor import harbor_task
from tests.helpers import chat_model

pytestmark = pytest.mark.anyio

SECRET = "stdio-mcp-secret-7"
IMAGE = "agentenv-test/mcp-stdio:1"

SERVER = f"""\
import os
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("box-tools")
calls = 0

@mcp.tool()
def where() -> str:
    \"\"\"Who and where the server runs.\"\"\"
    return f"{{os.getuid()}} {{os.getcwd()}} {{os.environ.get('TASK_VAR')}}"

@mcp.tool()
def count() -> int:
    \"\"\"How many times it was called in this process.\"\"\"
    global calls
    calls += 1
    return calls

@mcp.tool()
def get_secret() -> str:
    \"\"\"Returns a secret value.\"\"\"
    return {SECRET!r}

@mcp.tool()
def hang() -> str:
    \"\"\"Never answers.\"\"\"
    import time
    time.sleep(3600)
    return "woke"

@mcp.tool()
def die() -> str:
    \"\"\"Kills the server in the middle of the call.\"\"\"
    os._exit(3)

mcp.run()  # stdio
"""

DOCKERFILE = f"""\
FROM {BASE_IMAGE}
COPY wheels /tmp/wheels
# no pip in the image: pip's own wheel installs the SDK, offline, from the host's download
# (Debian marks its Python externally managed: this image is a test's own)
RUN python3 /tmp/wheels/$(cd /tmp/wheels && ls pip-*.whl)/pip install -q --no-index \\
      --break-system-packages --find-links /tmp/wheels mcp && rm -rf /tmp/wheels
COPY server.py /opt/box-tools/server.py
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
env = { TASK_VAR = "from-the-task" }

[[environment.mcp_servers]]
name = "box"
transport = "stdio"
command = "python3"
args = ["/opt/box-tools/server.py"]
"""

TEST = f"""\
if [ "$(cat /app/secret.txt 2>/dev/null)" = {SECRET} ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def _python_of(image: str) -> str:
    """``3.11``: the image's Python, the one the wheels must be for."""
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image, "python3", "-c",
         "import sys; print('%d.%d' % sys.version_info[:2])"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout.strip()


@pytest.fixture(scope="module")
def stdio_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An image FROM the base one with the ``mcp`` SDK installed and the server in it."""
    import docker

    context = tmp_path_factory.mktemp("mcp-stdio-image")
    arch = {"x86_64": "x86_64", "aarch64": "aarch64"}[
        subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip()
    ]
    platforms = [
        f"--platform={p}_{arch}" for p in ("manylinux2014", "manylinux_2_17", "manylinux_2_28")
    ]
    download = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "mcp",
        "pip",
        "-d",
        str(context / "wheels"),
    ]
    download += [
        "--only-binary=:all:",
        "--implementation=cp",
        f"--python-version={_python_of(BASE_IMAGE)}",
    ]
    got = subprocess.run(download + platforms, capture_output=True, text=True)
    # The suite's hosts reach a package index (CI does): a failed download fails the test
    assert got.returncode == 0, f"pip download of the mcp SDK's wheels failed: {got.stderr[-500:]}"
    (context / "Dockerfile").write_text(DOCKERFILE)
    (context / "server.py").write_text(SERVER)
    docker.from_env().images.build(path=str(context), tag=IMAGE, rm=True)
    return IMAGE


def stdio_task(root: Path, toml: str = TOML) -> Path:
    """A Harbor task whose stdio MCP server is in its image (FROM :data:`IMAGE`)."""
    folder = harbor_task(root, "box-tools", test=TEST, toml=toml)
    (folder / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nWORKDIR /app\n")
    return folder


def _call(name: str, **arguments: object) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=json.dumps(arguments))


async def test_the_model_calls_a_stdio_server_in_the_sandbox(
    stdio_image: str, tmp_path: Path
) -> None:
    task = load_task(stdio_task(tmp_path))  # refused before: "stdio MCP servers ... not"
    assert task.mcp_servers == [
        McpServer(
            name="box", transport="stdio", command="python3", args=["/opt/box-tools/server.py"]
        )
    ]
    calls = [
        [_call("box__where"), _call("box__count")],
        [_call("box__count"), _call("box__get_secret")],  # after a pause: the same process
        [_call("box__die")],
        [_call("box__count")],  # started anew
        [_call("bash", command=f"printf {SECRET} > /app/secret.txt")],
        [_call("submit")],
    ]
    script = [ScriptedTurn(reasoning="Next step.", tool_calls=turn) for turn in calls]
    server = K3Server(script)
    traj, _ = await run_task(task, chat_model(server, "in-process"))  # paused between turns
    offered = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert {"bash", "submit", "box__where", "box__count", "box__die"} <= set(offered)
    assert offered["box__count"]["description"] == "How many times it was called in this process."
    by = [(r.name, r.error, r.output) for turn in traj.turns for r in turn.tool_results]
    assert by[0] == ("box__where", False, "0 /app from-the-task"), by  # its user, workdir, env
    assert by[1] == ("box__count", False, "1"), by
    assert by[2] == ("box__count", False, "2"), by  # kept across the pause/resume
    assert by[3] == ("box__get_secret", False, SECRET), by
    assert by[4][:2] == ("box__die", True) and "MCP server 'box'" in by[4][2], by
    assert by[5] == ("box__count", False, "1"), by  # a new process
    tool_messages = [m for m in traj.messages if m["role"] == "tool"]
    assert tool_messages[3]["content"] == SECRET  # what the model was sent back
    assert traj.stop_reason == "submitted"
    assert traj.score is not None and traj.score.error is None and traj.reward == 1.0


async def test_a_stdio_server_survives_pause_and_a_missing_command_is_named(
    stdio_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentenv.agent.mcp.CALL_TIMEOUT_S", 3.0)
    good = McpServer(
        name="box", transport="stdio", command="python3", args=["/opt/box-tools/server.py"]
    )
    missing = McpServer(name="gone", transport="stdio", command="no-such-mcp-server")
    async with await get_backend("docker").create(SandboxSpec(image=stdio_image)) as box:
        async with mcp_tools([good], box) as tools:
            count = next(t for t in tools if t.name == "box__count")
            assert (await count.run(box, count.args())).text == "1"
            await box.pause()
            await box.resume()
            assert (await count.run(box, count.args())).text == "2"  # the same process
            await box.exec("pkill -f /opt/box-tools/server.py")
            again = await count.run(box, count.args())  # died between calls: a new one
            if again.error:  # the call raced its death: that call only
                again = await count.run(box, count.args())
            assert again.text == "1", again
            hang = next(t for t in tools if t.name == "box__hang")
            hung = await hang.run(box, hang.args())
            assert hung.error and "gave no answer in 3 s" in hung.text, hung
            assert (await count.run(box, count.args())).text == "1"  # the hung one replaced
        with pytest.raises(SandboxError) as caught:
            async with mcp_tools([missing], box):
                pass
        said = str(caught.value)
        assert "MCP server 'gone' (no-such-mcp-server) did not start" in said, said
        assert "executable file not found" in said, said


@pytest.mark.parametrize("backend", ["docker", "podman"])
async def test_a_sandbox_streams_a_process_across_pause_on_both_engines(backend: str) -> None:
    spec = SandboxSpec(env={"FROM_SPEC": "spec"})
    async with await get_backend(backend).create(spec) as box:
        loop = "while read l; do echo $l:$FROM_SPEC:$EXTRA:$(pwd); done"
        stream = await box.stream(["sh", "-c", loop], env={"EXTRA": "extra"})
        await stream.send(b"one\n")
        assert await stream.receive_stdout() == b"one:spec:extra:/workspace\n"
        await box.pause()
        await box.resume()
        await stream.send(b"two\n")
        assert await stream.receive_stdout() == b"two:spec:extra:/workspace\n"
        stream.close()
        missing = await box.stream(["no-such-program"])
        said = (await missing.receive_stdout()) + bytes(missing.stderr)
        assert b"no-such-program" in said and await missing.receive_stdout() == b""


@pytest.mark.no_docker
def test_harbor_stdio_servers_load_or_are_refused_by_name(tmp_path: Path) -> None:
    cases = {
        'transport = "stdio"\n': "mcp_servers[0].command: a stdio server ('m') needs a command",
        'transport = "stdio"\ncommand = "x"\nurl = "http://a/"\n': (
            "mcp_servers[0].url: is for sse and streamable-http servers, not stdio"
        ),
        'transport = "stdio"\ncommand = "x"\nargs = "a b"\n': "args: must be an array of strings",
    }
    for i, (body, said) in enumerate(cases.items()):
        toml = TOML.split("[[environment.mcp_servers]]")[0]
        folder = stdio_task(
            tmp_path / str(i), toml + f'[[environment.mcp_servers]]\nname = "m"\n{body}'
        )
        with pytest.raises(TaskError) as caught:
            load_task(folder)
        assert said in str(caught.value), str(caught.value)


@pytest.mark.no_docker
async def test_a_stdio_server_that_does_not_start_is_an_error_result() -> None:
    from agentenv.agent.mcp_stdio import StdioServer

    class Gone:
        async def stream(self, argv: list[str], *, env: object = None) -> object:
            raise SandboxError("the sandbox died")

    server = McpServer(name="m", transport="stdio", command="srv")
    async with StdioServer(server, Gone()) as stdio:  # type: ignore[arg-type]
        output = await call(stdio, "anything", {})
    assert output.error and "MCP server 'm': anything failed" in output.text
    assert "the sandbox died" in output.text
