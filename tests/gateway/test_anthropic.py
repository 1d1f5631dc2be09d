"""The Anthropic Messages dialect end to end: the real ``anthropic`` client on the gateway's
Unix socket, a scripted K3 server behind it; what reached the server is asserted on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from agentenv.testing import K3Server, ScriptedTurn
from tests.gateway.conftest import TWO_TURNS, anthropic_client, gateway_on, tool

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

BASH = {
    "name": "bash",
    "description": "Run a shell command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}
SYSTEM = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]


async def _turn(client: Any, messages: list[dict[str, Any]], stream: bool) -> list[dict[str, Any]]:
    """One call; the answer's content blocks as plain dicts."""
    kwargs: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4000,
        "system": SYSTEM,
        "messages": messages,
        "tools": [BASH],
        "thinking": {"type": "enabled", "budget_tokens": 2000},
    }
    if not stream:
        message = await client.messages.create(**kwargs)
    else:
        async with client.messages.stream(**kwargs) as s:
            message = await s.get_final_message()
    return [b.model_dump(exclude_none=True) for b in message.content], message


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("keep_thinking", [True, False])
async def test_tool_use_round_trips_with_thinking_replayed(
    socket_dir: Path, stream: bool, keep_thinking: bool
) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = anthropic_client(gateway)
            messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
            blocks, first = await _turn(client, messages, stream)
            assert first.stop_reason == "tool_use"
            assert [b["type"] for b in blocks] == ["thinking", "tool_use"]
            assert blocks[0]["thinking"] == "I should list the files first."
            use = blocks[1]
            assert use["name"] == "bash" and use["input"] == {"command": "ls -la"}
            assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
            if not keep_thinking:
                blocks = blocks[1:]
            result = {"type": "tool_result", "tool_use_id": use["id"], "content": "total 0"}
            messages += [
                {"role": "assistant", "content": blocks},
                {"role": "user", "content": [result]},
            ]
            blocks, second = await _turn(client, messages, stream)
            assert second.stop_reason == "end_turn"
            assert blocks[-1] == {"type": "text", "text": "All done."}
            assert second.usage.cache_read_input_tokens > 0
            await client.close()
    sent = server.requests[1]["messages"]
    assert sent[0] == {"role": "system", "content": "You are Claude Code."}
    assert sent[2]["reasoning_content"] == "I should list the files first."
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"command": "ls -la"}'
    assert sent[3] == {"role": "tool", "tool_call_id": use["id"], "content": "total 0"}
    assert sent[:2] == server.requests[0]["messages"]
    assert server.requests[0]["tools"][0]["function"]["parameters"] == BASH["input_schema"]
    assert len(gateway._trajectory.turns) == 2


async def test_malformed_arguments_go_out_and_come_back_as_they_were(socket_dir: Path) -> None:
    bad = '{"command": "ls'
    script = [
        ScriptedTurn(reasoning="r1", tool_calls=[tool("bash", command="x")]),
        ScriptedTurn(reasoning="r2", content="ok"),
    ]
    script[0].tool_calls[0].arguments = bad
    with K3Server(script) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = anthropic_client(gateway)
            messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
            blocks, _ = await _turn(client, messages, stream=True)
            use = blocks[-1]
            assert use["input"] == {"_unparsed_arguments": bad}
            messages += [
                {"role": "assistant", "content": [use]},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": use["id"],
                            "content": [{"type": "text", "text": "bad input"}],
                            "is_error": True,
                        }
                    ],
                },
            ]
            await _turn(client, messages, stream=False)
            await client.close()
    sent = server.requests[1]["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == bad
    assert sent[3]["content"] == "Error: bad input"


async def test_count_tokens_and_errors_in_anthropics_shape(socket_dir: Path) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = anthropic_client(gateway)
            counted = await client.messages.count_tokens(
                model="m", system=SYSTEM, messages=[{"role": "user", "content": "hi " * 40}]
            )
            assert counted.input_tokens > 20
            image = {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
            }
            with pytest.raises(anthropic.BadRequestError, match="'image' block"):
                await client.messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": [image]}]
                )
            wrong = anthropic_client(gateway, token="wrong")
            with pytest.raises(anthropic.AuthenticationError, match="gateway token"):
                await wrong.messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
                )
            await client.close()
            await wrong.close()
    assert server.requests == []
