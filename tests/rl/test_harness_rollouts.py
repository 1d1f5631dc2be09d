"""The RL API with a harness playing (``agent=``): a rollout of mini-swe-agent through the
gateway gets the verifier's reward with its turns recorded and the sandbox frozen during
each model call; a forked group of them gets rewards and advantages; a multi-step task and a
pool are refused by name, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.model import OpenAIChatModel
from agentenv.rl.rollout import rollout, rollout_group, stream
from agentenv.tasks import load_task
from agentenv.testing import K3Server
from tests.formats.test_harbor_steps import two_steps
from tests.runner.test_harness_eval import answer_task, null, solving

pytestmark = pytest.mark.anyio


@pytest.mark.on_docker
async def test_a_rollout_played_by_mini_swe_agent_is_rewarded(tmp_path: Path) -> None:
    task = load_task(answer_task(tmp_path))
    with K3Server(solving) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="local")
        traj = await rollout(
            task, model, agent="mini-swe-agent", backend="docker", policy_version=7
        )
        calls = len(server.requests)
    assert traj.error is None, traj.error
    assert traj.reward == 1.0
    assert len(traj.turns) == calls == 2
    assert all(t.policy_version == 7 for t in traj.turns)
    assert traj.paused_s > 0 and all(t.paused_s > 0 for t in traj.turns)
    assert traj.harness is not None and traj.harness.exit_code == 0
    assert traj.stop_reason == "harness_exited"
    # what the harness sent and what the model answered, as for the built-in loop
    assert traj.messages[-1]["role"] == "assistant"
    assert traj.turns[0].completion.tool_calls[0].name == "bash"


@pytest.mark.on_docker
async def test_a_group_played_by_a_harness_gets_advantages(tmp_path: Path) -> None:
    task = load_task(answer_task(tmp_path))
    with K3Server(solving) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="local")
        group = await rollout_group(task, model, 2, agent="mini-swe-agent", backend="docker")
    assert [t.error for t in group] == [None, None]
    assert [t.reward for t in group] == [1.0, 1.0]
    assert len({t.group_id for t in group}) == 1
    assert all(t.harness is not None and len(t.turns) == 2 for t in group)
    with K3Server(null) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="local")
        got = [
            t async for t in stream([task], model, n=1, agent="mini-swe-agent", backend="docker")
        ]
    assert [t.reward for t in got] == [0.0]


@pytest.mark.no_docker
async def test_a_multi_step_task_or_an_unknown_agent_is_refused(tmp_path: Path) -> None:
    steps = load_task(two_steps(tmp_path, "two"))
    model = OpenAIChatModel(base_url="http://127.0.0.1:9/v1", api_key="local")
    with pytest.raises(TaskError, match=r"task 'two-steps' has steps.*'mini-swe-agent'"):
        await rollout(steps, model, agent="mini-swe-agent")
    with pytest.raises(TaskError, match=r"task 'two-steps' has steps.*'mini-swe-agent'"):
        await rollout_group(steps, model, 2, agent="mini-swe-agent")
    with pytest.raises(TaskError, match=r"unknown agent 'nope'.*mini-swe-agent"):
        await rollout(load_task(answer_task(tmp_path)), model, agent="nope")
    # verified in the agent's own sandbox, which would carry the harness's layer to the verdict
    final = answer_task(tmp_path, "final")
    toml = (final / "task.toml").read_text()
    (final / "task.toml").write_text('verify_in = "final"\n' + toml)
    with pytest.raises(TaskError, match="verified in the agent's final sandbox"):
        await rollout(load_task(final), model, agent="mini-swe-agent")
