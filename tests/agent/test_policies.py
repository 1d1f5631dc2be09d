"""Policies without a live model: the oracle runs solution.sh, replay repeats a recorded
trajectory's tool calls, null does nothing. All go through the same loop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentenv.agent import policies
from agentenv.agent.loop import run_episode
from agentenv.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.anyio

SOLUTION = """#!/bin/bash
set -e
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
python3 -c 'import calc; assert calc.add(2, 3) == 5'
echo solved
"""


@pytest.fixture(scope="module")
async def box() -> AsyncIterator[DockerSandbox]:
    async with await DockerSandbox.create() as sandbox:
        yield sandbox


async def test_oracle_runs_the_solution_and_submits(box: DockerSandbox) -> None:
    traj = await run_episode(policies.oracle(SOLUTION), box, "write calc.py", task_id="calc")
    assert traj.stop_reason == "submitted" and len(traj.turns) == 1
    write, bash, submit = traj.turns[0].tool_results
    assert not write.error and bash.exit_code == 0 and "solved" in bash.output
    assert submit.submitted
    assert (await box.exec("python3 -c 'import calc; print(calc.add(1, 1))'")).stdout == "2\n"
    assert traj.cost_usd == 0 and traj.turns[0].completion.route is not None
    assert traj.turns[0].completion.route.endpoint == "oracle"

    failing = await run_episode(policies.oracle("exit 3\n"), box, "x")
    assert failing.turns[0].tool_results[1].exit_code == 3  # recorded, the episode still ends
    assert failing.stop_reason == "submitted"


async def test_replay_repeats_the_recorded_tool_calls(box: DockerSandbox) -> None:
    await box.exec("rm -f calc.py")
    recorded = await run_episode(policies.oracle(SOLUTION), box, "write calc.py")
    await box.exec("rm -f calc.py")
    again = await run_episode(policies.replay(recorded), box, "write calc.py")
    assert again.stop_reason == "submitted"
    assert [m for m in again.messages if m["role"] == "assistant"] == [
        m for m in recorded.messages if m["role"] == "assistant"
    ]
    assert (await box.exec("test -f calc.py")).exit_code == 0


async def test_null_policy_does_nothing(box: DockerSandbox) -> None:
    before = (await box.exec("ls -A")).stdout
    traj = await run_episode(policies.null(), box, "do the task")
    assert traj.stop_reason == "no_tool_calls" and len(traj.turns) == 1
    assert (await box.exec("ls -A")).stdout == before
