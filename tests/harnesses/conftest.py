"""What the harness tests share: each harness's image built once per session on the base
image (cached by its digest across sessions too), and an episode's plumbing: a scripted K3
server upstream, the real gateway in front of it on a Unix socket, and a sandbox of the
harness image with the socket's folder as its ``gateway_dir``."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentenv.agent.loop import new_trajectory
from agentenv.agent.trajectory import Limits, Trajectory
from agentenv.gateway import Gateway, open_gateway
from agentenv.harnesses import Harness, harness
from agentenv.harnesses.install import harness_image
from agentenv.model import OpenAIChatModel
from agentenv.sandbox.backend import sandbox
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.protocol import Sandbox
from agentenv.sandbox.spec import SandboxSpec
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn

UPSTREAM_KEY = "sk-upstream-secret-0d9f8e7a"  # the real key: must never reach the sandbox
AGENT_USER = "1000:1000"
INSTRUCTION = "Create the file /workspace/answer.txt holding the number 42, then stop."
ANSWER = "/workspace/answer.txt"


def tool(name: str, **args: Any) -> ScriptedToolCall:
    """A scripted call with ``args`` as its JSON arguments."""
    return ScriptedToolCall(name=name, arguments=json.dumps(args))


NULL_SCRIPT = [ScriptedTurn(reasoning="Nothing to do.", content="I will not do anything.")]


def built(name: str) -> str:
    """The harness's image on the base image (built the first time, found after)."""
    return anyio.run(lambda: harness_image(BASE_IMAGE, harness(name), backend="docker"))


@pytest.fixture(scope="session")
def mini_image() -> str:
    """mini-swe-agent's image."""
    return built("mini-swe-agent")


@pytest.fixture(scope="session")
def codex_image() -> str:
    """Codex CLI's image."""
    return built("codex")


@pytest.fixture(scope="session")
def claude_image() -> str:
    """Claude Code's image."""
    return built("claude-code")


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short host folder for the gateway's socket (at most 107 bytes of path)."""
    with tempfile.TemporaryDirectory(prefix="hx-", dir="/tmp") as d:
        folder = Path(d) / "gw"
        folder.mkdir(mode=0o755)
        yield folder


@asynccontextmanager
async def episode(
    image: str,
    script: list[ScriptedTurn],
    socket_dir: Path,
    *,
    limits: Limits | None = None,
    user: str = AGENT_USER,
    **server: Any,
) -> AsyncIterator[tuple[Sandbox, Gateway, Trajectory, K3Server]]:
    """A sandbox of ``image`` reaching a gateway in front of a K3 server playing
    ``script`` (``server``: more of K3Server's settings), frozen for each model call."""
    spec = SandboxSpec(
        image=image,
        backend="docker",
        user=user,
        read_only=True,
        gateway_dir=socket_dir,
        memory="1g",
    )
    with K3Server(script, **server) as k3:
        model = OpenAIChatModel(
            base_url=k3.base_url,
            api_key=UPSTREAM_KEY,
            max_attempts=2,
            backoff_initial_s=0.01,
            backoff_max_s=0.02,
        )
        trajectory = new_trajectory(INSTRUCTION, task_id="harness-test")
        try:
            async with (
                sandbox(spec) as box,
                open_gateway(
                    model, trajectory, socket_dir=socket_dir, sandbox=box, limits=limits or Limits()
                ) as gateway,
            ):
                yield box, gateway, trajectory, k3
        finally:
            await model.aclose()


class Scripted(Harness):
    """A stand-in harness for the failure tests: ``argv`` as given."""

    argv: tuple[str, ...] = ()

    def launch(
        self, instruction: str, *, base_url: str, token: str, model: str, workdir: str, home: str
    ) -> Any:
        """``argv`` with ``{base_url}`` and ``{token}`` filled in."""
        from agentenv.harnesses import Launch

        fill = {"{base_url}": base_url, "{token}": token}
        return Launch(argv=[fill.get(a, a) for a in self.argv])


def scripted(*argv: str) -> Scripted:
    """A stand-in harness running ``argv``."""
    return Scripted(name="scripted", version="0", dialect="chat", argv=argv)
