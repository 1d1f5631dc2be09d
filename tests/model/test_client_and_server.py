"""The streaming client against the local K3-compatible server, over real HTTP through the
real `openai` client."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import openai
import pytest

from agentenv.errors import BadRequest
from agentenv.model import ContextOverflow, OpenAIChatModel
from agentenv.model.types import K3_PRICE, StreamEvent, Usage
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.testing.k3server import IN_PROCESS_URL
from tests.helpers import HISTORY_WITHOUT_REASONING, chat_model, serving

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
]
SCRIPT = [
    ScriptedTurn(
        reasoning="The user wants the files listed. I will call bash twice to be thorough.",
        content="Let me look.",
        tool_calls=[
            ScriptedToolCall(name="bash", arguments=json.dumps({"cmd": "ls -la /workspace"})),
            ScriptedToolCall(name="bash", arguments=json.dumps({"cmd": "cat README.md"})),
        ],
    ),
    ScriptedTurn(reasoning="Done.", content="There are two files."),
]


@pytest.fixture
def server(transport: str) -> Iterator[K3Server]:
    with serving(K3Server(SCRIPT, chunk_chars=5), transport) as s:
        yield s


@pytest.fixture
async def model(server: K3Server, transport: str) -> AsyncIterator[OpenAIChatModel]:
    chat = chat_model(server, transport)
    yield chat
    await chat.aclose()


async def test_stream_is_assembled_with_tool_calls_by_index(model: OpenAIChatModel) -> None:
    events: list[StreamEvent] = []
    done = await model.complete(
        [{"role": "user", "content": "list files"}], TOOLS, on_event=events.append
    )
    assert done.reasoning_content == SCRIPT[0].reasoning
    assert done.content == "Let me look."
    assert [c.id for c in done.tool_calls] == ["functions.bash:0", "functions.bash:1"]
    assert [json.loads(c.arguments)["cmd"] for c in done.tool_calls] == [
        "ls -la /workspace",
        "cat README.md",
    ]
    assert done.finish_reason == "tool_calls"
    assert done.ttft_s is not None and done.latency_s >= done.ttft_s
    kinds = [e.kind for e in events]
    assert kinds[0] == "reasoning" and kinds[-1] == "usage"
    assert kinds.count("tool_call_started") == 2 and kinds.count("tool_call_finished") == 2
    assert "".join(e.text for e in events if e.kind == "reasoning") == SCRIPT[0].reasoning


async def test_request_follows_the_wire_format(server: K3Server, model: OpenAIChatModel) -> None:
    await model.complete([{"role": "user", "content": "hi"}], TOOLS)
    sent = server.requests[-1]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["max_completion_tokens"] >= 16_000
    assert "temperature" not in sent and "top_p" not in sent and "n" not in sent


async def test_usage_cached_tokens_and_cost(model: OpenAIChatModel) -> None:
    history: list[dict[str, object]] = [{"role": "user", "content": "list files " * 200}]
    first = await model.complete(history, TOOLS)
    assert first.usage.cached_tokens == 0 and first.usage.prompt_tokens > 400
    history.append(
        {
            "role": "assistant",
            "content": first.content,
            "reasoning_content": first.reasoning_content,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in first.tool_calls
            ],
        }
    )
    history += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in first.tool_calls]
    second = await model.complete(history, TOOLS)  # append-only: the prefix is shared
    assert second.usage.cached_tokens > first.usage.prompt_tokens * 0.9
    assert second.usage.reasoning_tokens > 0
    expected = K3_PRICE.cost(second.usage)
    assert second.cost_usd == pytest.approx(expected)
    assert expected == pytest.approx(
        (second.usage.prompt_tokens - second.usage.cached_tokens) * 3e-6
        + second.usage.cached_tokens * 0.3e-6
        + second.usage.completion_tokens * 15e-6
    )


async def test_missing_reasoning_content_is_the_documented_400(model: OpenAIChatModel) -> None:
    with pytest.raises(BadRequest, match=r"reasoning_content is missing .* index 1"):
        await model.complete(HISTORY_WITHOUT_REASONING, TOOLS)


async def test_context_overflow_is_a_400() -> None:
    with (
        K3Server(SCRIPT, context_window=100) as small,
        pytest.raises(ContextOverflow, match="exceeded model token limit"),
    ):
        chat = OpenAIChatModel(base_url=small.base_url, api_key="k")
        try:
            await chat.complete([{"role": "user", "content": "word " * 500}])
        finally:
            await chat.aclose()


async def test_models_route_and_non_streamed_answers(server: K3Server, transport: str) -> None:
    where = (
        {"base_url": server.base_url}
        if transport == "http"
        else {"base_url": IN_PROCESS_URL, "http_client": server.http_client()}
    )
    async with openai.AsyncOpenAI(api_key="k", max_retries=0, **where) as client:
        models = await client.models.list()
        assert [m.id for m in models.data] == ["kimi-k3"]
        answer = await client.chat.completions.create(
            model="kimi-k3", messages=[{"role": "user", "content": "hi"}]
        )
    message = answer.choices[0].message
    assert message.tool_calls is not None and len(message.tool_calls) == 2
    assert answer.usage is not None and answer.usage.prompt_tokens > 0


def test_price_of_usage() -> None:
    usage = Usage(prompt_tokens=1_000_000, cached_tokens=400_000, completion_tokens=100_000)
    assert K3_PRICE.cost(usage) == pytest.approx(0.6 * 3.00 + 0.4 * 0.30 + 0.1 * 15.00)


def test_the_server_queues_a_burst_of_connections() -> None:
    # 300 episodes at once reconnect in bursts (the client keeps 100 connections alive): a
    # listen backlog of 5 overflowed, and the connections whose SYN cookie failed were reset
    # (tests/faults/test_load.py saw 5 model requests retried on "Connection error.").
    # The backlog as the kernel holds it: `ss` shows it as a listening socket's Send-Q.
    with K3Server(SCRIPT) as server:
        port = server.base_url.split(":")[2].split("/")[0]
        listed = subprocess.run(
            ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
        ).stdout.split()
    backlog = int(listed[2])
    assert backlog >= min(1024, int(Path("/proc/sys/net/core/somaxconn").read_text())), listed
