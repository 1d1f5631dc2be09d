"""``agentenv serve-env`` driven by OpenEnv's own clients (``openenv-core`` from PyPI):
episodes to their reward over real WebSocket sessions on real sandboxes, frozen between
steps; MCP-style tools; sessions isolated; capacity, bad actions, dead sandboxes, dropped
and idle sessions; the HTTP routes; the command line, and what a killed server leaves."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import pytest
from openenv.core import GenericEnvClient, MCPToolClient
from openenv.core.env_server import CallToolAction
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from agentenv.envserver import EnvServer
from agentenv.envserver.taskset import TaskSet, UnknownTask
from agentenv.sandbox import get_backend
from agentenv.sandbox.cgroup import cpu_usage_ns
from agentenv.tasks import Task
from tests.rl.test_rollouts import make_task

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

T = TypeVar("T")


def message(*pairs: tuple[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """An assistant message calling ``pairs`` of (tool, arguments)."""
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(pairs)
    ]
    return {"role": "assistant", "content": "", "tool_calls": calls, **extra}


class Running:
    """An :class:`EnvServer` serving on its own event loop in a thread of this process."""

    def __init__(self, server: EnvServer, loop: asyncio.AbstractEventLoop):
        self.server = server
        self.loop = loop

    @property
    def url(self) -> str:
        return self.server.url

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the server's loop (where its sessions live)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def boxes(self) -> list[str]:
        """The sandbox ids of the open sessions' episodes."""
        return [
            s.episode._rollout.box.id for s in list(self.server.sessions) if s.episode is not None
        ]


@contextmanager
def running(tasks: list[Task], **options: Any) -> Iterator[Running]:
    server = EnvServer(tasks, port=0, backend="docker", **options)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    failed: list[BaseException] = []
    serving = loop.create_task(server.serve_forever(ready=ready.set))

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(serving)
        except asyncio.CancelledError:
            pass
        except BaseException as e:
            failed.append(e)
        finally:
            ready.set()
            loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(30)
    if failed:
        raise failed[0]
    try:
        yield Running(server, loop)
    finally:
        loop.call_soon_threadsafe(serving.cancel)
        thread.join(120)
    if failed:
        raise failed[0]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    root = tmp_path_factory.mktemp("tasks")
    return [make_task(root, "note"), make_task(root, "other")]


@pytest.fixture(scope="module")
def env(tasks: list[Task]) -> Iterator[Running]:
    """The server most tests share (64 sessions, no TTL)."""
    with running(tasks, session_ttl_s=0) as r:
        yield r


def gone(box_id: str) -> bool:
    return all(x.id != box_id for x in get_backend("docker").leftovers())


async def wait_until(check: Any, what: str, within_s: float = 60) -> None:
    """Poll ``check`` (blocking, run in a thread) until true; fail naming ``what``."""
    deadline = time.monotonic() + within_s
    while not await anyio.to_thread.run_sync(check):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not after {within_s} s")
        await anyio.sleep(0.2)


async def test_generic_client_drives_an_episode_to_its_reward_frozen_between_steps(
    env: Running,
) -> None:
    async with GenericEnvClient(base_url=env.url) as client:
        r = await client.reset(task_id="note", episode_id="ep-1")
        obs = r.observation
        assert not r.done and r.reward is None
        assert "answer.txt" in obs["instruction"] == obs["metadata"]["instruction"]
        assert obs["task_id"] == "note" and obs["episode_id"] == "ep-1"
        assert [m["role"] for m in obs["messages"]][-1] == "user"
        names = [t["function"]["name"] for t in obs["tools_openai"]]
        assert "bash" in names and "submit" in names

        # a busy loop left running in there gets no CPU while the policy "thinks"
        busy = "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 & echo ok > answer.txt"
        r = await client.step(message(("bash", {"command": busy})))
        assert not r.done and r.reward is None
        assert r.observation["messages"][0]["role"] == "tool"
        assert r.observation["tool_results"][0]["name"] == "bash"
        (box,) = env.boxes()
        before = cpu_usage_ns(box)
        await anyio.sleep(0.5)
        assert before is not None and cpu_usage_ns(box) == before

        # a malformed action is answered with an error, and the session goes on
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            await client.step({"tol": "submit"})
        with pytest.raises(RuntimeError, match=r"names no function.*VALIDATION_ERROR"):
            await client.step({"role": "assistant", "tool_calls": [{"id": "y"}]})
        state = await client.state()
        assert state["episode_id"] == "ep-1" and state["step_count"] == 1
        assert state["done"] is False

        tokens = {"prompt_token_ids": [1, 2, 3], "token_ids": [4, 5], "logprobs": [-0.1, -0.2]}
        r = await client.step(message(("submit", {"summary": "done"}), **tokens))
        assert r.done and r.reward == 1.0
        meta = r.observation["metadata"]
        assert meta["stop_reason"] == "submitted" and meta["passed"] is True
        assert meta["trajectory"]["task_id"] == "note" and len(meta["trajectory"]["turns"]) == 2
        assert meta["timings"]["reset_s"] > 0 and meta["timings"]["paused_s"] > 0
        # the token export: only the turns that carried tokens could give it
        assert meta["tokens"] is None and "turn 0 has no token ids" in meta["tokens_unavailable"]
        assert {"cost_usd", "prompt_tokens", "completion_tokens"} <= meta.keys()
        with pytest.raises(RuntimeError, match=r"episode is over.*SESSION_ERROR"):
            await client.step(message(("bash", {"command": "true"})))
        assert (await client.state())["reward"] == 1.0

    # the same through the synchronous client, a wrong answer: reward 0
    with GenericEnvClient(base_url=env.url).sync() as sync:
        sync.reset(task_id="note")
        wrong = message(("write_file", {"path": "answer.txt", "content": "no\n"}), ("submit", {}))
        result = sync.step(wrong)
        assert result.done and result.reward == 0.0
        assert result.observation["metadata"]["passed"] is False


