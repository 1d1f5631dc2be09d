"""What the local server simulates beyond plain answers: K3's slow first token and decode,
vLLM's token ids and logprobs (refused by a hosted endpoint, as Moonshot's API does),
malformed tool arguments, and replaying a recorded conversation."""

from __future__ import annotations

import json

import pytest

from agentenv.errors import BadRequest
from agentenv.model import OpenAIChatModel
from agentenv.model.endpoints import PRESETS, resolve_endpoint
from agentenv.testing import Fault, K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.testing.k3server import count_tokens, turns_from_messages

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

HELLO = [{"role": "user", "content": "hello"}]
LONG = ScriptedTurn(reasoning="x" * 400, content="y" * 400)  # 200 completion tokens


async def test_time_to_first_token_and_decode_speed() -> None:
    with K3Server([LONG], ttft_s=0.5, tokens_per_s=1000) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="k")
        try:
            done = await model.complete(HELLO)
        finally:
            await model.aclose()
    assert done.usage.completion_tokens == 200
    assert done.ttft_s is not None and done.ttft_s >= 0.5
    decode = done.latency_s - done.ttft_s
    assert decode >= 0.15  # 200 tokens at 1000/s, less the first chunk's share


async def test_token_ids_and_logprobs_only_from_self_hosted() -> None:
    with K3Server([LONG]) as server:
        model = OpenAIChatModel.for_endpoint(resolve_endpoint(server.base_url))
        try:
            done = await model.complete(HELLO)
        finally:
            await model.aclose()
    sent = server.requests[0]
    assert sent["return_token_ids"] is True and sent["logprobs"] is True
    assert done.token_ids is not None and len(done.token_ids) == done.usage.completion_tokens
    assert done.logprobs is not None and len(done.logprobs) == len(done.token_ids)
    assert all(lp <= 0 for lp in done.logprobs)
    assert done.prompt_token_ids is not None
    assert len(done.prompt_token_ids) == done.usage.prompt_tokens

    # The hosted preset never sends vLLM's fields (the hosted API would answer 400) ...
    hosted = PRESETS["kimi-k3"].model_copy(update={"base_url": "", "api_key_env": None})
    with K3Server([LONG], hosted=True) as server:
        model = OpenAIChatModel.for_endpoint(
            hosted.model_copy(update={"base_url": server.base_url})
        )
        try:
            done = await model.complete(HELLO)
        finally:
            await model.aclose()
        assert "return_token_ids" not in server.requests[0] and done.token_ids is None
        # ... and a client that did would get that 400, not retried.
        eager = OpenAIChatModel(base_url=server.base_url, api_key="k", token_ids=True)
        try:
            with pytest.raises(BadRequest, match="return_token_ids"):
                await eager.complete(HELLO)
        finally:
            await eager.aclose()


async def test_malformed_tool_arguments_arrive_as_sent() -> None:
    turn = ScriptedTurn(
        reasoning="r", tool_calls=[ScriptedToolCall(name="bash", arguments='{"command": "ls -la"}')]
    )
    with K3Server([turn], faults=[Fault(kind="malformed")]) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="k")
        try:
            done = await model.complete(HELLO)
        finally:
            await model.aclose()
    (call,) = done.tool_calls
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.arguments)
    assert done.retries == 0  # the model's mistake, not a transport failure


async def test_replaying_a_recorded_conversation() -> None:
    recorded = [
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "(calling tools)",
            "reasoning_content": "look first",
            "tool_calls": [
                {
                    "id": "functions.bash:0",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.bash:0", "content": "a.py"},
        {"role": "assistant", "content": "done", "reasoning_content": "all good"},
    ]
    turns = turns_from_messages(recorded)
    assert [t.reasoning for t in turns] == ["look first", "all good"]
    assert turns[0].tool_calls[0].arguments == '{"command": "ls"}' and turns[1].content == "done"
    with K3Server(turns) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="k")
        try:
            first = await model.complete(recorded[:1])
            second = await model.complete(recorded[:3])
        finally:
            await model.aclose()
    assert first.reasoning_content == "look first" and first.tool_calls[0].name == "bash"
    assert second.content == "done" and not second.tool_calls
    with pytest.raises(ValueError, match="no assistant turn"):
        turns_from_messages(recorded[:1])


def test_stand_in_tokenizer() -> None:
    assert count_tokens("") == 0 and count_tokens("abcd") == 1 and count_tokens("abcde") == 2
