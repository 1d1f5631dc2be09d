"""The session's rules over real HTTP on the Unix socket: the token, routes, budgets, an
endpoint that fails, a context that overflows, calls at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import openai
import pytest

from agentenv.agent.trajectory import Limits
from agentenv.testing import Fault, K3Server, ScriptedTurn
from tests.gateway.conftest import ORIGIN, TWO_TURNS, gateway_on, openai_client

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

HELLO = [{"role": "user", "content": "hello"}]


def raw(path: Path) -> httpx2.AsyncClient:
    """A plain HTTP client on the socket, for what the SDKs never send."""
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(path)), base_url=ORIGIN)


async def test_a_call_without_the_token_is_401_and_reaches_no_model(socket_dir: Path) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway, token="not-the-token")
            with pytest.raises(openai.AuthenticationError, match="gateway token"):
                await client.chat.completions.create(model="kimi-k3", messages=HELLO)
            await client.close()
            async with raw(gateway.socket_path) as http:
                bare = await http.post("/v1/chat/completions", json={"messages": HELLO})
                models = await http.get("/v1/models")
                anthropic = await http.post("/v1/messages", json={}, headers={"x-api-key": "x"})
    assert bare.status_code == 401 and models.status_code == 401
    assert anthropic.status_code == 401
    assert anthropic.json()["type"] == "error"  # in Anthropic's shape on its route
    assert server.requests == [] and gateway.calls == 0


async def test_unknown_routes_and_methods_are_named(socket_dir: Path) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            auth = {"authorization": f"Bearer {gateway.token}"}
            async with raw(gateway.socket_path) as http:
                missing = await http.post("/v1/embeddings", json={}, headers=auth)
                wrong = await http.get("/v1/chat/completions", headers=auth)
                broken = await http.post("/v1/chat/completions", content=b"{not json", headers=auth)
    assert missing.status_code == 404
    assert "/v1/embeddings" in missing.json()["error"]["message"]
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert broken.status_code == 400 and "invalid request" in broken.json()["error"]["message"]


async def test_a_spent_budget_refuses_the_call_and_stops_the_session(socket_dir: Path) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir, limits=Limits(max_turns=1)) as gateway:
            client = openai_client(gateway)
            await client.chat.completions.create(model="kimi-k3", messages=HELLO)
            assert not gateway.stopped.is_set()
            with pytest.raises(openai.BadRequestError, match="max_turns"):
                await client.chat.completions.create(model="kimi-k3", messages=HELLO)
            await client.close()
    assert gateway.stopped.is_set() and gateway.stop_reason == "max_turns"
    assert gateway._trajectory.stop_reason == "max_turns"
    assert len(server.requests) == 1 and gateway.error is None


async def test_a_call_still_running_when_the_wall_time_ends_is_cut_and_stops_the_session(
    socket_dir: Path,
) -> None:
    """The model takes longer than the episode has left: the harness gets a 400 naming the
    wall time instead of an answer it would act on past its time, and no turn is recorded."""
    with K3Server(TWO_TURNS, ttft_s=60) as server:
        limits = Limits(wall_time_s=1)
        async with gateway_on(server, socket_dir, limits=limits) as gateway:
            client = openai_client(gateway)
            with anyio.fail_after(30):  # a guard against the call running to its end
                with pytest.raises(openai.BadRequestError, match="wall_time"):
                    await client.chat.completions.create(model="kimi-k3", messages=HELLO)
            await client.close()
    assert gateway.stop_reason == "wall_time" and gateway.stopped.is_set()
    assert gateway._trajectory.turns == [] and gateway.error is None
    assert gateway.model_s > 0


async def test_an_endpoint_that_stays_down_is_an_error_answer_and_ends_the_session(
    socket_dir: Path,
) -> None:
    with K3Server(TWO_TURNS, faults=[Fault(kind="503")] * 10) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            with pytest.raises(openai.InternalServerError) as caught:
                await client.chat.completions.create(model="kimi-k3", messages=HELLO)
            assert caught.value.status_code == 503
            tried = len(server.requests)
            with pytest.raises(openai.InternalServerError, match="episode is over"):
                await client.chat.completions.create(model="kimi-k3", messages=HELLO)
            await client.close()
    assert tried == 2  # the model's own retries (max_attempts=2), then given up
    assert len(server.requests) == tried  # nothing more after the session ended
    assert gateway.error is not None and gateway.stopped.is_set()
    assert gateway._trajectory.error and "503" in gateway._trajectory.error


async def test_a_context_overflow_is_a_400_and_stops_with_context_length(
    socket_dir: Path,
) -> None:
    with K3Server(TWO_TURNS, context_window=10) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            big = [{"role": "user", "content": "word " * 100}]
            with pytest.raises(openai.BadRequestError, match="context_length_exceeded"):
                await client.chat.completions.create(model="kimi-k3", messages=big)
            await client.close()
    assert gateway.stop_reason == "context_length" and gateway.error is None


async def test_calls_at_once_are_all_answered_and_recorded(socket_dir: Path) -> None:
    def echo(body: dict[str, Any]) -> ScriptedTurn:
        return ScriptedTurn(reasoning="r", content=body["messages"][-1]["content"])

    answers: dict[int, str] = {}
    with K3Server(echo, ttft_s=0.2) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)

            async def ask(i: int) -> None:
                r = await client.chat.completions.create(
                    model="kimi-k3", messages=[{"role": "user", "content": f"call {i}"}]
                )
                answers[i] = r.choices[0].message.content or ""

            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(ask, i)
            await client.close()
    assert answers == {i: f"call {i}" for i in range(6)}
    assert gateway.calls == 6 and len(gateway._trajectory.turns) == 6


@pytest.mark.parametrize("limits", [Limits(max_turns=2), Limits(max_output_tokens=1)])
async def test_calls_at_once_do_not_get_past_a_budget(socket_dir: Path, limits: Limits) -> None:
    allowed = limits.max_turns if limits.max_output_tokens is None else 1
    outcomes: list[str] = []
    with K3Server(TWO_TURNS, ttft_s=0.2) as server:
        async with gateway_on(server, socket_dir, limits=limits) as gateway:
            client = openai_client(gateway)

            async def ask() -> None:
                try:
                    await client.chat.completions.create(model="kimi-k3", messages=HELLO)
                    outcomes.append("answered")
                except openai.BadRequestError as e:
                    assert "budget is spent" in str(e)
                    outcomes.append("refused")

            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(ask)
            await client.close()
    assert outcomes.count("answered") == allowed == len(server.requests)
    assert len(gateway._trajectory.turns) == allowed and gateway.stopped.is_set()


async def test_the_harness_is_told_the_routed_endpoints_model_through_a_meter(
    socket_dir: Path,
) -> None:
    """A refactor job hands the gateway its routed model wrapped in a meter: the name the
    harness is told (and /v1/models lists) is the endpoint's model, not an object's repr."""
    from agentenv.agent.loop import new_trajectory
    from agentenv.agent.trajectory import Spend
    from agentenv.gateway import open_gateway
    from agentenv.model.endpoints import Endpoint
    from agentenv.model.router import Router
    from agentenv.runner.budget import Metered

    with K3Server(TWO_TURNS) as server:
        endpoint = Endpoint(name="local", base_url=server.base_url, model="kimi-k3-preview")
        routed = Router([endpoint]).for_task(task_id="gw")
        traj = new_trajectory("harness episode", task_id="gw")
        async with open_gateway(
            Metered(routed, Spend()), traj, socket_dir=socket_dir, sandbox=None, limits=Limits()
        ) as gateway:
            auth = {"authorization": f"Bearer {gateway.token}"}
            async with raw(gateway.socket_path) as http:
                listed = (await http.get("/v1/models", headers=auth)).json()
    assert gateway.model_name == "kimi-k3-preview"
    assert [m["id"] for m in listed["data"]] == ["kimi-k3-preview"]
