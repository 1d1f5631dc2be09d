"""Episodes driven one action at a time (agentenv.rl.driven): the policy's messages run as
turns through the loop, the sandbox frozen between them, the reward with the act that ends
the episode; bad actions and calls are answered, never fatal; an abandoned one is removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentenv.rl.driven import ActionError, EpisodeOver, open_episode
from agentenv.sandbox import get_backend
from tests.rl.test_rollouts import make_task

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message calling ``pairs`` of (tool, arguments)."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(pairs)
        ],
    }


async def test_a_driven_episode_runs_the_policys_turns_frozen_between_and_is_rewarded(
    tmp_path: Path,
) -> None:
    episode = await open_episode(make_task(tmp_path))
    try:
        names = [t["function"]["name"] for t in episode.tools]
        assert "bash" in names and "submit" in names
        assert episode.messages[-1]["role"] == "user"
        assert "answer.txt" in episode.messages[-1]["content"]
        box = episode._rollout.box
        assert box.paused  # frozen while the policy generates

        busy = "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 & echo ok > answer.txt"
        first = await episode.act(calls(("bash", {"command": busy})))
        assert not first.done and len(first.messages) == 1
        assert first.messages[0]["role"] == "tool"
        assert box.paused
        before = await box.cpu_usage_ns()
        await anyio.sleep(0.5)  # the policy "thinking": a busy loop in there gets no CPU
        assert await box.cpu_usage_ns() == before
        # an unknown tool goes back as an error; a message that is not one is refused
        bad = await episode.act(
            {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "nope"}}]}
        )
        assert not bad.done and "nope" in bad.messages[0]["content"]
        with pytest.raises(ActionError, match="names no function"):
            await episode.act({"role": "assistant", "tool_calls": [{"id": "y"}]})

        last = await episode.act(calls(("submit", {"summary": "done"})))
        assert last.done and last.reward == 1.0 and last.stop_reason == "submitted"
        assert last.trajectory is not None and len(last.trajectory.turns) == 3
        assert all(t.paused_s == t.model_s > 0 for t in last.trajectory.turns)
        with pytest.raises(EpisodeOver):
            await episode.act(calls(("bash", {"command": "true"})))
    finally:
        await episode.close()


async def test_an_abandoned_episode_removes_its_sandbox(tmp_path: Path) -> None:
    episode = await open_episode(make_task(tmp_path, setup="echo prepared > /tmp/p"))
    box_id = episode._rollout.box.id
    await episode.act(calls(("bash", {"command": "echo no > answer.txt"})))
    await episode.close()
    await episode.close()  # twice is fine
    left = [x for x in get_backend().leftovers() if x.id == box_id]
    assert left == []
