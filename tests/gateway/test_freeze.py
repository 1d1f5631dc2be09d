"""The sandbox is frozen for every model call a harness makes through the gateway: a real
Docker sandbox with a busy loop in it, a slow scripted model, the real ``openai`` client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import openai
import pytest

from agentenv.sandbox import SandboxSpec, create
from agentenv.sandbox.protocol import Sandbox
from agentenv.testing import K3Server, ScriptedTurn
from tests.gateway.conftest import gateway_on, openai_client

pytestmark = pytest.mark.anyio

SPINNING = 10_000_000  # CPU-ns over 0.5 s only a running busy loop reaches; frozen: 0
SLOW = [ScriptedTurn(reasoning="thinking slowly", content="done")]


@pytest.fixture
async def busy() -> AsyncIterator[Sandbox]:
    """A sandbox on the base image with a busy loop running in it."""
    box = await create(SandboxSpec(backend="docker"))
    try:
        await box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        yield box
    finally:
        await box.close()


async def _cpu_over(box: Sandbox, seconds: float) -> int:
    before = await box.cpu_usage_ns()
    await anyio.sleep(seconds)
    return await box.cpu_usage_ns() - before


async def _until_asked(server: K3Server, n: int) -> None:
    with anyio.fail_after(30):
        while len(server.requests) < n:
            await anyio.sleep(0.01)


async def test_the_sandbox_is_frozen_while_the_model_thinks(
    socket_dir: Path, busy: Sandbox
) -> None:
    with K3Server(SLOW, ttft_s=2.0) as server:
        async with gateway_on(server, socket_dir, sandbox=busy) as gateway:
            client = openai_client(gateway)
            answers: list[str] = []

            async def ask() -> None:
                r = await client.chat.completions.create(
                    model="kimi-k3", messages=[{"role": "user", "content": "x"}], stream=True
                )
                answers.append(
                    "".join([c.choices[0].delta.content or "" async for c in r if c.choices])
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                tg.start_soon(ask)  # two at once: frozen once, thawed when both end
                await _until_asked(server, 2)
                assert busy.paused
                assert await _cpu_over(busy, 0.5) == 0
            assert answers == ["done", "done"]
            assert not busy.paused
            assert await _cpu_over(busy, 0.5) > SPINNING
            await client.close()
    traj = gateway._trajectory
    assert len(traj.turns) == 2 and all(t.paused_s > 0 for t in traj.turns)
    assert traj.paused_s == pytest.approx(sum(t.paused_s for t in traj.turns))


async def test_a_call_cut_short_by_the_gateway_closing_thaws_the_sandbox(
    socket_dir: Path, busy: Sandbox
) -> None:
    with K3Server(SLOW, ttft_s=3.0) as server:
        async with anyio.create_task_group() as tg:
            async with gateway_on(server, socket_dir, sandbox=busy) as gateway:
                client = openai_client(gateway)

                async def ask() -> None:
                    with pytest.raises(openai.APIConnectionError):
                        await client.chat.completions.create(
                            model="kimi-k3", messages=[{"role": "user", "content": "x"}]
                        )

                tg.start_soon(ask)
                await _until_asked(server, 1)
                assert busy.paused
            # the gateway closed with the call in flight: cancelled, and the sandbox thawed
            assert not busy.paused
            assert await _cpu_over(busy, 0.5) > SPINNING
    await client.close()
    assert gateway.calls == 0


async def test_a_sandbox_that_cannot_be_thawed_ends_the_session_with_an_error(
    socket_dir: Path, busy: Sandbox
) -> None:
    with K3Server(SLOW, ttft_s=1.0) as server:
        async with gateway_on(server, socket_dir, sandbox=busy) as gateway:
            client = openai_client(gateway)
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    with pytest.raises(openai.InternalServerError, match="sandbox failed"):
                        await client.chat.completions.create(
                            model="kimi-k3", messages=[{"role": "user", "content": "x"}]
                        )

                tg.start_soon(ask)
                await _until_asked(server, 1)
                await busy.close()  # gone while frozen: the thaw cannot succeed
            await client.close()
    assert gateway.error is not None and gateway.stopped.is_set()
