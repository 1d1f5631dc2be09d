"""Whole episodes: a scripted model on the local K3 server, through the real openai client,
driving a real sandbox."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from agentenv.agent.loop import Limits, Trajectory, run_episode
from agentenv.agent.tools import SUBMIT, Tool, tool_schemas, tools_named
from agentenv.errors import EndpointUnavailable
from agentenv.model import OpenAIChatModel
from agentenv.sandbox.docker import DockerSandbox
from agentenv.testing import Fault, K3Server, ScriptedToolCall, ScriptedTurn
from tests.helpers import frozen

pytestmark = pytest.mark.anyio


def tool(name: str, **args: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=json.dumps(args))


SOLVE = [
    ScriptedTurn(
        reasoning="First write the file and look at the folder.",
        tool_calls=[
            tool("write_file", path="/workspace/greet.py", content="print('helo')\n"),
            tool("bash", command="ls /workspace"),
        ],
    ),
    ScriptedTurn(
        reasoning="There is a typo; fix it and check.",
        content="Fixing the typo.",
        tool_calls=[
            tool("edit_file", path="/workspace/greet.py", old_string="helo", new_string="hello"),
            ScriptedToolCall(name="bash", arguments='{"command": "python3 greet.py"'),  # malformed
        ],
    ),
    ScriptedTurn(
        reasoning="Run it properly.", tool_calls=[tool("bash", command="python3 greet.py")]
    ),
    ScriptedTurn(reasoning="It works.", tool_calls=[tool("submit", summary="fixed the greeting")]),
]


@pytest.fixture(scope="module")
async def box() -> AsyncIterator[DockerSandbox]:
    async with await DockerSandbox.create() as sandbox:
        yield sandbox


async def _episode(server: K3Server, box: DockerSandbox, **kwargs: Any) -> Trajectory:
    model = OpenAIChatModel(base_url=server.base_url, api_key="k")
    try:
        return await run_episode(
            model, box, "Make greet.py print hello.", task_id="greet", **kwargs
        )
    finally:
        await model.aclose()


async def test_scripted_episode_solves_the_task(box: DockerSandbox) -> None:
    with K3Server(SOLVE) as server:
        traj = await _episode(server, box)
    assert traj.stop_reason == "submitted"
    assert len(traj.turns) == 4
    assert (await box.exec("python3 /workspace/greet.py")).stdout == "hello\n"
    # the malformed call went back to the model as an error, and the episode went on
    bad = traj.turns[1].tool_results[1]
    assert bad.error and "not valid JSON" in bad.text
    assert traj.turns[2].tool_results[0].text.startswith("hello\n")

    # what the server received: append-only history, reasoning kept, tool messages by id
    sent = [r["messages"] for r in server.requests]
    assert len(sent) == 4
    for before, after in itertools.pairwise(sent):
        assert after[: len(before)] == before
    assert all(r["tools"] == server.requests[0]["tools"] for r in server.requests)
    for message in sent[-1]:
        if message["role"] == "assistant":
            assert message["reasoning_content"] and message["content"]
    ids = [c["id"] for m in sent[-1] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    tool_ids = [m["tool_call_id"] for m in sent[-1] if m["role"] == "tool"]
    assert tool_ids == ids[: len(tool_ids)]

    # accounting: the shared prefix is cached, and dollars add up
    assert traj.turns[-1].completion.usage.cached_tokens > 0
    assert traj.cost_usd == pytest.approx(sum(t.completion.cost_usd for t in traj.turns))
    for before, after in itertools.pairwise(traj.turns):
        # append-only history with identical tools: all of the previous prompt is cached
        # (bar the closing brackets and rounding)
        assert after.completion.usage.cached_tokens >= before.completion.usage.prompt_tokens - 2
    u = traj.turns[-1].completion.usage
    expected = ((u.prompt_tokens - u.cached_tokens) * 3.0 + u.cached_tokens * 0.3) / 1e6
    expected += u.completion_tokens * 15.0 / 1e6
    assert traj.turns[-1].completion.cost_usd == pytest.approx(expected)
    assert traj.cache_hit_rate == pytest.approx(traj.cached_tokens / traj.prompt_tokens)
    assert traj.cache_hit_rate > 0.5
    assert Trajectory.model_validate_json(traj.model_dump_json()) == traj


async def test_sandbox_is_paused_while_the_model_answers(box: DockerSandbox) -> None:
    states: list[bool] = []

    def script(body: dict[str, Any]) -> ScriptedTurn:
        states.append(frozen(box.id))
        return SOLVE[min(len(states) - 1, len(SOLVE) - 1)]

    with K3Server(script) as server:
        traj = await _episode(server, box)
    assert traj.stop_reason == "submitted"
    assert states == [True] * len(traj.turns)
    assert not box.paused
    assert traj.paused_s > 0

    states.clear()
    with K3Server(script) as server:
        await _episode(server, box, pause=False)
    assert states and not any(states)


async def test_limits_and_plain_answers_stop_the_episode(box: DockerSandbox) -> None:
    forever = [ScriptedTurn(reasoning="again", tool_calls=[tool("bash", command="true")])]
    with K3Server(forever) as server:
        traj = await _episode(server, box, limits=Limits(max_turns=3))
    assert traj.stop_reason == "max_turns" and len(traj.turns) == 3

    with K3Server([ScriptedTurn(reasoning="nothing to do", content="Done already.")]) as server:
        traj = await _episode(server, box)
    assert traj.stop_reason == "no_tool_calls"

    with K3Server(forever, context_window=150) as server:
        traj = await _episode(server, box)
    assert traj.stop_reason == "context_length"


async def test_parallel_tool_calls_run_in_order_with_one_message_each(box: DockerSandbox) -> None:
    turn = ScriptedTurn(
        reasoning="Three things at once.",
        tool_calls=[
            tool("bash", command="echo one > /tmp/order"),
            tool("bash", command="echo two >> /tmp/order"),
            tool("read_file", path="/tmp/order"),
            tool("nonexistent_tool"),
        ],
    )
    with K3Server([turn, ScriptedTurn(reasoning="ok", tool_calls=[tool("submit")])]) as server:
        traj = await _episode(server, box)
    results = traj.turns[0].tool_results
    assert results[2].output == "one\ntwo\n"  # ran in the order given
    assert results[3].error and "unknown tool" in results[3].text
    second = server.requests[1]["messages"]
    ids = [c["id"] for c in second[-5]["tool_calls"]]
    assert [m["tool_call_id"] for m in second[-4:]] == ids
    assert len(set(ids)) == 4
    assert all(r.duration_s >= 0 for r in results)


@pytest.mark.parametrize("kind", ["429", "500", "503", "cut", "stall", "malformed"])
async def test_every_fault_within_a_full_episode(box: DockerSandbox, kind: str) -> None:
    # the fault hits the second request; the episode recovers and submits
    faults: list[Fault | None] = [None, Fault(kind=kind, stall_s=3.0)]  # type: ignore[arg-type]
    with K3Server(SOLVE, faults=faults) as server:
        model = OpenAIChatModel(
            base_url=server.base_url, api_key="k", timeout_s=1.0, backoff_initial_s=0.01
        )
        try:
            traj = await run_episode(model, box, "Make greet.py print hello.")
        finally:
            await model.aclose()
    assert traj.stop_reason == "submitted"
    if kind == "malformed":  # the model's mistake: reported back, not retried
        assert traj.retries == 0
        assert all(r.error for r in traj.turns[1].tool_results if r.name != "submit")
        assert "not valid JSON" in traj.turns[1].tool_results[0].text
    else:
        assert traj.retries == 1 and traj.turns[1].completion.retries == 1
        assert len(server.requests) == len(traj.turns) + 1
    assert not box.paused


async def test_an_endpoint_that_stays_down_fails_the_episode_not_the_loop(
    box: DockerSandbox,
) -> None:
    with K3Server(SOLVE, faults=[Fault(kind="503")] * 3) as server:
        model = OpenAIChatModel(
            base_url=server.base_url, api_key="k", max_attempts=3, backoff_initial_s=0.01
        )
        try:
            with pytest.raises(EndpointUnavailable):
                await run_episode(model, box, "x")
        finally:
            await model.aclose()
    assert not box.paused  # resumed even though the model call failed
    assert (await box.exec("true")).ok


class CountArgs(BaseModel):
    """Count the words of a file in the sandbox."""

    path: str


async def _count_words(box: Any, args: CountArgs) -> str:
    return str(len((await box.read_file(args.path)).split()))


async def test_the_tools_shown_are_the_tools_that_run(box: DockerSandbox) -> None:
    # A tool of the caller's own, and a set without bash: the model is shown exactly these,
    # and a call to bash (which exists, but not in this set) is refused like any unknown one.
    words = Tool("count_words", CountArgs, _count_words)
    await box.write_file("/workspace/words.txt", b"one two three\n")
    script = [
        ScriptedTurn(
            reasoning="Count.", tool_calls=[tool("count_words", path="/workspace/words.txt")]
        ),
        ScriptedTurn(
            reasoning="Try bash.", tool_calls=[tool("bash", command="touch /workspace/ran")]
        ),
        ScriptedTurn(reasoning="Done.", tool_calls=[tool("submit", summary="counted")]),
    ]
    with K3Server(script) as server:
        traj = await _episode(server, box, tools=(words, *tools_named(["submit"])))
        shown = [[t["function"]["name"] for t in r["tools"]] for r in server.requests]
    assert shown == [["count_words", "submit"]] * 3
    assert shown[0] == [s["function"]["name"] for s in tool_schemas((words, SUBMIT))]
    counted, refused, _ = (turn.tool_results[0] for turn in traj.turns)
    assert counted.text == "3" and not counted.error
    assert refused.error and "unknown tool 'bash'" in refused.text
    assert "count_words, submit" in refused.text
    assert traj.stop_reason == "submitted"
    assert not (await box.exec("test -e /workspace/ran")).ok


class PlainProvider:
    """A provider of someone else's: its completions carry no K3 formatting."""

    async def complete(self, messages: Any, tools: Any = None, *, on_event: Any = None) -> Any:
        from agentenv.model.types import Completion, ToolCall

        call = ToolCall(id="call_1", name="submit", arguments='{"summary": "done"}')
        return Completion(content="", tool_calls=[call], finish_reason="tool_calls")


async def test_the_history_message_is_the_models_own_form(box: DockerSandbox) -> None:
    # K3's form (reasoning_content replayed, no empty content) comes from its client; another
    # provider's model gets the plain OpenAI form without the loop knowing either.
    traj = await run_episode(PlainProvider(), box, "Finish.")  # type: ignore[arg-type]
    assert traj.messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "submit", "arguments": '{"summary": "done"}'},
            }
        ],
    }
    with K3Server(SOLVE[-1:]) as server:
        k3 = await _episode(server, box)
    assert k3.messages[2]["reasoning_content"] == "It works."
    assert k3.messages[2]["content"] == "(calling tools)"
