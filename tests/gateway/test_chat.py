"""The Chat Completions dialect end to end: the real ``openai`` client on the gateway's
Unix socket, a scripted K3 server behind it; what reached the server is asserted on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.testing import K3Server
from tests.gateway.conftest import BASH, TWO_TURNS, gateway_on, openai_client

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]


async def _turn(client: Any, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    """One call; the assistant message as a plain dict (reasoning included)."""
    if not stream:
        r = await client.chat.completions.create(model="kimi-k3", messages=messages, tools=[BASH])
        return r.choices[0].message.model_dump(exclude_none=True)
    out: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": ""}
    calls: dict[int, dict[str, Any]] = {}
    stream_ = await client.chat.completions.create(
        model="kimi-k3", messages=messages, tools=[BASH], stream=True
    )
    async for chunk in stream_:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        out["content"] += delta.content or ""
        out["reasoning_content"] += getattr(delta, "reasoning_content", None) or ""
        for c in delta.tool_calls or []:
            entry = calls.setdefault(
                c.index, {"id": c.id, "type": "function", "function": {"name": "", "arguments": ""}}
            )
            entry["function"]["name"] += c.function.name or ""
            entry["function"]["arguments"] += c.function.arguments or ""
    if calls:
        out["tool_calls"] = [calls[i] for i in sorted(calls)]
    return out


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("keep_reasoning", [True, False])
async def test_tool_call_round_trips_with_reasoning_replayed(
    socket_dir: Path, stream: bool, keep_reasoning: bool
) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": "You are a harness."},
                {"role": "user", "content": "List the files."},
            ]
            first = await _turn(client, messages, stream)
            assert first["reasoning_content"] == "I should list the files first."
            (call,) = first["tool_calls"]
            assert call["function"]["name"] == "bash"
            assert json.loads(call["function"]["arguments"]) == {"command": "ls -la"}
            if not keep_reasoning:  # a harness that drops what it does not know
                first.pop("reasoning_content")
            first["content"] = None
            messages += [first, {"role": "tool", "tool_call_id": call["id"], "content": "total 0"}]
            second = await _turn(client, messages, stream)
            assert second["content"] == "All done."
            assert "tool_calls" not in second
            await client.close()
        traj = gateway._trajectory
    # K3 got the tool-call turn back with its reasoning (it 400s without), both times
    sent = server.requests[1]["messages"]
    assert sent[2]["reasoning_content"] == "I should list the files first."
    assert sent[2]["tool_calls"][0]["id"] == call["id"]
    assert sent[3] == {"role": "tool", "tool_call_id": call["id"], "content": "total 0"}
    assert server.requests[1]["tools"][0]["function"]["name"] == "bash"
    # the second request extends the first byte for byte (the prefix cache hits)
    assert sent[:2] == server.requests[0]["messages"]
    assert gateway.calls == 2
    assert len(traj.turns) == 2
    assert traj.messages[:4] == sent
    assert traj.messages[-1]["content"] == "All done."
    assert traj.turns[0].completion.tool_calls[0].name == "bash"
    assert traj.prompt_tokens > 0 and traj.completion_tokens > 0
    assert traj.cached_tokens > 0  # the second call's prefix was cached
    assert traj.turns[0].tools_s > 0 and traj.turns[1].tools_s > 0


async def test_models_listed(socket_dir: Path) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            models = [m.id async for m in client.models.list()]
            await client.close()
    assert models == ["kimi-k3"]


async def test_a_request_it_cannot_read_is_a_400_naming_the_field(socket_dir: Path) -> None:
    import openai

    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            with pytest.raises(openai.BadRequestError, match="n must be 1"):
                await client.chat.completions.create(
                    model="kimi-k3", messages=[{"role": "user", "content": "x"}], n=2
                )
            image = {"type": "image_url", "image_url": {"url": "data:,"}}
            with pytest.raises(openai.BadRequestError, match="image_url"):
                await client.chat.completions.create(
                    model="kimi-k3", messages=[{"role": "user", "content": [image]}]
                )
            await client.close()
    assert server.requests == []  # nothing reached the model