async def test_the_token_export_comes_back_when_every_action_carries_its_tokens(
    env: Running,
) -> None:
    async with GenericEnvClient(base_url=env.url) as client:
        await client.reset(task_id="other")
        first = {"prompt_token_ids": [1, 2], "token_ids": [3, 4], "logprobs": [-0.5, -0.25]}
        await client.step(message(("bash", {"command": "echo ok > answer.txt"}), **first))
        last = {"prompt_token_ids": [1, 2, 3, 4, 9], "token_ids": [7], "logprobs": [-1.0]}
        r = await client.step(message(("submit", {}), **last))
    tokens = r.observation["metadata"]["tokens"]
    assert tokens["token_ids"] == [1, 2, 3, 4, 9, 7]
    assert tokens["loss_mask"] == [0, 0, 1, 1, 0, 1]
    assert tokens["logprobs"] == [0.0, 0.0, -0.5, -0.25, 0.0, -1.0]
    assert tokens["reward"] == 1.0


async def test_mcp_tool_client_lists_and_calls_the_tasks_tools(env: Running) -> None:
    async with MCPToolClient(base_url=env.url) as client:
        r = await client.reset(task_id="note")
        assert "answer.txt" in r.observation.metadata["instruction"]
        tools = {t.name: t for t in await client.list_tools()}
        assert {"bash", "write_file", "submit"} <= tools.keys()
        assert "command" in tools["bash"].input_schema["properties"]
        out = await client.call_tool("bash", command="echo ok > answer.txt && echo wrote")
        assert "wrote" in out
        with pytest.raises(RuntimeError, match="tool_not_found"):
            await client.call_tool("nope")
        last = await client.step(CallToolAction(tool_name="submit", arguments={}))
        assert last.done and last.reward == 1.0
        assert last.observation.metadata["stop_reason"] == "submitted"


async def test_two_sessions_at_once_are_isolated(env: Running) -> None:
    a, b = GenericEnvClient(base_url=env.url), GenericEnvClient(base_url=env.url)
    async with a, b:
        await asyncio.gather(a.reset(task_id="note", episode_id="A"), b.reset(task_id="note"))
        await asyncio.gather(
            a.step(message(("bash", {"command": "echo ok > answer.txt"}))),
            b.step(message(("bash", {"command": "ls answer.txt || echo none"}))),
        )
        ra, rb = await asyncio.gather(
            a.step(message(("submit", {}))), b.step(message(("submit", {})))
        )
        assert (ra.reward, rb.reward) == (1.0, 0.0)
        sa, sb = await asyncio.gather(a.state(), b.state())
        assert sa["episode_id"] == "A" and sb["episode_id"] != "A"
        assert sa["step_count"] == sb["step_count"] == 2


async def test_a_dead_sandbox_closes_its_episode_with_an_error_and_the_session_goes_on(
    env: Running,
) -> None:
    async with GenericEnvClient(base_url=env.url) as client:
        await client.reset(task_id="note")
        (box,) = env.boxes()
        subprocess.run(["docker", "rm", "-f", box], check=True, capture_output=True)
        with pytest.raises(RuntimeError, match="EXECUTION_ERROR"):
            await client.step(message(("bash", {"command": "true"})))
        state = await client.state()
        assert state["error"] and "failed" in state["error"]
        with pytest.raises(RuntimeError, match=r"send reset first.*SESSION_ERROR"):
            await client.step(message(("bash", {"command": "true"})))
        r = await client.reset(task_id="note")
        assert not r.done
        (first,) = env.boxes()
        await client.reset(task_id="other")  # a reset while one is open closes that one
        assert gone(first) and env.boxes() != [first]


