"""The Responses dialect end to end, as Codex CLI uses it: the real ``openai`` client on the
gateway's Unix socket, a scripted K3 server behind it; what reached the server is asserted on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from agentenv.testing import K3Server
from tests.gateway.conftest import TWO_TURNS, gateway_on, openai_client

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}
WEB = {"type": "web_search"}  # a hosted tool Codex may list: not offered to the model


async def _turn(client: Any, items: list[dict[str, Any]], stream: bool) -> Any:
    kwargs: dict[str, Any] = {
        "model": "kimi-k3",
        "instructions": "You are Codex.",
        "input": items,
        "tools": [SHELL, WEB],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "medium", "summary": "auto"},
    }
    if not stream:
        return await client.responses.create(**kwargs)
    seen = []
    async with client.responses.stream(**kwargs) as events:
        async for event in events:
            seen.append(event.type)
        final = await events.get_final_response()
    assert seen[0] == "response.created" and seen[-1] == "response.completed"
    assert "response.output_item.done" in seen
    return final


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("keep_reasoning", [True, False])
async def test_function_call_round_trips_with_reasoning_replayed(
    socket_dir: Path, stream: bool, keep_reasoning: bool
) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            items: list[dict[str, Any]] = [
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "env: linux"}],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "List the files."}],
                },
            ]
            first = await _turn(client, items, stream)
            kinds = [o.type for o in first.output]
            assert kinds == ["reasoning", "function_call"]
            reasoning, call = first.output
            assert reasoning.content[0].text == "I should list the files first."
            assert call.name == "bash" and json.loads(call.arguments) == {"command": "ls -la"}
            assert first.usage.input_tokens > 0
            back = [o.model_dump(exclude_none=True) for o in first.output]
            if not keep_reasoning:
                back = back[1:]
            items += back
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": "total 0"}
            )
            second = await _turn(client, items, stream)
            assert [o.type for o in second.output] == ["reasoning", "message"]
            assert second.output_text == "All done."
            assert second.usage.input_tokens_details.cached_tokens > 0
            await client.close()
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "system", "user", "assistant", "tool"]
    assert sent[0]["content"] == "You are Codex."
    assert sent[3]["reasoning_content"] == "I should list the files first."
    assert sent[3]["tool_calls"][0]["id"] == call.call_id
    assert sent[4] == {"role": "tool", "tool_call_id": call.call_id, "content": "total 0"}
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["shell"]
    assert sent[:3] == server.requests[0]["messages"]
    assert len(gateway._trajectory.turns) == 2


async def test_what_it_cannot_read_is_refused_by_name(socket_dir: Path) -> None:
    with K3Server(TWO_TURNS) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            with pytest.raises(openai.BadRequestError, match="previous_response_id"):
                await client.responses.create(model="m", input="hi", previous_response_id="resp_1")
            with pytest.raises(openai.BadRequestError, match="'local_shell_call'"):
                await client.responses.create(
                    model="m",
                    input=[
                        {"type": "message", "role": "user", "content": "hi"},
                        {
                            "type": "local_shell_call",
                            "call_id": "c",
                            "status": "completed",
                            "action": {"type": "exec", "command": ["ls"], "env": {}},
                        },
                    ],
                )
            await client.close()
    assert server.requests == []


async def test_a_context_overflow_carries_codexs_error_code(socket_dir: Path) -> None:
    with K3Server(TWO_TURNS, context_window=10) as server:
        async with gateway_on(server, socket_dir) as gateway:
            client = openai_client(gateway)
            with pytest.raises(openai.BadRequestError) as caught:
                await client.responses.create(model="m", input="word " * 100)
            await client.close()
    assert caught.value.code == "context_length_exceeded"
    assert gateway.stop_reason == "context_length"