async def test_a_dropped_connection_has_its_sandbox_removed(env: Running) -> None:
    ws = await connect(env.url.replace("http", "ws") + "/ws")
    await ws.send(json.dumps({"type": "reset", "data": {"task_id": "note"}}))
    assert json.loads(await ws.recv())["type"] == "observation"
    (box,) = env.boxes()
    ws.transport.abort()  # no close frame: the client just went
    await wait_until(lambda: gone(box), "the dropped session's sandbox removed")
    await wait_until(lambda: not env.server.sessions, "the dropped session released")


async def test_protocol_errors_are_answered_and_the_session_goes_on(env: Running) -> None:
    async with connect(env.url.replace("http", "ws") + "/ws") as ws:
        for sent, code in [
            ("not json", "INVALID_JSON"),
            (json.dumps({"type": "bogus"}), "UNKNOWN_TYPE"),
            (json.dumps({"type": "step"}), "VALIDATION_ERROR"),
            (json.dumps({"type": "step", "data": {"type": "list_tools"}}), "SESSION_ERROR"),
            (json.dumps({"type": "reset", "data": {"task_id": "missing"}}), "VALIDATION_ERROR"),
        ]:
            await ws.send(sent)
            reply = json.loads(await ws.recv())
            assert reply["type"] == "error" and reply["data"]["code"] == code, (sent, reply)
        await ws.send(json.dumps({"type": "state"}))
        assert json.loads(await ws.recv()) == {
            "type": "state",
            "data": {
                "episode_id": None,
                "step_count": 0,
                "task_id": None,
                "done": False,
                "reward": None,
                "stop_reason": None,
                "error": None,
            },
        }


def test_a_reset_gets_the_task_it_names_else_by_seed_else_the_next(tasks: list[Task]) -> None:
    chosen = TaskSet(tasks)
    assert chosen.pick("other").id == "other"
    assert len({chosen.pick(seed=7).id for _ in range(5)}) == 1
    assert [chosen.pick().id for _ in range(4)] == ["note", "other", "note", "other"]
    with pytest.raises(UnknownTask, match=r"'missing'.*tasks: note, other"):
        chosen.pick("missing")


def http(url: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


async def test_http_routes_answer_and_stateless_episodes_are_refused(env: Running) -> None:
    assert http(env.url + "/health") == (200, {"status": "healthy"})
    status, metadata = http(env.url + "/metadata")
    assert status == 200 and metadata["name"] == "agentenv" and "2 tasks" in metadata["description"]
    status, schema = http(env.url + "/schema")
    assert status == 200 and {"action", "observation", "state"} == schema.keys()
    body = json.dumps({"action": {"type": "list_tools"}}).encode()
    for path in ("/reset", "/step"):
        status, refused = http(env.url + path, body)
        assert status == 405 and "WebSocket at /ws" in refused["detail"]
    assert http(env.url + "/nothing")[0] == 404


async def test_capacity_refuses_a_session_too_many_and_an_idle_one_is_collected(
    tasks: list[Task],
) -> None:
    with running(tasks, max_concurrent_envs=1, session_ttl_s=3) as small:
        a = GenericEnvClient(base_url=small.url)
        await a.connect()
        await a.reset(task_id="note")
        (box,) = small.boxes()
        b = GenericEnvClient(base_url=small.url)
        await b.connect()  # the handshake is accepted, as OpenEnv's server does
        # what the client sees: the capacity error frame, or (usually) the close after it
        with pytest.raises((RuntimeError, ConnectionClosed), match=r"(?i)capacity"):
            await b.reset()
        await b.close()

        # a sits idle past the TTL: its episode and its connection are closed
        await wait_until(lambda: gone(box), "the idle session's sandbox removed")
        with pytest.raises(ConnectionClosed, match="idle"):
            await a.step(message(("bash", {"command": "true"})))
        await a.close()
        async with GenericEnvClient(base_url=small.url) as c:  # its slot is free again
            assert (await c.reset(task_id="note")).done is False


def test_the_command_serves_and_a_killed_servers_sandbox_is_collectable(
    tasks: list[Task],
) -> None:
    folder = tasks[0].folder
    assert folder is not None
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentenv",
            "serve-env",
            str(folder),
            "--port",
            "0",
            "--backend",
            "docker",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().strip()
        assert line.startswith("agentenv serve-env listening on http://127.0.0.1:"), line
        assert line.endswith("(1 task)")
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        assert http(url + "/health")[0] == 200
        client = GenericEnvClient(base_url=url).sync()
        client.connect()
        client.reset()
        os.kill(server.pid, signal.SIGKILL)
        server.wait(30)
        with contextlib.suppress(Exception):
            client.close()
        # what it left is labelled with its owner, now gone: `agentenv gc` collects it
        ours = [
            x
            for x in get_backend("docker").leftovers()
            if x.owner.split(":")[1:2] == [str(server.pid)]
        ]
        assert ours and all(x.stale == "owner gone" for x in ours)
    finally:
        server.kill()
        server.wait(30)
